//! `stampede check`: judge a result against a baseline, metric by metric, each with a
//! tolerance sized to its run-to-run noise; a worsening beyond the tolerance is a regression
//! (exit 1), an improvement never fails. Two results are compared only when their scenarios
//! agree on what shapes the figures, unless `--force`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use crate::cli::{CheckCmd, CheckFormat};
use crate::error::{EXIT_FAILED_CHECK, EnvError, UsageError};
use crate::report::{self, RunResult};
use crate::thresholds::{error_rate, stale_ratio};

/// How a metric is measured, which decides how its tolerance reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Events (calls, loads): tolerance relative to the baseline, with an absolute floor.
    Count,
    /// Milliseconds: same, the floor in ms.
    Ms,
    /// A share of requests: tolerance in percentage points.
    Rate,
}

/// Allowed worsening: the larger of `rel` × baseline and `abs` (in the metric's unit; a
/// share for rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    fn allowed(&self, baseline: f64) -> f64 {
        (self.rel * baseline.abs()).max(self.abs)
    }

    fn show(&self, kind: Kind) -> String {
        let abs = match kind {
            Kind::Count => format!("{:.0}", self.abs),
            Kind::Ms => format!("{} ms", self.abs),
            Kind::Rate => format!("{} pp", self.abs * 100.0),
        };
        match (self.rel > 0.0, self.abs > 0.0) {
            (true, true) => format!("{}% or {abs}", self.rel * 100.0),
            (true, false) => format!("{}%", self.rel * 100.0),
            _ => abs,
        }
    }
}

/// One compared metric.
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    /// True when a larger value is better (hit rate).
    pub higher_is_better: bool,
    pub get: fn(&RunResult) -> f64,
    /// Default tolerance, sized from the run-to-run spread of `scenarios/ci.toml` on a shared
    /// 2-core machine (README, "Use in CI"): two to three times the widest range seen for any
    /// strategy over 10 runs, narrower than the gap between a strategy and cache-aside, which
    /// is what it degrades to when its protection breaks.
    pub default: Tolerance,
}

const fn tol(rel: f64, abs: f64) -> Tolerance {
    Tolerance { rel, abs }
}

/// Every metric `check` compares, in the order it reports them.
pub const METRICS: [Metric; 10] = [
    Metric {
        name: "db_calls",
        kind: Kind::Count,
        higher_is_better: false,
        get: |r| r.db.calls as f64,
        default: tol(0.05, 5.0),
    },
    Metric {
        name: "redundant_loads",
        kind: Kind::Count,
        higher_is_better: false,
        get: |r| r.db.redundant_loads as f64,
        default: tol(0.30, 3.0),
    },
    Metric {
        name: "peak_key_herd",
        kind: Kind::Count,
        higher_is_better: false,
        get: |r| r.db.peak_key_herd as f64,
        default: tol(0.40, 0.0),
    },
    Metric {
        name: "peak_concurrent",
        kind: Kind::Count,
        higher_is_better: false,
        get: |r| r.db.peak_concurrent as f64,
        default: tol(0.20, 3.0),
    },
    Metric {
        name: "hit_rate",
        kind: Kind::Rate,
        higher_is_better: true,
        get: |r| r.hit_rate,
        default: tol(0.0, 0.015),
    },
    Metric {
        name: "error_rate",
        kind: Kind::Rate,
        higher_is_better: false,
        get: error_rate,
        default: tol(0.0, 0.001),
    },
    Metric {
        name: "stale_ratio",
        kind: Kind::Rate,
        higher_is_better: false,
        get: stale_ratio,
        default: tol(0.0, 0.01),
    },
    Metric {
        name: "p50",
        kind: Kind::Ms,
        higher_is_better: false,
        get: |r| r.latency_ms.p50,
        default: tol(1.0, 2.0),
    },
    Metric {
        name: "p95",
        kind: Kind::Ms,
        higher_is_better: false,
        get: |r| r.latency_ms.p95,
        default: tol(0.50, 10.0),
    },
    Metric {
        name: "p99",
        kind: Kind::Ms,
        higher_is_better: false,
        get: |r| r.latency_ms.p99,
        default: tol(0.50, 10.0),
    },
];

