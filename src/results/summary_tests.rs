//! Tests of [`super`]: the verdicts a comparison prints and writes, from trials made up on top
//! of a real results file.

use super::*;
use crate::scenario::WriteLoad;

/// A trial of `strategy` with the given figures; the rest is a real CI result's.
fn trial(strategy: &str, calls: u64, p99: f64, divergent: u64, stale_read_ratio: f64) -> RunResult {
    let mut r: RunResult =
        serde_json::from_str(include_str!("../../results/baseline-ci/cache-aside.json"))
            .expect("the CI baseline parses");
    r.strategy = strategy.to_string();
    r.db.calls = crate::results::Known::Value(calls);
    r.latency_ms.p99 = p99;
    r.outcomes.stale = 0;
    r.requests.errors = 0;
    r.outcomes.rejected = 0;
    r.thresholds.clear();
    r.diagnoses.clear();
    r.consistency.divergent_keys = crate::results::Known::Value(divergent);
    r.consistency.stale_read_ratio = stale_read_ratio;
    r
}

fn with_writes(mut r: RunResult) -> RunResult {
    r.scenario.writes = Some(WriteLoad {
        rps: 200.0,
        zipf: 1.0,
        writers: 1,
        gap: None,
    });
    r
}

fn build(runs: &[Vec<RunResult>]) -> CompareSummary {
    CompareSummary::build("w".into(), runs, Vec::new(), false)
}

fn row<'a>(s: &'a CompareSummary, name: &str) -> &'a Row {
    s.ranking
        .iter()
        .find(|r| r.strategy == name)
        .unwrap_or_else(|| panic!("{name} not ranked"))
}

/// Six trials of skipping invalidation against deleting: `none` saves misses (fewer DB calls
/// in every trial, p99 alike) and leaves keys wrong in two of them, with more stale reads.
fn invalidate_delete_none(writes: bool) -> Vec<Vec<RunResult>> {
    let w = |r: RunResult| if writes { with_writes(r) } else { r };
    let none = (0..6)
        .map(|i| {
            w(trial(
                "cache-aside/none",
                900 + i,
                5.0 + 0.1 * i as f64,
                if i % 3 == 0 { 2 } else { 0 },
                0.02 + 0.001 * i as f64,
            ))
        })
        .collect();
    let delete = (0..6)
        .map(|i| {
            w(trial(
                "cache-aside/delete",
                1000 + i,
                5.05 + 0.1 * i as f64,
                0,
                0.001 * i as f64 / 10.0,
            ))
        })
        .collect();
    vec![delete, none]
}

#[test]
fn with_writes_consistency_decides_and_a_wrong_pair_is_marked() {
    // Without the consistency objectives `none` dominates `delete` on DB calls: the verdict the
    // objectives of reads alone gave.
    let reads_only = build(&invalidate_delete_none(false));
    assert_eq!(reads_only.objectives.len(), 5);
    assert_eq!(
        row(&reads_only, "cache-aside/delete")
            .dominated_by
            .as_deref(),
        Some("cache-aside/none")
    );

    let s = build(&invalidate_delete_none(true));
    assert_eq!(
        s.objectives,
        [
            "db_calls",
            "p99",
            "stale",
            "errors",
            "rejected",
            "stale_read_ratio",
            "divergent_keys",
            "writes_left_wrong_ratio"
        ]
    );
    // Eight objectives: complete separation needs 6 trials.
    assert_eq!(s.min_trials_to_decide, 6);
    let (none, delete) = (row(&s, "cache-aside/none"), row(&s, "cache-aside/delete"));
    // `none` still has fewest calls and ranks first, but carries the mark; `delete` keeps
    // the cache right and is on the front, not dominated by a pair that leaves keys wrong.
    assert_eq!(none.rank, 1);
    assert!(none.leaves_keys_wrong && !delete.leaves_keys_wrong);
    assert_eq!(delete.dominated_by, None);
    assert!(!delete.undecided);
    assert_eq!(s.pareto, ["cache-aside/none", "cache-aside/delete"]);
    let (_, cells, _) = s.ranking_cells(false);
    assert_eq!(cells[0][1], "cache-aside/none (leaves keys wrong)");
    assert_eq!(cells[1][1], "cache-aside/delete");
    assert_eq!(
        s.front_line(),
        "cache-aside/none (leaves keys wrong), cache-aside/delete"
    );
    assert!(
        s.verdict_notes()
            .iter()
            .any(|n| n.starts_with("leaves keys wrong: at least one trial"))
    );
    // The trade-offs show the consistency objectives.
    assert_eq!(
        s.tradeoff_header(),
        [
            "strategy",
            "db calls",
            "p99 Δ",
            "stale",
            "waited",
            "errors",
            "rejected",
            "stale read %",
            "divergent",
            "writes left wrong",
            "pareto"
        ]
    );
    let t = s.tradeoffs();
    assert_eq!(t[0][0], "cache-aside/none (leaves keys wrong)");
    assert_eq!(
        t[0][7],
        cell(Metric::StaleReadRatio, none.figure(Metric::StaleReadRatio))
    );
    assert!(
        t[0][7].starts_with("2.") && t[0][7].ends_with('%'),
        "{}",
        t[0][7]
    );
    // Its median of divergent keys is 0 (two trials of six): the mark does not rest on it.
    assert_eq!(t[0][8], "0");
    // And summary.json says so.
    let json = serde_json::to_value(&s).expect("encodes");
    assert_eq!(json["ranking"][0]["leaves_keys_wrong"], true);
    assert_eq!(json["ranking"][1]["leaves_keys_wrong"], false);
    assert_eq!(json["objectives"][6], "divergent_keys");
    assert_eq!(json["objectives"][7], "writes_left_wrong_ratio");
}

