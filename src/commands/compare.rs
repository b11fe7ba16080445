//! `stampede compare`: several strategies on the same seeded workload, one after another on the
//! same servers, each with a fresh cache namespace and fresh DB counters, ranked by DB calls.
//! Every strategy's results are written as soon as it finishes, so a later failure or a
//! Ctrl-C loses nothing that ran.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::session::{Env, Status, run_on, shutdown_on_signals};
use crate::cli::{CompareCmd, OutputFlags, TrialFlags};
use crate::error::UsageError;
use crate::report::{self, markdown, tables};
use crate::results::summary::CompareSummary;
use crate::results::{self, RunResult};
use crate::scenario::{self, Scenario};
use crate::stats;
use crate::strategy::{PRESETS, StrategySpec};

/// The strategies named by `--strategies`: `all` for the presets, else a comma-separated list;
/// each parsed, duplicates (by canonical name) refused.
pub fn parse_list(list: &str) -> Result<Vec<String>, UsageError> {
    let names: Vec<&str> = if list.trim() == "all" {
        PRESETS.to_vec()
    } else {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    };
    if names.is_empty() {
        return Err(UsageError::new(
            "--strategies is empty: give a comma-separated list such as cache-aside,mutex, or all",
        ));
    }
    let mut canonical: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        let spec =
            StrategySpec::parse(n).map_err(|e| UsageError::new(format!("--strategies: {e}")))?;
        let c = spec.to_string();
        if canonical.contains(&c) {
            return Err(UsageError::new(format!(
                "--strategies names {c} twice: each strategy runs once"
            )));
        }
        canonical.push(c);
    }
    Ok(canonical)
}

/// The invalidations of `--invalidate` (a comma-separated list: a comparison axis), each
/// once; None when the flag is not given (the scenario file's, or the default, applies).
pub fn parse_invalidations(list: Option<&str>) -> Result<Option<Vec<String>>, UsageError> {
    let Some(list) = list else { return Ok(None) };
    let mut names: Vec<String> = Vec::new();
    for n in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let i =
            scenario::invalidation(n).map_err(|e| UsageError::new(format!("--invalidate: {e}")))?;
        if names.iter().any(|x| x == i.name()) {
            return Err(UsageError::new(format!(
                "--invalidate names {i} twice: each invalidation runs once"
            )));
        }
        names.push(i.name().to_string());
    }
    if names.is_empty() {
        return Err(UsageError::new(
            "--invalidate is empty: give a comma-separated list such as delete,versioned",
        ));
    }
    Ok(Some(names))
}

