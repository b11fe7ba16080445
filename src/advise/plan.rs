//! The search's plan, made before the first run from the time it may take: the final trials'
//! time reserved first (survivors and the baseline, 5 trials each, at the team's window or a
//! shorter one when `--time` is short), then rounds of successive halving in what is left —
//! every candidate at a quarter of the window, the better half at twice that, and so on — with
//! candidates cut up front when even the shortest window cannot fit them all.

use std::time::Duration;

use crate::metric::{Better, Metric};
use crate::results::RunResult;
use crate::scenario::Scenario;

/// A run's cost besides its measured window: the cache reset, the warm start, the drain and
/// the figures read from the servers (0.35 s measured here over 40 runs), with a margin.
pub const RUN_OVERHEAD: Duration = Duration::from_millis(600);
/// Servers started once for the search.
const START: Duration = Duration::from_secs(5);
/// The shortest measured window a round runs.
const MIN_WINDOW: Duration = Duration::from_secs(1);
/// Candidates that reach the final trials.
pub const SURVIVORS: usize = 3;
/// The final trials per candidate: the fewest the statistics decide from.
pub const FINAL_TRIALS: usize = crate::stats::MIN_TRIALS;

/// One round: how many candidates run, each once, at which window.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub candidates: usize,
    pub window: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub rounds: Vec<Step>,
    pub survivors: usize,
    pub final_window: Duration,
    pub final_trials: usize,
    /// The estimated wall time of the whole plan.
    pub estimate: Duration,
    overhead: Duration,
}

impl Plan {
    /// The plan for `n` candidates on `sc`'s workload within `time`.
    pub fn make(sc: &Scenario, n: usize, time: Duration) -> Plan {
        let overhead = RUN_OVERHEAD + sc.warmup.0;
        // A shock must fall inside every window, with the recovery's observation after it:
        // a shorter window has no verdict, and a budget on the recovery could not rank.
        let min_window = sc
            .faults
            .iter()
            .map(|f| {
                // A second more than the observation: the shock ends a moment after its time.
                f.ends_at() + sc.recovery.observe.0.max(Duration::from_secs(2)) + MIN_WINDOW
            })
            .max()
            .unwrap_or(MIN_WINDOW)
            .max(MIN_WINDOW);
        let survivors = n.min(SURVIVORS);
        let final_runs = (survivors + 1) * FINAL_TRIALS;
        let mut final_window = sc.duration.0.max(min_window);
        let share = time.mul_f64(0.6);
        if (final_window + overhead) * final_runs as u32 > share {
            let fit = share / final_runs as u32;
            final_window = fit.saturating_sub(overhead).max(min_window);
        }
        let reserve = START + (final_window + overhead) * final_runs as u32;
        let mut left = time.saturating_sub(reserve);
        let mut rounds = Vec::new();
        let mut alive = n;
        let mut window = (final_window / 4).max(min_window);
        while alive > survivors {
            let each = window + overhead;
            let fit = (left.as_secs_f64() / each.as_secs_f64()).floor() as usize;
            let run = alive.min(fit.max(survivors));
            left = left.saturating_sub(each * run as u32);
            rounds.push(Step {
                candidates: run,
                window,
            });
            alive = run.div_ceil(2).max(survivors);
            window = (window * 2).min(final_window);
        }
        let mut p = Plan {
            rounds,
            survivors,
            final_window,
            final_trials: FINAL_TRIALS,
            estimate: Duration::ZERO,
            overhead,
        };
        p.estimate = START
            + p.rounds
                .iter()
                .map(|s| (s.window + overhead) * s.candidates as u32)
                .sum::<Duration>()
            + (final_window + overhead) * final_runs as u32;
        p
    }

    /// Runs the plan makes.
    pub fn total_runs(&self) -> usize {
        self.rounds.iter().map(|s| s.candidates).sum::<usize>()
            + (self.survivors + 1) * self.final_trials
    }

    /// The plan in words, printed before the first run.
    pub fn describe(
        &self,
        candidates: &[super::space::Candidate],
        objective: Metric,
        budgets: &[(Metric, f64)],
    ) -> String {
        let mut s = format!(
            "advise: minimize {} within {} ({} candidates: {})\n",
            objective.name(),
            if budgets.is_empty() {
                "no budget".to_string()
            } else {
                budgets
                    .iter()
                    .map(|&(m, v)| {
                        format!(
                            "{} {}",
                            m.threshold_name().unwrap_or_default(),
                            crate::values::points::trim(v)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            candidates.len(),
            candidates
                .iter()
                .map(|c| c.label())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (i, r) in self.rounds.iter().enumerate() {
            s.push_str(&format!(
                "  round {i}: {} candidates × 1 run of {:.1} s{}\n",
                r.candidates,
                r.window.as_secs_f64(),
                if i == 0 && r.candidates < candidates.len() {
                    format!(
                        " ({} cut up front: out of time)",
                        candidates.len() - r.candidates
                    )
                } else {
                    String::new()
                }
            ));
        }
        s.push_str(&format!(
            "  final: {} survivors and {} × {} trials of {:.1} s; estimate {:.0} s (runs cost ~{:.1} s each besides their window)",
            self.survivors,
            match candidates.first() {
                Some(c) if super::app::is_app(&c.strategy) => "the app at its defaults",
                _ => "cache-aside",
            },
            self.final_trials,
            self.final_window.as_secs_f64(),
            self.estimate.as_secs_f64(),
            self.overhead.as_secs_f64()
        ));
        s
    }
}

/// A round's order: candidates that meet every budget first, by the objective; then the
/// others by how far they break the budgets.
pub fn rank(r: &RunResult, objective: Metric, budgets: &[(Metric, f64)]) -> f64 {
    let mut excess = 0.0;
    for &(m, limit) in budgets {
        let v = r.figure(m);
        let over = match m.def().better {
            Better::Lower => v - limit,
            Better::Higher => limit - v,
        };
        if v.is_nan() {
            excess += 1.0;
        } else if over > 0.0 {
            excess += over / limit.abs().max(1e-9);
        }
    }
    let o = r.figure(objective);
    if excess > 0.0 {
        1e15 * (1.0 + excess)
    } else if o.is_nan() {
        1e14
    } else {
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(duration_s: u64) -> Scenario {
        let (mut s, _) = crate::scenario::resolve_one(None, Default::default()).unwrap();
        s.duration = crate::values::Dur::secs(duration_s);
        s
    }

    #[test]
    fn the_final_trials_are_reserved_and_rounds_halve() {
        let p = Plan::make(&sc(10), 20, Duration::from_secs(600));
        assert_eq!(p.survivors, 3);
        assert_eq!(p.final_window, Duration::from_secs(10));
        assert_eq!(p.rounds[0].candidates, 20);
        assert_eq!(p.rounds[0].window, Duration::from_millis(2500));
        assert_eq!(p.rounds[1].candidates, 10);
        assert_eq!(
            p.rounds.last().unwrap().candidates,
            3.max(p.rounds.last().unwrap().candidates)
        );
        assert!(p.estimate <= Duration::from_secs(600), "{p:?}");
    }

    #[test]
    fn a_short_time_shortens_the_final_window_and_cuts_candidates() {
        let p = Plan::make(&sc(10), 30, Duration::from_secs(90));
        assert!(p.final_window < Duration::from_secs(10));
        assert!(p.final_window >= Duration::from_secs(1));
        assert!(p.rounds[0].candidates < 30, "{p:?}");
        assert!(p.estimate <= Duration::from_secs(100), "{p:?}");
    }
}
