//! The answer of a search, from the final trials alone: which candidates meet every budget
//! (a budget is met when the interval of its median is on the right side of the limit, not
//! just the median), the best of them on the objective, a tie when the trials cannot tell it
//! from others (the simplest named), or none-meets with the closest candidate and the budget
//! it breaks, by how much. A figure a trial could not give (a recovery never reached, a window
//! too short to judge it) is `unknown` with its reason, never a number.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::space::Candidate;
use crate::metric::{Better, Metric};
use crate::results::RunResult;
use crate::stats;

/// advise.json's layout version.
/// 2: `undecided`, `evidence.never_measured`, a budget's `unknown`, `closest.measured` and
/// `closest.by` null when unknown.
pub const ADVICE_SCHEMA: u32 = 2;

/// A figure over trials: the median and the interval of the median (its real coverage in
/// `coverage`; below 5 trials the range of the trials, coverage null).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub median: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub coverage: Option<f64>,
}

impl Interval {
    pub fn of(xs: &[f64]) -> Interval {
        let v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
        let ranks = stats::median_ci_ranks(v.len(), 0.95);
        let (lo, hi) = stats::median_ci(&v, 0.95)
            .map(|(a, b)| (Some(a), Some(b)))
            .unwrap_or_else(|| {
                (
                    v.iter().copied().reduce(f64::min),
                    v.iter().copied().reduce(f64::max),
                )
            });
        Interval {
            median: stats::median(&v),
            lo,
            hi,
            coverage: ranks.map(|r| r.coverage),
        }
    }
}

/// One budget of one candidate, in the shape a run's thresholds use, with its interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Budget {
    pub name: String,
    pub limit: f64,
    /// The median over the trials.
    pub measured: Option<f64>,
    /// Met: the whole interval on the right side of the limit.
    pub passed: bool,
    pub interval: Interval,
    /// Why some trials have no figure ("unknown in 2 of 4 trials: …"); absent when every
    /// trial has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

/// One candidate's standing in the final trials.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pick {
    pub label: String,
    pub strategy: String,
    /// The settings moved from their defaults (run flag → value).
    pub settings: BTreeMap<String, String>,
    pub trials: usize,
    /// The objective's median and interval.
    pub objective: Interval,
    pub thresholds: Vec<Budget>,
}

/// The candidate nearest to meeting the budgets, and what it breaks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Closest {
    pub candidate: Pick,
    pub budget: String,
    pub limit: f64,
    /// The interval's bound on the wrong side; null when the trials did not give the figure
    /// (`candidate`'s budget says why).
    pub measured: Option<f64>,
    /// How far past the limit, relative to it (0.2: 20% past); null when unknown.
    pub by: Option<f64>,
}

/// The verdict and its parts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// `recommended`, `tie`, `none-meets`, or `undecided` (the search stopped before its
    /// final trials were done: the other fields hold what was decided so far).
    pub verdict: String,
    pub recommended: Option<Pick>,
    pub runner_up: Option<Pick>,
    /// With a tie: the others that cannot be told from the recommended one.
    pub tied_with: Vec<String>,
    /// Cache-aside at the team's settings (with `--target`, the app at its defaults): what
    /// doing nothing costs.
    pub baseline: Option<Pick>,
    /// The budget with the least room left for the recommended candidate.
    pub binding: Option<String>,
    pub closest: Option<Closest>,
}

fn pick(c: &Candidate, trials: &[RunResult], objective: Metric, budgets: &[(Metric, f64)]) -> Pick {
    let samples = |m: Metric| -> Vec<f64> { trials.iter().map(|r| r.figure(m)).collect() };
    Pick {
        label: c.label(),
        strategy: c.strategy.clone(),
        settings: c.settings.iter().cloned().collect(),
        trials: trials.len(),
        objective: Interval::of(&samples(objective)),
        thresholds: budgets
            .iter()
            .map(|&(m, limit)| {
                let xs = samples(m);
                let interval = Interval::of(&xs);
                let reasons: Vec<String> =
                    trials.iter().filter_map(|r| r.measured(m).err()).collect();
                let unknown = reasons.first().map(|why| {
                    format!(
                        "unknown in {} of {} trials: {why}",
                        reasons.len(),
                        trials.len()
                    )
                });
                // A trial without the figure (a recovery never judged or never reached) cannot
                // show the budget met: met needs every trial's figure.
                let known = xs.iter().all(|x| !x.is_nan());
                let passed = known
                    && match (m.def().better, interval.lo, interval.hi) {
                        (Better::Lower, _, Some(hi)) => hi <= limit,
                        (Better::Higher, Some(lo), _) => lo >= limit,
                        _ => false,
                    };
                Budget {
                    name: m.threshold_name().unwrap_or_else(|| m.name().to_string()),
                    limit,
                    measured: interval.median,
                    passed,
                    interval,
                    unknown,
                }
            })
            .collect(),
    }
}

