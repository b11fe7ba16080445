//! `stampede check`: read a result (or a `compare --out` directory) and its baseline, refuse
//! what cannot be compared or trusted, judge each pair ([`crate::results::check`]) and print
//! the verdicts; exit 1 on a regression.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{CheckCmd, CheckFormat};
use crate::error::{EXIT_FAILED_CHECK, EnvError, UsageError};
use crate::report;
use crate::results::check::{Comparison, judge, mismatches, tolerances, unreliable};
use crate::results::{self, RunResult};

fn read(path: &Path) -> Result<RunResult, UsageError> {
    results::read_json(path).map_err(|e| UsageError::new(format!("{e:#}")))
}

/// The results files of a `compare --out` directory, by strategy (file stem), sorted.
fn results_in(dir: &Path) -> Result<Vec<(String, PathBuf)>, UsageError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| UsageError::new(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut v: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            (stem != "summary").then_some((stem, p))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Files to compare: (baseline, current).
type Pairs = Vec<(PathBuf, PathBuf)>;

/// The pairs to compare, and notes on strategies present on one side only.
fn pairs(cmd: &CheckCmd) -> Result<(Pairs, Vec<String>), UsageError> {
    match (cmd.current.is_dir(), cmd.baseline.is_dir()) {
        (false, false) => Ok((vec![(cmd.baseline.clone(), cmd.current.clone())], vec![])),
        (true, true) => {
            let base = results_in(&cmd.baseline)?;
            let cur = results_in(&cmd.current)?;
            let mut notes = Vec::new();
            let mut v = Vec::new();
            for (name, b) in &base {
                match cur.iter().find(|(n, _)| n == name) {
                    Some((_, c)) => v.push((b.clone(), c.clone())),
                    None => notes.push(format!(
                        "{name}: in the baseline, not in {}",
                        cmd.current.display()
                    )),
                }
            }
            for (name, _) in cur
                .iter()
                .filter(|(n, _)| !base.iter().any(|(b, _)| b == n))
            {
                notes.push(format!(
                    "{name}: not in the baseline {}",
                    cmd.baseline.display()
                ));
            }
            if v.is_empty() {
                return Err(UsageError::new(format!(
                    "no strategy is in both {} and {}: nothing to compare (each should hold <strategy>.json files from `stampede compare --out`)",
                    cmd.current.display(),
                    cmd.baseline.display()
                )));
            }
            Ok((v, notes))
        }
        (cur_dir, _) => Err(UsageError::new(format!(
            "{} is a {} but the baseline {} is {}: compare a file with a file, or a `compare --out` directory with another",
            cmd.current.display(),
            if cur_dir { "directory" } else { "file" },
            cmd.baseline.display(),
            if cur_dir { "not" } else { "a directory" }
        ))),
    }
}

/// Compare, print, and say whether anything regressed.
pub fn run(cmd: CheckCmd) -> Result<ExitCode> {
    let tols = tolerances(&cmd.tolerance)?;
    let (pairs, notes) = pairs(&cmd)?;
    let mut comparisons = Vec::with_capacity(pairs.len());
    let mut refused = Vec::new();
    let mut unreliable_runs = Vec::new();
    for (b, c) in pairs {
        let (base, cur) = (read(&b)?, read(&c)?);
        let mut diff = mismatches(&base, &cur);
        for (p, r) in [(&b, &base), (&c, &cur)] {
            if let Some(why) = unreliable(r) {
                if cmd.force {
                    diff.push(format!("{}: {why}", p.display()));
                } else {
                    unreliable_runs.push(format!("{}: {why}", p.display()));
                }
            }
        }
        if !diff.is_empty() && !cmd.force {
            refused.push(format!(
                "{} vs baseline {}:\n    {}",
                c.display(),
                b.display(),
                diff.join("\n    ")
            ));
            continue;
        }
        comparisons.push(Comparison {
            strategy: cur.strategy.clone(),
            rows: judge(&base, &cur, &tols),
            current: c,
            baseline: b,
            forced: diff,
        });
    }
    if !refused.is_empty() {
        return Err(UsageError::new(format!(
            "refusing to compare results of different scenarios (add --force to compare anyway):\n  {}",
            refused.join("\n  ")
        ))
        .into());
    }
    if !unreliable_runs.is_empty() {
        return Err(EnvError(format!(
            "cannot judge (run again on a quieter machine, or add --force to judge anyway):\n  {}",
            unreliable_runs.join("\n  ")
        ))
        .into());
    }
    let text = match cmd.format {
        CheckFormat::Text => report::tables::check(&comparisons, &notes),
        CheckFormat::Markdown => report::markdown::check(&comparisons, &notes),
    };
    print!("{text}");
    if comparisons.iter().any(|c| c.regressions() > 0) {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    Ok(ExitCode::SUCCESS)
}
