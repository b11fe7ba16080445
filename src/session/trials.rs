//! Repeated trials of one or more scenarios on one set of servers, interleaved so drift in the
//! machine falls on every strategy alike. Every trial is written as soon as it ends and the
//! summary after each, so a later failure or a Ctrl-C loses nothing that ran.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::Progress;
use super::{Env, Status, run_on, shutdown_on_signals};
use crate::metric::Metric;
use crate::report::sink::{HtmlReport, Sinks, Terminal, TrialDir};
use crate::results::summary::CompareSummary;
use crate::results::{self, RunResult, cost};
use crate::scenario::Scenario;
use crate::stats;

/// Where a comparison's results go.
pub struct Output {
    pub dir: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub quiet: bool,
}

/// How a session of runs ended, for the command to turn into an exit code.
pub struct Ended {
    /// Ctrl-C (or SIGTERM) cut it short: the figures cover what took place.
    pub interrupted: bool,
    /// The broken thresholds, one line each (empty when none broke).
    pub broken: String,
}

impl Output {
    /// The sinks of a comparison: its table on the terminal, its directory, its HTML report.
    fn sinks(&self) -> Sinks {
        let mut sinks = Sinks::default().with(Terminal {
            quiet: self.quiet,
            each: false,
        });
        if let Some(dir) = &self.dir {
            sinks = sinks.with(TrialDir { dir: dir.clone() });
        }
        if let Some(path) = &self.html {
            sinks = sinks.with(HtmlReport {
                path: path.clone(),
                quiet: self.quiet,
            });
        }
        sinks
    }
}

/// Run `repeat` trials of every scenario, interleaved, on one set of servers; write each trial
/// as soon as it ends, and the summary after each; print the ranking and the trade-offs.
/// How many trials and whether they share a seed (`--repeat`, `--same-seed`).
#[derive(Debug, Clone, Copy)]
pub struct Trials {
    pub repeat: u32,
    pub same_seed: bool,
}

pub async fn run_trials(scenarios: &[Scenario], trials: Trials, out: &Output) -> Result<Ended> {
    if let Some(dir) = &out.dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(out.quiet);
    let mut sinks = out.sinks();
    let mut env = Env::start(&scenarios[0], &status).await?;
    let quiet = Progress {
        quiet: out.quiet,
        export: None,
    };
    let repeat = trials.repeat.max(1);
    let order = stats::interleaved_order(scenarios.len(), repeat as usize);
    let total = order.len();
    let mut done: Vec<Vec<RunResult>> = vec![Vec::new(); scenarios.len()];
    let mut failure = None;
    let mut summary = CompareSummary::build(String::new(), &[], Vec::new(), false);
    for (k, &(t, si)) in order.iter().enumerate() {
        if shutdown.is_cancelled() {
            break;
        }
        let mut sc = scenarios[si].clone();
        if !trials.same_seed {
            sc.seed = sc.seed.wrapping_add(t as u64);
        }
        let label = if repeat > 1 {
            format!(
                "{} (trial {}/{repeat}, seed {})",
                sc.label(),
                t + 1,
                sc.seed
            )
        } else {
            sc.label()
        };
        status.line(&format!("[{}/{total}] {label}", k + 1));
        let mut r = match run_on(&sc, &mut env, shutdown.clone(), &quiet, &status).await {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e.context(format!("running strategy {}", sc.label())));
                break;
            }
        };
        // The same trial's run without a cache, if it ran already, gives this run's L.
        if let Some(n) = no_cache_of(&done, t) {
            rebase(&mut r, n);
        }
        if let Some(why) = results::check::unreliable(&r) {
            eprintln!("warning ({label}): {why}");
        }
        status.line(&trial_line(k + 1, total, &label, &r));
        let interrupted = r.interrupted;
        if let Err(e) = sinks.result(&r, t as u32, repeat) {
            failure = Some(e);
            break;
        }
        let no_cache = cost::is_no_cache(&r);
        done[si].push(r);
        // Without a cache now: the same trial's caching runs that ran before take its L, and
        // their files are written again.
        if no_cache && let Err(e) = rebase_trial(&mut done, si, t, &mut sinks, repeat, &status) {
            failure = Some(e);
            break;
        }
        summary = summarize(scenarios, &done, interrupted || shutdown.is_cancelled());
        if let Err(e) = sinks.summary(&summary) {
            failure = Some(e);
            break;
        }
        if interrupted {
            break;
        }
    }
    env.stop();
    let ran = done.iter().any(|t| !t.is_empty());
    if failure.is_some() || shutdown.is_cancelled() {
        summary = summarize(scenarios, &done, true);
        if ran && let Err(e) = sinks.summary(&summary) {
            eprintln!("warning: {e:#}");
        }
    }
    // One line per strategy in the HTML report: its first trial (the scenario's own seed, the
    // same keys for every strategy) stands for it; the ranking has the medians.
    let shown: Vec<RunResult> = done.iter().filter_map(|t| t.first().cloned()).collect();
    if let Some(dir) = &out.dir
        && ran
    {
        status.line(&format!(
            "results written to {}/ ({} strategies × {repeat} trial(s), summary.json, summary.md)",
            dir.display(),
            done.iter().filter(|t| !t.is_empty()).count(),
        ));
    }
    if ran && let Err(e) = sinks.finish(&shown, Some(&summary)) {
        eprintln!("warning: {e:#}");
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let broken: String = done
        .iter()
        .flatten()
        .map(RunResult::broken_thresholds)
        .collect();
    Ok(Ended {
        interrupted: summary.interrupted,
        broken,
    })
}

