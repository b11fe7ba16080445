//! Writes, invalidation and consistency on real Redis and Postgres: what each invalidation
//! leaves in the cache when writers race each other and when readers race writers, and the
//! lease coordination (one load per expiry across instances; its late, stale SET refused).
//! Counts and bounds, never timings. The runs go to the shared servers
//! (`on_shared`): each has its own schema and key namespace, and they take turns.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// `stampede compare ARGS --out <dir> --quiet` (exit 0 asserted); the trials of each label,
/// as written (`<strategy>@<invalidation>/trial-N.json` with `--repeat`).
fn compare(args: &[&str], dir: &Path) -> Vec<(String, Vec<Value>)> {
    let (_servers, args) = on_shared(args);
    let _turn = cpu_turn();
    let out = stampede()
        .arg("compare")
        .args(&args)
        .arg("--out")
        .arg(dir)
        .arg("--quiet")
        .output()
        .expect("running stampede");
    assert_eq!(
        out.status.code(),
        Some(0),
        "stampede compare {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut labels: Vec<(String, Vec<Value>)> = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            let mut trials: Vec<_> = std::fs::read_dir(&p)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            trials.sort();
            let runs = trials.iter().filter_map(|t| read_json(t)).collect();
            labels.push((name, runs));
        } else if let Some(stem) = name.strip_suffix(".json")
            && stem != "summary"
        {
            labels.push((stem.to_string(), vec![read_json(&p).unwrap()]));
        }
    }
    labels
}

