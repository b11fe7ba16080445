//! `stampede compare`: several strategies on the same seeded workload, one after another on the
//! same servers, each with a fresh cache namespace and fresh DB counters, ranked; every trial
//! written as soon as it ends.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::CompareCmd;
use crate::session::Status;
use crate::session::trials::{Output, run_trials};

pub async fn run(cmd: CompareCmd) -> Result<ExitCode> {
    let scenarios = crate::scenario::compare::scenarios(&cmd)?;
    let out = Output {
        dir: cmd.out.clone(),
        html: cmd.html.clone(),
        quiet: cmd.quiet,
    };
    let ended = run_trials(&scenarios, super::trials(&cmd.trials), &out).await?;
    Ok(super::ending(
        ended.interrupted,
        &ended.broken,
        &Status::new(cmd.quiet),
        "the files cover the trials that ran (the last one in part)",
    ))
}
