//! `stampede check` on real results: the committed CI baseline (produced by
//! `stampede compare --strategies all --scenario scenarios/ci.toml`), judged against itself,
//! against other strategies, and against doctored copies; plus the Markdown it prints.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::stampede;
use serde_json::Value;

fn baseline_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results/baseline-ci")
}

fn baseline(strategy: &str) -> PathBuf {
    baseline_dir().join(format!("{strategy}.json"))
}

fn check(args: &[&Path], extra: &[&str]) -> Output {
    let mut c = stampede();
    c.arg("check").arg(args[0]).arg("--baseline").arg(args[1]);
    c.args(extra).output().expect("running stampede check")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A copy of a baseline result with `edit` applied, written to `dir`.
fn doctored(dir: &Path, strategy: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(baseline(strategy)).unwrap()).unwrap();
    edit(&mut v);
    let p = dir.join(format!("{strategy}.json"));
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p
}

#[test]
fn a_result_checked_against_itself_passes() {
    let m = baseline("mutex");
    let o = check(&[&m, &m], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("no regression"));

    // A whole compare directory against itself: every strategy compared.
    let d = baseline_dir();
    let o = check(&[&d, &d], &[]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("6 strategies compared, no regression"),
        "{out}"
    );
}

#[test]
fn a_clearly_better_baseline_is_a_regression_only_with_force() {
    let (mutex, cache_aside) = (baseline("mutex"), baseline("cache-aside"));
    // Different strategies are different scenarios: refused, naming the difference.
    let o = check(&[&cache_aside, &mutex], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("strategy: baseline mutex, current cache-aside"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");

    let o = check(&[&cache_aside, &mutex], &["--force"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", text(&o.stderr));
    for metric in ["db_calls", "redundant_loads", "peak_key_herd"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(metric))
            .unwrap_or_else(|| panic!("no {metric} row:\n{out}"));
        assert!(line.contains("REGRESSION"), "{line}");
    }

    // The other way round every change is an improvement, and improvements never fail.
    let o = check(&[&mutex, &cache_aside], &["--force"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(!out.contains("REGRESSION"), "{out}");
    assert!(out.contains("better"), "{out}");
}

#[test]
fn scenarios_that_differ_in_what_matters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (edit, needle) in [
        (
            Box::new(|v: &mut Value| v["scenario"]["keys"] = 5000.into())
                as Box<dyn FnOnce(&mut Value)>,
            "keys: baseline 1000, current 5000",
        ),
        (
            Box::new(|v: &mut Value| v["scenario"]["ttl"] = "2s".into()),
            "ttl: baseline 1s, current 2s",
        ),
        (
            Box::new(|v: &mut Value| v["scenario"]["load"]["rps"] = 4000.0.into()),
            "load:",
        ),
        (
            Box::new(|v: &mut Value| v["interrupted"] = true.into()),
            "current run was interrupted",
        ),
    ] {
        let cur = doctored(dir.path(), "mutex", edit);
        let o = check(&[&cur, &baseline("mutex")], &[]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{needle}: {err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn tolerances_decide_what_counts_as_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = baseline("mutex");
    let calls = |v: &Value| v["db"]["calls"].as_u64().unwrap();
    // 20% more DB calls: beyond the default tolerance, within an explicit 25%.
    let cur = doctored(dir.path(), "mutex", |v| {
        v["db"]["calls"] = (calls(v) * 12 / 10).into();
    });
    let o = check(&[&cur, &base], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let o = check(&[&cur, &base], &["--tolerance", "db_calls=25%"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    // Fewer calls is never a failure, however large the change.
    let cur = doctored(dir.path(), "mutex", |v| v["db"]["calls"] = 1.into());
    assert_eq!(check(&[&cur, &base], &[]).status.code(), Some(0));

    let o = check(&[&base, &base], &["--tolerance", "p999=5%"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("p999") && err.contains("db_calls, "), "{err}");
}

#[test]
fn markdown_is_a_table_with_one_row_per_metric() {
    let (mutex, cache_aside) = (baseline("mutex"), baseline("cache-aside"));
    let o = check(
        &[&cache_aside, &mutex],
        &["--force", "--format", "markdown"],
    );
    assert_eq!(o.status.code(), Some(1));
    let md = text(&o.stdout);
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .strip_prefix('|')
            .and_then(|l| l.strip_suffix('|'))
            .unwrap_or_else(|| panic!("not a table row: {l}"))
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    };
    assert_eq!(
        cells(table[0]),
        ["metric", "baseline", "current", "change", "verdict"]
    );
    assert!(
        cells(table[1])
            .iter()
            .all(|c| c.trim_end_matches(':').chars().all(|ch| ch == '-') && c.len() >= 3),
        "{}",
        table[1]
    );
    let names: Vec<String> = table[2..].iter().map(|l| cells(l)[0].clone()).collect();
    let expected: Vec<&str> = stampede::metric::Metric::judged()
        .map(|m| m.name())
        .collect();
    assert_eq!(names, expected, "{md}");
    for row in &table[2..] {
        assert_eq!(cells(row).len(), 5, "{row}");
    }
    let db = table.iter().find(|l| l.starts_with("| db_calls ")).unwrap();
    assert!(db.contains("REGRESSION"), "{db}");
}

#[test]
fn a_run_whose_generator_fell_behind_is_not_judged() {
    // A machine that stalls (seen here: a run 4.8 s behind schedule) produces figures that say
    // nothing about the strategy; check says so instead of a verdict.
    let dir = tempfile::tempdir().unwrap();
    let cur = doctored(dir.path(), "mutex", |v| {
        v["generator"]["max_dispatch_lag_ms"] = 4800.0.into();
        v["latency_ms"]["p99"] = 5000.0.into();
    });
    let base = baseline("mutex");
    let o = check(&[&cur, &base], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("4800 ms behind"), "{err}");
    // With --force it is judged, and the stalled p99 is a regression.
    let o = check(&[&cur, &base], &["--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));

    // Redis missing its deadlines with no fault injected: the machine starved it, and the
    // fail-open path then let loads past the mutex.
    let cur = doctored(dir.path(), "mutex", |v| {
        v["redis"]["timeouts"] = 500.into();
        v["db"]["peak_key_herd"] = 40.into();
    });
    let o = check(&[&cur, &base], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("Redis missed its deadline 500 times"), "{err}");
}

#[test]
fn default_tolerances_catch_a_strategy_that_lost_its_protection() {
    // A coordination or freshness policy that silently stops working degrades to plain
    // cache-aside; on the CI scenario that must be a regression for each of them. (The jitter
    // preset is the exception: ci.toml has no synchronized expiry for it to spread.)
    let cache_aside = baseline("cache-aside");
    for s in ["mutex", "single-flight", "swr", "xfetch"] {
        let o = check(&[&cache_aside, &baseline(s)], &["--force"]);
        assert_eq!(o.status.code(), Some(1), "{s}:\n{}", text(&o.stdout));
    }
}