fn n(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

/// Every write went through the tool and Postgres counted the same; the writes are apart from
/// the loads (`db.calls` still equals the server's count of the loader statement).
fn assert_writes_counted(r: &Value) {
    assert!(n(r, "/db/writes") > 0, "{}", r["db"]);
    assert_eq!(n(r, "/db/writes"), n(r, "/db/writes_server"), "{}", r["db"]);
    assert_eq!(n(r, "/db/calls"), n(r, "/db/calls_server"), "{}", r["db"]);
    assert_eq!(n(r, "/db/write_errors"), 0, "{}", r["db"]);
}

#[test]
fn without_writes_every_strategy_is_consistent() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().unwrap();
    let runs = compare(
        &[
            "--strategies",
            "cache-aside,mutex,single-flight,xfetch,swr,jitter,lease",
            "--rps",
            "2000",
            "--duration",
            "2s",
            "--keys",
            "200",
            "--ttl",
            "1s",
        ],
        dir.path(),
    );
    assert_eq!(runs.len(), 7, "{runs:?}");
    for (label, trials) in &runs {
        assert!(
            !label.contains('@'),
            "no invalidation in the label: {label}"
        );
        let r = &trials[0];
        assert_eq!(n(r, "/db/writes"), 0);
        assert!(r["scenario"].get("writes").is_none(), "no writes setting");
        let c = &r["consistency"];
        for f in [
            "stale_reads",
            "divergent_keys",
            "keys_written",
            "stale_sets_refused",
            "invalidation_failures",
        ] {
            assert_eq!(n(c, &format!("/{f}")), 0, "{label}: {f} in {c}");
        }
        assert_eq!(c["stale_read_ratio"].as_f64(), Some(0.0), "{label}");
        let stale_reads_in_timeline: u64 = r["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| n(b, "/stale_reads"))
            .sum();
        assert_eq!(stale_reads_in_timeline, 0, "{label}");
    }
}

/// Writers only: every read asks for an id that does not exist (no reader ever stores a
/// row), the cache starts full and lives longer than the run, and 5000 writes/s land on 10
/// keys. What the cache holds at the end is decided by the writers alone.
fn writer_race(invalidations: &str, dir: &Path) -> Vec<(String, Vec<Value>)> {
    compare(
        &[
            "--strategies",
            "cache-aside",
            "--invalidate",
            invalidations,
            "--repeat",
            "3",
            "--rps",
            "500",
            "--missing-ratio",
            "100%",
            "--duration",
            "2s",
            "--keys",
            "10",
            "--zipf",
            "0.5",
            "--write-rps",
            "5000",
            "--db-cost",
            "1ms",
            "--ttl",
            "60s",
            "--start",
            "synchronized",
            // A busy machine can stall Redis past the default 100 ms: an invalidation that
            // fails is a different property (counted, and its run left out below).
            "--redis-timeout",
            "1s",
        ],
        dir,
    )
}

#[test]
fn racing_writers_diverge_with_set_and_not_with_delete() {
    let dir = tempfile::tempdir().unwrap();
    let runs = writer_race("set,delete", dir.path());
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["cache-aside@delete", "cache-aside@set"]);
    let mut totals = Vec::new();
    for (label, trials) in &runs {
        assert_eq!(trials.len(), 3, "{label}");
        let (mut divergent, mut written, mut clean) = (0, 0, 0);
        let (mut left_wrong, mut probed) = (0, 0);
        for r in trials {
            assert_writes_counted(r);
            assert_eq!(
                r["strategy"].as_str(),
                Some(label.replace('@', "/").as_str())
            );
            let c = &r["consistency"];
            assert_eq!(
                n(r, "/db/calls"),
                n(r, "/requests/completed"),
                "every read missed"
            );
            assert_eq!(n(c, "/stale_reads"), 0, "no read served a row: {c}");
            if n(c, "/invalidation_failures") > 0 {
                // A failed invalidation leaves the old value whatever the race: not this property.
                eprintln!("{label}: a run with failed invalidations left out: {c}");
                continue;
            }
            clean += 1;
            divergent += n(c, "/divergent_keys");
            written += n(c, "/keys_written");
            left_wrong += n(c, "/writes_left_wrong");
            probed += n(c, "/writes_probed");
        }
        assert!(
            clean >= 2,
            "{label}: only {clean} runs without a failed invalidation"
        );
        eprintln!(
            "{label}: {left_wrong} writes left wrong of {probed} probed; \
             {divergent} divergent keys of {written} written at the end over {clean} runs"
        );
        totals.push((left_wrong, divergent));
    }
    // Two writers' SETs after their commits reach Redis in either order: the older one can
    // land last. A delete leaves nothing to be out of order. Judged per write (each read back
    // once its key settles: about 10% left wrong under set here), not by the keys left wrong
    // at the end, which hang on the last few writes of 10 keys (5% of them, so all 60 came out
    // right in one CI run of six).
    assert_eq!(
        totals[0],
        (0, 0),
        "delete: the writers' race leaves nothing behind"
    );
    assert!(
        totals[1].0 > 0,
        "set: the older write's SET landed last somewhere"
    );
}

