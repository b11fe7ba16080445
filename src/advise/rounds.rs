//! The search's rounds on one set of servers: successive halving over short windows, then
//! the repeated final trials, each run written under `--out` and read back instead of run
//! again with `--resume`; no run starts that could not end before `--time` does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use tokio_util::sync::CancellationToken;

use crate::error::UsageError;
use crate::metric::Metric;
use crate::report::sink::write_result;
use crate::results::{RunResult, read_json};
use crate::scenario::Scenario;
use crate::session::{Env, Progress, Status, run_on};

use super::plan::{self, Plan};
use super::space::Candidate;
use super::{Resolver, Round, app, judge};

/// Where each run's file goes under `--out`.
fn run_path(dir: &Path, round: &str, c: &Candidate, t: usize) -> PathBuf {
    dir.join("runs")
        .join(round)
        .join(c.slug())
        .join(format!("trial-{}.json", t + 1))
}

/// Runs candidates on one set of servers: each run written under `--out`, read back instead
/// of run again with `--resume`.
pub(super) struct Runner<'a> {
    pub(super) env: Env,
    pub(super) resolve: &'a Resolver,
    pub(super) out: Option<PathBuf>,
    pub(super) resume: bool,
    pub(super) shutdown: CancellationToken,
    pub(super) bar: ProgressBar,
    pub(super) runs: usize,
    /// Runs read back from --out under --resume instead of run again.
    pub(super) read_back: usize,
    pub(super) deadline: Instant,
    /// `--target` with two settings or more: round 0 keeps a place for the cross of their
    /// best values, run once the round has run each alone ([`Runner::cross`]).
    pub(super) cross: bool,
    /// What each candidate's last run cost besides its window, measured: a run that never
    /// came back drains its piled-up requests for tens of seconds, which no plan made before
    /// the first run can know. Every later decision on time reads it.
    pub(super) spent: std::collections::HashMap<String, Duration>,
    /// The plan's cost of a run besides its window, for a candidate not run yet.
    pub(super) overhead: Duration,
}

impl Runner<'_> {
    /// What a run of `c` costs besides its window: measured, or the plan's estimate.
    fn overhead_of(&self, c: &Candidate) -> Duration {
        self.spent.get(&c.label()).copied().unwrap_or(self.overhead)
    }

    /// Time left before the deadline.
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The least time the final trials take, at the runs' measured costs: 3 trials of the
    /// baseline and of each survivor (the mean cost of the runs so far for those).
    fn finals_floor(&self, plan: &Plan, baseline: &Candidate) -> Duration {
        let mean = match self.spent.len() {
            0 => self.overhead,
            n => self.spent.values().sum::<Duration>() / n as u32,
        };
        let one = |o: Duration| plan.final_window + o;
        (one(self.overhead_of(baseline)) + one(mean) * plan.survivors as u32)
            * plan::MIN_FINAL_TRIALS as u32
    }

    /// The scenario of `c` with the measured window `window` and seed offset `t`.
    fn scenario(&self, c: &Candidate, window: Duration, t: usize) -> Result<Scenario, UsageError> {
        let mut sc = (self.resolve)(c)?;
        sc.duration = crate::values::Dur(window);
        sc.seed = sc.seed.wrapping_add(t as u64);
        Ok(sc)
    }

    /// One run of `c` (None when stopped or out of time before it started).
    async fn run(
        &mut self,
        round: &str,
        c: &Candidate,
        window: Duration,
        t: usize,
    ) -> Result<Option<RunResult>> {
        let path = self.out.as_ref().map(|d| run_path(d, round, c, t));
        if self.resume
            && let Some(p) = &path
            && p.is_file()
            && let Ok(r) = read_json(p)
            && !r.interrupted
        {
            self.bar.inc(1);
            self.read_back += 1;
            return Ok(Some(r));
        }
        // A run that could not end before the deadline is not started: the search ends
        // within --time.
        if self.shutdown.is_cancelled() || window + self.overhead_of(c) > self.left() {
            return Ok(None);
        }
        let began = Instant::now();
        let sc = self.scenario(c, window, t)?;
        self.bar.set_message(format!("{round}: {}", c.label()));
        // The bar says where the search is; each run's own lines would scroll it away.
        let r = run_on(
            &sc,
            &mut self.env,
            self.shutdown.clone(),
            &Progress::quiet(),
            &Status::new(true),
        )
        .await
        .with_context(|| format!("running {}", c.label()))?;
        self.spent
            .insert(c.label(), began.elapsed().saturating_sub(window));
        self.runs += 1;
        self.bar.inc(1);
        if r.interrupted {
            return Ok(None);
        }
        if let Some(p) = &path {
            write_result(p, &r)?;
        }
        Ok(Some(r))
    }
}