fn metric_names() -> String {
    METRICS
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tolerances for every metric: the defaults with `--tolerance` entries on top.
pub fn tolerances(args: &[String]) -> Result<Vec<Tolerance>, UsageError> {
    let mut t: Vec<Tolerance> = METRICS.iter().map(|m| m.default).collect();
    for a in args.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        let (name, value) = a.split_once('=').ok_or_else(|| {
            UsageError::new(format!(
                "--tolerance {a}: expected METRIC=TOL such as db_calls=10% (metrics: {})",
                metric_names()
            ))
        })?;
        let i = METRICS
            .iter()
            .position(|m| m.name == name.trim())
            .ok_or_else(|| {
                UsageError::new(format!(
                    "--tolerance: unknown metric `{}` (valid: {})",
                    name.trim(),
                    metric_names()
                ))
            })?;
        let kind = METRICS[i].kind;
        let v = value.trim();
        let bad = || {
            UsageError::new(format!(
                "--tolerance {a}: expected a percentage (10%) or a number of {} 0 or more",
                match kind {
                    Kind::Count => "calls",
                    Kind::Ms => "ms",
                    Kind::Rate => "percentage points, written 1%",
                }
            ))
        };
        let parsed = match v.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
            None => v.parse::<f64>(),
        }
        .map_err(|_| bad())?;
        if !parsed.is_finite() || parsed < 0.0 {
            return Err(bad());
        }
        t[i] = match (kind, v.ends_with('%')) {
            // A rate's tolerance is in points: "1%" allows 0.01 of worsening.
            (Kind::Rate, true) => tol(0.0, parsed),
            (Kind::Rate, false) => return Err(bad()),
            (_, true) => tol(parsed, 0.0),
            (_, false) => tol(0.0, parsed),
        };
    }
    Ok(t)
}

/// What one metric did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Better by more than the tolerance.
    Better,
    /// Within the tolerance either way.
    Same,
    /// Worse by more than the tolerance: a regression.
    Worse,
}

pub struct Row {
    pub metric: &'static str,
    pub kind: Kind,
    pub baseline: f64,
    pub current: f64,
    pub tolerance: Tolerance,
    pub verdict: Verdict,
}

impl Row {
    /// A value of this row's metric, for people.
    pub fn show(&self, v: f64) -> String {
        match self.kind {
            Kind::Count => format!("{v:.0}"),
            Kind::Ms => format!("{v:.2} ms"),
            Kind::Rate => format!("{:.2}%", v * 100.0),
        }
    }

    /// The change from baseline to current: relative for counts and latencies, in points for rates.
    pub fn change(&self) -> String {
        let d = self.current - self.baseline;
        match self.kind {
            Kind::Rate => format!("{:+.2} pp", d * 100.0),
            _ if self.baseline == 0.0 && d == 0.0 => "0%".to_string(),
            _ if self.baseline == 0.0 => format!("+{}", self.show(d)),
            _ => format!("{:+.1}%", d * 100.0 / self.baseline),
        }
    }

    pub fn tolerance(&self) -> String {
        self.tolerance.show(self.kind)
    }

    pub fn verdict(&self) -> &'static str {
        match self.verdict {
            Verdict::Better => "better",
            Verdict::Same => "ok",
            Verdict::Worse => "REGRESSION",
        }
    }
}

/// One result judged against its baseline.
pub struct Comparison {
    pub strategy: String,
    pub current: PathBuf,
    pub baseline: PathBuf,
    pub rows: Vec<Row>,
    /// Differences in the scenario that `--force` overrode.
    pub forced: Vec<String>,
}

impl Comparison {
    pub fn regressions(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Worse)
            .count()
    }
}

/// Judge `current` against `baseline`, metric by metric.
pub fn judge(baseline: &RunResult, current: &RunResult, tols: &[Tolerance]) -> Vec<Row> {
    METRICS
        .iter()
        .zip(tols)
        .map(|(m, &t)| {
            let (b, c) = ((m.get)(baseline), (m.get)(current));
            let worse_by = if m.higher_is_better { b - c } else { c - b };
            let allowed = t.allowed(b);
            let verdict = if worse_by > allowed {
                Verdict::Worse
            } else if -worse_by > allowed {
                Verdict::Better
            } else {
                Verdict::Same
            };
            Row {
                metric: m.name,
                kind: m.kind,
                baseline: b,
                current: c,
                tolerance: t,
                verdict,
            }
        })
        .collect()
}

