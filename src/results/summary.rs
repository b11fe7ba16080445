//! The summary of a `compare`: one row per strategy, ranked by DB calls, written as
//! `summary.json` beside each strategy's own results file and rendered as a table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RunResult;
use crate::metric::{DEFS, Metric};
use crate::stats;

/// Version of the summary document's layout. 2: a row's figures are one map keyed by the
/// metric list's names (was one field per figure, a second list of metrics to keep in step),
/// with repeated trials (`trials`, `samples`, `ci95`, `same_as_next`) and the Pareto front.
pub const SUMMARY_SCHEMA: u32 = 2;

/// The objectives of the Pareto front, all lower-is-better. Rejections count: a protection
/// that refuses loads must not look like a strategy that needs none.
pub const PARETO: [Metric; 5] = [
    Metric::DbCalls,
    Metric::P99,
    Metric::Stale,
    Metric::Errors,
    Metric::Rejected,
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareSummary {
    /// Version of this document's layout.
    pub schema: u32,
    /// Version of stampede that produced it.
    pub tool_version: String,
    /// The workload every strategy ran, in words (strategy left out).
    pub workload: String,
    /// True when the comparison was stopped early (Ctrl-C / SIGTERM, or an error): `not_run`
    /// lists what is missing, and a row marked interrupted covers only what ran.
    pub interrupted: bool,
    /// Strategies ranked by median DB calls, fewest first (ties: fewer redundant loads, then
    /// lower p99).
    pub ranking: Vec<Row>,
    /// Strategies asked for but not run because the comparison stopped early.
    pub not_run: Vec<String>,
    /// Whether the scenario set any threshold.
    pub thresholds_set: bool,
    /// Strategies no other strategy dominates on (DB calls, p99, stale responses, errors,
    /// rejections): at least as good on all five and better on one beyond the noise (with fewer than 5 trials,
    /// plainly better).
    #[serde(default)]
    pub pareto: Vec<String>,
    /// The strategy the trade-offs are measured against: cache-aside when it ran, else the
    /// first strategy named.
    #[serde(default)]
    pub tradeoff_baseline: Option<String>,
}

/// One strategy's headline figures: with several trials, the medians.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// 1 = fewest DB calls.
    pub rank: usize,
    /// Canonical strategy name; its results are `<strategy>.json`, or `<strategy>/trial-N.json`
    /// with several trials.
    pub strategy: String,
    /// Every metric of the list (docs/results.md), by name: `db_calls`, `hit_rate`, `p99`, …
    /// (the median over the trials).
    pub figures: BTreeMap<String, f64>,
    /// Trials run.
    #[serde(default = "one")]
    pub trials: usize,
    /// Every trial's value of every metric, by name, in trial order.
    #[serde(default)]
    pub samples: BTreeMap<String, Vec<f64>>,
    /// 95% interval of each metric's median (distribution-free, from order statistics); empty
    /// below 5 trials, where no interval is computed.
    #[serde(default)]
    pub ci95: BTreeMap<String, [f64; 2]>,
    /// Whether this strategy's DB calls cannot be told from the next one's (two-sided
    /// Mann–Whitney U at α = 0.05); null below 5 trials on either side, or for the last row.
    #[serde(default)]
    pub same_as_next: Option<bool>,
    /// The strategy that dominates this one on the Pareto objectives, if any.
    #[serde(default)]
    pub dominated_by: Option<String>,
    /// `db_calls` divided by the best strategy's; null when the best made no call.
    pub db_calls_vs_best: Option<f64>,
    /// Requests scheduled in the measured window (equal across strategies in open loop).
    pub scheduled: u64,
    /// Fingerprint of the key draws (equal = the same keys were asked for).
    pub key_digest: String,
    /// Thresholds broken by this strategy in any trial (names); empty when all passed or none
    /// were set.
    pub thresholds_broken: Vec<String>,
    /// Diagnosis codes of any trial (see docs/results.md).
    #[serde(default)]
    pub diagnoses: Vec<String>,
    /// True when this strategy's run was cut short.
    pub interrupted: bool,
    /// Whether the runs had writes (the consistency figures mean something).
    #[serde(default)]
    pub writes: bool,
}

fn one() -> usize {
    1
}

