//! `stampede trace-stats` and `stampede mrc`: read a trace (or draw a run's workload), print
//! its figures or its LRU miss-ratio curve (the work is `session::traces`).

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{MrcCmd, TraceStatsCmd};
use crate::scenario::trace as resolve;
use crate::session::traces;

pub fn stats(cmd: TraceStatsCmd) -> Result<ExitCode> {
    let (file, json) = resolve::for_trace_stats(&cmd);
    print!("{}", traces::trace_stats(&file, json)?);
    Ok(ExitCode::SUCCESS)
}

pub fn mrc(cmd: MrcCmd) -> Result<ExitCode> {
    print!("{}", traces::mrc(&resolve::for_mrc(&cmd)?)?);
    Ok(ExitCode::SUCCESS)
}