/// Scenario settings that shape the figures: two results that differ in one of them measure
/// different things.
const MUST_MATCH: [&str; 12] = [
    "load",
    "duration",
    "warmup",
    "keys",
    "zipf",
    "seed",
    "ttl",
    "db_cost",
    "db_pool",
    "instances",
    "warm",
    "missing_ratio",
];

fn show(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "unset".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// How the two results' scenarios differ in what matters (empty when comparable).
pub fn mismatches(baseline: &RunResult, current: &RunResult) -> Vec<String> {
    let mut v = Vec::new();
    if baseline.strategy != current.strategy {
        v.push(format!(
            "strategy: baseline {}, current {}",
            baseline.strategy, current.strategy
        ));
    }
    for k in MUST_MATCH {
        let (b, c) = (baseline.scenario.get(k), current.scenario.get(k));
        if b != c {
            v.push(format!("{k}: baseline {}, current {}", show(b), show(c)));
        }
    }
    if baseline.schema != current.schema {
        v.push(format!(
            "results schema: baseline {}, current {}",
            baseline.schema, current.schema
        ));
    }
    for (which, r) in [("baseline", baseline), ("current", current)] {
        if r.interrupted {
            v.push(format!(
                "the {which} run was interrupted: its figures cover part of the run"
            ));
        }
    }
    v
}

/// Most an open-loop request may have been dispatched after its scheduled time before the run
/// stops being a measurement of the strategy: beyond it the machine could not keep the
/// schedule. Over 149 runs of the CI scenario on a busy 2-core machine the median was 9 ms and
/// 95% stayed under 100 ms; a run 4.8 s behind (the process stalled) was the worst.
pub const LAG_LIMIT_MS: f64 = 250.0;

/// Why a result cannot be trusted as a measurement, when it cannot: the load generator could
/// not keep its schedule, or Redis (with no fault injected) missed its deadlines — on a local
/// server that means the machine starved it, and the fail-open path then turns every strategy
/// into cache-aside (seen here once: mutex with 2052 Redis timeouts, DB calls +41%).
pub fn unreliable(r: &RunResult) -> Option<String> {
    let mut why = Vec::new();
    let lag = r.generator.max_dispatch_lag_ms;
    if lag > LAG_LIMIT_MS {
        why.push(format!(
            "the load generator fell {lag:.0} ms behind its schedule (limit {LAG_LIMIT_MS:.0} ms)"
        ));
    }
    let misses = r.redis.timeouts;
    if r.faults.is_empty() && misses * 1000 > r.requests.scheduled.max(1000) {
        why.push(format!(
            "Redis missed its deadline {misses} times with no fault injected (more than 1 in 1000 requests)"
        ));
    }
    (!why.is_empty()).then(|| {
        format!(
            "{}: the machine was too busy for this scenario, so these figures measure the machine, not the strategy",
            why.join("; ")
        )
    })
}

fn read(path: &Path) -> Result<RunResult, UsageError> {
    report::read_json(path).map_err(|e| UsageError::new(format!("{e:#}")))
}

/// The results files of a `compare --out` directory, by strategy (file stem), sorted.
fn results_in(dir: &Path) -> Result<Vec<(String, PathBuf)>, UsageError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| UsageError::new(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut v: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "summary").then_some((stem, p))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Files to compare: (baseline, current).
type Pairs = Vec<(PathBuf, PathBuf)>;

/// The pairs to compare, and notes on strategies present on one side only.
fn pairs(cmd: &CheckCmd) -> Result<(Pairs, Vec<String>), UsageError> {
    match (cmd.current.is_dir(), cmd.baseline.is_dir()) {
        (false, false) => Ok((vec![(cmd.baseline.clone(), cmd.current.clone())], vec![])),
        (true, true) => {
            let base = results_in(&cmd.baseline)?;
            let cur = results_in(&cmd.current)?;
            let mut notes = Vec::new();
            let mut v = Vec::new();
            for (name, b) in &base {
                match cur.iter().find(|(n, _)| n == name) {
                    Some((_, c)) => v.push((b.clone(), c.clone())),
                    None => notes.push(format!(
                        "{name}: in the baseline, not in {}",
                        cmd.current.display()
                    )),
                }
            }
            for (name, _) in cur
                .iter()
                .filter(|(n, _)| !base.iter().any(|(b, _)| b == n))
            {
                notes.push(format!(
                    "{name}: not in the baseline {}",
                    cmd.baseline.display()
                ));
            }
            if v.is_empty() {
                return Err(UsageError::new(format!(
                    "no strategy is in both {} and {}: nothing to compare (each should hold <strategy>.json files from `stampede compare --out`)",
                    cmd.current.display(),
                    cmd.baseline.display()
                )));
            }
            Ok((v, notes))
        }
        (cur_dir, _) => Err(UsageError::new(format!(
            "{} is a {} but the baseline {} is {}: compare a file with a file, or a `compare --out` directory with another",
            cmd.current.display(),
            if cur_dir { "directory" } else { "file" },
            cmd.baseline.display(),
            if cur_dir { "not" } else { "a directory" }
        ))),
    }
}

/// Compare, print, and say whether anything regressed.
pub fn run(cmd: CheckCmd) -> Result<ExitCode> {
    let tols = tolerances(&cmd.tolerance)?;
    let (pairs, notes) = pairs(&cmd)?;
    let mut comparisons = Vec::with_capacity(pairs.len());
    let mut refused = Vec::new();
    let mut unreliable_runs = Vec::new();
    for (b, c) in pairs {
        let (base, cur) = (read(&b)?, read(&c)?);
        let mut diff = mismatches(&base, &cur);
        for (p, r) in [(&b, &base), (&c, &cur)] {
            if let Some(why) = unreliable(r) {
                if cmd.force {
                    diff.push(format!("{}: {why}", p.display()));
                } else {
                    unreliable_runs.push(format!("{}: {why}", p.display()));
                }
            }
        }
        if !diff.is_empty() && !cmd.force {
            refused.push(format!(
                "{} vs baseline {}:\n    {}",
                c.display(),
                b.display(),
                diff.join("\n    ")
            ));
            continue;
        }
        comparisons.push(Comparison {
            strategy: cur.strategy.clone(),
            rows: judge(&base, &cur, &tols),
            current: c,
            baseline: b,
            forced: diff,
        });
    }
    if !refused.is_empty() {
        return Err(UsageError::new(format!(
            "refusing to compare results of different scenarios (add --force to compare anyway):\n  {}",
            refused.join("\n  ")
        ))
        .into());
    }
    if !unreliable_runs.is_empty() {
        return Err(EnvError(format!(
            "cannot judge (run again on a quieter machine, or add --force to judge anyway):\n  {}",
            unreliable_runs.join("\n  ")
        ))
        .into());
    }
    let text = match cmd.format {
        CheckFormat::Text => report::tables::check(&comparisons, &notes),
        CheckFormat::Markdown => report::markdown::check(&comparisons, &notes),
    };
    print!("{text}");
    if comparisons.iter().any(|c| c.regressions() > 0) {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_forms() {
        let t = tolerances(&["db_calls=10%".into(), "p99=3".into(), "hit_rate=2%".into()]).unwrap();
        assert_eq!(t[0], tol(0.10, 0.0));
        assert_eq!(t[9], tol(0.0, 3.0));
        assert_eq!(t[4], tol(0.0, 0.02));
        assert!(tolerances(&["p999=1%".into()]).is_err());
        assert!(tolerances(&["hit_rate=0.5".into()]).is_err());
        assert!(tolerances(&["db_calls=-1%".into()]).is_err());
        assert!(tolerances(&["db_calls".into()]).is_err());
    }

    #[test]
    fn allowed_is_the_larger_of_relative_and_floor() {
        assert_eq!(tol(0.10, 5.0).allowed(10.0), 5.0);
        assert_eq!(tol(0.10, 5.0).allowed(1000.0), 100.0);
    }
}
