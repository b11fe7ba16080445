//! `stampede advise`: the configuration to adopt, searched. The team states the figure to
//! minimise and the budgets it cannot break (thresholds); the workload is theirs and never
//! varies. Candidates ([`space`]) run in rounds of successive halving — short windows (the
//! same rates and keys, only the measured window shorter) for all, then longer ones for the
//! better half — and the survivors with the baseline (cache-aside at the team's settings) run
//! repeated full-window trials that decide the answer ([`judge`]). Every named strategy (and
//! the baseline) is measured in round 0 before anything is cut, beside the final trials'
//! reserve; a `--time` that cannot hold both is refused before a server starts ([`plan`]).
//! Settings variants that do not fit are never measured, and the answer says so; a search
//! stopped before its final trials were done is `undecided`. The whole search stays within
//! `--time`; a fault the scenario names runs in every round. With `--target`, the candidates
//! are the app's own settings ([`app`]), the app started again for each run.

pub mod adopt;
pub mod app;
pub mod judge;
pub mod plan;
pub mod space;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{EXIT_FAILED_CHECK, UsageError};
use crate::metric::Metric;
use crate::report::sink::{write_result, write_text};
use crate::results::summary::CompareSummary;
use crate::results::{RunResult, read_json};
use crate::scenario::Scenario;
use crate::session::{Env, Progress, Status, run_on, shutdown_on_signals};
use crate::strategy::{Knob, Library};
use judge::Verdict;
use plan::Plan;
use space::Candidate;

/// One round of the search as it went: its window, who ran, who went on, who was cut.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Round {
    /// 0, 1, …; `final` rounds are the repeated trials.
    pub round: String,
    pub window_s: f64,
    pub trials: usize,
    pub ran: Vec<String>,
    pub kept: Vec<String>,
    /// Left out, and why (out of time, the worse half, a budget broken).
    pub cut: Vec<String>,
}

/// What the answer rests on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Evidence {
    pub candidates: usize,
    /// Runs the answer rests on (read back with --resume included).
    pub runs: usize,
    /// Of `runs`, those read back from --out with --resume instead of run again.
    pub read_back: usize,
    pub final_trials: usize,
    pub seconds: f64,
    pub rounds: Vec<Round>,
    /// Candidates no round ran (cut up front for time, or the search stopped first): the
    /// verdict holds among the others only.
    #[serde(default)]
    pub never_measured: Vec<String>,
}

/// advise.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Advice {
    pub schema: u32,
    pub tool_version: String,
    /// The answer in sentences.
    pub text: String,
    /// Stopped early (Ctrl-C, or `--time` ran out before the final trials): what was decided
    /// so far.
    pub interrupted: bool,
    pub minimize: String,
    pub budgets: Vec<(String, f64)>,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub evidence: Evidence,
    /// The recommendation in the terms of `--for`'s library, or what it cannot express.
    pub adoption: Option<String>,
}

/// The scenario of a candidate (its strategy, its settings moved), resolved as `run` resolves
/// the team's scenario file and flags.
pub type Resolver = Box<dyn Fn(&Candidate) -> Result<Scenario, UsageError> + Send + Sync>;

/// What `advise` is asked, typed and checked by the command from its flags.
pub struct AdvicePlan {
    /// The figure to make as low as possible (`--minimize`).
    pub minimize: String,
    /// The strategies searched: `--strategies`, else [`space::default_strategies`].
    pub strategies: Vec<String>,
    /// `--vary NAME=VALUES`.
    pub vary: Vec<String>,
    /// The settings searched, as declared with them.
    pub knobs: Vec<Knob>,
    /// Longest the whole search may take.
    pub time: Duration,
    pub out: Option<PathBuf>,
    pub resume: bool,
    /// The library whose terms the answer is written in (`--for`).
    pub library: Option<Library>,
    pub ci_out: Option<PathBuf>,
    /// How `run` reads a scenario file, for the one `--ci-out` writes.
    pub file: adopt::FileSettings,
    pub quiet: bool,
    /// Print the plan (or the refusal) and stop before a server starts.
    pub plan_only: bool,
    pub resolve: Resolver,
    /// `--target`: the app's own settings searched instead of the built-in strategies.
    pub app: Option<app::AppSearch>,
}

