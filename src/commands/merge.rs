//! `stampede merge`: the shards' results of one sharded run, read from files or directories,
//! merged into one result (see `results::merge`), written, summarized and judged against the
//! scenario's thresholds like any run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::MergeCmd;
use crate::error::{EXIT_FAILED_CHECK, UsageError};
use crate::report;
use crate::results::{self, RunResult};

/// The results files named, directories expanded to the shard results they hold.
fn read_inputs(inputs: &[PathBuf]) -> Result<Vec<(String, RunResult)>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading the directory {}", p.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                // A directory may hold other JSON (a merged result, a summary): only shards.
                if let Ok(r) = results::read_json(&f)
                    && r.shard.is_some()
                {
                    out.push((f.display().to_string(), r));
                }
            }
        } else {
            let r = results::read_json(p)?;
            out.push((p.display().to_string(), r));
        }
    }
    if out.is_empty() {
        return Err(UsageError::new(format!(
            "no shard results found in {}: give the files `run --shard I/N --out FILE` wrote, or the directory holding them",
            inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    Ok(out)
}

pub fn run(cmd: MergeCmd) -> Result<ExitCode> {
    let shards = read_inputs(&cmd.inputs)?;
    let n = shards.len();
    let merged = results::merge::merge(shards, cmd.allow_missing)?;
    report::sink::write_result(&cmd.out, &merged)?;
    if !cmd.quiet {
        print!("{}", report::terminal::summary(&merged));
        print!("{}", report::tables::thresholds(&merged.thresholds));
    }
    let m = merged.merged.as_ref();
    eprintln!(
        "merged {n} shard result(s) of run {}{} into {}",
        m.map_or("", |m| m.run_id.as_str()),
        match m {
            Some(m) if m.partial =>
                format!(" (PARTIAL: shards {:?} of {} missing)", m.missing, m.count),
            _ => String::new(),
        },
        cmd.out.display()
    );
    let broken = merged.broken_thresholds();
    eprint!("{broken}");
    Ok(if broken.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED_CHECK)
    })
}
