//! The one list of the figures a run is judged and ranked by: name, unit, which direction is
//! better, what it counts, its default `check` tolerance and whether a threshold may be set on
//! it. `check`, thresholds, `compare` and every renderer read this list; a new metric is one
//! entry in [`DEFS`] plus its arm in `RunResult::figure` (the compiler points at the arm).

/// A figure of a run, by which results are judged, limited and ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    DbCalls,
    RedundantLoads,
    PeakKeyHerd,
    PeakConcurrent,
    HitRate,
    Stale,
    StaleRatio,
    Waited,
    Errors,
    ErrorRate,
    Rejected,
    RejectedRate,
    P50,
    P95,
    P99,
    StaleReads,
    StaleReadRatio,
    StalenessP99,
    DivergentKeys,
    StaleSetsRefused,
    InvalidationFailures,
    WritesLeftWrongRatio,
    RecoveryBack,
}

/// The unit of a metric, which decides how it is written and what a limit or tolerance may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A number of events (calls, loads, requests).
    Count,
    /// Milliseconds.
    Ms,
    /// A share between 0 and 1 (written as a percentage; tolerances in percentage points).
    Share,
}

impl Unit {
    /// A value in this unit, for people.
    pub fn show(self, v: f64) -> String {
        // NaN is how an unknown figure travels through tables and rankings.
        if v.is_nan() {
            return "—".to_string();
        }
        match self {
            Unit::Count => format!("{v:.0}"),
            Unit::Ms => format!("{v:.2} ms"),
            Unit::Share => format!("{:.2}%", v * 100.0),
        }
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// Allowed worsening in `check`: the larger of `rel` × baseline and `abs` (in the metric's
/// unit; a share for rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    pub fn allowed(&self, baseline: f64) -> f64 {
        (self.rel * baseline.abs()).max(self.abs)
    }

    /// "5% or 5", "10 ms", "1.5 pp".
    pub fn show(&self, unit: Unit) -> String {
        let abs = match unit {
            Unit::Count => format!("{:.0}", self.abs),
            Unit::Ms => format!("{} ms", self.abs),
            Unit::Share => format!("{} pp", self.abs * 100.0),
        };
        match (self.rel > 0.0, self.abs > 0.0) {
            (true, true) => format!("{}% or {abs}", self.rel * 100.0),
            (true, false) => format!("{}%", self.rel * 100.0),
            _ => abs,
        }
    }
}

/// Everything known about one metric.
pub struct Def {
    pub metric: Metric,
    /// Its name in `--tolerance`, summary.json and the base of its threshold's name.
    pub name: &'static str,
    /// Short column header in tables.
    pub header: &'static str,
    pub unit: Unit,
    pub better: Better,
    /// What is counted, for `--help`, error messages and the docs.
    pub what: &'static str,
    /// `check` judges this metric with this default tolerance; None: not judged (a count
    /// shown for context whose share is judged instead).
    pub tolerance: Option<Tolerance>,
    /// A threshold (`<name>[_ms]_max|_min`) may be set on it.
    pub threshold: bool,
    /// A column of compare's ranking and of the HTML report's table.
    pub ranked: bool,
}

const fn tol(rel: f64, abs: f64) -> Option<Tolerance> {
    Some(Tolerance { rel, abs })
}

