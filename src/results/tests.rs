//! The results document read back: schemas 2 and 3, unknown figures, thresholds, the
//! timeline and the histograms.

use super::*;
use crate::metric::Metric;
use crate::thresholds::Thresholds;

/// The committed CI baseline's mutex result: a real schema-2 document.
fn baseline() -> RunResult {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/results/baseline-ci/mutex.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_schema_2_file_reads_with_every_figure_known() {
    let r = baseline();
    assert_eq!(r.schema, 2);
    // A recovery exists only after a shock, which the baseline has none of.
    for d in crate::metric::DEFS
        .iter()
        .filter(|d| d.metric != crate::metric::Metric::RecoveryBack)
    {
        assert!(
            r.measured(d.metric).is_ok(),
            "{} unknown in a schema-2 baseline",
            d.name
        );
    }
    assert!(schemas_comparable(2, SCHEMA));
    assert!(!schemas_comparable(1, SCHEMA));
}

#[test]
fn a_threshold_on_an_unknown_figure_fails_with_the_reason() {
    let mut r = baseline();
    r.db.peak_key_herd = Known::unknown("the app does not load through stampede_load");
    r.db.calls = Known::unknown("pg_stat_statements could not be read");
    let t: Thresholds = toml::from_str("peak_key_herd_max = 5\ndb_calls_max = 1000000").unwrap();
    let judged = r.judge(&t);
    assert_eq!(judged.len(), 2);
    for j in &judged {
        assert!(!j.passed, "{} passed on an unknown figure", j.name);
        assert!(j.measured.reason().is_some());
    }
    r.thresholds = judged;
    let broken = r.broken_thresholds();
    assert!(
        broken.contains("peak_key_herd is unknown: the app does not load through stampede_load"),
        "{broken}"
    );
    assert!(
        broken.contains("db_calls is unknown: pg_stat_statements could not be read"),
        "{broken}"
    );
    assert!(r.figure(Metric::DbCalls).is_nan());
    assert_eq!(
        r.shown(Metric::DbCalls),
        "unknown (pg_stat_statements could not be read)"
    );
}

#[test]
fn with_no_request_completed_the_latency_and_rates_are_unknown() {
    let mut r = baseline();
    r.requests.completed = 0;
    for m in [Metric::P50, Metric::P95, Metric::P99, Metric::RejectedRate] {
        assert_eq!(
            r.measured(m),
            Err("no request completed".to_string()),
            "{m:?}"
        );
    }
    let t: Thresholds = toml::from_str("p99_ms_max = 250").unwrap();
    assert!(!r.judge(&t)[0].passed);
}

#[test]
fn an_unknown_figure_is_null_in_the_json_with_its_reason() {
    let mut r = baseline();
    r.consistency.divergent_keys = Known::unknown("read-back failed");
    let t: Thresholds = toml::from_str("divergent_keys_max = 0").unwrap();
    r.thresholds = r.judge(&t);
    r.schema = SCHEMA;
    let v = serde_json::to_value(&r).unwrap();
    assert!(v.pointer("/consistency/divergent_keys").unwrap().is_null());
    assert_eq!(
        v["unknown"]["consistency.divergent_keys"],
        "read-back failed"
    );
    assert!(v["thresholds"][0]["measured"].is_null());
    assert_eq!(v["unknown"]["thresholds[0].measured"], "read-back failed");
    assert!(!v.to_string().contains("$unknown"), "no marker is written");
    let back: RunResult = serde_json::from_value(v).unwrap();
    assert_eq!(
        back.measured(Metric::DivergentKeys),
        Err("read-back failed".to_string())
    );
    assert_eq!(
        back.thresholds[0].measured.reason(),
        Some("read-back failed")
    );
    // Every figure known: no map at all (the baseline predates db.by_cause, read as unknown).
    let mut b = baseline();
    b.db.by_cause = Known::Value(Default::default());
    let v = serde_json::to_value(b).unwrap();
    assert!(v.get("unknown").is_none());
}

#[test]
fn a_schema_3_file_reads_its_companion_reasons() {
    let mut v: serde_json::Value = serde_json::to_value(baseline()).unwrap();
    v["schema"] = 3.into();
    v["db"]["calls"] = serde_json::Value::Null;
    v["db"]["calls_unknown"] = "pg_stat_statements could not be read".into();
    v["hit_rate"] = serde_json::Value::Null;
    v["hit_rate_unknown"] = "no request completed".into();
    let r: RunResult = serde_json::from_value(v).unwrap();
    assert_eq!(
        r.measured(Metric::DbCalls),
        Err("pg_stat_statements could not be read".to_string())
    );
    assert_eq!(r.hit_rate.reason(), Some("no request completed"));
}

#[test]
fn whole_leaves_out_the_trailing_partial_buckets() {
    let b = |t, partial| Bucket {
        t_ms: t,
        partial,
        ..Bucket::default()
    };
    let tl = vec![b(100, false), b(200, false), b(230, true), b(260, true)];
    assert_eq!(whole(&tl).len(), 2);
    assert!(whole(&[b(10, true)]).is_empty());
    let json = serde_json::to_value(b(100, false)).unwrap();
    assert!(
        json.get("partial").is_none(),
        "a whole bucket writes no flag"
    );
}

#[test]
fn histograms_round_trip() {
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    for v in [100, 2_000, 30_000, 30_001] {
        h.record(v).unwrap();
    }
    let back = decode_histogram(&encode_histogram(&h)).unwrap();
    assert_eq!(back.len(), 4);
    assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
}