/// A trial's line as it ends: its figures that decide, and what writes left.
fn trial_line(n: usize, total: usize, label: &str, r: &RunResult) -> String {
    format!(
        "[{}/{total}] {label}: {} DB calls, peak herd {}, hit rate {}, p99 {}{}{}{}",
        n,
        r.shown(Metric::DbCalls),
        r.shown(Metric::PeakKeyHerd),
        r.shown(Metric::HitRate),
        r.shown(Metric::P99),
        match r.cost.as_ref().and_then(|c| c.break_even_hit_rate) {
            Some(h) => format!(", break-even {:.1}%", h * 100.0),
            None => String::new(),
        },
        if r.scenario.writes.is_some() {
            format!(
                ", {} writes, {} left wrong, {} stale reads, {} divergent keys",
                r.db.writes,
                r.shown(Metric::WritesLeftWrongRatio),
                r.consistency.stale_reads,
                r.shown(Metric::DivergentKeys)
            )
        } else {
            String::new()
        },
        if r.interrupted { " [INTERRUPTED]" } else { "" }
    )
}

/// Trial `t`'s run without a cache, if one ran.
fn no_cache_of(done: &[Vec<RunResult>], t: usize) -> Option<&RunResult> {
    done.iter()
        .filter_map(|d| d.get(t))
        .find(|r| cost::is_no_cache(r))
}

/// Trial `t` of scenario `si` ran without a cache: every caching run of that trial done before
/// it takes its L for the break-even, and is written again.
/// Take `r`'s load time L from `no_cache` ([`cost::rebase`]) and, when that changed it, judge
/// the diagnoses again, as the break-even's moved.
fn rebase(r: &mut RunResult, no_cache: &RunResult) -> bool {
    if !cost::rebase(r, no_cache) {
        return false;
    }
    r.diagnoses = results::diagnose::diagnose(r);
    true
}

fn rebase_trial(
    done: &mut [Vec<RunResult>],
    si: usize,
    t: usize,
    sinks: &mut Sinks,
    repeat: u32,
    status: &Status,
) -> Result<()> {
    let Some(n) = done[si].get(t).cloned() else {
        return Ok(());
    };
    for r in done.iter_mut().filter_map(|d| d.get_mut(t)) {
        if !rebase(r, &n) {
            continue;
        }
        if let Some(line) = cost::line(r) {
            status.line(&format!("{}: {line}", r.strategy));
        }
        sinks.result(r, t as u32, repeat)?;
    }
    Ok(())
}

fn summarize(scenarios: &[Scenario], done: &[Vec<RunResult>], interrupted: bool) -> CompareSummary {
    let not_run = scenarios
        .iter()
        .zip(done)
        .filter(|(_, t)| t.is_empty())
        .map(|(s, _)| s.label())
        .collect();
    let workload = done
        .iter()
        .flatten()
        .next()
        .map(|r| crate::report::describe(&r.scenario).join(", "))
        .unwrap_or_default();
    CompareSummary::build(workload, done, not_run, interrupted)
}
