//! `stampede run`: one strategy's run (or its trials, or one shard of a run), its result
//! written where `--out` and `--html` ask and its summary printed.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::RunCmd;
use crate::report;
use crate::results;
use crate::session::Status;
use crate::session::single::{self, Done};

pub async fn run(cmd: RunCmd) -> Result<ExitCode> {
    let status = Status::new(cmd.output.quiet);
    match single::run(&cmd, |r| write_and_show(&cmd, r, &status)).await? {
        Done::One(result) => Ok(super::ending(
            result.interrupted,
            &result.broken_thresholds(),
            &status,
            "the figures cover the part of the run that took place",
        )),
        Done::Trials(ended) => Ok(super::ending(
            ended.interrupted,
            &ended.broken,
            &status,
            "the files cover the trials that ran (the last one in part)",
        )),
    }
}

/// Write the result where `--out` and `--html` ask, and print its summary.
fn write_and_show(cmd: &RunCmd, result: &results::RunResult, status: &Status) -> Result<()> {
    if let Some(why) = results::check::unreliable(result) {
        eprintln!("warning: {why}");
    }
    if let Some(p) = &cmd.output.out {
        results::write_json(p, result)?;
    }
    if !cmd.output.quiet {
        print!("{}", report::terminal::summary(result));
        print!("{}", report::tables::thresholds(&result.thresholds));
    }
    if let Some(p) = &cmd.output.out {
        status.line(&format!("results written to {}", p.display()));
    }
    if let Some(p) = &cmd.output.html {
        report::html::write(std::slice::from_ref(result), p)?;
        status.line(&format!("HTML report written to {}", p.display()));
    }
    Ok(())
}
