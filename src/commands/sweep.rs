//! `stampede sweep`: every strategy at every point of one or two axes of run flags (or the
//! boundary rate, bisected), each point a full run on a fresh cache and fresh counters; and
//! `stampede report` of a sweep's directory.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::SweepCmd;
use crate::report;
use crate::session::{self, Status};

pub async fn run(cmd: SweepCmd) -> Result<ExitCode> {
    let ended = session::sweep::run(&cmd).await?;
    Ok(super::ending(
        ended.interrupted,
        &ended.broken,
        &Status::new(cmd.quiet),
        "sweep.json covers the cells that finished; --resume runs the rest",
    ))
}

/// A sweep's directory: its maps as HTML with `--html`, else its summary.
pub fn report(dir: &Path, html: Option<&Path>) -> Result<ExitCode> {
    let doc = report::html::map::load(dir)?;
    match html {
        Some(p) => {
            report::html::map::write(&doc, p)?;
            eprintln!(
                "HTML report of the sweep in {} ({} cells) written to {}",
                dir.display(),
                doc.cells.len(),
                p.display()
            );
        }
        None => print!("{}", report::sweep::text(&doc)),
    }
    Ok(ExitCode::SUCCESS)
}
