//! A figure the tool may not have measured: its value, or why it is unknown. Every reader has
//! to handle both (no NaN, no zero standing for "unknown", no companion string to forget).
//! In a results file an unknown figure is `null`, and its reason is in the document's one
//! top-level `unknown` map (field path → reason): [`lift`] moves the reasons there on
//! writing, [`lower`] puts them back on reading, and converts the forms of schemas 2 and 3
//! (`null` with a `<name>_unknown` string beside it).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Marks an unknown figure inside the document between [`Known`]'s own serialization and
/// [`lift`] (never written to a file).
const MARK: &str = "$unknown";

/// A figure, or why it was not measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Known<T> {
    Value(T),
    Unknown(String),
}

impl<T> Known<T> {
    /// Unknown, for this reason.
    pub fn unknown(why: impl Into<String>) -> Self {
        Known::Unknown(why.into())
    }

    /// `v` when there is one, else unknown for `why`.
    pub fn or_unknown(v: Option<T>, why: impl FnOnce() -> String) -> Self {
        match v {
            Some(v) => Known::Value(v),
            None => Known::Unknown(why()),
        }
    }

    /// The value, if known.
    pub fn value(&self) -> Option<T>
    where
        T: Copy,
    {
        match self {
            Known::Value(v) => Some(*v),
            Known::Unknown(_) => None,
        }
    }

    /// Why it is unknown, if it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Known::Value(_) => None,
            Known::Unknown(why) => Some(why),
        }
    }

    pub fn is_known(&self) -> bool {
        matches!(self, Known::Value(_))
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Known<U> {
        match self {
            Known::Value(v) => Known::Value(f(v)),
            Known::Unknown(why) => Known::Unknown(why),
        }
    }

    /// The value, or the reason as the error.
    pub fn result(&self) -> Result<T, String>
    where
        T: Copy,
    {
        match self {
            Known::Value(v) => Ok(*v),
            Known::Unknown(why) => Err(why.clone()),
        }
    }
}

/// A figure a results file did not hold (written before it existed).
impl<T> Default for Known<T> {
    fn default() -> Self {
        Known::Unknown("not in this results file".to_string())
    }
}