impl CompareSummary {
    /// Rank the finished runs: one list of trials per strategy (each non-empty).
    pub fn build(
        workload: String,
        runs: &[Vec<RunResult>],
        not_run: Vec<String>,
        interrupted: bool,
    ) -> CompareSummary {
        let mut rows: Vec<Row> = runs
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| row(t))
            .collect();
        rows.sort_by(|a, b| {
            let key = |r: &Row| (r.figure(Metric::DbCalls), r.figure(Metric::RedundantLoads));
            key(a)
                .partial_cmp(&key(b))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.figure(Metric::P99).total_cmp(&b.figure(Metric::P99)))
        });
        let best = rows.first().map_or(0.0, |r| r.figure(Metric::DbCalls));
        for (i, r) in rows.iter_mut().enumerate() {
            r.rank = i + 1;
            r.db_calls_vs_best = (best > 0.0).then(|| r.figure(Metric::DbCalls) / best);
        }
        for i in 0..rows.len().saturating_sub(1) {
            let (a, b) = (&rows[i], &rows[i + 1]);
            let (sa, sb) = (a.samples_of(Metric::DbCalls), b.samples_of(Metric::DbCalls));
            rows[i].same_as_next = (sa.len() >= stats::MIN_TRIALS && sb.len() >= stats::MIN_TRIALS)
                .then(|| !stats::distinguishable(sa, sb, stats::DEFAULT_ALPHA));
        }
        let objectives: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| PARETO.iter().map(|&m| r.figure(m)).collect())
            .collect();
        let pareto = stats::pareto_front(&objectives, |d, r, o| {
            let m = PARETO[o];
            stats::lower_beyond_noise(
                rows[d].samples_of(m),
                rows[r].samples_of(m),
                stats::DEFAULT_ALPHA,
            )
        });
        let names: Vec<String> = rows.iter().map(|r| r.strategy.clone()).collect();
        for (r, d) in rows.iter_mut().zip(&pareto.dominated_by) {
            r.dominated_by = d.map(|i| names[i].clone());
        }
        let tradeoff_baseline = names
            .iter()
            .find(|n| *n == "cache-aside")
            .cloned()
            .or_else(|| {
                runs.first()
                    .and_then(|t| t.first())
                    .map(|r| r.strategy.clone())
            });
        CompareSummary {
            schema: SUMMARY_SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            workload,
            interrupted,
            pareto: pareto.front.iter().map(|&i| names[i].clone()).collect(),
            ranking: rows,
            not_run,
            thresholds_set: runs.iter().flatten().any(|r| !r.thresholds.is_empty()),
            tradeoff_baseline,
        }
    }

    /// The most trials any strategy ran.
    pub fn trials(&self) -> usize {
        self.ranking.iter().map(|r| r.trials).max().unwrap_or(0)
    }

    /// Each strategy against the trade-off baseline: DB calls ×, p99 Δ, stale, waited, errors,
    /// rejected.
    pub fn tradeoffs(&self) -> Vec<Vec<String>> {
        let Some(base) = self
            .tradeoff_baseline
            .as_ref()
            .and_then(|b| self.ranking.iter().find(|r| &r.strategy == b))
        else {
            return Vec::new();
        };
        let (bc, bp) = (base.figure(Metric::DbCalls), base.figure(Metric::P99));
        self.ranking
            .iter()
            .map(|r| {
                let calls = r.figure(Metric::DbCalls);
                vec![
                    r.strategy.clone(),
                    if bc > 0.0 {
                        format!("×{:.2}", calls / bc)
                    } else {
                        format!("{calls:.0} (baseline 0)")
                    },
                    format!("{:+.2} ms", r.figure(Metric::P99) - bp),
                    format!("{:.0}", r.figure(Metric::Stale)),
                    format!("{:.0}", r.figure(Metric::Waited)),
                    format!("{:.0}", r.figure(Metric::Errors)),
                    format!("{:.0}", r.figure(Metric::Rejected)),
                    match &r.dominated_by {
                        None => "Pareto front".to_string(),
                        Some(d) => format!("dominated by {d}"),
                    },
                ]
            })
            .collect()
    }
}

