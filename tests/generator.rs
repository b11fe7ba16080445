//! The load generator itself, end to end: the open-loop clock schedules exactly rate × duration
//! requests also when requests go out in batches, overload is shed and counted rather than
//! stalling the clock, and the run reports what the generator cost. Behaviour only: the
//! performance figures live in `scripts/bench`.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn schedule_is_exact_at_a_rate_that_batches_dispatch() {
    // Above 10k req/s the pacer sends requests due within its minimum gap together; the count
    // must not drift, in the warm-up or in the measured window.
    let r = run_ok(&[
        "--rps",
        "25k",
        "--warmup",
        "1s",
        "--duration",
        "2s",
        "--keys",
        "1000",
        "--start",
        "cold",
        "--warm",
        "1000",
        "--ttl",
        "600s",
        "--db-cost",
        "0ms",
    ]);
    assert_eq!(r.u("/requests/warmup"), 25_000);
    assert_eq!(r.u("/requests/scheduled"), 50_000);
    r.assert_counts_add_up();
    assert_servers_gone(&r.json);
}

#[test]
fn overload_is_shed_and_counted_not_queued_behind_the_clock() {
    // Four requests at a time, each a 50 ms load (1 ms TTL, so nearly every request loads):
    // the instance serves ~80 req/s of the 20k asked. The clock must keep its schedule and
    // shed the excess, and the run must end about when it was due to.
    let r = run_ok(&[
        "--rps",
        "20000",
        "--duration",
        "2s",
        "--max-inflight",
        "4",
        "--db-cost",
        "50ms",
        "--ttl",
        "1ms",
        "--keys",
        "100000",
    ]);
    // The run itself, not the wait for its turn.
    let took = r.took;
    let (scheduled, completed, shed) = (
        r.u("/requests/scheduled"),
        r.u("/requests/completed"),
        r.u("/requests/shed"),
    );
    assert_eq!(scheduled, 40_000, "the clock skipped requests");
    assert_eq!(completed + shed, scheduled);
    assert!(
        shed > scheduled / 2,
        "most of the overload is shed: {shed} of {scheduled}"
    );
    assert!(completed > 0);
    assert!(r.u("/db/calls") > 0);
    // Server start-up and clean-up included; a clock that waited for requests to finish
    // would take 40000 × 50 ms / 4 = over 8 minutes.
    assert!(
        took < Duration::from_secs(2 + 60),
        "the run took {took:?} for 2 s of traffic"
    );
    assert_servers_gone(&r.json);
}

#[test]
fn the_result_says_what_the_generator_cost() {
    let r = run_ok(&["--rps", "2000", "--duration", "2s", "--keys", "100"]);
    let cpu = r.f("/generator/cpu_seconds");
    let cores = r.u("/generator/cores");
    assert!(cpu > 0.0, "cpu_seconds {cpu}");
    assert!(cores >= 1);
    let util = r.f("/generator/cpu_utilization");
    assert!(util > 0.0 && util <= 1.0, "cpu_utilization {util}");
    let per_request = r.f("/generator/cpu_per_request_us");
    let requests = r.u("/requests/scheduled") + r.u("/requests/warmup");
    assert!(
        (per_request * requests as f64 / 1e6 - cpu).abs() < 1e-6,
        "cpu_per_request_us {per_request} × {requests} requests != {cpu} s"
    );
    assert!(r.f("/generator/peak_rss_mib") > 1.0);
    // The precision of the schedule as percentiles, the maximum the same as the field of old.
    let (p50, p99, max) = (
        r.f("/generator/dispatch_lag_ms/p50"),
        r.f("/generator/dispatch_lag_ms/p99"),
        r.f("/generator/dispatch_lag_ms/max"),
    );
    assert!(0.0 <= p50 && p50 <= p99, "p50 {p50} p99 {p99}");
    // The percentiles come from a histogram of 2 significant digits, the maximum is exact.
    assert!(p99 <= max * 1.01 + 0.001, "p99 {p99} max {max}");
    assert_eq!(max, r.f("/generator/max_dispatch_lag_ms"));
    // What may cast doubt on the figures is a diagnosis now (generator-behind), never a
    // silent field.
    assert!(r.json["diagnoses"].is_array());
}

#[test]
fn a_rate_beyond_the_machine_ends_on_time_and_counts_what_was_never_sent() {
    let r = run_ok(&["--rps", "1e9", "--duration", "1s", "--start", "cold"]);
    let took = r.took;
    // The window (1 s) plus the bounded drain (30 s) plus start-up is the promise; this machine
    // ends such a run in a few seconds.
    assert!(took < std::time::Duration::from_secs(35), "{took:?}");
    assert_eq!(r.u("/requests/scheduled"), 1_000_000_000);
    assert!(r.u("/requests/unsent") > 0, "{}", r.json["requests"]);
    assert_eq!(
        r.u("/requests/completed") + r.u("/requests/shed") + r.u("/requests/unsent"),
        r.u("/requests/scheduled")
    );
    let codes = r.json["diagnoses"].to_string();
    assert!(codes.contains("never sent"), "{codes}");
}

/// The schedule is exact at 1k, 10k and 50k req/s, with one instance, two, and more instances
/// than the machine has cores: rate × duration requests scheduled, each completed or shed
/// once, and every miss one statement that Postgres counted too.
#[test]
fn the_schedule_is_exact_at_every_rate_and_instance_count() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let many = (cores + 3).to_string();
    for (rate, instances) in [("1000", "1"), ("10k", "2"), ("50k", many.as_str())] {
        let r = run_ok(&[
            "--rps",
            rate,
            "--duration",
            "2s",
            "--instances",
            instances,
            "--keys",
            "2000",
            "--ttl",
            "1s",
            "--db-cost",
            "0ms",
        ]);
        let expected = match rate {
            "1000" => 2_000,
            "10k" => 20_000,
            _ => 100_000,
        };
        assert_eq!(
            r.u("/requests/scheduled"),
            expected,
            "{rate}/s on {instances} instances: {}",
            r.json["requests"]
        );
        r.assert_counts_add_up();
        assert_eq!(
            r.json["db"]["calls"], r.json["db"]["calls_server"],
            "{rate}/s on {instances} instances: {}",
            r.json["db"]
        );
        assert_eq!(
            r.u("/generator/instances"),
            instances.parse::<u64>().unwrap()
        );
        assert_servers_gone(&r.json);
    }
}

/// A closed loop has no schedule, so no dispatch lag: null in the JSON and said so in the
/// summary, never a row of zeros that reads as perfect precision.
#[test]
fn a_closed_loop_has_no_dispatch_lag_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args(["run", "--clients", "4", "--duration", "1s", "--keys", "100"])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j = read_json(&out).unwrap();
    assert!(
        j["generator"]["dispatch_lag_ms"].is_null(),
        "{}",
        j["generator"]
    );
    assert!(
        said.contains("no dispatch lag (closed loop: no schedule)"),
        "{said}"
    );
}