#[test]
fn readers_racing_writers_diverge_under_cache_aside_but_not_lease_or_versioned() {
    // Light: the counts it asserts are each trial's own (lease and versioned leave no key
    // wrong, cache-aside's readers race the writes), which a neighbour's run cannot move.
    crate::common::light_turns();
    let dir = tempfile::tempdir().unwrap();
    // Hot keys under reads and writes; a load holds the row it read for 50 ms (its snapshot is
    // taken when the statement starts, pg_sleep runs after), a write commits in between.
    let runs = compare(
        &[
            "--strategies",
            "cache-aside,lease",
            "--invalidate",
            "delete,versioned",
            "--repeat",
            "3",
            "--rps",
            "2000",
            "--duration",
            "3s",
            "--keys",
            "20",
            "--write-rps",
            "150",
            "--db-cost",
            "50ms",
            "--ttl",
            "60s",
            "--redis-timeout",
            "1s",
        ],
        dir.path(),
    );
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "cache-aside@delete",
            "cache-aside@versioned",
            "lease@delete",
            "lease@versioned"
        ]
    );
    for (label, trials) in &runs {
        let mut divergent_in_all = 0;
        for r in trials {
            assert_writes_counted(r);
            let c = &r["consistency"];
            eprintln!("{label}: {c}");
            let divergent = n(c, "/divergent_keys");
            divergent_in_all += divergent;
            match label.as_str() {
                // A reader that read the old row stores it after the writer's delete; whether
                // a key is still wrong at the end depends on whether its last write was raced,
                // so the keys left are counted over the trials (below), the race in every one.
                "cache-aside@delete" => {
                    assert!(n(c, "/stale_reads") > 0, "{label}: {c}");
                    assert_eq!(n(c, "/stale_sets_refused"), 0, "{label}: {c}");
                }
                _ if n(c, "/invalidation_failures") == 0 => {
                    assert_eq!(divergent, 0, "{label}: {c}")
                }
                _ => eprintln!("{label}: an invalidation failed, divergence allowed"),
            }
            if label == "lease@delete" {
                // The delete took the reader's token: its late SET of the old row was refused.
                assert!(n(c, "/stale_sets_refused") > 0, "{label}: {c}");
            }
            let in_timeline: u64 = r["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| n(b, "/stale_reads"))
                .sum();
            assert_eq!(
                in_timeline,
                n(c, "/stale_reads"),
                "{label}: timeline adds up"
            );
        }
        eprintln!(
            "{label}: {divergent_in_all} divergent keys over {} runs",
            trials.len()
        );
        if label == "cache-aside@delete" {
            assert!(
                divergent_in_all > 0,
                "{label}: no key left diverged in any run"
            );
        }
    }
}

/// The hot-key scenario (1 key, 60 closed-loop clients on 2 instances, TTL 2 s, 50 ms loads)
/// for 5 s: at most 1 + 5/2 + 1 fills.
fn hot_key(strategy: &str) -> Run {
    let r = run_ok_shared(&[
        "--scenario",
        "scenarios/hot-key.toml",
        "--strategy",
        strategy,
        "--duration",
        "5s",
        "--redis-timeout",
        "1s",
    ]);
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));
    assert_eq!(r.u("/redis/timeouts") + r.u("/redis/errors"), 0);
    r
}

#[test]
fn a_lease_loads_once_per_expiry_across_instances() {
    let _servers = shared_servers();
    let r = hot_key("lease");
    let calls = r.u("/db/calls");
    assert!((2..=5).contains(&calls), "lease: {calls} DB calls");
    assert_eq!(r.u("/db/peak_key_herd"), 1, "{}", r.json["db"]);
    assert_eq!(r.u("/db/redundant_loads"), 0);
    assert!(r.u("/lock/contended") > 0 && r.u("/outcomes/waited") > 0);
    // No write took a token: every lease SET was accepted.
    assert_eq!(r.u("/consistency/stale_sets_refused"), 0);
    assert_eq!(
        r.u("/lock/lost"),
        0,
        "a lease is never counted as a lost lock"
    );

    let r = hot_key("swr+lease");
    let refreshes = r.u("/db/background_refreshes");
    assert!((1..=4).contains(&refreshes), "{refreshes} refreshes");
    assert_eq!(r.u("/db/peak_key_herd"), 1, "{}", r.json["db"]);
    assert_eq!(r.u("/consistency/stale_sets_refused"), 0);
}

#[test]
fn writes_and_invalidation_are_refused_where_they_mean_nothing() {
    for (args, needle) in [
        (&["--invalidate", "set"][..], "add --write-rps"),
        (&["--write-zipf", "0.5"][..], "add --write-rps"),
        (
            &["--write-rps", "10", "--invalidate", "set,delete"][..],
            "compare --invalidate takes a list",
        ),
        (
            &["--write-rps", "10", "--invalidate", "purge"][..],
            "valid: delete",
        ),
        (&["--write-rps=-1"][..], "--write-rps"),
        (
            &["--strategy", "lease+mutex"][..],
            "combines lease with mutex",
        ),
    ] {
        let out = stampede().arg("run").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
    }
}

