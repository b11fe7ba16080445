//! `stampede sweep`, end to end against the managed servers: a 2×2 grid writes its cells, its
//! document and its survival map, `--resume` runs none of them again and `report` draws the
//! map; the boundary bisection finds the capacity of a workload whose capacity is known by
//! construction; and what a sweep cannot do is refused before any server starts (exit 2).

use crate::common;

use std::path::Path;
use std::time::SystemTime;

use common::{assert_servers_gone, cpu_turn, read_json, stampede};
use serde_json::Value;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(p: &Path) -> Value {
    read_json(p).unwrap_or_else(|| panic!("{} missing or not JSON", p.display()))
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const GRID: &[&str] = &[
    "sweep",
    "--strategies",
    "cache-aside,mutex",
    "--axis",
    "rps=200,400",
    "--axis",
    "ttl=1s..2s:+1s",
    "--duration",
    "2s",
    "--keys",
    "200",
];

#[test]
fn a_two_by_two_sweep_writes_its_cells_resumes_and_draws_its_map() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args(GRID)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let doc = json(&out.join("sweep.json"));
    let axes = doc["axes"].as_array().expect("axes[]");
    assert_eq!(axes[0]["name"], "rps");
    assert_eq!(axes[0]["values"], serde_json::json!([200, 400]));
    assert_eq!(axes[1]["name"], "ttl");
    assert_eq!(
        axes[1]["values"],
        serde_json::json!([1000, 2000]),
        "durations in ms"
    );
    let cells = doc["cells"].as_array().expect("cells[]");
    assert_eq!(cells.len(), 8, "2 strategies × 2 × 2: {doc}");
    let mut files = Vec::new();
    for strategy in ["cache-aside", "mutex"] {
        for rps in [200, 400] {
            for ttl in [1000, 2000] {
                let c = cells
                    .iter()
                    .find(|c| {
                        c["strategy"] == strategy
                            && c["params"]["rps"] == rps
                            && c["params"]["ttl"] == ttl
                    })
                    .unwrap_or_else(|| panic!("no cell {strategy} rps={rps} ttl={ttl}: {doc}"));
                let rel = format!("{strategy}/rps={rps},ttl={ttl}.json");
                assert_eq!(c["result"], rel.as_str());
                let path = out.join(&rel);
                let r = json(&path);
                // The point's flags reached the run, and each cell ran on its own counters.
                assert_eq!(r["scenario"]["load"]["rps"], f64::from(rps));
                assert_eq!(r["strategy"], strategy);
                assert_eq!(r["requests"]["scheduled"].as_u64(), Some(2 * rps as u64));
                let f = &c["figures"];
                assert_eq!(f["offered_per_s"].as_f64(), Some(f64::from(rps)));
                for k in ["goodput_per_s", "db_calls_per_s", "p99_ms", "peak_key_herd"] {
                    assert!(f[k].is_number(), "{k} in {c}");
                }
                assert!(c["recovery"].is_null(), "no shock, no recovery: {c}");
                assert_servers_gone(&r);
                files.push(path);
            }
        }
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for s in [
        "cache-aside: survival map",
        "mutex: survival map",
        "| 200 |",
        "| 400 |",
    ] {
        assert!(
            summary.contains(s),
            "{s} missing from summary.md:\n{summary}"
        );
    }
    assert!(stdout.contains("survival map"), "{stdout}");

    // Again with --resume: every cell is there with the same scenario, so none runs.
    let before: Vec<SystemTime> = files.iter().map(|p| mtime(p)).collect();
    let o = stampede()
        .args(GRID)
        .arg("--out")
        .arg(&out)
        .arg("--resume")
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("0 run, 8 skipped"), "{stderr}");
    let after: Vec<SystemTime> = files.iter().map(|p| mtime(p)).collect();
    assert_eq!(before, after, "a resumed sweep rewrote a finished cell");
    assert_eq!(
        json(&out.join("sweep.json"))["cells"]
            .as_array()
            .map(Vec::len),
        Some(8)
    );

    // The report of a sweep directory: one map panel per strategy.
    let html = dir.path().join("map.html");
    let o = stampede()
        .arg("report")
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 2, "one panel per strategy");
    for s in [
        "survival map of cache-aside",
        "survival map of mutex",
        "ttl (ms)",
    ] {
        assert!(page.contains(s), "{s} missing from the page");
    }
}

