//! What a cluster fault strikes: the primary a kill-redis or failover takes down
//! (`--redis-node`), and the slot a migrate-slot fault moves: `hottest` (the slot of the run's
//! most popular key) or a slot number, written as a word or a number in a `[[fault]]` table and
//! after `slot=` on the command line.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which primary a cluster fault strikes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeChoice {
    /// The primary serving the slot of the run's most popular key.
    #[default]
    Hottest,
    /// A primary drawn with the run's seed.
    Random,
    /// The node with this id (CLUSTER NODES), or `host:port`.
    Id(String),
}

impl FromStr for NodeChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "hottest" => NodeChoice::Hottest,
            "random" => NodeChoice::Random,
            "" => return Err("--redis-node is empty: give hottest, random or a node id".into()),
            id => NodeChoice::Id(id.to_string()),
        })
    }
}

/// Slots of a Redis Cluster: 0 to 16383.
const SLOTS: u16 = 16384;

/// Which slot a migration moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotChoice {
    /// The slot of the run's most popular key (its entry, lock, lease and marker share it).
    Hottest,
    /// This slot.
    Number(u16),
}

impl SlotChoice {
    /// The slot number, or None for the hottest key's (found once the cluster is up).
    pub fn number(self) -> Option<u16> {
        match self {
            SlotChoice::Hottest => None,
            SlotChoice::Number(n) => Some(n),
        }
    }
}

impl FromStr for SlotChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "hottest" {
            return Ok(SlotChoice::Hottest);
        }
        match t.parse::<u16>() {
            Ok(n) if n < SLOTS => Ok(SlotChoice::Number(n)),
            _ => Err(format!(
                "'{s}' is not a slot: write hottest or a number from 0 to {}",
                SLOTS - 1
            )),
        }
    }
}

impl fmt::Display for SlotChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotChoice::Hottest => f.write_str("hottest"),
            SlotChoice::Number(n) => write!(f, "{n}"),
        }
    }
}

/// A slot as a TOML file may write it: `"hottest"`, `"12"` or `12`.
#[derive(Deserialize)]
#[serde(untagged)]
enum WordOrNumber {
    Word(String),
    Number(i64),
}

impl<'de> Deserialize<'de> for SlotChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = match WordOrNumber::deserialize(d)? {
            WordOrNumber::Word(w) => w,
            WordOrNumber::Number(n) => n.to_string(),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for SlotChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SlotChoice::Hottest => s.serialize_str("hottest"),
            SlotChoice::Number(n) => s.serialize_u16(*n),
        }
    }
}

impl schemars::JsonSchema for SlotChoice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SlotChoice".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "hottest (the slot of the most popular key) or a slot number",
            "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": SLOTS - 1 },
                { "type": "string", "pattern": "^\\s*(hottest|[0-9]+)\\s*$" }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_hottest_or_a_number_in_range() {
        assert_eq!("hottest".parse(), Ok(SlotChoice::Hottest));
        assert_eq!("16383".parse(), Ok(SlotChoice::Number(16383)));
        for bad in ["16384", "-1", "hot", ""] {
            let e = bad.parse::<SlotChoice>().unwrap_err();
            assert!(e.contains("0 to 16383"), "{bad}: {e}");
        }
        #[derive(Deserialize)]
        struct T {
            slot: SlotChoice,
        }
        let t: T = toml::from_str("slot = 12").unwrap();
        assert_eq!(t.slot, SlotChoice::Number(12));
        let t: T = toml::from_str("slot = \"hottest\"").unwrap();
        assert_eq!(t.slot, SlotChoice::Hottest);
    }
}