/// Where each run's file goes under `--out`.
fn run_path(dir: &Path, round: &str, c: &Candidate, t: usize) -> PathBuf {
    dir.join("runs")
        .join(round)
        .join(c.slug())
        .join(format!("trial-{}.json", t + 1))
}

/// Runs candidates on one set of servers: each run written under `--out`, read back instead
/// of run again with `--resume`.
struct Runner<'a> {
    env: Env,
    resolve: &'a Resolver,
    out: Option<PathBuf>,
    resume: bool,
    shutdown: CancellationToken,
    bar: ProgressBar,
    runs: usize,
    /// Runs read back from --out under --resume instead of run again.
    read_back: usize,
    deadline: Instant,
    /// `--target` with two settings or more: round 0 keeps a place for the cross of their
    /// best values, run once the round has run each alone ([`Runner::cross`]).
    cross: bool,
    /// What each candidate's last run cost besides its window, measured: a run that never
    /// came back drains its piled-up requests for tens of seconds, which no plan made before
    /// the first run can know. Every later decision on time reads it.
    spent: std::collections::HashMap<String, Duration>,
    /// The plan's cost of a run besides its window, for a candidate not run yet.
    overhead: Duration,
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

/// The figure `--minimize` names: one of the metric list's lower-is-better figures.
pub fn objective_of(name: &str) -> Result<Metric, UsageError> {
    Metric::by_name(name)
        .filter(|m| m.def().better == crate::metric::Better::Lower)
        .ok_or_else(|| {
            UsageError::new(format!(
                "--minimize {}: not a lower-is-better figure of the metric list; one of {}",
                name,
                crate::metric::DEFS
                    .iter()
                    .filter(|d| d.better == crate::metric::Better::Lower)
                    .map(|d| d.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The search's inputs, every setting checked before a server starts.
struct Prepared {
    candidates: Vec<Candidate>,
    /// Cache-aside at the team's settings.
    baseline: Candidate,
    /// The workload as the team runs it, with the baseline's strategy.
    base_sc: Scenario,
}

fn prepare(plan: &AdvicePlan) -> Result<Prepared> {
    if let Some(a) = &plan.app {
        let baseline = app::AppSearch::baseline();
        let base_sc = (plan.resolve)(&baseline)?;
        let mut candidates = a.candidates();
        for c in &candidates {
            (plan.resolve)(c)
                .map_err(|e| UsageError::new(format!("candidate {}: {e}", c.label())))?;
        }
        candidates.dedup();
        return Ok(Prepared {
            candidates,
            baseline,
            base_sc,
        });
    }
    let baseline = Candidate {
        strategy: "cache-aside".to_string(),
        settings: Vec::new(),
    };
    let base_sc = (plan.resolve)(&baseline)?;
    if base_sc.target.is_some() {
        return Err(UsageError::new(
            "the scenario names an app under test: search its own settings with advise --target URL --app-cmd CMD --app-setting NAME=VALUES",
        )
        .into());
    }
    let faulted = !base_sc.faults.is_empty();
    let all = space::candidates(&plan.strategies, &plan.vary, &plan.knobs, faulted)?;
    // A declared search value this workload refuses (an L1 larger than its limit …) is left
    // out; what the user asked for (a strategy, a --vary) is an error.
    let varied: Vec<String> = plan
        .vary
        .iter()
        .filter_map(|v| crate::scenario::sweep::axes::parse(v).ok().map(|a| a.flag))
        .collect();
    let mut candidates = Vec::with_capacity(all.len());
    for c in all {
        match (plan.resolve)(&c) {
            Ok(_) => candidates.push(c),
            Err(_)
                if !c.settings.is_empty()
                    && !c.settings.iter().any(|(k, _)| varied.contains(k)) => {}
            Err(e) => return Err(UsageError::new(format!("candidate {}: {e}", c.label())).into()),
        }
    }
    Ok(Prepared {
        candidates,
        baseline,
        base_sc,
    })
}

/// The bar that says where the search is (hidden under --quiet).
fn progress_bar(quiet: bool, runs: usize) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(runs as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "advise [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta} {msg}",
    ) {
        b.set_style(style.progress_chars("=> "));
    }
    b
}

/// `stampede advise`.
pub async fn run(cmd: AdvicePlan) -> Result<ExitCode> {
    let started = Instant::now();
    let objective = objective_of(&cmd.minimize)?;
    let Prepared {
        candidates,
        baseline,
        base_sc,
    } = prepare(&cmd)?;
    let budgets: Vec<(Metric, f64)> = base_sc.thresholds.iter().collect();
    if cmd.app.is_some() {
        app::refuse_unmeasured(objective, &budgets)?;
    }
    let crosses = cmd.app.as_ref().is_some_and(app::AppSearch::crosses);
    let space = plan::Space {
        candidates: candidates.len() + usize::from(crosses),
        named: candidates.iter().filter(|c| c.settings.is_empty()).count(),
        baseline_named: candidates.contains(&baseline),
    };
    // Without an app to start, the plan (or the refusal) comes before any server does.
    if cmd.app.is_none() {
        let plan = Plan::make(&base_sc, space, cmd.time)?;
        if cmd.plan_only {
            println!("{}", plan.describe(&candidates, objective, &budgets));
            return Ok(ExitCode::SUCCESS);
        }
    }
    let status = Status::new(cmd.quiet);
    if let Some(dir) = &cmd.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    let shutdown = shutdown_on_signals();
    // An app under test is started again for every run, on a freshly seeded schema: that
    // cost, measured once on these servers before the plan, is part of every run's.
    let (env, plan_sc) = match &cmd.app {
        Some(_) => {
            let (env, sc) = app::measure_start(&base_sc, &status, &shutdown).await?;
            (Some(env), sc)
        }
        None => (None, base_sc.clone()),
    };
    let plan = match Plan::make(&plan_sc, space, cmd.time) {
        Ok(p) => p,
        Err(e) => {
            if let Some(mut env) = env {
                env.stop();
            }
            return Err(e.into());
        }
    };
    let described = plan.describe(&candidates, objective, &budgets);
    if cmd.plan_only {
        if let Some(mut env) = env {
            env.stop();
        }
        println!("{described}");
        return Ok(ExitCode::SUCCESS);
    }
    status.line(&described);
    if crosses {
        status.line("  round 0 also runs the app's settings crossed, each at its best value there (when that beat the defaults)");
    }
    let env = match env {
        Some(e) => e,
        None => Env::start(&base_sc, &status).await?,
    };
    let mut runner = Runner {
        env,
        resolve: &cmd.resolve,
        out: cmd.out.clone(),
        resume: cmd.resume,
        shutdown: shutdown.clone(),
        bar: progress_bar(cmd.quiet, plan.total_runs()),
        runs: 0,
        read_back: 0,
        deadline: started + cmd.time,
        cross: crosses,
        spent: Default::default(),
        overhead: plan.overhead(),
    };
    let searched = search(
        &mut runner,
        &plan,
        &candidates,
        &baseline,
        objective,
        &budgets,
    )
    .await;
    runner.bar.finish_and_clear();
    runner.env.stop();
    let (finals, base_trials, rounds, stopped) = searched?;
    let never_measured = unmeasured(&candidates, &rounds);
    let why_stopped = if shutdown.is_cancelled() {
        "Ctrl-C"
    } else {
        "--time ran out"
    };
    let (verdict, text) = decide(
        (&finals, base_trials.as_ref()),
        (objective, &budgets),
        (candidates.len(), &never_measured),
        stopped.then_some(why_stopped),
    );
    let rec_run = verdict.recommended.as_ref().and_then(|p| {
        finals
            .iter()
            .find(|(c, _)| c.label() == p.label)
            .and_then(|(_, t)| t.first())
    });
    let adoption = match (cmd.library, &verdict.recommended, rec_run) {
        (Some(lib), Some(p), Some(r)) => {
            // What the library can express instead is looked for among the final trials.
            let measured: Vec<_> = finals.iter().chain(base_trials.as_ref()).collect();
            Some(adopt::adopt(lib, p, r, &measured).unwrap_or_else(|e| e))
        }
        _ => None,
    };
    let advice = Advice {
        schema: judge::ADVICE_SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        text,
        interrupted: stopped,
        minimize: objective.name().to_string(),
        budgets: budgets
            .iter()
            .map(|&(m, v)| (m.threshold_name().unwrap_or_default(), v))
            .collect(),
        verdict,
        evidence: Evidence {
            candidates: candidates.len(),
            runs: runner.runs + runner.read_back,
            read_back: runner.read_back,
            final_trials: rounds
                .iter()
                .find(|r| r.round == "final")
                .map_or(plan.final_trials, |r| r.trials),
            seconds: started.elapsed().as_secs_f64(),
            rounds,
            never_measured,
        },
        adoption,
    };
    println!("{}", render::terminal(&advice));
    if let Some(dir) = &cmd.out {
        let json = serde_json::to_string_pretty(&advice).context("encoding advise.json")?;
        write_text(&dir.join("advise.json"), &(json + "\n"))?;
        write_text(&dir.join("advise.md"), &render::markdown(&advice))?;
        write_final(dir, &finals, base_trials.as_ref())?;
    }
    // An undecided search has no answer to hold CI to.
    if let (Some(path), Some(p), Some(r), false) = (
        &cmd.ci_out,
        &advice.verdict.recommended,
        rec_run,
        advice.interrupted,
    ) {
        write_text(
            path,
            &adopt::ci_scenario(p, r, &cmd.file, objective, &budgets),
        )?;
        eprintln!("CI scenario written to {}", path.display());
    }
    Ok(if advice.verdict.verdict == "none-meets" {
        ExitCode::from(EXIT_FAILED_CHECK)
    } else {
        ExitCode::SUCCESS
    })
}

/// A candidate and its trials.
type Trials = (Candidate, Vec<RunResult>);

/// The candidates no round ran.
fn unmeasured(candidates: &[Candidate], rounds: &[Round]) -> Vec<String> {
    candidates
        .iter()
        .map(Candidate::label)
        .filter(|l| !rounds.iter().any(|r| r.ran.contains(l)))
        .collect()
}

/// The verdict and its sentences: among the measured when some candidates never were, and
/// `undecided` (with what was decided so far) when the search stopped (`stopped`: why)
/// before its final trials were done, never `none-meets` from trials that were not run.
fn decide(
    (finals, base): (&[Trials], Option<&Trials>),
    (objective, budgets): (Metric, &[(Metric, f64)]),
    (all, never): (usize, &[String]),
    stopped: Option<&str>,
) -> (Verdict, String) {
    let mut verdict = judge::judge(finals, base, objective, budgets);
    let partial = (!never.is_empty()).then_some((all - never.len(), all));
    let mut text = judge::sentence(&verdict, objective, partial);
    if let Some(why) = stopped {
        verdict.verdict = "undecided".to_string();
        text = format!(
            "Undecided: the search stopped ({why}) before its final trials were done. Decided so far, from the runs that finished: {text}"
        );
    }
    if !never.is_empty() {
        text.push_str(&format!(
            " Never measured ({} of {all} candidates, cut up front: out of time): {}.",
            never.len(),
            never.join(", ")
        ));
    }
    (verdict, text)
}

/// The final trials as a comparison directory (`stampede report DIR --html`).
fn write_final(
    dir: &Path,
    finals: &[(Candidate, Vec<RunResult>)],
    base: Option<&(Candidate, Vec<RunResult>)>,
) -> Result<()> {
    let fin = dir.join("final");
    let mut groups: Vec<Vec<RunResult>> = Vec::new();
    for (c, trials) in base.into_iter().chain(finals) {
        if trials.is_empty()
            || groups
                .iter()
                .any(|g| g[0].strategy == trials[0].strategy && c.settings.is_empty())
        {
            continue;
        }
        let mut g = Vec::new();
        for (t, r) in trials.iter().enumerate() {
            let mut r = r.clone();
            // Two candidates of one strategy are told apart by their settings.
            r.strategy = c.label().replace(' ', ",");
            write_result(
                &crate::report::sink::trial_path(&fin, &r.strategy, t as u32, trials.len() as u32),
                &r,
            )?;
            g.push(r);
        }
        groups.push(g);
    }
    let s = CompareSummary::build(String::new(), &groups, Vec::new(), false);
    let json = serde_json::to_string_pretty(&s).context("encoding the summary")?;
    write_text(&fin.join("summary.json"), &(json + "\n"))
}

type Searched = (
    Vec<(Candidate, Vec<RunResult>)>,
    Option<(Candidate, Vec<RunResult>)>,
    Vec<Round>,
    bool,
);

/// The rounds and the final trials.
async fn search(
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

mod render;