#[test]
fn the_boundary_is_the_capacity_of_a_workload_built_to_have_one() {
    crate::common::waiting_turns();
    // Every request asks for an id absent from the database (--missing-ratio 100%) and no
    // not-found sentinel is cached (no --negative-ttl), so every request is one load; one
    // instance with 2 connections and loads of pg_sleep(20ms) serves at most
    // 1 × 2 / 0.020 s = 100 loads/s. Past that the pool's queue grows for the whole window
    // and the p99 passes the knee's 100 ms within a few req/s; below it nothing queues.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args([
                "sweep",
                "--strategies",
                "cache-aside",
                "--boundary",
                "rps",
                // No bounds: an eighth to four times the rate, 6.25 to 200 req/s.
                "--rps",
                "50",
                "--missing-ratio",
                "100%",
                "--db-cost",
                "20ms",
                "--db-pool",
                "2",
                "--instances",
                "1",
                "--keys",
                "200",
                "--duration",
                "3s",
                // Below what the boundary can be: it must break and exit 1.
                "--threshold",
                "boundary_rps_min=150",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap()
    };
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("threshold broken (cache-aside): boundary_rps_min"),
        "{stderr}"
    );
    assert!(
        stderr.contains("between 6.25 and 200 req/s, an eighth to four times"),
        "{stderr}"
    );
    let doc = json(&out.join("sweep.json"));
    let b = &doc["boundary"]["cache-aside"][0];
    let rps = b["rps"]
        .as_f64()
        .unwrap_or_else(|| panic!("no boundary: {doc}"));
    let runs = b["runs"].as_u64().unwrap();
    println!("boundary of cache-aside: {rps} req/s in {runs} runs (capacity 100 by construction)");
    assert!(b["bound"].is_null(), "found between the ends: {b}");
    assert!(runs <= 8, "more runs than --max-runs: {b}");
    assert!(
        (85.0..=115.0).contains(&rps),
        "boundary {rps} req/s, capacity 100: {b}"
    );
    if let Some(fails) = b["fails_at"].as_f64() {
        assert!(fails <= rps * 1.05 + 1.0 || runs == 8, "not within 5%: {b}");
    }
    assert_eq!(doc["cells"].as_array().map(Vec::len), Some(runs as usize));
    assert!(stdout.contains("cache-aside holds up to"), "{stdout}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("cache-aside holds up to"), "{summary}");
}

