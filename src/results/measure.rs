//! The figures of the metric list read off a result, each as a value or why it is unknown,
//! and the thresholds judged against them.

use super::{Known, RunResult, ThresholdResult};
use crate::metric::Metric;
use crate::thresholds::{Thresholds, passes};

impl RunResult {
    /// The value of one metric of the list in [`crate::metric`].
    pub fn figure(&self, m: Metric) -> f64 {
        self.measured(m).unwrap_or(f64::NAN)
    }

    /// The value of one metric, or why it was not measured: a figure the tool could not
    /// obtain is unknown, never 0 (`figure` gives NaN for it, which every comparison treats
    /// as not comparable and every renderer prints as `—`).
    pub fn measured(&self, m: Metric) -> Result<f64, String> {
        fn known<T: Into<f64> + Copy>(v: &Known<T>) -> Result<f64, String> {
            v.result().map(Into::into)
        }
        let n = |v: u64| Ok(v as f64);
        let none_completed = || {
            if self.requests.completed == 0 {
                Err("no request completed".to_string())
            } else {
                Ok(())
            }
        };
        let app = self.app.is_some();
        let app_outcomes = || {
            if app {
                Err("an app under test's outcomes are HTTP's: the tool cannot see whether it served from its cache".to_string())
            } else {
                Ok(())
            }
        };
        let d = &self.db;
        let c = &self.consistency;
        let u = |v: &Known<u64>| v.clone().map(|x| x as f64);
        match m {
            Metric::DbCalls => known(&u(&d.calls)),
            Metric::RedundantLoads => known(&u(&d.redundant_loads)),
            Metric::PeakKeyHerd => known(&u(&d.peak_key_herd)),
            Metric::PeakConcurrent => n(d.peak_concurrent),
            Metric::HitRate => known(&self.hit_rate),
            Metric::Stale => app_outcomes().and(n(self.outcomes.stale)),
            Metric::StaleRatio => app_outcomes()
                .and(none_completed())
                .map(|()| share(self.outcomes.stale, self.requests.completed)),
            Metric::Waited => app_outcomes().and(n(self.outcomes.waited)),
            Metric::Errors => n(self.requests.errors),
            Metric::ErrorRate => Ok(share(
                self.requests.errors
                    + self.outcomes.retry_after
                    + self.outcomes.timed_out
                    + self.requests.shed
                    + self.requests.unsent,
                self.requests.scheduled,
            )),
            Metric::Rejected => n(self.outcomes.rejected),
            Metric::RejectedRate => {
                none_completed().map(|()| share(self.outcomes.rejected, self.requests.completed))
            }
            Metric::P50 => none_completed().map(|()| self.latency_ms.p50),
            Metric::P95 => none_completed().map(|()| self.latency_ms.p95),
            Metric::P99 => none_completed().map(|()| self.latency_ms.p99),
            Metric::StaleReads => n(c.stale_reads),
            Metric::StaleReadRatio => Ok(c.stale_read_ratio),
            Metric::StalenessP99 => Ok(c.staleness_ms.p99),
            Metric::DivergentKeys => known(&u(&c.divergent_keys)),
            Metric::WritesLeftWrongRatio => Ok(c.writes_left_wrong_ratio),
            Metric::StaleSetsRefused => n(c.stale_sets_refused),
            Metric::InvalidationFailures => n(c.invalidation_failures),
            Metric::RecoveryBack => match &self.recovery {
                None => Err("the run has no shock to recover from".to_string()),
                Some(rc) => rc
                    .back_ms
                    .map(|v| v as f64)
                    .ok_or_else(|| format!("{}: {}", rc.verdict.name(), rc.reason)),
            },
        }
    }

    /// One metric for a summary line: its value in its unit, or `unknown (why)`.
    pub fn shown(&self, m: Metric) -> String {
        match self.measured(m) {
            Ok(v) => m.def().unit.show(v),
            Err(why) => format!("unknown ({why})"),
        }
    }

    /// Judge this run against every threshold of `t`.
    pub fn judge(&self, t: &Thresholds) -> Vec<ThresholdResult> {
        t.iter()
            .map(|(m, limit)| {
                let name = m.threshold_name().unwrap_or_default();
                match self.measured(m) {
                    Ok(measured) => ThresholdResult {
                        name,
                        limit,
                        measured: Known::Value(measured),
                        passed: passes(m, limit, measured),
                    },
                    // A limit on a figure nobody measured holds nothing: it fails.
                    Err(why) => ThresholdResult {
                        name,
                        limit,
                        measured: Known::Unknown(why),
                        passed: false,
                    },
                }
            })
            .collect()
    }

    /// One line per broken threshold, naming it, its limit and what was measured.
    pub fn broken_thresholds(&self) -> String {
        let mut o = String::new();
        for t in self.thresholds.iter().filter(|t| !t.passed) {
            let Some(m) = Metric::by_threshold_name(&t.name) else {
                continue;
            };
            let d = m.def();
            match &t.measured {
                Known::Value(v) => o.push_str(&format!(
                    "threshold broken ({}): {} = {} but measured {} ({})\n",
                    self.strategy,
                    t.name,
                    d.unit.show(t.limit),
                    d.unit.show(*v),
                    d.what
                )),
                Known::Unknown(why) => o.push_str(&format!(
                    "threshold broken ({}): {} = {} but {} is unknown: {} (a limit on a figure that was not measured fails)\n",
                    self.strategy,
                    t.name,
                    d.unit.show(t.limit),
                    d.name,
                    why
                )),
            }
        }
        o
    }
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}
