//! The search's plan, made before the first run from the time it may take. Round 0 measures
//! every named strategy (and the baseline) before anything is cut; the final trials' time
//! (survivors and the baseline, 5 trials each, at the team's window) is reserved beside it,
//! shrinking first to a shorter window, then to fewer trials (never below 3), when `--time`
//! is short. Whatever is left goes to the settings variants and rounds of successive halving —
//! the better half at twice the window, and so on. When even the shortest window that still
//! gives every figure (a shock needs its observation) cannot fit round 0 and 3 final trials,
//! there is no plan: `advise` refuses up front with the time it needs.

use std::time::Duration;

use crate::error::UsageError;
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
/// The final trials per candidate when the time allows: the fewest the statistics decide from.
pub const FINAL_TRIALS: usize = crate::stats::MIN_TRIALS;
/// The fewest final trials the reserve may shrink to before a named strategy would be cut.
pub const MIN_FINAL_TRIALS: usize = 3;
/// The step by which a window shrinks to fit `--time`.
const SHRINK: Duration = Duration::from_millis(100);

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
    /// The baseline runs once in round 0 beside the candidates (it is not one of them).
    pub baseline_in_round0: bool,
    /// The estimated wall time of the whole plan.
    pub estimate: Duration,
    overhead: Duration,
    /// The shortest window that gives every figure, and why.
    min_window: Duration,
    min_window_why: String,
}

/// What the search is asked to cover.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Space {
    /// Candidates in all.
    pub candidates: usize,
    /// Of them, the named strategies at their defaults (listed first): each must run.
    pub named: usize,
    /// The baseline is one of the candidates (cache-aside at the team's settings).
    pub baseline_named: bool,
}

/// The shortest measured window in which every figure has a value, and why: a shock must fall
/// inside it with its recovery's observation after it (a shorter window has no verdict, and a
/// budget on the recovery could not rank).
fn min_window(sc: &Scenario) -> (Duration, String) {
    let worst = sc.faults.iter().max_by_key(|f| f.ends_at());
    match worst {
        Some(f) => {
            let observe = sc.recovery.observe.0.max(Duration::from_secs(2));
            // A second more than the observation: the shock ends a moment after its time.
            let w = (f.ends_at() + observe + MIN_WINDOW).max(MIN_WINDOW);
            let why = format!(
                "the {} ending at {:.1} s, its {} observation and a second",
                f.kind,
                f.ends_at().as_secs_f64(),
                crate::values::Dur(observe)
            );
            (w, why)
        }
        None => (MIN_WINDOW, "the shortest window a round runs".to_string()),
    }
}

/// `d` in words for a person: `7m 12s`.
fn words(d: Duration) -> String {
    crate::values::Dur(Duration::from_secs(d.as_secs_f64().ceil() as u64)).to_string()
}

