//! `stampede run`: one strategy, one session, the summary and the files it asked for.

use std::process::ExitCode;

use anyhow::Result;

use super::session::{Env, Status, run_on, shutdown_on_signals};
use crate::cli::RunCmd;
use crate::report;
use crate::results;
use crate::scenario;

pub async fn run(cmd: RunCmd) -> Result<ExitCode> {
    let sc = scenario::with_target(
        scenario::resolve(cmd.scenario.as_ref(), cmd.flags())?,
        &cmd.flags,
        &cmd.target,
    )?;
    if cmd.trials.repeat > 1 {
        if let Some(p) = &cmd.output.out
            && p.extension().is_some_and(|x| x == "json")
        {
            return Err(crate::error::UsageError::new(format!(
                "--out {} looks like a file, but with --repeat it is a directory that gets <strategy>/trial-N.json and summary.json: give a directory",
                p.display()
            ))
            .into());
        }
        // The same shape as compare writes, for one strategy.
        let out = super::compare::Output {
            dir: cmd.output.out.clone(),
            html: cmd.output.html.clone(),
            quiet: cmd.output.quiet,
        };
        return super::compare::run_trials(std::slice::from_ref(&sc), cmd.trials, &out).await;
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(cmd.output.quiet);
    let mut env = Env::start(&sc, &status).await?;
    let outcome = run_on(&sc, &mut env, shutdown.clone(), &cmd.output, &status).await;
    env.stop();
    let result = outcome?;
    if let Some(why) = results::check::unreliable(&result) {
        eprintln!("warning: {why}");
    }
    if let Some(p) = &cmd.output.out {
        results::write_json(p, &result)?;
    }
    if !cmd.output.quiet {
        print!("{}", report::terminal::summary(&result));
        print!("{}", report::tables::thresholds(&result.thresholds));
    }
    if let Some(p) = &cmd.output.out {
        status.line(&format!("results written to {}", p.display()));
    }
    if let Some(p) = &cmd.output.html {
        report::html::write(std::slice::from_ref(&result), p)?;
        status.line(&format!("HTML report written to {}", p.display()));
    }
    Ok(super::ending(
        result.interrupted,
        &result.broken_thresholds(),
        &status,
        "the figures cover the part of the run that took place",
    ))
}