/// How far a pick is from meeting its budgets: the largest relative excess of an interval
/// bound over its limit (0 when all are met), with the budget. A budget without a figure ranks
/// past every measured excess (infinite here, never printed).
fn excess(p: &Pick) -> (f64, Option<&Budget>) {
    p.thresholds
        .iter()
        .filter(|b| !b.passed)
        .map(|b| {
            let bound = if b.limit >= 0.0 && b.interval.hi.is_some() {
                b.interval.hi.unwrap_or(f64::INFINITY)
            } else {
                f64::INFINITY
            };
            let by = if b.limit.abs() > 0.0 {
                (bound - b.limit).abs() / b.limit.abs()
            } else {
                (bound - b.limit).abs()
            };
            (by, Some(b))
        })
        .fold((0.0, None), |a, x| if x.0 > a.0 { x } else { a })
}

/// Whether two candidates' objective trials cannot be told apart.
fn same(a: &[f64], b: &[f64]) -> bool {
    if a.len() >= stats::MIN_TRIALS && b.len() >= stats::MIN_TRIALS {
        !stats::distinguishable(a, b, stats::DEFAULT_ALPHA)
    } else {
        let tol = |m: f64| m.abs() * 0.05;
        match (stats::median(a), stats::median(b)) {
            (Some(x), Some(y)) => (x - y).abs() <= tol(x.max(y)),
            _ => true,
        }
    }
}

