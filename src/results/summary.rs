//! The summary of a `compare`: one row per strategy, ranked by DB calls, written as
//! `summary.json` beside each strategy's own results file and rendered as a table; with the
//! Pareto verdicts (front, dominated, undecided) over the objectives a choice turns on, and
//! the marks a row must carry whatever its rank (a pair that leaves keys wrong).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RunResult;
use super::row::Ci;
pub use super::row::{LEAVES_KEYS_WRONG, Row};
use crate::metric::{DEFS, Metric};
use crate::stats;

/// Version of the summary document's layout. 2: a row's figures are one map keyed by the
/// metric list's names (was one field per figure, a second list of metrics to keep in step),
/// with repeated trials (`trials`, `samples`, `ci95`, `same_as_next`) and the Pareto front.
/// 3: the `conclusion` that leads it, and each row's DB calls by cause (`by_cause`).
pub const SUMMARY_SCHEMA: u32 = 3;

/// The objectives of every comparison's Pareto front, all lower-is-better. Rejections count:
/// a protection that refuses loads must not look like a strategy that needs none.
pub const OBJECTIVES: [Metric; 5] = [
    Metric::DbCalls,
    Metric::P99,
    Metric::Stale,
    Metric::Errors,
    Metric::Rejected,
];

/// Added to [`OBJECTIVES`] when the runs had writes: skipping invalidation saves misses, so
/// without these a pair that serves old versions and leaves keys wrong would dominate the one
/// that keeps the cache right. Shares rather than counts where the count grows with what was
/// done (stale reads with requests completed, writes left wrong with writes probed), so a
/// strategy is not penalised for completing more; divergent keys at the end are a count of
/// keys, bounded by the keys written. The per-write figure of the invalidation race
/// (`consistency.writes_left_wrong_ratio`) sees what a later write's heal hides from divergent
/// keys. A new consistency objective is one more entry here.
pub const WRITE_OBJECTIVES: [Metric; 3] = [
    Metric::StaleReadRatio,
    Metric::DivergentKeys,
    Metric::WritesLeftWrongRatio,
];

/// The Pareto objectives of a comparison, in the order tables show them.
pub fn objectives(writes: bool) -> Vec<Metric> {
    let extra: &[Metric] = if writes { &WRITE_OBJECTIVES } else { &[] };
    OBJECTIVES.iter().chain(extra).copied().collect()
}

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
    /// Strategies no other strategy dominates on the `objectives`: dominated = another is
    /// lower beyond the noise on one objective (exact Mann–Whitney U, Holm-corrected over the
    /// objectives, at `alpha`) and this one is lower beyond the noise on none. Undecided
    /// strategies stay on the front.
    #[serde(default)]
    pub pareto: Vec<String>,
    /// The Pareto objectives, by metric name (with writes, the consistency figures too).
    #[serde(default)]
    pub objectives: Vec<String>,
    /// The significance level of the verdicts, before the Holm correction.
    #[serde(default)]
    pub alpha: f64,
    /// The fewest trials per strategy at which complete separation on one objective passes the
    /// corrected level: what `--repeat` must be for any strategy to be marked dominated.
    #[serde(default)]
    pub min_trials_to_decide: usize,
    /// The strategy the trade-offs are measured against: cache-aside when it ran, else the
    /// first strategy named.
    #[serde(default)]
    pub tradeoff_baseline: Option<String>,
    /// What the numbers say, computed from them alone: the sentence (`text`) and its parts.
    /// It leads every rendering of the comparison.
    #[serde(default)]
    pub conclusion: super::conclusion::Conclusion,
}

