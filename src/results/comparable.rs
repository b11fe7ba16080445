//! Which settings make two results comparable: those of the workload (two results that differ
//! in one measured different things), those of the strategy under test, and the rest; and the
//! settings in which two scenarios differ, as the results files write them.

use std::sync::LazyLock;

use crate::scenario::{Compared, Scenario};

/// Settings that shape what the workload asks of the servers ([`Compared::Workload`]): two
/// results that differ in one of them measured different things, whatever their strategies.
pub static WORKLOAD_SETTINGS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| keys(Compared::Workload));

/// Settings of the strategy under test ([`Compared::Strategy`]): what the app does, not what is
/// asked of it.
pub static STRATEGY_SETTINGS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| keys(Compared::Strategy));

/// The keys of the scenario that compare as `class`, as declared with its fields.
fn keys(class: Compared) -> Vec<&'static str> {
    Scenario::compared()
        .into_iter()
        .filter(|(_, c)| *c == class)
        .map(|(k, _)| &*k.leak())
        .collect()
}

/// The settings among `keys` in which `self` and `other` differ, as "key: a, b" with the
/// values as the results file writes them.
pub fn differences(a: &Scenario, b: &Scenario, keys: &[&str]) -> Vec<(String, String, String)> {
    let (mut a, mut b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    // A trace is the same trace wherever it lies: its bytes (the digest) and the slice and
    // pacing chosen decide, not its path.
    for v in [&mut a, &mut b] {
        if let Some(t) = v.get_mut("trace").and_then(|t| t.as_object_mut()) {
            t.remove("path");
        }
    }
    let show = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => "unset".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    keys.iter()
        .filter(|k| a.get(**k) != b.get(**k))
        .map(|k| (k.to_string(), show(a.get(*k)), show(b.get(*k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Percent;

    /// The scenario of the run flags `set` (flag, value).
    fn resolved(set: &[(&str, &str)]) -> Scenario {
        let flags = crate::scenario::sweep::axes::flags_at(&Default::default(), set).unwrap();
        crate::scenario::resolve(None, flags).unwrap()
    }

    #[test]
    fn every_written_key_compares_one_way() {
        // With writes, a lease, a memory limit and a size distribution, so that every
        // optional setting is written.
        let s = resolved(&[
            ("strategy", "lease"),
            ("write-rps", "10"),
            ("maxmemory", "8mb"),
            ("value-size-dist", "100..10k"),
            ("net-rtt", "1ms"),
            ("redis-client", "ioredis"),
            ("check-values", "true"),
        ]);
        let v = serde_json::to_value(&s).unwrap();
        let declared = Scenario::compared();
        for k in v.as_object().unwrap().keys() {
            let n = declared.iter().filter(|(d, _)| d == k).count();
            assert_eq!(n, 1, "{k} is declared {n} times");
        }
        // And every declared key is one the results file can hold: the scenario's schema.
        let schema = schemars::schema_for!(Scenario);
        let props = schema.get("properties").unwrap().as_object().unwrap();
        assert_eq!(declared.len(), props.len());
        assert!(declared.iter().all(|(k, _)| props.contains_key(k)));
        // The flattened lock's keys compare as the strategy's; the derived ones as declared.
        assert!(
            STRATEGY_SETTINGS.contains(&"lock_wait") && STRATEGY_SETTINGS.contains(&"retry_after")
        );
        assert!(
            WORKLOAD_SETTINGS.contains(&"redis_conns") && WORKLOAD_SETTINGS.contains(&"db_timeout")
        );
        assert_eq!((WORKLOAD_SETTINGS.len(), STRATEGY_SETTINGS.len()), (31, 23));
    }

    #[test]
    fn a_typed_scenario_reads_back_what_it_wrote() {
        let s = resolved(&[("strategy", "jitter+mutex")]);
        let text = serde_json::to_string(&s).unwrap();
        let back: Scenario = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert!(differences(&s, &back, &WORKLOAD_SETTINGS).is_empty());
        let mut other = back.clone();
        other.jitter = Percent(0.2);
        other.keys += 1;
        assert_eq!(differences(&s, &other, &WORKLOAD_SETTINGS).len(), 1);
        assert_eq!(differences(&s, &other, &STRATEGY_SETTINGS).len(), 1);
    }
}