/// The verdict over the final trials of each candidate (and the baseline's).
pub fn judge(
    finals: &[(Candidate, Vec<RunResult>)],
    baseline: Option<&(Candidate, Vec<RunResult>)>,
    objective: Metric,
    budgets: &[(Metric, f64)],
) -> Verdict {
    let picks: Vec<(Pick, Vec<f64>, &Candidate)> = finals
        .iter()
        .filter(|(_, t)| !t.is_empty())
        .map(|(c, t)| {
            let obj: Vec<f64> = t
                .iter()
                .map(|r| r.figure(objective))
                .filter(|x| !x.is_nan())
                .collect();
            (pick(c, t, objective, budgets), obj, c)
        })
        .collect();
    let baseline = baseline
        .filter(|(_, t)| !t.is_empty())
        .map(|(c, t)| pick(c, t, objective, budgets));
    let key = |p: &Pick| p.objective.median.unwrap_or(f64::INFINITY);
    let mut meeting: Vec<&(Pick, Vec<f64>, &Candidate)> = picks
        .iter()
        .filter(|(p, o, _)| p.thresholds.iter().all(|b| b.passed) && !o.is_empty())
        .collect();
    meeting.sort_by(|a, b| key(&a.0).total_cmp(&key(&b.0)));
    let Some(best) = meeting.first() else {
        let closest = picks
            .iter()
            .map(|(p, _, _)| (excess(p), p))
            .min_by(|a, b| a.0.0.total_cmp(&b.0.0))
            .and_then(|((by, b), p)| {
                b.map(|b| Closest {
                    candidate: p.clone(),
                    budget: b.name.clone(),
                    limit: b.limit,
                    measured: b.interval.hi.or(b.measured).filter(|_| b.unknown.is_none()),
                    by: (by.is_finite() && b.unknown.is_none()).then_some(by),
                })
            });
        return Verdict {
            verdict: "none-meets".to_string(),
            recommended: None,
            runner_up: None,
            tied_with: Vec::new(),
            baseline,
            binding: None,
            closest,
        };
    };
    let mut tied: Vec<&(Pick, Vec<f64>, &Candidate)> = meeting
        .iter()
        .copied()
        .filter(|m| same(&m.1, &best.1))
        .collect();
    tied.sort_by_key(|m| m.2.simplicity());
    let (verdict, chosen) = if tied.len() > 1 {
        ("tie", tied[0])
    } else {
        ("recommended", *best)
    };
    let runner_up = meeting
        .iter()
        .find(|m| m.0.label != chosen.0.label)
        .map(|m| m.0.clone());
    let binding = chosen
        .0
        .thresholds
        .iter()
        .map(|b| {
            let room = match (b.interval.hi, b.interval.lo) {
                (Some(hi), _) if b.limit != 0.0 && hi <= b.limit => (b.limit - hi) / b.limit.abs(),
                (_, Some(lo)) if b.limit != 0.0 => (lo - b.limit) / b.limit.abs(),
                _ => 0.0,
            };
            (room.abs(), b.name.clone())
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n);
    Verdict {
        verdict: verdict.to_string(),
        recommended: Some(chosen.0.clone()),
        runner_up,
        tied_with: if verdict == "tie" {
            tied[1..].iter().map(|m| m.0.label.clone()).collect()
        } else {
            Vec::new()
        },
        baseline,
        binding,
        closest: None,
    }
}

/// A figure of `m` for a sentence (`unknown` without a finite one).
pub fn show(m: Metric, v: Option<f64>) -> String {
    match v.filter(|v| v.is_finite()) {
        Some(v) => match m.def().unit {
            crate::metric::Unit::Share => format!("{:.2}%", v * 100.0),
            crate::metric::Unit::Ms => format!("{v:.2} ms"),
            crate::metric::Unit::Count => format!("{v:.0}"),
        },
        None => "unknown".to_string(),
    }
}

/// An interval for a sentence: `1234 [1200, 1300]`.
pub fn show_interval(m: Metric, i: &Interval) -> String {
    match (i.lo, i.hi) {
        (Some(lo), Some(hi)) => format!(
            "{} [{}, {}]",
            show(m, i.median),
            show(m, Some(lo)),
            show(m, Some(hi))
        ),
        _ => show(m, i.median),
    }
}

/// The verdict in sentences. `measured`: (measured, all) when some candidates were never
/// measured, so the verdict holds among the measured only.
pub fn sentence(v: &Verdict, objective: Metric, measured: Option<(usize, usize)>) -> String {
    let name = objective.name();
    let among = measured.map_or(String::new(), |(n, _)| format!(" among the {n} measured"));
    let base = v.baseline.as_ref().map(|b| {
        format!(
            " Doing nothing ({}): {name} {}.",
            super::app::doing_nothing(&b.strategy),
            show_interval(objective, &b.objective)
        )
    });
    let mut s = match (v.verdict.as_str(), &v.recommended, &v.closest) {
        ("recommended", Some(r), _) => format!(
            "Recommended{among}: {} — {name} {}, {}.{}",
            r.label,
            show_interval(objective, &r.objective),
            match (&v.binding, r.thresholds.is_empty()) {
                (_, true) => "no budget set".to_string(),
                (Some(b), false) => format!("every budget met (the binding one: {b})"),
                (None, false) => "every budget met".to_string(),
            },
            v.runner_up.as_ref().map_or(String::new(), |u| format!(
                " Runner-up: {} — {name} {}.",
                u.label,
                show_interval(objective, &u.objective)
            ))
        ),
        ("tie", Some(r), _) => format!(
            "Tie{among}: {} and {} meet every budget and cannot be told apart on {name} ({}); the simplest is {}.",
            r.label,
            v.tied_with.join(", "),
            show_interval(objective, &r.objective),
            r.label
        ),
        (_, _, Some(c)) => {
            let m = Metric::by_threshold_name(&c.budget).unwrap_or(objective);
            let unknown = c
                .candidate
                .thresholds
                .iter()
                .find(|b| b.name == c.budget)
                .and_then(|b| b.unknown.clone());
            match (c.measured, c.by, unknown) {
                (Some(x), Some(by), None) => format!(
                    "None meets the budgets{among}: the closest is {}, whose {} reaches {} (the far end of its interval) against the limit {} ({:.0}% past it).",
                    c.candidate.label,
                    c.budget,
                    show(m, Some(x)),
                    show(m, Some(c.limit)),
                    by * 100.0
                ),
                (_, _, why) => format!(
                    "None meets the budgets{among}: none has every budget's figure in every trial; the closest is {}, whose {} (limit {}) is {}.",
                    c.candidate.label,
                    c.budget,
                    show(m, Some(c.limit)),
                    why.unwrap_or_else(|| "unknown".to_string())
                ),
            }
        }
        _ => "No candidate finished: nothing to recommend.".to_string(),
    };
    if let Some(b) = base {
        s.push_str(&b);
    }
    s
}
