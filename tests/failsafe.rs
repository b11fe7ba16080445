//! Values kept past their expiry, on real servers: the fail-safe serves the kept value only
//! while loads fail and only within `--fail-safe` of the expiry, and throttles a failing key;
//! the soft timeout answers with the kept value and the load writes back behind it; eager
//! refresh loads before the expiry, never twice at once per key per instance. Every figure
//! is a count from the results file.

use crate::common;

use common::*;

/// 20 keys all written at the same instant, read on 2 instances for 3 s.
const BASE: [&str; 10] = [
    "--keys",
    "20",
    "--start",
    "synchronized",
    "--duration",
    "3s",
    "--instances",
    "2",
    "--threshold",
    "error_rate_max=100%",
];

/// At 400 req/s with a 500 ms TTL every key expires several times and is read after it.
const FAST: [&str; 4] = ["--rps", "400", "--ttl", "500ms"];

fn with(extra: &[&str]) -> Run {
    let args: Vec<&str> = BASE.iter().chain(extra).copied().collect();
    let r = run_ok_shared(&args);
    r.assert_counts_add_up();
    r
}

/// Every load fails (its statement outlives --db-timeout). With the fail-safe longer than the
/// run, every request is served: a hit, or the kept value (stale), never an error; and a key's
/// failed load is not tried again on its instance for the throttle, so the database sees at
/// most one statement per key per instance. With a fail-safe of 500 ms the kept values are
/// gone 1 s into the run, and from then on the failing loads are errors.
#[test]
fn the_fail_safe_serves_the_kept_value_only_while_loads_fail_and_within_its_window() {
    crate::common::waiting_turns();
    let failing = [&FAST[..], &["--db-cost", "50ms", "--db-timeout", "10ms"]].concat();
    let long = with(&[&failing[..], &["--fail-safe", "30s"]].concat());
    let db = &long.json["db"];
    eprintln!("fail-safe 30s: {} / {db}", long.json["outcomes"]);
    assert_eq!(long.u("/outcomes/error"), 0, "{}", long.json["outcomes"]);
    assert!(long.u("/outcomes/stale") > 100, "{}", long.json["outcomes"]);
    assert_eq!(
        long.u("/outcomes/stale"),
        long.u("/db/fail_safe"),
        "every stale answer is the fail-safe's: {db}"
    );
    assert!(long.u("/db/fail_safe_throttled") > 0, "{db}");
    assert_eq!(long.u("/outcomes/miss"), 0, "no load succeeded");
    // Throttled for 30 s after its first failure: a key's loads on an instance after the
    // first all started while it was in flight (redundant), so the rest are at most one per key
    // per instance.
    assert!(
        long.u("/db/calls") - long.u("/db/redundant_loads") <= 20 * 2,
        "{db}"
    );
    assert!(long.u("/db/statement_timeouts") > 0, "{db}");

    let short = with(&[&failing[..], &["--fail-safe", "500ms"]].concat());
    eprintln!("fail-safe 500ms: {}", short.json["outcomes"]);
    assert!(short.u("/db/fail_safe") > 0, "{}", short.json["db"]);
    assert!(
        short.u("/outcomes/error") > 100,
        "past the fail-safe nothing is kept, and the failing loads are errors: {}",
        short.json["outcomes"]
    );

    // Loads that succeed: the kept value is never served, whatever the fail-safe.
    let ok = with(&[&FAST[..], &["--db-cost", "50ms", "--fail-safe", "30s"]].concat());
    assert_eq!(ok.u("/db/fail_safe"), 0, "{}", ok.json["db"]);
    assert_eq!(ok.u("/outcomes/stale"), 0, "{}", ok.json["outcomes"]);
    assert_eq!(ok.u("/outcomes/error"), 0);
    assert!(ok.u("/outcomes/miss") > 0);
    assert_eq!(ok.json["scenario"]["fail_safe"]["throttle"], "30s");
}

/// Loads of 200 ms and a soft timeout of 20 ms: the requests that find a kept value are
/// answered with it (stale) at the soft timeout, and the loads go on and write back; after the
/// write-back the key is a hit again. Without the soft timeout the same requests wait for the
/// load (misses) and none is answered early.
#[test]
fn the_soft_timeout_answers_with_the_kept_value_and_the_load_writes_back_after() {
    crate::common::waiting_turns();
    let slow = [&FAST[..], &["--db-cost", "200ms", "--fail-safe", "30s"]].concat();
    let soft = with(&[&slow[..], &["--soft-timeout", "20ms"]].concat());
    let db = &soft.json["db"];
    eprintln!("soft timeout: {} / {db}", soft.json["outcomes"]);
    let (answered, wrote) = (
        soft.u("/db/soft_timeouts"),
        soft.u("/db/soft_timeout_write_backs"),
    );
    assert!(answered > 0, "{db}");
    assert!(
        wrote > 0,
        "the loads behind the soft timeouts wrote back: {db}"
    );
    assert!(wrote <= soft.u("/db/calls"), "{db}");
    // Every stale answer is a soft timeout's (no load failed).
    assert_eq!(
        soft.u("/outcomes/stale"),
        answered,
        "{}",
        soft.json["outcomes"]
    );
    assert_eq!(soft.u("/db/fail_safe"), 0, "{db}");
    assert_eq!(soft.u("/outcomes/error"), 0);
    assert!(
        soft.u("/outcomes/miss") < answered,
        "most requests that found a kept value did not wait for its load: {}",
        soft.json["outcomes"]
    );
    assert!(
        soft.u("/outcomes/hit") > soft.u("/outcomes/stale"),
        "{}",
        soft.json["outcomes"]
    );

    let hard = with(&slow);
    assert_eq!(hard.u("/db/soft_timeouts"), 0, "{}", hard.json["db"]);
    assert_eq!(hard.u("/outcomes/stale"), 0, "{}", hard.json["outcomes"]);
    assert!(hard.u("/outcomes/miss") > 0, "{}", hard.json["outcomes"]);
}

/// Eager refresh at 50% of a 1 s TTL on keys read many times a second: every key is refreshed
/// in the background before it expires (its reads after the refresh are hits, not misses),
/// and a key's refreshes never overlap on an instance: at most one load of a key in flight
/// per instance.
#[test]
fn eager_refresh_loads_before_expiry_and_never_twice_per_key_per_instance() {
    crate::common::waiting_turns();
    let r = with(&[
        "--ttl",
        "1s",
        "--db-cost",
        "20ms",
        "--rps",
        "1000",
        "--eager-refresh",
        "50%",
    ]);
    let db = &r.json["db"];
    eprintln!("eager refresh: {} / {db}", r.json["outcomes"]);
    let eager = r.u("/db/eager_refreshes");
    // 20 keys, 3 s, refreshed once every half a TTL or so, on 2 instances.
    assert!(eager >= 40, "{db}");
    assert_eq!(
        r.u("/db/background_refreshes"),
        eager,
        "each eager refresh is one load: {db}"
    );
    assert!(
        r.u("/outcomes/miss") <= 20,
        "the keys were loaded before they expired: {}",
        r.json["outcomes"]
    );
    assert!(
        r.u("/db/peak_key_herd") <= 2,
        "one per key per instance: {db}"
    );
    assert_eq!(r.u("/outcomes/stale"), 0);
}
