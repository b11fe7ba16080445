//! The rate limit and the re-warm job on real servers. `--db-rate R --db-burst B` holds the DB
//! calls of every timeline bucket (and of every second) to R·t + B, and the window to about R,
//! counted by the tool per bucket and by Postgres in all; the global scope holds the whole run to R through Redis, and
//! while Redis is paused the instances hold themselves to R / instances and say for how long.
//! `--rewarm-every D --rewarm-top K` sends K DB calls right after every D and none between.

use crate::common;

use common::*;
use serde_json::Value;

/// (end of the bucket in ms since the window opened, its length in ms, DB calls) of every
/// whole bucket of the window (the drain's and a cut-short bucket left out).
fn buckets(r: &Run) -> Vec<(u64, u64, u64)> {
    let t = r.json["timeline"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut prev = 0;
    for b in &t {
        let at = b["t_ms"].as_u64().expect("t_ms");
        if !b["partial"].as_bool().unwrap_or(false) {
            out.push((at, at - prev, b["db_calls"].as_u64().expect("db_calls")));
        }
        prev = at;
    }
    out
}

/// Every bucket of `r` holds at most rate × its length + burst DB calls, and every second of
/// ten buckets at most rate × its span + burst; over the window, at least 3/4 of the rate
/// (the demand is about twice it). The server's count is the tool's.
///
/// The tolerances are what the measurement needs, not slack for the limiter: a call is counted
/// when its statement starts, a little after the limiter let it go (the pool's checkout, and
/// under the global scope the Lua call's answer), so a window is judged as if it were a bucket
/// (100 ms) longer, and a bucket shorter than one (a tick late the bucket before) as a whole
/// one; and the machine is shared: a stall of the process loses the tokens that overflow the
/// bucket meanwhile, hence no lower bound per second.
fn assert_held(r: &Run, rate: f64, burst: u64) {
    let b = buckets(r);
    assert!(b.len() >= 20, "{} whole buckets", b.len());
    let calls_in = |ms: u64| (rate * ms as f64 / 1000.0).ceil() as u64;
    for &(at, len, calls) in &b {
        let most = calls_in(len.max(100)) + burst + 1;
        assert!(
            calls <= most,
            "bucket ending at {at} ms: {calls} DB calls in {len} ms, more than {most}: {b:?}"
        );
    }
    for w in b.windows(10) {
        let span = w[9].0 - w[0].0 + w[0].1;
        let calls: u64 = w.iter().map(|x| x.2).sum();
        let most = calls_in(span + 100) + burst + 1;
        assert!(
            calls <= most,
            "the {span} ms up to {} ms: {calls} DB calls, more than {most}",
            w[9].0
        );
    }
    let window = b.last().map_or(0, |x| x.0);
    let all: u64 = b.iter().map(|x| x.2).sum();
    assert!(
        all >= calls_in(window) * 3 / 4,
        "{all} DB calls in {window} ms at {rate}/s: the limit was not reached"
    );
    assert_eq!(
        r.json["db"]["calls_server"].as_u64(),
        Some(r.u("/db/calls")),
        "Postgres counted what the tool sent: {}",
        r.json["db"]
    );
}

/// The defaults (10k req/s over 10k keys, 3 s TTL, a steady start) want about twice the
/// loads the limit lets through, so every bucket runs at the limit.
const BUSY: [&str; 4] = ["--duration", "4s", "--db-burst", "20"];

#[test]
fn a_global_rate_limit_holds_every_bucket_to_r_plus_burst_and_refuses_the_rest() {
    let r = run_ok(
        &[
            &BUSY[..],
            &["--db-rate", "200", "--db-rate-scope", "global"],
        ]
        .concat(),
    );
    let per_bucket: Vec<u64> = buckets(&r).iter().map(|b| b.2).collect();
    eprintln!(
        "global 200/s burst 20: DB calls per 100 ms {per_bucket:?}; {} refused, {} rejected, {} stale",
        r.u("/db/rate_refusals"),
        r.u("/outcomes/rejected"),
        r.u("/outcomes/stale")
    );
    assert_held(&r, 200.0, 20);
    // The refused loads were served stale or rejected, never failed, never sent.
    assert!(r.u("/db/rate_refusals") > 500, "{}", r.json["db"]);
    assert!(r.u("/outcomes/rejected") > 0);
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.json["requests"]);
    assert_eq!(r.u("/db/limit_refusals") + r.u("/db/breaker_refusals"), 0);
    assert_eq!(r.u("/db/rate_fallback_ms"), 0, "Redis answered every call");
    let sc: &Value = &r.json["scenario"]["db_rate"];
    assert_eq!(
        (
            sc["rate"].as_f64(),
            sc["burst"].as_u64(),
            sc["scope"].as_str()
        ),
        (Some(200.0), Some(20), Some("global"))
    );

    // Per instance, each of the 2 instances has its own 200/s: the database sees twice it.
    let r = run_ok(&["--duration", "3s", "--db-burst", "20", "--db-rate", "200"]);
    let per_bucket: Vec<u64> = buckets(&r).iter().map(|b| b.2).collect();
    eprintln!("per instance 200/s burst 20, 2 instances: {per_bucket:?}");
    assert_held(&r, 400.0, 40);
    assert!(r.u("/db/rate_refusals") > 0);
}

