//! `stampede compare`: several strategies on the same seeded workload, one after another on the
//! same servers, each with a fresh cache namespace and fresh DB counters, ranked by DB calls.
//! Every strategy's results are written as soon as it finishes, so a later failure or a
//! Ctrl-C loses nothing that ran.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::session::{Env, Status, run_on, shutdown_on_signals};
use crate::cli::{CompareCmd, OutputFlags};
use crate::error::UsageError;
use crate::report::{self, markdown, tables};
use crate::results::summary::CompareSummary;
use crate::results::{self, RunResult};
use crate::scenario::{self, Scenario};
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

/// One scenario per strategy: the file and flags with the strategy replaced, each validated
/// before any server starts (a strategy's defaults, such as the jitter preset's ±10%, apply).
fn scenarios(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    parse_list(&cmd.strategies)?
        .into_iter()
        .map(|name| {
            let mut flags = cmd.flags.clone();
            flags.strategy = Some(name);
            scenario::resolve(cmd.scenario.as_ref(), flags)
        })
        .collect()
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
    if let Some(dir) = &cmd.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(cmd.quiet);
    let mut env = Env::start(&scenarios[0], &status).await?;
    let quiet = OutputFlags {
        out: None,
        html: None,
        quiet: cmd.quiet,
    };
    let n = scenarios.len();
    let mut done: Vec<RunResult> = Vec::with_capacity(n);
    let mut failure = None;
    let mut summary = CompareSummary::build(String::new(), &[], Vec::new(), false);
    for (i, sc) in scenarios.iter().enumerate() {
        if shutdown.is_cancelled() {
            break;
        }
        status.line(&format!("[{}/{n}] {}", i + 1, sc.strategy));
        let r = match run_on(sc, &mut env, shutdown.clone(), &quiet, &status).await {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e.context(format!("running strategy {}", sc.strategy)));
                break;
            }
        };
        if let Some(why) = results::check::unreliable(&r) {
            eprintln!("warning ({}): {why}", r.strategy);
        }
        status.line(&format!(
            "[{}/{n}] {}: {} DB calls, peak herd {}, hit rate {:.1}%, p99 {:.2} ms{}",
            i + 1,
            r.strategy,
            r.db.calls,
            r.db.peak_key_herd,
            r.hit_rate * 100.0,
            r.latency_ms.p99,
            if r.interrupted { " [INTERRUPTED]" } else { "" }
        ));
        let interrupted = r.interrupted;
        done.push(r);
        summary = summarize(&scenarios, &done, interrupted || shutdown.is_cancelled());
        if let Some(dir) = &cmd.out {
            let last = &done[done.len() - 1];
            if let Err(e) = results::write_json(&dir.join(format!("{}.json", last.strategy)), last)
                .and_then(|_| write_summary(dir, &summary))
            {
                failure = Some(e);
                break;
            }
        }
        if interrupted {
            break;
        }
    }
    env.stop();
    if failure.is_some() || shutdown.is_cancelled() {
        summary = summarize(&scenarios, &done, true);
        if let Some(dir) = &cmd.out
            && !done.is_empty()
            && let Err(e) = write_summary(dir, &summary)
        {
            eprintln!("warning: {e:#}");
        }
    }
    if !cmd.quiet && !done.is_empty() {
        print!("{}", tables::compare(&summary));
    }
    if let Some(dir) = &cmd.out
        && !done.is_empty()
    {
        status.line(&format!(
            "results written to {}/ ({} strategies, summary.json, summary.md)",
            dir.display(),
            done.len()
        ));
    }
    if let Some(p) = &cmd.html
        && !done.is_empty()
    {
        match report::html::write(&done, p) {
            Ok(()) => status.line(&format!("HTML report written to {}", p.display())),
            Err(e) => eprintln!("warning: {e:#}"),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let broken: String = done.iter().map(RunResult::broken_thresholds).collect();
    Ok(super::ending(
        summary.interrupted,
        &broken,
        &status,
        "the files cover the strategies that ran (the last one in part)",
    ))
}

fn summarize(scenarios: &[Scenario], done: &[RunResult], interrupted: bool) -> CompareSummary {
    let not_run = scenarios
        .iter()
        .skip(done.len())
        .map(|s| s.strategy.to_string())
        .collect();
    let workload = done
        .first()
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
}
