//! The keys of the network faults (partition, reset, latency, bandwidth, slow-close): whose network
//! (`server=`) and which app instances (`instance=`, repeatable). What the proxy does with them
//! is [`crate::net`]'s; the lane that switches it is [`super::chaos`]'s.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whose network a network fault strikes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum NetServer {
    Redis,
    Postgres,
    /// Both servers' (the instance is cut off from everything).
    #[default]
    Both,
}

impl NetServer {
    pub fn name(self) -> &'static str {
        match self {
            NetServer::Redis => "redis",
            NetServer::Postgres => "postgres",
            NetServer::Both => "both",
        }
    }

    pub fn redis(self) -> bool {
        self != NetServer::Postgres
    }

    pub fn postgres(self) -> bool {
        self != NetServer::Redis
    }
}

/// The most instances a run has (`--instances` is at most 256).
const MAX: usize = 256;

/// A set of app instances, numbered from 0 as `breaker[].instance` is: a bit set, so a fault
/// stays `Copy`. Written as a list of numbers (`instance = [0, 2]`, or one number).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstanceSet([u64; MAX / 64]);

impl InstanceSet {
    pub fn contains(&self, i: usize) -> bool {
        i < MAX && self.0[i / 64] & (1 << (i % 64)) != 0
    }

    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// The instances in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX).filter(|&i| self.contains(i))
    }

    /// The highest instance named.
    pub fn max(&self) -> Option<usize> {
        self.iter().last()
    }
}

impl Serialize for InstanceSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for InstanceSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(i64),
            Many(Vec<i64>),
        }
        let list = match OneOrMany::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "instance: write an instance number from 0, or a list of them (instance = [0, 2])",
            )
        })? {
            OneOrMany::One(i) => vec![i],
            OneOrMany::Many(v) => v,
        };
        let mut set = InstanceSet::default();
        for i in list {
            if !(0..MAX as i64).contains(&i) {
                return Err(serde::de::Error::custom(format!(
                    "instance {i} is out of range: instances are numbered from 0, and a run has at most {MAX}"
                )));
            }
            set.insert(i as usize);
        }
        Ok(set)
    }
}

impl JsonSchema for InstanceSet {
    fn schema_name() -> Cow<'static, str> {
        "InstanceSet".into()
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        <Vec<u16>>::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_one_number_or_a_list_and_writes_a_list() {
        let s: InstanceSet = toml::Value::Integer(3).try_into().unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), [3]);
        let s: InstanceSet = toml::Value::Array(vec![2.into(), 0.into(), 200.into()])
            .try_into()
            .unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 2, 200]);
        assert_eq!(s.max(), Some(200));
        assert_eq!(serde_json::to_string(&s).unwrap(), "[0,2,200]");
        let e = toml::Value::Integer(256)
            .try_into::<InstanceSet>()
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