impl<T: Serialize> Serialize for Known<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Known::Value(v) => v.serialize(s),
            Known::Unknown(why) => {
                let mut m = BTreeMap::new();
                m.insert(MARK, why);
                m.serialize(s)
            }
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Known<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Mark {
            #[serde(rename = "$unknown")]
            why: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr<T> {
            Mark(Mark),
            Plain(Option<T>),
        }
        Ok(match Repr::<T>::deserialize(d)? {
            Repr::Mark(m) => Known::Unknown(m.why),
            Repr::Plain(Some(v)) => Known::Value(v),
            Repr::Plain(None) => Known::Unknown("not measured".to_string()),
        })
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Known<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        Option::<T>::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Option::<T>::json_schema(g)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// Replace every unknown figure of `doc` by null and gather the reasons into its top-level
/// `unknown` map (absent when every figure is known).
pub fn lift(doc: &mut Value) {
    let mut found = Map::new();
    walk(doc, "", &mut found);
    if let Value::Object(o) = doc {
        o.remove("unknown");
        if !found.is_empty() {
            o.insert("unknown".into(), Value::Object(found));
        }
    }
}

fn walk(v: &mut Value, path: &str, found: &mut Map<String, Value>) {
    match v {
        Value::Object(o) => {
            if o.len() == 1
                && let Some(why) = o.get(MARK)
            {
                found.insert(path.to_string(), why.clone());
                *v = Value::Null;
                return;
            }
            for (k, x) in o.iter_mut() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, &p, found);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                walk(x, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// The figures of schemas 2 and 3 that were null with a reason in a companion field beside
/// them (`thresholds[].measured` had `unknown`).
const COMPANIONS: [(&str, &str); 6] = [
    ("hit_rate", "hit_rate_unknown"),
    ("db.calls", "db.calls_unknown"),
    ("db.peak_in_flight", "db.peak_in_flight_unknown"),
    ("db.peak_key_herd", "db.peak_key_herd_unknown"),
    ("db.redundant_loads", "db.redundant_loads_unknown"),
    (
        "consistency.divergent_keys",
        "consistency.divergent_keys_unknown",
    ),
];

/// Put the reasons of `doc`'s `unknown` map back on their figures, for [`Known`] to read;
/// in a document of schema 2 or 3, take them from the companion fields instead.
pub fn lower(doc: &mut Value) {
    let mut reasons: Vec<(String, Value)> =
        match doc.as_object_mut().and_then(|o| o.remove("unknown")) {
            Some(Value::Object(m)) => m.into_iter().collect(),
            _ => vec![],
        };
    for (figure, companion) in COMPANIONS {
        let (parent, name) = companion.rsplit_once('.').unwrap_or(("", companion));
        let holder = if parent.is_empty() {
            Some(&mut *doc)
        } else {
            doc.get_mut(parent)
        };
        if let Some(why) = holder
            .and_then(Value::as_object_mut)
            .and_then(|o| o.remove(name))
            .filter(Value::is_string)
        {
            reasons.push((figure.to_string(), why));
        }
    }
    if let Some(Value::Array(ts)) = doc.get_mut("thresholds") {
        for t in ts.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(why) = t.remove("unknown").filter(Value::is_string) {
                t.insert("measured".into(), mark(why));
            }
        }
    }
    for (path, why) in reasons {
        if let Some(slot) = at(doc, &path).filter(|s| s.is_null()) {
            *slot = mark(why);
        }
    }
}

fn mark(why: Value) -> Value {
    let mut m = Map::new();
    m.insert(MARK.into(), why);
    Value::Object(m)
}

/// The value at a path of the `unknown` map (`db.calls`, `thresholds[2].measured`).
fn at<'a>(doc: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut v = doc;
    for part in path.split('.') {
        let (key, indexes) = part.split_once('[').unwrap_or((part, ""));
        v = v.get_mut(key)?;
        for i in indexes.split('[').filter(|s| !s.is_empty()) {
            v = v.get_mut(i.trim_end_matches(']').parse::<usize>().ok()?)?;
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_move_to_the_top_level_map_and_back() {
        let k: Known<u64> = Known::unknown("no ledger");
        let mut doc = serde_json::json!({"db": {"calls": k, "ok": Known::Value(3u64)}, "t": [{"m": Known::<f64>::unknown("x")}]});
        lift(&mut doc);
        assert_eq!(doc["db"]["calls"], Value::Null);
        assert_eq!(doc["db"]["ok"], 3);
        assert_eq!(doc["unknown"]["db.calls"], "no ledger");
        assert_eq!(doc["unknown"]["t[0].m"], "x");
        lower(&mut doc);
        assert!(doc.get("unknown").is_none());
        let back: Known<u64> = serde_json::from_value(doc["db"]["calls"].clone()).unwrap();
        assert_eq!(back, Known::unknown("no ledger"));
        let m: Known<f64> = serde_json::from_value(doc["t"][0]["m"].clone()).unwrap();
        assert_eq!(m.reason(), Some("x"));
    }

    #[test]
    fn a_schema_3_companion_becomes_the_reason() {
        let mut doc = serde_json::json!({"hit_rate": null, "hit_rate_unknown": "none completed",
            "db": {"calls": 5}, "thresholds": [{"measured": null, "unknown": "why"}]});
        lower(&mut doc);
        assert!(doc.get("hit_rate_unknown").is_none());
        let h: Known<f64> = serde_json::from_value(doc["hit_rate"].clone()).unwrap();
        assert_eq!(h.reason(), Some("none completed"));
        let c: Known<u64> = serde_json::from_value(doc["db"]["calls"].clone()).unwrap();
        assert_eq!(c, Known::Value(5));
        let t: Known<f64> =
            serde_json::from_value(doc["thresholds"][0]["measured"].clone()).unwrap();
        assert_eq!(t.reason(), Some("why"));
    }
}
