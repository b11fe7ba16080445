//! The summary of a `compare`: one row per strategy, ranked by DB calls, written as
//! `summary.json` beside each strategy's own results file and rendered as a table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RunResult;
use crate::metric::{DEFS, Metric};

/// Version of the summary document's layout. 2: a row's figures are one map keyed by the
/// metric list's names (was one field per figure, a second list of metrics to keep in step).
pub const SUMMARY_SCHEMA: u32 = 2;

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
    /// Strategies ranked by DB calls, fewest first (ties: fewer redundant loads, then lower p99).
    pub ranking: Vec<Row>,
    /// Strategies asked for but not run because the comparison stopped early.
    pub not_run: Vec<String>,
    /// Whether the scenario set any threshold.
    pub thresholds_set: bool,
}

/// One strategy's headline figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// 1 = fewest DB calls.
    pub rank: usize,
    /// Canonical strategy name; its results file is `<strategy>.json`.
    pub strategy: String,
    /// Every metric of the list (docs/results.md), by name: `db_calls`, `hit_rate`, `p99`, …
    pub figures: BTreeMap<String, f64>,
    /// `db_calls` divided by the best strategy's; null when the best made no call.
    pub db_calls_vs_best: Option<f64>,
    /// Requests scheduled in the measured window (equal across strategies in open loop).
    pub scheduled: u64,
    /// Fingerprint of the key draws (equal = the same keys were asked for).
    pub key_digest: String,
    /// Thresholds broken by this strategy (names); empty when all passed or none were set.
    pub thresholds_broken: Vec<String>,
    /// True when this strategy's run was cut short.
    pub interrupted: bool,
}

impl CompareSummary {
    /// Rank the finished runs.
    pub fn build(
        workload: String,
        runs: &[RunResult],
        not_run: Vec<String>,
        interrupted: bool,
    ) -> CompareSummary {
        let mut sorted: Vec<&RunResult> = runs.iter().collect();
        sorted.sort_by(|a, b| {
            (a.db.calls, a.db.redundant_loads)
                .cmp(&(b.db.calls, b.db.redundant_loads))
                .then(a.latency_ms.p99.total_cmp(&b.latency_ms.p99))
        });
        let best = sorted.first().map_or(0, |r| r.db.calls);
        let ranking = sorted
            .iter()
            .enumerate()
            .map(|(i, r)| Row {
                rank: i + 1,
                strategy: r.strategy.clone(),
                figures: DEFS
                    .iter()
                    .map(|d| (d.name.to_string(), r.figure(d.metric)))
                    .collect(),
                db_calls_vs_best: (best > 0).then(|| r.db.calls as f64 / best as f64),
                scheduled: r.requests.scheduled,
                key_digest: r.generator.key_digest.clone(),
                thresholds_broken: r
                    .thresholds
                    .iter()
                    .filter(|t| !t.passed)
                    .map(|t| t.name.clone())
                    .collect(),
                interrupted: r.interrupted,
            })
            .collect();
        CompareSummary {
            schema: SUMMARY_SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            workload,
            interrupted,
            ranking,
            not_run,
            thresholds_set: runs.iter().any(|r| !r.thresholds.is_empty()),
        }
    }

    /// Whether any strategy broke a threshold.
    pub fn thresholds_broken(&self) -> bool {
        self.ranking.iter().any(|r| !r.thresholds_broken.is_empty())
    }
}

impl Row {
    /// One figure of the row (0 when the row was written without it).
    pub fn figure(&self, m: Metric) -> f64 {
        self.figures.get(m.name()).copied().unwrap_or(0.0)
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
        for m in Metric::ranked() {
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
                    r.rank.to_string(),
                    format!(
                        "{tick}{}{tick}{}",
                        r.strategy,
                        if r.interrupted { " (interrupted)" } else { "" }
                    ),
                ];
                for m in Metric::ranked() {
                    v.push(cell(m, r.figure(m)));
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
}