#[test]
fn a_shocked_map_has_a_verdict_in_every_cell() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args([
                "sweep",
                "--strategies",
                "mutex",
                "--axis",
                "rps=200,400",
                "--axis",
                "drop-fraction=50%,100%",
                "--duration",
                "5s",
                "--keys",
                "200",
                "--drop-cache-at",
                "2s",
                "--observe",
                "2s",
                "--settle",
                "1s",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap()
    };
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let doc = json(&out.join("sweep.json"));
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["shock"], true, "{c}");
        // A light load on a warm cache: every point of the map is judged, and comes back.
        assert_eq!(c["recovery"]["verdict"], "recovered", "{c}");
        assert!(c["params"]["drop_fraction"].as_f64().unwrap() > 0.4, "{c}");
    }
    assert!(stdout.contains("mutex"), "{stdout}");
    // Too little window after the shock for a verdict: refused before any server starts.
    let o = stampede()
        .args([
            "sweep",
            "--strategies",
            "mutex",
            "--axis",
            "rps=200,400",
            "--duration",
            "3s",
            "--drop-cache-at",
            "2s",
            "--out",
        ])
        .arg(dir.path().join("short"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--observe"), "{}", text(&o.stderr));
}

/// An axis on a fault's key (`drop-cache.fraction`) sets the key of the run's one fault of
/// that kind, here given with `--fault`: each cell's drop removes its own share.
#[test]
fn a_fault_key_is_an_axis() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k");
    let o = {
        let _turn = cpu_turn();
        stampede()
            .args([
                "sweep",
                "--strategies",
                "mutex",
                "--axis",
                "drop-cache.fraction=50%,100%",
                "--rps",
                "200",
                "--duration",
                "5s",
                "--keys",
                "200",
                "--fault",
                "drop-cache@2s",
                "--observe",
                "2s",
                "--settle",
                "1s",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap()
    };
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = json(&out.join("sweep.json"));
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let mut fractions = Vec::new();
    for c in cells {
        assert_eq!(c["shock"], true, "{c}");
        fractions.push(c["params"]["drop_cache.fraction"].as_f64().unwrap());
    }
    assert_eq!(fractions, [0.5, 1.0]);
    let full = json(&out.join("mutex/drop_cache.fraction=1.json"));
    assert_eq!(
        full["scenario"]["faults"][0]["fraction"], "100%",
        "{}",
        full["scenario"]
    );
}

/// `stampede ARGS`, expected to be refused as a usage error before any server starts.
fn refused(args: &[&str], names: &str) {
    let o = stampede().args(args).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(names), "{args:?} should name {names}: {err}");
}

#[test]
fn what_a_sweep_cannot_do_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let out = out.to_str().unwrap();
    let sweep = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = ["sweep", "--strategies", "mutex", "--out", out]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: &[(&[&'static str], &str)] = &[
        (&["--axis", "nope=1,2"], "--axis nope"),
        (&["--axis", "strategy=mutex,swr"], "--axis strategy"),
        (&["--axis", "arrival=poisson"], "--axis arrival"),
        (&["--axis", "rps=1k..16k"], "--axis rps"),
        (&["--axis", "rps=16k..1k:x2"], "--axis rps"),
        (&["--axis", "ttl=1s..4s:x0.5"], "--axis ttl"),
        (&["--axis", "rps=fast"], "--axis rps"),
        (
            &["--boundary", "rps", "--boundary-max", "40"],
            "--boundary-min",
        ),
        (
            &["--boundary", "rps", "--boundary-min", "40"],
            "--boundary-max",
        ),
        (
            &[
                "--boundary",
                "rps",
                "--boundary-min",
                "40",
                "--boundary-max",
                "200",
                "--axis",
                "rps=1,2",
            ],
            "--axis rps",
        ),
        (
            &["--axis", "ttl=1s", "--threshold", "boundary_rps_min=5000"],
            "boundary_rps_min",
        ),
        (&[], "--axis"),
    ];
    for (extra, names) in cases {
        let args = sweep(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, names);
    }
    // A run or a comparison has no boundary: the threshold is refused there.
    refused(
        &[
            "run",
            "--threshold",
            "boundary_rps_min=5000",
            "--duration",
            "1s",
        ],
        "boundary_rps_min",
    );
    refused(
        &[
            "compare",
            "--strategies",
            "mutex",
            "--threshold",
            "boundary_rps_min=5k",
        ],
        "boundary_rps_min",
    );
    // The same limit from a scenario file's [thresholds]: refused by run, and by a sweep
    // without --boundary.
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, "[thresholds]\nboundary_rps_min = 5000\n").unwrap();
    let file = scenario.to_str().unwrap();
    refused(
        &["run", "--scenario", file, "--duration", "1s"],
        "boundary_rps_min",
    );
    refused(
        &[
            "sweep",
            "--strategies",
            "mutex",
            "--axis",
            "ttl=1s,2s",
            "--scenario",
            file,
            "--out",
            out,
        ],
        "--boundary rps",
    );
    assert!(!Path::new(out).join("sweep.json").exists());
}
