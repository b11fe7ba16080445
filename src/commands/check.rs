//! `stampede check`: read a result (or a `compare --out` directory) and its baseline, refuse
//! what cannot be compared or trusted, judge each pair ([`crate::results::check`]) and print
//! the verdicts; exit 1 on a regression.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{CheckCmd, CheckFormat};
use crate::error::{EXIT_FAILED_CHECK, EXIT_USAGE, EnvError, UsageError};
use crate::report;
use crate::results::check::{Comparison, judge_trials, mismatches, tolerances, unreliable};
use crate::results::{self, RunResult};

fn read(path: &Path) -> Result<RunResult, UsageError> {
    results::read_json(path).map_err(|e| UsageError::new(format!("{e:#}")))
}

/// A strategy's results: one file, or the trials of `--repeat` (`<strategy>/trial-N.json`).
type Group = Vec<PathBuf>;

/// The results of a `compare --out` directory, by strategy, sorted: `<strategy>.json` files,
/// and `<strategy>/` directories of `trial-N.json` files.
fn results_in(dir: &Path) -> Result<Vec<(String, Group)>, UsageError> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| UsageError::new(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut v: Vec<(String, Group)> = Vec::new();
    for p in rd.filter_map(|e| e.ok().map(|e| e.path())) {
        let Some(name) = p.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if p.is_dir() {
            let mut trials: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| {
                    UsageError::new(format!("cannot read directory {}: {e}", p.display()))
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|t| {
                    t.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("trial-") && n.ends_with(".json"))
                })
                .collect();
            // trial-10 after trial-9.
            trials.sort_by_key(|t| {
                t.file_stem()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.trim_start_matches("trial-").parse::<u32>().ok())
                    .unwrap_or(u32::MAX)
            });
            if !trials.is_empty() {
                v.push((name, trials));
            }
        } else if let Some(stem) = name.strip_suffix(".json")
            && stem != "summary"
        {
            v.push((stem.to_string(), vec![p]));
        }
    }
    v.sort();
    Ok(v)
}

/// Groups to compare: (baseline, current).
type Pairs = Vec<(Group, Group)>;

/// The pairs to compare, and notes on strategies present on one side only.
fn pairs(cmd: &CheckCmd) -> Result<(Pairs, Vec<String>), UsageError> {
    match (cmd.current.is_dir(), cmd.baseline.is_dir()) {
        (false, false) => Ok((
            vec![(vec![cmd.baseline.clone()], vec![cmd.current.clone()])],
            vec![],
        )),
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
                    "no strategy is in both {} and {}: nothing to compare (each should hold <strategy>.json files or <strategy>/trial-N.json directories from `stampede compare --out`)",
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

fn read_group(g: &Group) -> Result<Vec<RunResult>, UsageError> {
    g.iter().map(|p| read(p)).collect()
}

fn label(g: &Group) -> PathBuf {
    match g.as_slice() {
        [one] => one.clone(),
        many => many[0]
            .parent()
            .map_or_else(|| many[0].clone(), Path::to_path_buf),
    }
}

/// Compare, print, and say whether anything regressed.
pub fn run(cmd: CheckCmd) -> Result<ExitCode> {
    let tols = tolerances(&cmd.tolerance)?;
    let (pairs, notes) = pairs(&cmd)?;
    let mut comparisons = Vec::with_capacity(pairs.len());
    let mut refused = Vec::new();
    let mut unreliable_runs = Vec::new();
    for (bg, cg) in pairs {
        let (bases, curs) = (read_group(&bg)?, read_group(&cg)?);
        let (b, c) = (label(&bg), label(&cg));
        let (base, cur) = (&bases[0], &curs[0]);
        let mut diff = mismatches(base, cur);
        for (g, rs) in [(&bg, &bases), (&cg, &curs)] {
            for (p, r) in g.iter().zip(rs.iter()) {
                if let Some(why) = unreliable(r) {
                    if cmd.force {
                        diff.push(format!("{}: {why}", p.display()));
                    } else {
                        unreliable_runs.push(format!("{}: {why}", p.display()));
                    }
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
            rows: judge_trials(&bases, &curs, &tols),
            trials: (bases.len(), curs.len()),
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
    let not_comparable: usize = comparisons.iter().map(Comparison::not_comparable).sum();
    if not_comparable > 0 {
        eprintln!(
            "note: {not_comparable} metric(s) not comparable: a figure is unknown on one side or both (see the rows marked `not comparable`){}",
            if cmd.strict { "; --strict: exit 2" } else { "" }
        );
    }
    if comparisons.iter().any(|c| c.regressions() > 0) {
        return Ok(ExitCode::from(EXIT_FAILED_CHECK));
    }
    if cmd.strict && not_comparable > 0 {
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    Ok(ExitCode::SUCCESS)
}
