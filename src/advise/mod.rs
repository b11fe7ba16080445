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
mod rounds;
pub mod space;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::error::{EXIT_FAILED_CHECK, UsageError};
use crate::metric::Metric;
use crate::report::sink::{write_result, write_text};
use crate::results::RunResult;
use crate::results::summary::CompareSummary;
use crate::scenario::Scenario;
use crate::session::{Env, Status, shutdown_on_signals};
use crate::strategy::{Knob, Library};
use judge::Verdict;
use plan::Plan;
use rounds::{Runner, search};
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
    let searched = searched?;
    let tally = Tally {
        candidates: &candidates,
        runs: runner.runs,
        read_back: runner.read_back,
        planned_trials: plan.final_trials,
        started,
        cancelled: shutdown.is_cancelled(),
    };
    conclude(&cmd, (objective, &budgets), searched, tally)
}

/// What the search counted besides its trials.
struct Tally<'a> {
    candidates: &'a [Candidate],
    runs: usize,
    read_back: usize,
    planned_trials: usize,
    started: Instant,
    /// Stopped by Ctrl-C (else by `--time`, when it stopped).
    cancelled: bool,
}

/// The answer from the search's trials: printed, written under `--out` (and `--ci-out`), and
/// the exit code (`none-meets` fails).
fn conclude(
    cmd: &AdvicePlan,
    (objective, budgets): (Metric, &[(Metric, f64)]),
    (finals, base_trials, rounds, stopped): rounds::Searched,
    tally: Tally<'_>,
) -> Result<ExitCode> {
    let candidates = tally.candidates;
    let never_measured = unmeasured(candidates, &rounds);
    let why_stopped = if tally.cancelled {
        "Ctrl-C"
    } else {
        "--time ran out"
    };
    let (verdict, text) = decide(
        (&finals, base_trials.as_ref()),
        (objective, budgets),
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
            runs: tally.runs + tally.read_back,
            read_back: tally.read_back,
            final_trials: rounds
                .iter()
                .find(|r| r.round == "final")
                .map_or(tally.planned_trials, |r| r.trials),
            seconds: tally.started.elapsed().as_secs_f64(),
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
            &adopt::ci_scenario(p, r, &cmd.file, objective, budgets),
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

mod render;
