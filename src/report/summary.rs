//! The summary of a `compare`: one row per strategy, ranked by DB calls, written as
//! `summary.json` beside each strategy's own results file and rendered as a table.

use serde::{Deserialize, Serialize};

use super::RunResult;

/// Version of the summary document's layout.
pub const SUMMARY_SCHEMA: u32 = 1;

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
    /// Loads in the measured window (plus warm loads).
    pub db_calls: u64,
    /// `db_calls` divided by the best strategy's; null when the best made no call.
    pub db_calls_vs_best: Option<f64>,
    /// Loads started while another load of the same key was in flight.
    pub redundant_loads: u64,
    /// Most loads of one key in flight at once.
    pub peak_key_herd: u64,
    /// (hit + stale) / completed.
    pub hit_rate: f64,
    /// Requests served stale.
    pub stale: u64,
    /// Requests that got their value by waiting for another loader.
    pub waited: u64,
    /// Requests with outcome error (abandoned included).
    pub errors: u64,
    /// Requests scheduled in the measured window (equal across strategies in open loop).
    pub scheduled: u64,
    /// Latency percentiles, ms.
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
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
                db_calls: r.db.calls,
                db_calls_vs_best: (best > 0).then(|| r.db.calls as f64 / best as f64),
                redundant_loads: r.db.redundant_loads,
                peak_key_herd: r.db.peak_key_herd,
                hit_rate: r.hit_rate,
                stale: r.outcomes.stale,
                waited: r.outcomes.waited,
                errors: r.requests.errors,
                scheduled: r.requests.scheduled,
                p50_ms: r.latency_ms.p50,
                p95_ms: r.latency_ms.p95,
                p99_ms: r.latency_ms.p99,
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
    /// "1.00x", or "n/a" when the best made no call.
    pub fn vs_best(&self) -> String {
        match self.db_calls_vs_best {
            Some(x) => format!("{x:.2}x"),
            None if self.db_calls == 0 => "1.00x".to_string(),
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

impl CompareSummary {
    /// The ranking as a header and rows of text cells, shared by the terminal and Markdown
    /// tables; `markdown` spells the headers out and puts strategy names in code spans.
    pub fn ranking_cells(&self, markdown: bool) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let mut header = vec![
            "#",
            "strategy",
            if markdown { "DB calls" } else { "db calls" },
            "vs best",
            if markdown {
                "redundant loads"
            } else {
                "redundant"
            },
            "peak herd",
            "hit rate",
            "stale",
            "waited",
            "errors",
            "p50 ms",
            "p95 ms",
            "p99 ms",
        ];
        if self.thresholds_set {
            header.push("thresholds");
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
                    r.db_calls.to_string(),
                    r.vs_best(),
                    r.redundant_loads.to_string(),
                    r.peak_key_herd.to_string(),
                    format!("{:.1}%", r.hit_rate * 100.0),
                    r.stale.to_string(),
                    r.waited.to_string(),
                    r.errors.to_string(),
                    format!("{:.2}", r.p50_ms),
                    format!("{:.2}", r.p95_ms),
                    format!("{:.2}", r.p99_ms),
                ];
                if self.thresholds_set {
                    v.push(r.thresholds_cell(true));
                }
                v
            })
            .collect();
        (header, rows)
    }
}
