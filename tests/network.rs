//! The network between the app and its servers (`--net-rtt`): the tool's proxy on loopback
//! delays what the requests send and receive by the round trip, while the servers still count
//! every command and statement (the tool's own connections bypass it). Real servers.

mod common;

use common::run_ok;

/// One run of cache-aside on a cached key space: nearly every request one Redis GET.
fn hits(extra: &[&str]) -> common::Run {
    let mut args = vec![
        "--keys",
        "200",
        "--rps",
        "300",
        "--duration",
        "2s",
        "--ttl",
        "30s",
        "--warm",
        "200",
    ];
    args.extend_from_slice(extra);
    run_ok(&args)
}

#[test]
fn a_round_trip_is_what_the_requests_see_and_the_servers_still_count_everything() {
    let plain = hits(&[]);
    let rtt = hits(&["--net-rtt", "2ms"]);
    for r in [&plain, &rtt] {
        r.assert_counts_add_up();
        // Through the proxy as directly: the servers' counts are the tool's.
        assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"), "{}", r.stdout());
        assert_eq!(r.u("/redis/keyspace_hits"), r.u("/outcomes/hit"));
        assert_eq!(r.u("/redis/keyspace_misses"), r.u("/outcomes/miss"));
        assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    }
    assert_eq!(rtt.json["scenario"]["redis_rtt"], "2ms");
    assert_eq!(rtt.json["scenario"]["pg_rtt"], "2ms");
    assert!(plain.json["scenario"].get("redis_rtt").is_none());
    // A hit is one Redis round trip: its p50 rises by the 2 ms added (a loaded 2-core machine
    // adds its scheduling to both; the bounds catch a missing or doubled delay).
    let (p0, p1) = (plain.f("/latency_ms/p50"), rtt.f("/latency_ms/p50"));
    assert!(
        p1 - p0 >= 1.8 && p1 - p0 <= 4.0,
        "p50 {p0:.3} ms on loopback, {p1:.3} ms with a 2 ms round trip"
    );
}

#[test]
fn what_the_proxy_cannot_stand_between_is_refused() {
    for (args, needle) in [
        (
            &["--net-rtt", "1ms", "--redis-cluster"][..],
            "Redis Cluster",
        ),
        (&["--net-rtt", "1ms", "--tls"][..], "TLS"),
        (&["--net-rtt", "1ms±2ms"][..], "jitter"),
    ] {
        let out = common::stampede()
            .arg("run")
            .args(args)
            .output()
            .expect("run stampede");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