/// One scenario per strategy (and per invalidation, with `--invalidate a,b`: every pair,
/// strategy first): the file and flags with the strategy replaced, each validated before any
/// server starts (a strategy's defaults, such as the jitter preset's ±10%, apply).
fn scenarios(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    if !cmd.variant.is_empty() {
        return variants(cmd);
    }
    if cmd.target.target.is_some() {
        return Err(UsageError::new(
            "--strategies are the built-in app's: compare an app under test's own implementations with --variant NAME=ENV=VALUE (repeated)",
        ));
    }
    let invalidations = parse_invalidations(cmd.flags.invalidate.as_deref())?;
    let mut out = Vec::new();
    for name in parse_list(cmd.strategies.as_deref().unwrap_or_default())? {
        let axis: Vec<Option<String>> = match &invalidations {
            Some(v) => v.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for inv in axis {
            let mut flags = cmd.flags.clone();
            flags.strategy = Some(name.clone());
            if inv.is_some() {
                flags.invalidate = inv;
            }
            out.push(scenario::resolve(cmd.scenario.as_ref(), flags)?);
        }
    }
    Ok(out)
}

/// One scenario per `--variant`: the app under test started with that variant's environment.
fn variants(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    if cmd.target.target.is_none() || cmd.target.app_cmd.is_none() {
        return Err(UsageError::new(
            "--variant starts the app under test once per variant: give --target URL and --app-cmd CMD too",
        ));
    }
    let base = scenario::with_target(
        scenario::resolve(cmd.scenario.as_ref(), cmd.flags.clone())?,
        &cmd.flags,
        &cmd.target,
    )?;
    let mut out: Vec<Scenario> = Vec::with_capacity(cmd.variant.len());
    for v in &cmd.variant {
        let (name, env) = crate::target::parse_variant(v)?;
        if out.iter().any(|s| s.label() == name) {
            return Err(UsageError::new(format!(
                "--variant names {name} twice: each variant runs once"
            )));
        }
        let mut sc = base.clone();
        if let Some(t) = sc.target.as_mut() {
            t.variant = Some(name);
            t.app_env = env;
        }
        out.push(sc);
    }
    Ok(out)
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn write_summary(dir: &Path, s: &CompareSummary) -> Result<()> {
    let json = serde_json::to_string_pretty(s).context("encoding the summary")?;
    write_text(&dir.join("summary.json"), &(json + "\n"))?;
    write_text(&dir.join("summary.md"), &markdown::compare(s))
}

pub async fn run(cmd: CompareCmd) -> Result<ExitCode> {
    let scenarios = scenarios(&cmd)?;
    let out = Output {
        dir: cmd.out.clone(),
        html: cmd.html.clone(),
        quiet: cmd.quiet,
    };
    run_trials(&scenarios, cmd.trials, &out).await
}

/// Where a comparison's results go.
pub(super) struct Output {
    pub dir: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub quiet: bool,
}

/// Where trial `t` (from 0) of `strategy` is written: `<strategy>.json` for a single trial
/// (what `check` and the CI baseline read), `<strategy>/trial-N.json` for several.
fn trial_path(dir: &Path, strategy: &str, t: u32, repeat: u32) -> PathBuf {
    // A label `strategy/invalidation` names one file, not a directory.
    let strategy = strategy.replace('/', "@");
    let strategy = strategy.as_str();
    if repeat == 1 {
        dir.join(format!("{strategy}.json"))
    } else {
        dir.join(strategy).join(format!("trial-{}.json", t + 1))
    }
}

/// Run `repeat` trials of every scenario, interleaved, on one set of servers; write each trial
/// as soon as it ends, and the summary after each; print the ranking and the trade-offs.
pub(super) async fn run_trials(
    scenarios: &[Scenario],
    trials: TrialFlags,
    out: &Output,
) -> Result<ExitCode> {
    if let Some(dir) = &out.dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(out.quiet);
    let mut env = Env::start(&scenarios[0], &status).await?;
    let quiet = OutputFlags {
        out: None,
        html: None,
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
        let r = match run_on(&sc, &mut env, shutdown.clone(), &quiet, &status).await {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e.context(format!("running strategy {}", sc.label())));
                break;
            }
        };
        if let Some(why) = results::check::unreliable(&r) {
            eprintln!("warning ({label}): {why}");
        }
        status.line(&format!(
            "[{}/{total}] {label}: {} DB calls, peak herd {}, hit rate {:.1}%, p99 {:.2} ms{}{}",
            k + 1,
            r.db.calls,
            r.db.peak_key_herd,
            r.hit_rate * 100.0,
            r.latency_ms.p99,
            if r.scenario.writes.is_some() {
                format!(
                    ", {} writes, {} stale reads, {} divergent keys",
                    r.db.writes, r.consistency.stale_reads, r.consistency.divergent_keys
                )
            } else {
                String::new()
            },
            if r.interrupted { " [INTERRUPTED]" } else { "" }
        ));
        let interrupted = r.interrupted;
        if let Some(dir) = &out.dir
            && let Err(e) = results::write_json(&trial_path(dir, &r.strategy, t as u32, repeat), &r)
        {
            failure = Some(e);
            break;
        }
        done[si].push(r);
        summary = summarize(scenarios, &done, interrupted || shutdown.is_cancelled());
        if let Some(dir) = &out.dir
            && let Err(e) = write_summary(dir, &summary)
        {
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
        if let Some(dir) = &out.dir
            && ran
            && let Err(e) = write_summary(dir, &summary)
        {
            eprintln!("warning: {e:#}");
        }
    }
    if !out.quiet && ran {
        print!("{}", tables::compare(&summary));
    }
    if let Some(dir) = &out.dir
        && ran
    {
        status.line(&format!(
            "results written to {}/ ({} strategies × {repeat} trial(s), summary.json, summary.md)",
            dir.display(),
            done.iter().filter(|t| !t.is_empty()).count(),
        ));
    }
    if let Some(p) = &out.html
        && ran
    {
        // One line per strategy: its first trial (the scenario's own seed, the same keys for
        // every strategy) stands for it; the ranking has the medians.
        let shown: Vec<RunResult> = done.iter().filter_map(|t| t.first().cloned()).collect();
        match report::html::write(&shown, p) {
            Ok(()) => status.line(&format!("HTML report written to {}", p.display())),
            Err(e) => eprintln!("warning: {e:#}"),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let broken: String = done
        .iter()
        .flatten()
        .map(RunResult::broken_thresholds)
        .collect();
    Ok(super::ending(
        summary.interrupted,
        &broken,
        &status,
        "the files cover the trials that ran (the last one in part)",
    ))
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
        .map(|r| r.scenario.describe().join(", "))
        .unwrap_or_default();
    CompareSummary::build(workload, done, not_run, interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(parse_list("all").unwrap().len(), PRESETS.len());
        assert_eq!(
            parse_list("mutex, swr+mutex").unwrap(),
            vec!["mutex".to_string(), "swr+mutex".to_string()]
        );
        assert!(parse_list("mutex,mutex").is_err());
        assert!(parse_list("cache-aside,expire").is_err());
        assert!(parse_list("magic").is_err());
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn invalidation_lists() {
        assert_eq!(parse_invalidations(None).unwrap(), None);
        assert_eq!(
            parse_invalidations(Some("delete, versioned")).unwrap(),
            Some(vec!["delete".to_string(), "versioned".to_string()])
        );
        assert!(parse_invalidations(Some("delete,delete")).is_err());
        assert!(parse_invalidations(Some("purge")).is_err());
        assert!(parse_invalidations(Some(",")).is_err());
    }
}