/// One strategy's row from its trials.
fn row(trials: &[RunResult]) -> Row {
    let first = &trials[0];
    let samples: BTreeMap<String, Vec<f64>> = DEFS
        .iter()
        .map(|d| {
            (
                d.name.to_string(),
                trials.iter().map(|r| r.figure(d.metric)).collect(),
            )
        })
        .collect();
    let figures = samples
        .iter()
        .map(|(k, v)| (k.clone(), stats::median(v).unwrap_or(0.0)))
        .collect();
    let ci95 = if trials.len() >= stats::MIN_TRIALS {
        samples
            .iter()
            .filter_map(|(k, v)| stats::median_ci(v, 0.95).map(|(lo, hi)| (k.clone(), [lo, hi])))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut broken: Vec<String> = trials
        .iter()
        .flat_map(|r| {
            r.thresholds
                .iter()
                .filter(|t| !t.passed)
                .map(|t| t.name.clone())
        })
        .collect();
    broken.sort();
    broken.dedup();
    let mut diagnoses: Vec<String> = trials
        .iter()
        .flat_map(|r| r.diagnoses.iter().map(|d| d.code.clone()))
        .collect();
    diagnoses.sort();
    diagnoses.dedup();
    Row {
        rank: 0,
        strategy: first.strategy.clone(),
        figures,
        trials: trials.len(),
        samples,
        ci95,
        same_as_next: None,
        dominated_by: None,
        db_calls_vs_best: None,
        scheduled: first.requests.scheduled,
        key_digest: first.generator.key_digest.clone(),
        thresholds_broken: broken,
        diagnoses,
        interrupted: trials.iter().any(|r| r.interrupted),
        writes: first.scenario.writes.is_some(),
    }
}

impl Row {
    /// One figure of the row (0 when the row was written without it).
    pub fn figure(&self, m: Metric) -> f64 {
        self.figures.get(m.name()).copied().unwrap_or(0.0)
    }

    /// Every trial's value of `m`.
    pub fn samples_of(&self, m: Metric) -> &[f64] {
        self.samples.get(m.name()).map_or(&[], Vec::as_slice)
    }

    /// "1.00x", or "n/a" when the best made no call.
    pub fn vs_best(&self) -> String {
        match self.db_calls_vs_best {
            Some(x) => format!("{x:.2}x"),
            None if self.figure(Metric::DbCalls) == 0.0 => "1.00x".to_string(),
            None => "n/a".to_string(),
        }
    }

    /// "ok", "—" (none set) or the broken thresholds' names.
    pub fn thresholds_cell(&self, any_set: bool) -> String {
        if !any_set {
            "—".to_string()
        } else if self.thresholds_broken.is_empty() {
            "ok".to_string()
        } else {
            format!("BROKEN: {}", self.thresholds_broken.join(", "))
        }
    }
}

/// A figure in a table cell: counts whole, shares in percent, ms with two decimals.
pub fn cell(m: Metric, v: f64) -> String {
    match m.def().unit {
        crate::metric::Unit::Count => format!("{v:.0}"),
        crate::metric::Unit::Ms => format!("{v:.2}"),
        crate::metric::Unit::Share => format!("{:.1}%", v * 100.0),
    }
}

impl CompareSummary {
    /// The ranking as a header and rows of text cells, shared by the terminal and Markdown
    /// tables (`markdown` puts strategy names in code spans); the figure columns are the
    /// metric list's ranked metrics, with "vs best" after DB calls. Returns also which
    /// columns hold numbers.
    pub fn ranking_cells(
        &self,
        markdown: bool,
    ) -> (Vec<&'static str>, Vec<Vec<String>>, Vec<bool>) {
        let mut header = vec!["#", "strategy"];
        let mut numeric = vec![true, false];
        let repeated = self.trials() > 1;
        if repeated {
            header.push("trials");
            numeric.push(true);
        }
        let writes = self.ranking.iter().any(|r| r.writes);
        for m in Metric::ranked_for(writes) {
            header.push(m.def().header);
            numeric.push(true);
            if m == Metric::DbCalls {
                header.push("vs best");
                numeric.push(true);
            }
        }
        if self.thresholds_set {
            header.push("thresholds");
            numeric.push(false);
        }
        let tick = if markdown { "`" } else { "" };
        let rows = self
            .ranking
            .iter()
            .map(|r| {
                let mut v = vec![
                    format!(
                        "{}{}",
                        r.rank,
                        if r.same_as_next == Some(true) {
                            " ~"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "{tick}{}{tick}{}{}",
                        r.strategy,
                        if r.interrupted { " (interrupted)" } else { "" },
                        if r.diagnoses.is_empty() { "" } else { " *" }
                    ),
                ];
                if repeated {
                    v.push(r.trials.to_string());
                }
                for m in Metric::ranked_for(writes) {
                    let mut c = cell(m, r.figure(m));
                    // Intervals on the figures a choice turns on; the rest stay medians.
                    if matches!(m, Metric::DbCalls | Metric::P99)
                        && let Some([lo, hi]) = r.ci95.get(m.name())
                    {
                        c = format!("{c} [{}, {}]", cell(m, *lo), cell(m, *hi));
                    }
                    v.push(c);
                    if m == Metric::DbCalls {
                        v.push(r.vs_best());
                    }
                }
                if self.thresholds_set {
                    v.push(r.thresholds_cell(true));
                }
                v
            })
            .collect();
        (header, rows, numeric)
    }

    /// What the marks and figures of the ranking mean, and what it cannot say.
    pub fn notes(&self) -> Vec<String> {
        let n = self.trials();
        let mut v = Vec::new();
        if n >= stats::MIN_TRIALS {
            v.push(format!(
                "figures are medians of {n} trials (interleaved); [lo, hi] is the 95% interval of the median (order statistics); ~ marks a strategy whose DB calls cannot be told from the next one's (Mann–Whitney U, α = 0.05)"
            ));
        } else if n > 1 {
            v.push(format!(
                "figures are medians of {n} trials: below {} trials no interval is computed and no tie is tested; use --repeat {}",
                stats::MIN_TRIALS,
                stats::MIN_TRIALS
            ));
        } else {
            v.push(format!(
                "one trial per strategy: no interval is computed and close strategies may swap places from run to run; use --repeat {} for intervals and tie marks",
                stats::MIN_TRIALS
            ));
        }
        for r in self.ranking.iter().filter(|r| !r.diagnoses.is_empty()) {
            v.push(format!(
                "* {}: {} (see its results file)",
                r.strategy,
                r.diagnoses.join(", ")
            ));
        }
        v
    }
}