/// Every metric, in the order tables and `check` show them. Default tolerances are sized from
/// the run-to-run spread of `scenarios/ci.toml` on a shared 2-core machine (docs/ci.md): two to
/// three times the widest range seen for any strategy over 10 runs, narrower than the gap
/// between a strategy and cache-aside, which is what it degrades to when its protection breaks.
pub const DEFS: [Def; 23] = [
    Def {
        metric: Metric::DbCalls,
        name: "db_calls",
        header: "db calls",
        unit: Unit::Count,
        better: Better::Lower,
        what: "DB calls in the measured window (db.calls)",
        tolerance: tol(0.05, 5.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::RedundantLoads,
        name: "redundant_loads",
        header: "redundant",
        unit: Unit::Count,
        better: Better::Lower,
        what: "loads started while another load of the same key was in flight",
        tolerance: tol(0.30, 3.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::PeakKeyHerd,
        name: "peak_key_herd",
        header: "peak herd",
        unit: Unit::Count,
        better: Better::Lower,
        what: "most loads of one key in flight at once",
        tolerance: tol(0.40, 0.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::PeakConcurrent,
        name: "peak_concurrent",
        header: "peak db",
        unit: Unit::Count,
        better: Better::Lower,
        what: "most statements running in Postgres at once",
        tolerance: tol(0.20, 3.0),
        threshold: true,
        ranked: false,
    },
    Def {
        metric: Metric::HitRate,
        name: "hit_rate",
        header: "hit rate",
        unit: Unit::Share,
        better: Better::Higher,
        what: "(hit + stale) / completed",
        tolerance: tol(0.0, 0.015),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::Stale,
        name: "stale",
        header: "stale",
        unit: Unit::Count,
        better: Better::Lower,
        what: "requests served a stale value",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::StaleRatio,
        name: "stale_ratio",
        header: "stale %",
        unit: Unit::Share,
        better: Better::Lower,
        what: "stale / completed",
        tolerance: tol(0.0, 0.01),
        threshold: true,
        ranked: false,
    },
    Def {
        metric: Metric::Waited,
        name: "waited",
        header: "waited",
        unit: Unit::Count,
        better: Better::Lower,
        what: "requests that got their value by waiting for another loader",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::Errors,
        name: "errors",
        header: "errors",
        unit: Unit::Count,
        better: Better::Lower,
        what: "requests that failed (abandoned included)",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::ErrorRate,
        name: "error_rate",
        header: "error %",
        unit: Unit::Share,
        better: Better::Lower,
        what: "(errors + retry-after answers + shed + unsent) / scheduled",
        tolerance: tol(0.0, 0.001),
        threshold: true,
        ranked: false,
    },
    Def {
        metric: Metric::Rejected,
        name: "rejected",
        header: "rejected",
        unit: Unit::Count,
        better: Better::Lower,
        what: "requests whose load --db-limit, the breaker or --db-rate refused, with no stale value to serve",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::RejectedRate,
        name: "rejected_rate",
        header: "rejected %",
        unit: Unit::Share,
        better: Better::Lower,
        what: "rejected / completed",
        tolerance: tol(0.0, 0.001),
        threshold: true,
        ranked: false,
    },
    Def {
        metric: Metric::P50,
        name: "p50",
        header: "p50 ms",
        unit: Unit::Ms,
        better: Better::Lower,
        what: "median latency, ms",
        tolerance: tol(1.0, 2.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::P95,
        name: "p95",
        header: "p95 ms",
        unit: Unit::Ms,
        better: Better::Lower,
        what: "95th percentile latency, ms",
        tolerance: tol(0.50, 10.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::P99,
        name: "p99",
        header: "p99 ms",
        unit: Unit::Ms,
        better: Better::Lower,
        what: "99th percentile latency, ms",
        tolerance: tol(0.50, 10.0),
        threshold: true,
        ranked: true,
    },
    // The consistency figures: 0 without writes, and shown only for runs with writes.
    Def {
        metric: Metric::StaleReads,
        name: "stale_reads",
        header: "stale reads",
        unit: Unit::Count,
        better: Better::Lower,
        what: "requests that served a version older than one committed before they started",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::StaleReadRatio,
        name: "stale_read_ratio",
        header: "stale read %",
        unit: Unit::Share,
        better: Better::Lower,
        what: "stale reads / completed",
        tolerance: tol(0.5, 0.001),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::StalenessP99,
        name: "staleness_p99",
        header: "staleness p99",
        unit: Unit::Ms,
        better: Better::Lower,
        what: "99th percentile, over stale reads, of how long the newer version had been committed when the read started, ms",
        tolerance: None,
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::DivergentKeys,
        name: "divergent_keys",
        header: "divergent",
        unit: Unit::Count,
        better: Better::Lower,
        what: "written keys whose cached version differs from the database's once writes and in-flight work are over (wrong until their TTL)",
        tolerance: tol(0.5, 2.0),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::StaleSetsRefused,
        name: "stale_sets_refused",
        header: "sets refused",
        unit: Unit::Count,
        better: Better::Lower,
        what: "cache SETs refused: an older version than cached or announced (versioned), or a lease token no longer the key's",
        tolerance: None,
        threshold: false,
        ranked: true,
    },
    Def {
        metric: Metric::InvalidationFailures,
        name: "invalidation_failures",
        header: "inval. failed",
        unit: Unit::Count,
        better: Better::Lower,
        what: "invalidations after a committed write that failed or came back late (Redis down or slow)",
        tolerance: None,
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::WritesLeftWrongRatio,
        name: "writes_left_wrong_ratio",
        header: "writes left wrong",
        unit: Unit::Share,
        better: Better::Lower,
        what: "writes whose read-back, once their key settled, found an older version cached than the last committed one / writes probed",
        tolerance: tol(0.0, 0.02),
        threshold: true,
        ranked: true,
    },
    Def {
        metric: Metric::RecoveryBack,
        name: "recovery_back",
        header: "back after",
        unit: Unit::Ms,
        better: Better::Lower,
        what: "from the last shock's end until the run is back by the recovery verdict's criterion, ms (unknown when not recovered or not judged)",
        tolerance: None,
        threshold: true,
        ranked: false,
    },
];

impl Metric {
    /// This metric's entry.
    pub fn def(self) -> &'static Def {
        // DEFS is in enum order (a test holds it so).
        &DEFS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The metric called `name` in `--tolerance` and summary.json.
    pub fn by_name(name: &str) -> Option<Metric> {
        DEFS.iter().find(|d| d.name == name).map(|d| d.metric)
    }

    /// The threshold on this metric: `p99_ms_max`, `hit_rate_min`; None when none may be set.
    pub fn threshold_name(self) -> Option<String> {
        let d = self.def();
        d.threshold.then(|| {
            format!(
                "{}{}_{}",
                d.name,
                if d.unit == Unit::Ms { "_ms" } else { "" },
                match d.better {
                    Better::Lower => "max",
                    Better::Higher => "min",
                }
            )
        })
    }

    /// The metric a threshold name limits.
    pub fn by_threshold_name(name: &str) -> Option<Metric> {
        DEFS.iter()
            .map(|d| d.metric)
            .find(|m| m.threshold_name().as_deref() == Some(name))
    }

    /// Every metric `check` judges, in order.
    pub fn judged() -> impl Iterator<Item = Metric> {
        DEFS.iter()
            .filter(|d| d.tolerance.is_some())
            .map(|d| d.metric)
    }

    /// Every metric of compare's ranking table, in order.
    pub fn ranked() -> impl Iterator<Item = Metric> {
        DEFS.iter().filter(|d| d.ranked).map(|d| d.metric)
    }

    /// The ranked metrics a table shows: the consistency figures only when a run had writes
    /// (without them every one is 0 by construction).
    pub fn ranked_for(writes: bool) -> impl Iterator<Item = Metric> {
        Metric::ranked().filter(move |m| writes || !m.consistency())
    }

    /// Whether this is a consistency figure (0 without writes).
    pub fn consistency(self) -> bool {
        matches!(
            self,
            Metric::StaleReads
                | Metric::StaleReadRatio
                | Metric::StalenessP99
                | Metric::DivergentKeys
                | Metric::StaleSetsRefused
                | Metric::InvalidationFailures
                | Metric::WritesLeftWrongRatio
        )
    }

    /// Whether a table marks the best value of this metric. Not for stale responses, waits
    /// and rejections: they are what a protection trades for fewer loads, neither good nor bad
    /// on their own.
    pub fn has_best(self) -> bool {
        !matches!(self, Metric::Stale | Metric::Waited | Metric::Rejected)
    }

    /// Whether `a` is worse than `b` on this metric (strictly).
    pub fn worse(self, a: f64, b: f64) -> bool {
        match self.def().better {
            Better::Lower => a > b,
            Better::Higher => a < b,
        }
    }
}

/// Every threshold name, for `--help` and error messages.
pub fn threshold_names() -> String {
    DEFS.iter()
        .filter_map(|d| d.metric.threshold_name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defs_are_in_enum_order_with_unique_names() {
        for (i, d) in DEFS.iter().enumerate() {
            assert_eq!(d.metric as usize, i, "{}", d.name);
            assert_eq!(Metric::by_name(d.name), Some(d.metric));
        }
    }

    #[test]
    fn threshold_names_keep_their_spelling() {
        assert_eq!(
            threshold_names(),
            "db_calls_max, redundant_loads_max, peak_key_herd_max, peak_concurrent_max, hit_rate_min, stale_ratio_max, error_rate_max, rejected_rate_max, p50_ms_max, p95_ms_max, p99_ms_max, stale_read_ratio_max, staleness_p99_ms_max, divergent_keys_max, invalidation_failures_max, writes_left_wrong_ratio_max, recovery_back_ms_max"
        );
        assert_eq!(Metric::by_threshold_name("p99_ms_max"), Some(Metric::P99));
        assert_eq!(Metric::by_threshold_name("stale_max"), None);
    }
}