/// The invalidation race counted per write, as the lab measured it: each write is read back
/// once its key settles (the fills in flight at its commit written back, no other write of the
/// key in flight), and counted left wrong when the cache holds an older version than the last
/// committed one. Many writers and readers of 20 keys (100 writes/s each) with loads that
/// are a bare SELECT (so a load in flight at a commit is rare): DEL before the UPDATE
/// lets a reader cache the old row in the gap, racing writers' SETs land out of order, while
/// UPDATE-then-DEL leaves next to nothing and the versioned SET and the lease refuse the late
/// write. In each of 3 runs: delete-first above delete and set, versioned and lease at 0.
#[test]
fn writes_left_wrong_order_the_invalidations_as_the_lab_did() {
    let _servers = shared_servers();
    let workload = [
        "--repeat",
        "3",
        "--rps",
        "1000",
        "--duration",
        "3s",
        "--keys",
        "20",
        "--zipf",
        "0.5",
        "--write-rps",
        "2000",
        "--db-cost",
        "0ms",
        "--ttl",
        "60s",
        "--redis-timeout",
        "1s",
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--strategies",
        "cache-aside",
        "--invalidate",
        "delete-first,set,delete,versioned",
    ];
    args.extend(workload);
    let mut runs = compare(&args, dir.path());
    let lease_dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--strategies", "lease", "--invalidate", "delete"];
    args.extend(workload);
    runs.extend(compare(&args, lease_dir.path()));
    let ratio = |label: &str, t: usize| -> f64 {
        let (_, trials) = runs.iter().find(|(l, _)| l == label).unwrap_or_else(|| {
            panic!(
                "no {label} in {:?}",
                runs.iter().map(|r| &r.0).collect::<Vec<_>>()
            )
        });
        let c = &trials[t]["consistency"];
        let probed = n(c, "/writes_probed");
        assert!(probed > 100, "{label}: only {probed} writes probed: {c}");
        assert!(
            n(c, "/writes_left_wrong") <= probed,
            "{label}: more wrong than probed: {c}"
        );
        eprintln!(
            "{label} trial {}: {} of {probed} writes left wrong ({} not probed), divergent {} key-ms",
            t + 1,
            n(c, "/writes_left_wrong"),
            n(c, "/writes_unprobed"),
            n(c, "/divergent_ms")
        );
        c["writes_left_wrong_ratio"].as_f64().unwrap()
    };
    // set and delete each leave a few dozen of the 6000 wrong (a load in flight across the
    // write; under set also two writers' SETs landing out of order), and which is higher
    // changes from trial to trial on one build (27 vs 18 and 18 vs 32 here): set is held to
    // leaving some wrong, and below delete-first, not above delete.
    let mut set_wrong = 0.0;
    for t in 0..3 {
        let delete = ratio("cache-aside@delete", t);
        let first = ratio("cache-aside@delete-first", t);
        let set = ratio("cache-aside@set", t);
        assert!(first > delete, "trial {t}");
        assert!(first > set, "trial {t}");
        set_wrong += set;
        assert_eq!(ratio("cache-aside@versioned", t), 0.0, "trial {t}");
        assert_eq!(ratio("lease@delete", t), 0.0, "trial {t}");
    }
    assert!(set_wrong > 0.0, "set never left a write wrong");
}