impl Plan {
    /// The plan for `space` on `sc`'s workload within `time`; Err (a usage error, exit 2) with
    /// the time it needs when `time` cannot measure every named strategy and 3 final trials.
    pub fn make(sc: &Scenario, space: Space, time: Duration) -> Result<Plan, UsageError> {
        let overhead = RUN_OVERHEAD + sc.warmup.0;
        let (min_window, min_window_why) = min_window(sc);
        let n = space.candidates;
        let named = space.named.min(n);
        let survivors = n.min(SURVIVORS);
        let rounds_needed = n > survivors;
        let baseline_in_round0 = rounds_needed && !space.baseline_named;
        let must = if rounds_needed {
            named + usize::from(baseline_in_round0)
        } else {
            0
        };
        let final_runs = |trials: usize| ((survivors + 1) * trials) as u32;
        let round0_window = |fw: Duration| (fw / 4).max(min_window);
        let need = |trials: usize, fw: Duration| {
            START
                + (round0_window(fw) + overhead) * must as u32
                + (fw + overhead) * final_runs(trials)
        };
        let team = sc.duration.0.max(min_window);
        // The final trials' share at the team's window is 60% of --time; the rounds share the
        // rest. A shorter window comes first, fewer trials only when even that cannot fit.
        let share = time.mul_f64(0.6);
        let mut preferred = team;
        if (team + overhead) * final_runs(FINAL_TRIALS) > share {
            preferred = (share / final_runs(FINAL_TRIALS))
                .saturating_sub(overhead)
                .max(min_window);
        }
        let mut chosen = None;
        'fit: for trials in (MIN_FINAL_TRIALS..=FINAL_TRIALS).rev() {
            let mut fw = preferred;
            loop {
                if need(trials, fw) <= time {
                    chosen = Some((trials, fw));
                    break 'fit;
                }
                if fw <= min_window {
                    break;
                }
                fw = fw.saturating_sub(SHRINK).max(min_window);
            }
        }
        let Some((final_trials, final_window)) = chosen else {
            let needed = need(MIN_FINAL_TRIALS, min_window);
            let who = if baseline_in_round0 {
                format!("the {named} named strategies and the baseline (cache-aside)")
            } else {
                format!("the {named} named strategies")
            };
            return Err(refusal(
                time,
                needed,
                (&who, must),
                (min_window, &min_window_why),
                (survivors, final_runs(MIN_FINAL_TRIALS)),
                overhead,
                !sc.faults.is_empty(),
            ));
        };
        let left = time.saturating_sub(need(final_trials, final_window));
        let rounds = if rounds_needed {
            halving(
                (n, named, survivors),
                round0_window(final_window),
                final_window,
                overhead,
                left,
            )
        } else {
            Vec::new()
        };
        let mut p = Plan {
            rounds,
            survivors,
            final_window,
            final_trials,
            baseline_in_round0,
            estimate: Duration::ZERO,
            overhead,
            min_window,
            min_window_why,
        };
        p.estimate = START
            + p.rounds
                .iter()
                .map(|s| (s.window + overhead) * s.candidates as u32)
                .sum::<Duration>()
            + p.rounds
                .first()
                .filter(|_| baseline_in_round0)
                .map_or(Duration::ZERO, |s| s.window + overhead)
            + (final_window + overhead) * final_runs(final_trials);
        Ok(p)
    }

    /// A run's estimated cost besides its measured window.
    pub fn overhead(&self) -> Duration {
        self.overhead
    }

    /// Runs the plan makes.
    pub fn total_runs(&self) -> usize {
        self.rounds.iter().map(|s| s.candidates).sum::<usize>()
            + usize::from(self.baseline_in_round0)
            + (self.survivors + 1) * self.final_trials
    }

    /// The plan in words, printed before the first run.
    pub fn describe(
        &self,
        candidates: &[super::space::Candidate],
        objective: Metric,
        budgets: &[(Metric, f64)],
    ) -> String {
        let label = |c: &super::space::Candidate| c.label();
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
            candidates.iter().map(label).collect::<Vec<_>>().join(", ")
        );
        for (i, r) in self.rounds.iter().enumerate() {
            if i > 0 {
                s.push_str(&format!(
                    "  round {i}: {} candidates × 1 run of {:.1} s\n",
                    r.candidates,
                    r.window.as_secs_f64(),
                ));
                continue;
            }
            let named: Vec<String> = candidates
                .iter()
                .filter(|c| c.settings.is_empty())
                .map(label)
                .collect();
            let variants = candidates.len() - named.len();
            let ran_variants = r.candidates.saturating_sub(named.len());
            s.push_str(&format!(
                "  round 0: {} candidates × 1 run of {:.1} s: every named strategy ({}){}{}\n",
                r.candidates,
                r.window.as_secs_f64(),
                named.join(", "),
                match (variants, variants - ran_variants) {
                    (0, _) => String::new(),
                    (v, 0) => format!(" and all {v} settings variants"),
                    (v, cut) => format!(
                        " and {ran_variants} of {v} settings variants ({cut} cut up front: out of time, never measured)"
                    ),
                },
                if self.baseline_in_round0 {
                    ", and the baseline (cache-aside) once beside them"
                } else {
                    ""
                }
            ));
        }
        s.push_str(&format!(
            "  final: {} survivors and {} × {} trials of {:.1} s{}; estimate {:.0} s (runs cost ~{:.1} s each besides their window; no window is shorter than {:.1} s: {})",
            self.survivors,
            match candidates.first() {
                Some(c) if super::space::is_app(&c.strategy) => "the app at its defaults",
                _ => "cache-aside",
            },
            self.final_trials,
            self.final_window.as_secs_f64(),
            if self.final_trials < FINAL_TRIALS {
                format!(" (fewer than {FINAL_TRIALS}: --time is short)")
            } else {
                String::new()
            },
            self.estimate.as_secs_f64(),
            self.overhead.as_secs_f64(),
            self.min_window.as_secs_f64(),
            self.min_window_why
        ));
        s
    }
}

/// Why `time` cannot hold the search, with the time it needs.
fn refusal(
    time: Duration,
    needed: Duration,
    (who, must): (&str, usize),
    (min_window, why): (Duration, &str),
    (survivors, final_runs): (usize, u32),
    overhead: Duration,
    faulted: bool,
) -> UsageError {
    UsageError::new(format!(
        "--time {} is too short to measure every named strategy before deciding: round 0 runs {who} once each ({must} run(s) of {:.1} s, the shortest window that gives every figure: {why}), then {MIN_FINAL_TRIALS} final trials of {} and the baseline at that window ({final_runs} runs); with the servers' start and ~{:.1} s per run besides its window that needs {}. Give --time {} or more, or name fewer strategies with --strategies{}",
        words(time),
        min_window.as_secs_f64(),
        if survivors == 1 {
            "the survivor".to_string()
        } else {
            format!("the {survivors} survivors")
        },
        overhead.as_secs_f64(),
        words(needed),
        words(needed),
        if faulted {
            ", or a shorter --observe"
        } else {
            ""
        }
    ))
}