#[test]
fn a_global_rate_limit_whose_redis_is_paused_falls_back_to_its_share_and_counts_the_time() {
    // Redis paused for 1 s from 1.5 s: every call of the global bucket times out at
    // --redis-timeout, so each instance limits itself to 100/s (burst 10) until it answers.
    let r = run_ok(
        &[
            &BUSY[..],
            &[
                "--db-rate",
                "200",
                "--db-rate-scope",
                "global",
                "--pause-redis-at",
                "1500ms",
                "--pause-for",
                "1s",
            ],
        ]
        .concat(),
    );
    let per_bucket: Vec<u64> = buckets(&r).iter().map(|b| b.2).collect();
    let fallback = r.u("/db/rate_fallback_ms");
    eprintln!(
        "global 200/s, Redis paused 1 s: fallback {fallback} ms; DB calls per 100 ms {per_bucket:?}"
    );
    // The pause, less the first timeout, plus up to one hold after it before Redis is asked.
    assert!(
        (800..=1700).contains(&fallback),
        "fallback {fallback} ms for a 1 s pause"
    );
    // Two shares of 100/s, burst 10 each: the same rate through the pause. While the
    // instances switch back one by one, one already draws on the global bucket (full again
    // after the pause: its burst) while the other still draws on its share (its burst too):
    // up to twice the burst at that moment, never more.
    assert_held(&r, 200.0, 40);
}

#[test]
fn rewarm_sends_its_calls_on_schedule_and_none_between() {
    // Few misses of their own (a long TTL, a steady start): the job's calls stand out.
    let r = run_ok(&[
        "--rps",
        "500",
        "--keys",
        "2000",
        "--ttl",
        "60s",
        "--duration",
        "3500ms",
        "--rewarm-every",
        "1s",
        "--rewarm-top",
        "100",
    ]);
    let b = buckets(&r);
    let (calls, runs) = (r.u("/db/rewarm_calls"), r.u("/db/rewarm_runs"));
    eprintln!(
        "re-warm top 100 every 1 s: {runs} runs, {calls} calls of {}; per bucket {:?}",
        r.u("/db/calls"),
        b.iter().map(|x| x.2).collect::<Vec<_>>()
    );
    // At 1 s, 2 s and 3 s into the 3.5 s window: 3 runs of 100 loads, each one DB call.
    assert_eq!(runs, 3);
    assert_eq!(calls, 300, "{}", r.json["db"]);
    assert!(
        r.u("/db/calls") >= calls,
        "rewarm calls are among the DB calls"
    );
    for k in 1..=3u64 {
        // A run's 100 loads (50 per instance, 16 at once, 10 ms each) end within 300 ms.
        let near: u64 = b
            .iter()
            .filter(|(at, _, _)| *at > k * 1000 && *at <= k * 1000 + 300)
            .map(|x| x.2)
            .sum();
        assert!(near >= 100, "{near} DB calls in the 300 ms after {k} s");
    }
    let between: u64 = b
        .iter()
        .filter(|(at, _, _)| (*at % 1000) > 400 || *at < 900)
        .map(|x| x.2)
        .sum();
    let others = r.u("/db/calls") - calls;
    assert!(
        between <= others,
        "{between} DB calls away from the runs, more than the {others} that were not the job's"
    );
    assert_eq!(
        r.json["db"]["calls_server"].as_u64(),
        Some(r.u("/db/calls"))
    );
}