impl Runner<'_> {
    /// Round 0's cross of the app's settings ([`app::crossed`]), run once the round has run
    /// each setting alone; false when the search was stopped before it.
    async fn cross(
        &mut self,
        round: &str,
        window: Duration,
        ran: &mut Vec<(Candidate, RunResult)>,
        objective: Metric,
        budgets: &[(Metric, f64)],
    ) -> Result<bool> {
        let Some(c) = app::crossed(ran, objective, budgets) else {
            return Ok(true);
        };
        if ran.iter().any(|(r, _)| *r == c) {
            return Ok(true);
        }
        Ok(match self.run(round, &c, window, 0).await? {
            Some(r) => {
                ran.push((c, r));
                true
            }
            None => false,
        })
    }
}

pub(super) type Searched = (
    Vec<(Candidate, Vec<RunResult>)>,
    Option<(Candidate, Vec<RunResult>)>,
    Vec<Round>,
    bool,
);

/// The rounds and the final trials.
pub(super) async fn search(
    runner: &mut Runner<'_>,
    plan: &Plan,
    candidates: &[Candidate],
    baseline: &Candidate,
    objective: Metric,
    budgets: &[(Metric, f64)],
) -> Result<Searched> {
    let mut alive: Vec<Candidate> = candidates.to_vec();
    let mut rounds = Vec::new();
    let mut last: Vec<(Candidate, Vec<RunResult>)> = Vec::new();
    let mut base_round0: Option<(Candidate, Vec<RunResult>)> = None;
    let mut stopped = false;
    for (i, step) in plan.rounds.iter().enumerate() {
        if alive.len() <= plan.survivors {
            break;
        }
        let mut round = Round {
            round: format!("round-{i}"),
            window_s: step.window.as_secs_f64(),
            trials: 1,
            ..Round::default()
        };
        let crossing = i == 0 && runner.cross;
        let room = step.candidates.saturating_sub(usize::from(crossing));
        if alive.len() > room {
            for c in alive.drain(room..) {
                round
                    .cut
                    .push(format!("{} (out of time for round {i})", c.label()));
            }
        }
        let (mut ran, cut_short, base) =
            run_round(runner, (plan, i, step.window), &alive, baseline, &mut round).await?;
        stopped = cut_short;
        if let Some(r) = base {
            base_round0 = Some((baseline.clone(), vec![r]));
        }
        if crossing && !stopped {
            let name = round.round.clone();
            let before = ran.len();
            stopped = !runner
                .cross(&name, step.window, &mut ran, objective, budgets)
                .await?;
            round
                .ran
                .extend(ran[before..].iter().map(|(c, _)| c.label()));
        }
        if stopped {
            if !ran.is_empty() {
                last = ran.into_iter().map(|(c, r)| (c, vec![r])).collect();
            }
            rounds.push(round);
            return Ok((last, base_round0, rounds, true));
        }
        let keep = ran.len().div_ceil(2).max(plan.survivors);
        ran.sort_by(|a, b| {
            plan::rank(&a.1, objective, budgets)
                .total_cmp(&plan::rank(&b.1, objective, budgets))
                .then(a.0.simplicity().cmp(&b.0.simplicity()))
        });
        for (c, r) in ran.iter().skip(keep) {
            round.cut.push(format!(
                "{} ({} {})",
                c.label(),
                objective.name(),
                judge::show(objective, r.measured(objective).ok())
            ));
        }
        alive = ran.iter().take(keep).map(|(c, _)| c.clone()).collect();
        round.kept = alive.iter().map(Candidate::label).collect();
        last = ran.into_iter().map(|(c, r)| (c, vec![r])).collect();
        rounds.push(round);
    }
    alive.truncate(plan.survivors);
    // The final trials, interleaved so drift falls on every candidate alike; the baseline
    // runs with them unless it is a finalist.
    let with_base = !alive.iter().any(|c| c == baseline);
    let mut all: Vec<Candidate> = alive.clone();
    if with_base {
        all.push(baseline.clone());
    }
    let mut round = Round {
        round: "final".to_string(),
        window_s: plan.final_window.as_secs_f64(),
        trials: plan.final_trials,
        ran: all.iter().map(Candidate::label).collect(),
        kept: alive.iter().map(Candidate::label).collect(),
        cut: Vec::new(),
    };
    let (done, cut) = final_trials(runner, plan, &all, &mut round).await?;
    if cut {
        stopped = true;
        round
            .cut
            .push("the final trials were cut short (Ctrl-C or --time)".to_string());
    }
    rounds.push(round);
    let mut finals: Vec<(Candidate, Vec<RunResult>)> = all.into_iter().zip(done).collect();
    let base = if with_base {
        finals.pop()
    } else {
        finals.iter().find(|(c, _)| c == baseline).cloned()
    };
    // Cut before the baseline's first final trial: its round-0 run says what was seen.
    let base = match base {
        Some((_, t)) if t.is_empty() => base_round0,
        b => b,
    };
    // Cut short before any final trial: the last round's single runs are what was decided.
    if finals.iter().all(|(_, t)| t.is_empty()) && !last.is_empty() {
        return Ok((last, base, rounds, true));
    }
    Ok((finals, base, rounds, stopped))
}