/// The rounds in `left`: round 0 runs every named strategy (its time already counted), then as
/// many settings variants as fit; later rounds run only when they can cut (the better half of
/// what is left), else the last round's best go to the final trials.
fn halving(
    (n, named, survivors): (usize, usize, usize),
    window: Duration,
    final_window: Duration,
    overhead: Duration,
    mut left: Duration,
) -> Vec<Step> {
    let mut rounds = Vec::new();
    let each = window + overhead;
    let extra = ((left.as_secs_f64() / each.as_secs_f64()).floor() as usize).min(n - named);
    left = left.saturating_sub(each * extra as u32);
    let run = named + extra;
    rounds.push(Step {
        candidates: run,
        window,
    });
    let mut alive = run.div_ceil(2).max(survivors);
    let mut window = (window * 2).min(final_window);
    while alive > survivors {
        let each = window + overhead;
        let fit = (left.as_secs_f64() / each.as_secs_f64()).floor() as usize;
        if fit <= survivors {
            break;
        }
        let run = alive.min(fit);
        left = left.saturating_sub(each * run as u32);
        rounds.push(Step {
            candidates: run,
            window,
        });
        alive = run.div_ceil(2).max(survivors);
        window = (window * 2).min(final_window);
    }
    rounds
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

    fn space(candidates: usize, named: usize) -> Space {
        Space {
            candidates,
            named,
            baseline_named: false,
        }
    }

    #[test]
    fn the_final_trials_are_reserved_and_rounds_halve() {
        let p = Plan::make(&sc(10), space(20, 4), Duration::from_secs(600)).unwrap();
        assert_eq!(p.survivors, 3);
        assert_eq!(
            (p.final_window, p.final_trials),
            (Duration::from_secs(10), 5)
        );
        assert_eq!(p.rounds[0].candidates, 20);
        assert_eq!(p.rounds[0].window, Duration::from_millis(2500));
        assert!(p.baseline_in_round0);
        assert_eq!(p.rounds[1].candidates, 10);
        assert!(p.estimate <= Duration::from_secs(600), "{p:?}");
    }

    #[test]
    fn a_short_time_shortens_the_final_window_and_cuts_variants_never_named_strategies() {
        let p = Plan::make(&sc(10), space(30, 6), Duration::from_secs(90)).unwrap();
        assert!(p.final_window < Duration::from_secs(10));
        assert!(p.final_window >= Duration::from_secs(1));
        assert!(p.rounds[0].candidates < 30, "{p:?}");
        assert!(
            p.rounds[0].candidates >= 6,
            "every named strategy runs: {p:?}"
        );
        assert!(p.estimate <= Duration::from_secs(90), "{p:?}");
    }

    /// The search: five strategies named on a 20 s window with a drop at 4 s and a
    /// 10 s observation in 6 minutes: the reserve shrinks to 4 trials so that all five run.
    #[test]
    fn the_reserve_shrinks_before_a_named_strategy_is_cut_and_too_little_time_is_refused() {
        let mut s = sc(20);
        s.faults = vec![crate::fault::parse("drop-cache@4s,fraction=100%").unwrap()];
        let sp = Space {
            candidates: 40,
            named: 5,
            baseline_named: true,
        };
        let p = Plan::make(&s, sp, Duration::from_secs(360)).unwrap();
        assert_eq!(p.final_window, Duration::from_secs(15), "{p:?}");
        assert!(p.final_trials < 5 && p.final_trials >= 3, "{p:?}");
        assert!(p.rounds[0].candidates >= 5, "{p:?}");
        assert!(!p.baseline_in_round0, "cache-aside is named");
        assert!(p.estimate <= Duration::from_secs(360), "{p:?}");
        let e = Plan::make(&s, sp, Duration::from_secs(120)).unwrap_err().0;
        // 5 s + 5 × 15.6 s + 4 × 3 × 15.6 s = 270.4 s.
        assert!(
            e.contains("needs 4m 31s") && e.contains("--time 4m 31s"),
            "{e}"
        );
        assert!(e.contains("the drop-cache ending at 4.0 s"), "{e}");
    }

    #[test]
    fn few_candidates_go_straight_to_the_final_trials() {
        let p = Plan::make(&sc(2), space(3, 3), Duration::from_secs(60)).unwrap();
        assert!(p.rounds.is_empty() && !p.baseline_in_round0, "{p:?}");
    }
}
