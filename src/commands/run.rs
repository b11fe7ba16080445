//! `stampede run`: one strategy's run (or its trials, or one shard of a run), its result
//! written where `--out` and `--html` ask and its summary printed.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::RunCmd;
use crate::report::sink::{HtmlReport, ResultFile, Sinks, Terminal};
use crate::results;
use crate::session::Status;
use crate::session::trials::Output;
use crate::session::{self, Done};

pub async fn run(cmd: RunCmd) -> Result<ExitCode> {
    let status = Status::new(cmd.output.quiet);
    let (sc, plan) = crate::scenario::invocation::for_run(&cmd)?;
    let opts = session::Options {
        trials: super::trials(&cmd.trials),
        metrics_listen: cmd.metrics.metrics_listen,
        metrics_linger: cmd.metrics.metrics_linger,
        // With --repeat, --out is the directory compare writes, for one strategy.
        output: Output {
            dir: cmd.output.out.clone(),
            html: cmd.output.html.clone(),
            quiet: cmd.output.quiet,
        },
    };
    match session::run(sc, plan, &opts, |r| write_and_show(&cmd, r)).await? {
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
fn write_and_show(cmd: &RunCmd, result: &results::RunResult) -> Result<()> {
    let mut sinks = Sinks::default().with(Terminal {
        quiet: cmd.output.quiet,
        each: true,
    });
    if let Some(p) = &cmd.output.out {
        sinks = sinks.with(ResultFile {
            path: p.clone(),
            quiet: cmd.output.quiet,
        });
    }
    if let Some(p) = &cmd.output.html {
        sinks = sinks.with(HtmlReport {
            path: p.clone(),
            quiet: cmd.output.quiet,
        });
    }
    sinks.result(result, 0, 1)?;
    sinks.finish(std::slice::from_ref(result), None)
}