/// One round's runs, each candidate once, in order; in round 0 the baseline too (once, beside
/// the candidates, not ranked with them: a search cut short still says what doing nothing
/// costs), and a settings variant only when the final trials' least time at the runs'
/// measured costs stays after it. Also true when the search stopped (Ctrl-C, or no time).
async fn run_round(
    runner: &mut Runner<'_>,
    (plan, i, window): (&Plan, usize, Duration),
    alive: &[Candidate],
    baseline: &Candidate,
    round: &mut Round,
) -> Result<(Vec<(Candidate, RunResult)>, bool, Option<RunResult>)> {
    let name = round.round.clone();
    let mut ran: Vec<(Candidate, RunResult)> = Vec::new();
    for c in alive {
        if i == 0
            && !c.settings.is_empty()
            && runner.left() < window + runner.overhead_of(c) + runner.finals_floor(plan, baseline)
        {
            round.cut.push(format!(
                "{} (out of time: runs took longer than planned, and the final trials come first)",
                c.label()
            ));
            continue;
        }
        match runner.run(&name, c, window, 0).await? {
            Some(r) => ran.push((c.clone(), r)),
            None => {
                round.ran = ran.iter().map(|(c, _)| c.label()).collect();
                return Ok((ran, true, None));
            }
        }
    }
    round.ran = ran.iter().map(|(c, _)| c.label()).collect();
    if i > 0 || !plan.baseline_in_round0 {
        return Ok((ran, false, None));
    }
    match runner.run(&name, baseline, window, 0).await? {
        Some(r) => {
            round.ran.push(format!("{} (baseline)", baseline.label()));
            Ok((ran, false, Some(r)))
        }
        None => Ok((ran, true, None)),
    }
}

/// The final trials of `all`, interleaved so drift falls on every candidate alike; true when
/// they were cut short (Ctrl-C, or no time for the next run).
async fn final_trials(
    runner: &mut Runner<'_>,
    plan: &Plan,
    all: &[Candidate],
    round: &mut Round,
) -> Result<(Vec<Vec<RunResult>>, bool)> {
    // Fewer trials (never below 3) when the runs so far cost more than planned.
    let per_trial: Duration = all
        .iter()
        .map(|c| plan.final_window + runner.overhead_of(c))
        .sum();
    let fit = (runner.left().as_secs_f64() / per_trial.as_secs_f64().max(1e-3)).floor() as usize;
    round.trials = fit.clamp(plan::MIN_FINAL_TRIALS, plan.final_trials);
    if round.trials < plan.final_trials {
        round.cut.push(format!(
            "{} of the {} planned trials (runs took longer than planned; {} run)",
            plan.final_trials - round.trials,
            plan.final_trials,
            round.trials
        ));
    }
    let mut done: Vec<Vec<RunResult>> = vec![Vec::new(); all.len()];
    for t in 0..round.trials {
        for (k, c) in all.iter().enumerate() {
            match runner.run("final", c, plan.final_window, t).await? {
                Some(r) => done[k].push(r),
                None => return Ok((done, true)),
            }
        }
    }
    Ok((done, false))
}
