//! `stampede sweep`: every strategy at every point of one or two axes of run flags (or the
//! boundary rate, bisected), each point a full run on a fresh cache and fresh counters; and
//! `stampede report` of a sweep's directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::SweepCmd;
use crate::report;
use crate::session::{self, Status};

pub async fn run(cmd: SweepCmd) -> Result<ExitCode> {
    let (plan, opts) = crate::scenario::sweep::plan(cmd)?;
    let quiet = opts.quiet;
    let ended = session::sweep::run(plan, &opts).await?;
    Ok(super::ending(
        ended.interrupted,
        &ended.broken,
        &Status::new(quiet),
        "sweep.json covers the cells that finished; --resume runs the rest",
    ))
}

/// Sweeps' directories (one, or the same sweep under other settings): their maps as HTML with
/// `--html`, else their summaries.
pub fn report(dirs: &[PathBuf], html: Option<&Path>) -> Result<ExitCode> {
    let docs = dirs
        .iter()
        .map(|d| report::html::map::load(d))
        .collect::<Result<Vec<_>>>()?;
    match html {
        Some(p) => {
            report::sink::write_text(p, &report::html::map::render(&docs)?)?;
            let cells: usize = docs.iter().map(|d| d.cells.len()).sum();
            eprintln!(
                "HTML report of {} sweep(s) ({cells} cells) written to {}",
                docs.len(),
                p.display()
            );
        }
        None => {
            for d in &docs {
                print!("{}", report::sweep::text(d));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