#[test]
fn a_pair_left_wrong_in_one_trial_of_five_is_marked() {
    // The median of divergent_keys is 0 here; one trial with a key wrong is enough.
    let runs = vec![
        (0..5)
            .map(|i| with_writes(trial("set", 900, 5.0, u64::from(i == 3), 0.0)))
            .collect::<Vec<_>>(),
    ];
    let s = build(&runs);
    assert_eq!(s.ranking[0].figure(Metric::DivergentKeys), 0.0);
    assert!(s.ranking[0].leaves_keys_wrong);
}

#[test]
fn one_trial_is_undecided_and_says_what_would_decide() {
    // One trial each (the default): mutex made fewer calls at a lower p99, but one trial cannot
    // tell noise from a difference. Today's rule called cache-aside dominated.
    let runs = vec![
        vec![trial("cache-aside", 1500, 6.0, 0, 0.0)],
        vec![trial("mutex", 1000, 5.0, 0, 0.0)],
    ];
    let s = build(&runs);
    let ca = row(&s, "cache-aside");
    assert_eq!(ca.dominated_by, None);
    assert!(ca.undecided);
    assert_eq!(ca.undecided_vs.as_deref(), Some("mutex"));
    assert_eq!(ca.trials_to_decide, Some(5));
    assert_eq!(ca.verdict(), "undecided vs mutex (--repeat 5)");
    assert_eq!(row(&s, "mutex").verdict(), "Pareto front");
    assert_eq!(s.pareto, ["mutex", "cache-aside"]);
    assert_eq!(s.front_line(), "mutex, cache-aside (undecided)");
    assert_eq!(s.min_trials_to_decide, 5);
    assert!(
        s.verdict_notes()[1].starts_with(
            "with 1 trial(s) per strategy nothing can be marked dominated: complete separation decides from 5 trials"
        ),
        "{:?}",
        s.verdict_notes()
    );
    let json = serde_json::to_value(&s).expect("encodes");
    let j = &json["ranking"][1];
    assert_eq!(j["strategy"], "cache-aside");
    assert!(j["dominated_by"].is_null());
    assert_eq!(j["undecided"], true);
    assert_eq!(j["trials_to_decide"], 5);
}

#[test]
fn five_trials_apart_decide_without_writes() {
    let runs = vec![
        (0..5)
            .map(|i| trial("cache-aside", 1500 + i, 6.0 + 0.1 * i as f64, 0, 0.0))
            .collect::<Vec<_>>(),
        (0..5)
            .map(|i| trial("mutex", 1000 + i, 5.0 + 0.1 * i as f64, 0, 0.0))
            .collect(),
    ];
    let s = build(&runs);
    let ca = row(&s, "cache-aside");
    assert_eq!(ca.dominated_by.as_deref(), Some("mutex"));
    assert!(!ca.undecided);
    assert_eq!(ca.verdict(), "dominated by mutex");
    assert_eq!(s.pareto, ["mutex"]);
}

