//! The library presets on real servers, in one `compare` on a hot key from a cold start: each
//! shows its documented gap, or its guarantee, by a count. `laravel-flexible` and
//! `rails-race-ttl` take no lock on a miss, so the cold miss is a herd; `spring-sync`,
//! `symfony` (and `symfony-5.4`), `caffeine-refresh` and `fusion` load a key at most once per instance at a time
//! (single-flight), and no more, as does `bentocache` (its lock is in memory) while `dogpile`
//! loads it once in all (its lock is in Redis); each preset's own mechanism fired (laravel's
//! stale reads and locked refreshes, rails' push-backs, symfony's early recomputes,
//! caffeine's and fusion's eager refreshes, bentocache's and dogpile's stale reads refreshed
//! behind), and caffeine's entries stay in each instance's memory, out of Redis.

use crate::common;

use common::{cpu_turn, read_json, stampede};
use serde_json::Value;

const PRESETS: [&str; 9] = [
    "laravel-flexible",
    "rails-race-ttl",
    "symfony",
    "symfony-5.4",
    "caffeine-refresh",
    "spring-sync",
    "fusion",
    "bentocache",
    "dogpile",
];

fn u(r: &Value, ptr: &str) -> u64 {
    r.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing in {}", r["db"]))
}

#[test]
fn each_library_preset_shows_its_gap_by_a_count() {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    // One key, 40 closed-loop clients on 2 instances, a cold start, 1 s TTL and 50 ms loads:
    // every client misses at once, then the key expires twice more in the window.
    let o = stampede()
        .args([
            "compare",
            "--strategies",
            &PRESETS.join(","),
            "--keys",
            "1",
            "--clients",
            "40",
            "--instances",
            "2",
            "--start",
            "cold",
            "--ttl",
            "1s",
            "--db-cost",
            "50ms",
            "--duration",
            "3s",
            "--quiet",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .expect("running stampede compare");
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let result = |name: &str| {
        let p = dir.path().join(format!("{name}.json"));
        read_json(&p).unwrap_or_else(|| panic!("{} missing", p.display()))
    };
    for name in PRESETS {
        let r = result(name);
        assert_eq!(r["scenario"]["strategy"], name);
        eprintln!(
            "{name}: herd {} / {} / {}",
            r["db"]["peak_key_herd"], r["outcomes"], r["db"]
        );
        assert_eq!(u(&r, "/requests/errors"), 0, "{name}: {}", r["requests"]);
    }

    // No lock on a miss: the cold miss is a herd (more loads of the key at once than instances).
    let laravel = result("laravel-flexible");
    assert!(u(&laravel, "/db/peak_key_herd") > 2, "{}", laravel["db"]);
    // Past its TTL the value is served stale and refreshed behind, under the lock.
    assert!(
        u(&laravel, "/outcomes/stale") > 0,
        "{}",
        laravel["outcomes"]
    );
    assert!(u(&laravel, "/db/background_refreshes") > 0);
    assert!(u(&laravel, "/lock/acquired") > 0, "{}", laravel["lock"]);
    assert_eq!(
        laravel["scenario"]["stale"], "1s",
        "stale defaults to the TTL"
    );

    let rails = result("rails-race-ttl");
    assert!(u(&rails, "/db/peak_key_herd") > 2, "{}", rails["db"]);
    assert!(u(&rails, "/db/race_pushes") > 0, "{}", rails["db"]);

    // Single-flight per instance: one load of the key per instance at a time, no fewer
    // instances' worth on the cold miss.
    for name in [
        "symfony",
        "symfony-5.4",
        "caffeine-refresh",
        "spring-sync",
        "fusion",
    ] {
        let r = result(name);
        assert!(u(&r, "/db/peak_key_herd") <= 2, "{name}: {}", r["db"]);
        assert!(u(&r, "/outcomes/waited") > 0, "{name}: {}", r["outcomes"]);
    }
    assert_eq!(
        u(&result("spring-sync"), "/db/peak_key_herd"),
        2,
        "one load per instance on the cold miss: both instances load"
    );
    for name in ["symfony", "symfony-5.4"] {
        assert!(u(&result(name), "/db/early_recomputes") > 0, "{name}");
    }
    for name in ["caffeine-refresh", "fusion"] {
        let r = result(name);
        assert!(u(&r, "/db/eager_refreshes") > 0, "{name}: {}", r["db"]);
    }
    // Caffeine keeps its entries in each JVM: the preset's reads never reach Redis, and each
    // instance loads the key for itself on the cold miss.
    let caffeine = result("caffeine-refresh");
    assert_eq!(
        u(&caffeine, "/redis/keyspace_hits") + u(&caffeine, "/redis/keyspace_misses"),
        0,
        "{}",
        caffeine["redis"]
    );
    assert_eq!(u(&caffeine, "/db/peak_key_herd"), 2, "{}", caffeine["db"]);
    // bentocache's grace: the old value served while one factory per instance refreshes it.
    let bento = result("bentocache");
    assert!(u(&bento, "/db/peak_key_herd") <= 2, "{}", bento["db"]);
    assert!(u(&bento, "/outcomes/waited") > 0, "{}", bento["outcomes"]);
    assert!(u(&bento, "/outcomes/stale") > 0, "{}", bento["outcomes"]);
    assert!(u(&bento, "/db/background_refreshes") > 0, "{}", bento["db"]);
    // dogpile's Redis lock: one load of the key at a time across both instances, the cold
    // miss included; past the TTL the old value is served while the lock's holder reloads.
    let dogpile = result("dogpile");
    assert_eq!(u(&dogpile, "/db/peak_key_herd"), 1, "{}", dogpile["db"]);
    assert!(u(&dogpile, "/lock/acquired") > 0, "{}", dogpile["lock"]);
    assert!(
        u(&dogpile, "/outcomes/stale") > 0,
        "{}",
        dogpile["outcomes"]
    );
    assert_eq!(
        dogpile["scenario"]["stale"], "1s",
        "stale defaults to the TTL"
    );
    let fusion = result("fusion");
    assert_eq!(fusion["scenario"]["fail_safe"]["max"], "10s");
    assert_eq!(fusion["scenario"]["fail_safe"]["soft_timeout"], "100ms");
    assert_eq!(fusion["scenario"]["eager_refresh"], "90%");
}