/// The fewest trials whose interval of the median reaches 95% coverage.
pub fn trials_for_95() -> usize {
    (stats::MIN_TRIALS..)
        .find(|&n| stats::median_ci_ranks(n, 0.95).is_some_and(|r| r.coverage >= 0.95))
        .unwrap_or(stats::MIN_TRIALS)
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
        let objectives = objectives(rows.iter().any(|r| r.writes));
        // A trial whose figure is unknown (NaN) tells nothing about that objective: the
        // verdict rests on the trials that measured it, and with none the strategies are not
        // comparable (never dominated, never dominating).
        let samples: Vec<Vec<Vec<f64>>> = rows
            .iter()
            .map(|r| {
                objectives
                    .iter()
                    .map(|&m| {
                        r.samples_of(m)
                            .iter()
                            .copied()
                            .filter(|x| !x.is_nan())
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let standing = stats::verdicts(&samples, stats::DEFAULT_ALPHA);
        let names: Vec<String> = rows.iter().map(|r| r.strategy.clone()).collect();
        for (r, s) in rows.iter_mut().zip(&standing) {
            match *s {
                stats::Standing::Front => {}
                stats::Standing::Dominated { by } => r.dominated_by = Some(names[by].clone()),
                stats::Standing::Undecided { by, trials } => {
                    r.undecided = true;
                    r.undecided_vs = Some(names[by].clone());
                    r.trials_to_decide = trials;
                }
            }
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
        let conclusion = super::conclusion::conclude(&rows, tradeoff_baseline.as_deref());
        CompareSummary {
            conclusion,
            schema: SUMMARY_SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            workload,
            interrupted,
            pareto: names
                .iter()
                .zip(&standing)
                .filter(|(_, s)| s.on_front())
                .map(|(n, _)| n.clone())
                .collect(),
            min_trials_to_decide: stats::trials_to_separate(objectives.len(), stats::DEFAULT_ALPHA),
            objectives: objectives.iter().map(|m| m.name().to_string()).collect(),
            alpha: stats::DEFAULT_ALPHA,
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

    /// The Pareto objectives of this comparison.
    pub fn objective_metrics(&self) -> Vec<Metric> {
        let named: Vec<Metric> = self
            .objectives
            .iter()
            .filter_map(|n| Metric::by_name(n))
            .collect();
        if named.is_empty() {
            // A summary written before the list was recorded.
            objectives(self.ranking.iter().any(|r| r.writes))
        } else {
            named
        }
    }

    /// The objectives in words, for the line above the trade-offs.
    pub fn objectives_in_words(&self) -> String {
        self.objective_metrics()
            .iter()
            .map(|m| m.def().header.trim_end_matches(" ms"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The columns of the trade-offs table: DB calls ×, p99 Δ, stale, waited, errors,
    /// rejected, the consistency objectives when there were writes, and the verdict.
    pub fn tradeoff_header(&self) -> Vec<&'static str> {
        let mut h = vec![
            "strategy", "db calls", "p99 Δ", "stale", "waited", "errors", "rejected",
        ];
        h.extend(self.extra_objectives().iter().map(|m| m.def().header));
        h.push("pareto");
        h
    }

    /// The objectives the fixed trade-off columns do not already show.
    fn extra_objectives(&self) -> Vec<Metric> {
        self.objective_metrics()
            .into_iter()
            .filter(|m| !OBJECTIVES.contains(m))
            .collect()
    }

    /// Each strategy against the trade-off baseline, in the columns of [`Self::tradeoff_header`].
    pub fn tradeoffs(&self) -> Vec<Vec<String>> {
        let Some(base) = self
            .tradeoff_baseline
            .as_ref()
            .and_then(|b| self.ranking.iter().find(|r| &r.strategy == b))
        else {
            return Vec::new();
        };
        let (bc, bp) = (base.figure(Metric::DbCalls), base.figure(Metric::P99));
        let extra = self.extra_objectives();
        self.ranking
            .iter()
            .map(|r| {
                let calls = r.figure(Metric::DbCalls);
                let mut v = vec![
                    r.label(false),
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
                ];
                v.extend(extra.iter().map(|&m| cell(m, r.figure(m))));
                v.push(r.verdict());
                v
            })
            .collect()
    }

    /// The Pareto front in a line, each strategy with its marks.
    pub fn front_line(&self) -> String {
        self.pareto
            .iter()
            .map(|n| match self.ranking.iter().find(|r| &r.strategy == n) {
                Some(r) => {
                    let mut marks = Vec::new();
                    if r.undecided {
                        marks.push("undecided");
                    }
                    if r.leaves_keys_wrong {
                        marks.push(LEAVES_KEYS_WRONG);
                    }
                    if marks.is_empty() {
                        n.clone()
                    } else {
                        format!("{n} ({})", marks.join(", "))
                    }
                }
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What the verdicts of the trade-offs table mean and what would decide them.
    pub fn verdict_notes(&self) -> Vec<String> {
        let k = self.objective_metrics().len();
        let need = self.min_trials_to_decide;
        let mut v = vec![format!(
            "dominated: another strategy is lower beyond the noise on one objective and this one on none (exact Mann–Whitney U, Holm-corrected over the {k} objectives, α = {}); undecided: another's medians look as good on every objective and better on one, but the trials cannot tell; it stays on the front",
            self.alpha
        )];
        let most = self.trials();
        if most < need {
            v.push(format!(
                "with {most} trial(s) per strategy nothing can be marked dominated: complete separation decides from {need} trials per strategy over {k} objectives (p = {:.4} < {}/{k}); use --repeat {need} or more",
                stats::separation_p(need),
                self.alpha
            ));
        } else {
            v.push(format!(
                "complete separation decides from {need} trials per strategy over {k} objectives (p = {:.4} < {}/{k}); closer strategies need more",
                stats::separation_p(need),
                self.alpha
            ));
        }
        if self.ranking.iter().any(|r| r.leaves_keys_wrong) {
            v.push(format!(
                "{LEAVES_KEYS_WRONG}: at least one trial ended with written keys whose cached version differs from the database's (divergent_keys > 0), wrong until their TTL; whatever its rank, such a pair is not a safe choice"
            ));
        }
        v
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
    let ci = stats::median_ci_ranks(trials.len(), 0.95).map(|r| Ci {
        coverage: r.coverage,
        ranks: [r.lo, r.hi],
        bounds: samples
            .iter()
            .filter_map(|(k, v)| stats::median_ci(v, 0.95).map(|(lo, hi)| (k.clone(), [lo, hi])))
            .collect(),
    });
    // One trial that ended with a key wrong is enough: a divergent key is a fact of that run,
    // not noise around a typical value, and a median would hide a pair that leaves keys wrong
    // in two trials of five.
    let leaves_keys_wrong = samples
        .get(Metric::DivergentKeys.name())
        .is_some_and(|v| v.iter().any(|&x| x > 0.0));
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
        ci,
        same_as_next: None,
        dominated_by: None,
        undecided: false,
        undecided_vs: None,
        trials_to_decide: None,
        leaves_keys_wrong,
        db_calls_vs_best: None,
        scheduled: first.requests.scheduled,
        key_digest: first.generator.key_digest.clone(),
        thresholds_broken: broken,
        diagnoses,
        interrupted: trials.iter().any(|r| r.interrupted),
        writes: first.scenario.writes.is_some(),
        by_cause: super::conclusion::median_split(trials),
    }
}

/// A coverage in percent with as many decimals as it has (up to two): 93.75, 96.88, 99.
pub fn coverage_percent(c: f64) -> String {
    let s = format!("{:.2}", c * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A figure in a table cell: counts whole, shares in percent, ms with two decimals.
pub fn cell(m: Metric, v: f64) -> String {
    // An unknown figure travels as NaN; a table shows it as a dash, never as a number.
    if v.is_nan() {
        return "—".to_string();
    }
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
                    r.label(markdown),
                ];
                if repeated {
                    v.push(r.trials.to_string());
                }
                for m in Metric::ranked_for(writes) {
                    let mut c = cell(m, r.figure(m));
                    // Intervals on the figures a choice turns on; the rest stay medians.
                    if matches!(m, Metric::DbCalls | Metric::P99)
                        && let Some([lo, hi]) = r.ci.as_ref().and_then(|c| c.bounds.get(m.name()))
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
        if let Some(ci) = self
            .ranking
            .iter()
            .find_map(|r| r.ci.as_ref().filter(|_| r.trials == n))
        {
            let [lo, hi] = ci.ranks;
            let short = if ci.coverage < 0.95 {
                format!("; a 95% interval needs {} trials", trials_for_95())
            } else {
                String::new()
            };
            v.push(format!(
                "figures are medians of {n} trials (interleaved); [lo, hi] is the {}% interval of the median: trials {lo} and {hi} of {n} in order{short}; ~ marks a strategy whose DB calls cannot be told from the next one's (exact Mann–Whitney U, α = 0.05)",
                coverage_percent(ci.coverage)
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

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