#[test]
fn intervals_carry_their_real_coverage() {
    let five: Vec<RunResult> = (0..5)
        .map(|i| trial("mutex", 1000 + 10 * i, 5.0, 0, 0.0))
        .collect();
    let s = build(std::slice::from_ref(&five));
    let ci = s.ranking[0].ci.as_ref().expect("an interval at 5 trials");
    assert_eq!(ci.coverage, 0.9375);
    assert_eq!(ci.ranks, [1, 5]);
    assert_eq!(ci.bounds["db_calls"], [1000.0, 1040.0]);
    let note = &s.notes()[0];
    assert!(
        note.contains("the 93.75% interval of the median: trials 1 and 5 of 5 in order; a 95% interval needs 6 trials"),
        "{note}"
    );
    let json = serde_json::to_value(&s).expect("encodes");
    assert!(json["ranking"][0].get("ci95").is_none());
    assert_eq!(json["ranking"][0]["ci"]["coverage"], 0.9375);

    let mut six = five;
    six.push(trial("mutex", 1050, 5.0, 0, 0.0));
    let s = build(&[six]);
    let ci = s.ranking[0].ci.as_ref().expect("an interval at 6 trials");
    assert_eq!(ci.coverage, 1.0 - 2.0 / 64.0);
    assert!(
        s.notes()[0].contains("the 96.88% interval"),
        "{}",
        s.notes()[0]
    );
    assert!(!s.notes()[0].contains("needs"));
    // Below 5 trials: none.
    let s = build(&[vec![trial("mutex", 1000, 5.0, 0, 0.0)]]);
    assert!(s.ranking[0].ci.is_none());
    assert_eq!(trials_for_95(), 6);
    assert_eq!(coverage_percent(0.9375), "93.75");
    assert_eq!(coverage_percent(0.99), "99");
}

#[test]
fn docs_list_the_objectives_as_the_code_uses_them() {
    let docs = include_str!("../../docs/results.md");
    let line = docs
        .lines()
        .find(|l| l.starts_with("| `pareto` |"))
        .expect("docs/results.md documents summary.json's pareto");
    let list = |ms: &[Metric]| {
        ms.iter()
            .map(|m| format!("`{}`", m.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(line.contains(&list(&OBJECTIVES)), "{line}");
    assert!(
        line.contains(&format!("with writes also {}", list(&WRITE_OBJECTIVES))),
        "{line}"
    );
    // Every objective is one a lower value of is better: the front assumes it.
    for m in objectives(true) {
        assert_eq!(m.def().better, crate::metric::Better::Lower, "{}", m.name());
    }
}

#[test]
fn unknown_trials_count_for_nothing() {
    // Divergent keys unknown in every trial of `a` (the keys could not be read back): no mark,
    // and `b`, better on everything it measured, cannot be said to dominate `a` on a figure
    // `a` never had; the table prints a dash.
    let unknown = |mut r: RunResult| {
        r.consistency.divergent_keys = crate::results::Known::unknown("not read back");
        r
    };
    let runs = vec![
        (0..6)
            .map(|i| unknown(with_writes(trial("a", 1500 + i, 9.0, 0, 0.05))))
            .collect::<Vec<_>>(),
        (0..6)
            .map(|i| with_writes(trial("b", 1000 + i, 5.0, 0, 0.0)))
            .collect(),
    ];
    let s = build(&runs);
    let a = row(&s, "a");
    assert!(!a.leaves_keys_wrong);
    assert!(a.figure(Metric::DivergentKeys).is_nan());
    assert_eq!(a.dominated_by, None);
    assert!(
        !a.undecided,
        "medians are not comparable with a figure unknown"
    );
    assert_eq!(cell(Metric::DivergentKeys, f64::NAN), "—");
    // One unknown trial of six: the five known ones decide.
    let mut runs = runs;
    for (i, r) in runs[0].iter_mut().enumerate() {
        r.consistency.divergent_keys =
            crate::results::Known::or_unknown((i > 0).then_some(0), || "not read back".into());
    }
    let s = build(&runs);
    assert_eq!(row(&s, "a").dominated_by.as_deref(), Some("b"));
}