/// How stale a stale read is, in magnitude: with writes and no invalidation an entry serves
/// the version it was loaded with until its TTL ends, so a stale read is at most a TTL (plus
/// the load that filled it) behind the committed version, and its staleness grows with the
/// TTL; with `delete` the only stale reads are those the race leaves (a load in flight across
/// a write writing back the old version), a small share of them.
#[test]
fn staleness_is_bounded_by_the_ttl_and_grows_with_it() {
    crate::common::waiting_turns();
    let _servers = shared_servers();
    let stale = |ttl: &str, invalidate: &str| {
        let r = run_ok_shared(&[
            "--rps",
            "1000",
            "--duration",
            "3s",
            "--keys",
            "50",
            "--write-rps",
            "100",
            "--ttl",
            ttl,
            "--invalidate",
            invalidate,
            "--db-cost",
            "1ms",
        ]);
        let c = r.json["consistency"].clone();
        let f = |p: &str| c.pointer(p).and_then(Value::as_f64).unwrap();
        eprintln!("ttl {ttl} {invalidate}: {c}");
        (
            n(&c, "/stale_reads"),
            f("/staleness_ms/p50"),
            f("/staleness_ms/max"),
        )
    };
    let (short_n, short_p50, short_max) = stale("300ms", "none");
    let (long_n, long_p50, long_max) = stale("1500ms", "none");
    assert!(
        short_n > 50 && long_n > 50,
        "{short_n} / {long_n} stale reads"
    );
    // A TTL plus the load that filled the entry (1 ms of work, queueing at most a few tens).
    assert!(short_max <= 300.0 + 150.0, "ttl 300ms: max {short_max} ms");
    assert!(long_max <= 1500.0 + 150.0, "ttl 1500ms: max {long_max} ms");
    assert!(
        short_p50 > 0.0 && long_p50 > 2.0 * short_p50,
        "staleness grows with the TTL: p50 {short_p50} ms at 300 ms, {long_p50} ms at 1500 ms"
    );
    // A stale write-back that lands after the DEL can still stay until the TTL, so the bound
    // is on how many reads are stale, not how stale the few are.
    let (delete_n, _, delete_max) = stale("1500ms", "delete");
    assert!(
        delete_n * 20 < long_n && delete_max <= 1500.0 + 150.0,
        "delete leaves only the race window: {delete_n} stale reads (max {delete_max} ms) \
         against {long_n} without"
    );
}

/// `writes_left_wrong` of a run with writes: (left wrong, probed).
fn left_wrong(args: &[&str]) -> (u64, u64) {
    let r = run_ok_shared(args);
    (
        r.u("/consistency/writes_left_wrong"),
        r.u("/consistency/writes_probed"),
    )
}

#[test]
fn racing_writers_and_the_lab_s_orderings() {
    let _servers = shared_servers();
    // Two writers of one key per event, a 1-5 ms pause between each one's UPDATE and its cache
    // step, few readers with fast loads: the later commit's SET can land first (set), a delete
    // cannot leave an old value, and both guards refuse the older write.
    let two = |inv: &str| {
        left_wrong(&[
            "--keys",
            "50",
            "--rps",
            "200",
            "--db-cost",
            "1ms",
            "--ttl",
            "30s",
            "--write-rps",
            "100",
            "--writers-per-key",
            "2",
            "--write-gap",
            "1ms..5ms",
            "--invalidate",
            inv,
            "--duration",
            "2s",
        ])
    };
    let (set, probed) = two("set");
    assert!(probed >= 150, "probed {probed} write events (of 200)");
    assert!(set * 5 >= probed, "set: {set} of {probed} left wrong");
    let (delete, probed) = two("delete");
    assert!(
        delete * 50 <= probed,
        "delete: {delete} of {probed} left wrong"
    );
    assert!(set > 5 * delete.max(1), "set {set} ≫ delete {delete}");
    assert_eq!(two("versioned").0, 0);
    assert_eq!(two("delete-guarded").0, 0);
    // Three readers and one writer of one key: deleting before the UPDATE lets a reader cache
    // the old row in the pause; deleting after it leaves nothing for them to cache wrongly.
    let three = |inv: &str| {
        left_wrong(&[
            "--clients",
            "3",
            "--instances",
            "1",
            "--keys",
            "1",
            "--db-cost",
            "2ms",
            "--ttl",
            "30s",
            "--write-rps",
            "50",
            "--write-gap",
            "1ms..5ms",
            "--invalidate",
            inv,
            "--duration",
            "2s",
        ])
    };
    let (first, probed) = three("delete-first");
    assert!(
        first * 2 >= probed,
        "delete-first: {first} of {probed} left wrong"
    );
    let (after, _) = three("delete");
    assert!(
        first > 5 * after.max(1),
        "delete-first {first} ≫ delete {after}"
    );
    assert_eq!(three("delete-guarded").0, 0);
}
