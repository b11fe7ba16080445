//! `stampede conform`: the library's preset and the library itself, trial after trial on one
//! set of servers, each trial's results written as it ends; then the figures side by side
//! with their verdicts, on the terminal and in `--out`'s conform.json and conform.md.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{ConformCmd, TargetFlags};
use crate::conform::{self, Sides, figures, render};
use crate::error::{EXIT_INTERRUPTED, UsageError};
use crate::report::sink::{Sink, TrialDir};
use crate::results::RunResult;
use crate::session::{Env, Progress, Status, run_on, shutdown_on_signals};

pub async fn run(cmd: ConformCmd) -> Result<ExitCode> {
    let sides = sides(&cmd)?;
    if let Some(dir) = &cmd.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(cmd.quiet);
    let quiet = Progress {
        quiet: cmd.quiet,
        export: None,
    };
    let mut dir = cmd.out.clone().map(|dir| TrialDir { dir });
    let mut env = Env::start(&sides.preset, &status).await?;
    let n = cmd.trials();
    let order = conform::trial_order(n as usize);
    let mut done: [Vec<RunResult>; 2] = [Vec::new(), Vec::new()];
    let mut failure = None;
    let mut interrupted = false;
    for (k, &(t, si)) in order.iter().enumerate() {
        if shutdown.is_cancelled() {
            interrupted = true;
            break;
        }
        let mut sc = sides.side(si).clone();
        sc.seed = sc.seed.wrapping_add(t as u64);
        let label = format!(
            "{} ({}, trial {}/{n}, seed {})",
            sc.label(),
            if si == 0 { "preset" } else { "library" },
            t + 1,
            sc.seed
        );
        status.line(&format!("[{}/{}] {label}", k + 1, order.len()));
        let r = match run_on(&sc, &mut env, shutdown.clone(), &quiet, &status).await {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e.context(format!("running {label}")));
                break;
            }
        };
        status.line(&format!(
            "[{}/{}] {label}: {} DB calls, ledger peak herd {}",
            k + 1,
            order.len(),
            r.db.calls_server
                .map_or("unknown".to_string(), |c| c.to_string()),
            match si {
                0 => r.db.ledger_peak_key_herd,
                _ => r.db.peak_key_herd.value(),
            }
            .map_or("unknown".to_string(), |h| h.to_string())
        ));
        if let Some(d) = dir.as_mut()
            && let Err(e) = d.result(&r, t as u32, n)
        {
            failure = Some(e);
            break;
        }
        interrupted |= r.interrupted;
        done[si].push(r);
        if interrupted {
            break;
        }
    }
    env.stop();
    interrupted |= shutdown.is_cancelled();
    if done.iter().any(Vec::is_empty) {
        return Err(failure.unwrap_or_else(|| {
            anyhow::anyhow!("interrupted before both sides had run once: nothing to compare")
        }));
    }
    let c = figures::build(&sides, &done[0], &done[1], interrupted || failure.is_some());
    if !cmd.quiet {
        print!("{}", render::terminal(&c));
    }
    if let Some(d) = &cmd.out {
        let json = serde_json::to_string_pretty(&c).context("encoding conform.json")?;
        crate::report::sink::write_text(&d.join("conform.json"), &(json + "\n"))?;
        crate::report::sink::write_text(&d.join("conform.md"), &render::markdown(&c))?;
        status.line(&format!(
            "written to {}/ (conform.json, conform.md, each side's trials)",
            d.display()
        ));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The command's flags turned into both sides, checked before any server starts: the preset
/// resolved as `run` resolves it, the library's app attached as `--target` attaches one.
fn sides(cmd: &ConformCmd) -> Result<Sides, UsageError> {
    let (decl, app) = conform::library(&cmd.library)?;
    cmd.refuse_warm()?;
    let sh = conform::run_sh(cmd.apps.as_deref(), app)?;
    let mut flags = cmd.flags.clone();
    flags.cache.strategy = Some(decl.preset.to_string());
    let resolved = crate::scenario::resolve(cmd.scenario.as_ref(), flags.clone())?;
    let (preset, admission) =
        conform::preset_side(app, resolved, cmd.flags.load.max_inflight.is_some())?;
    let target = TargetFlags {
        target: Some(conform::APP_URL.to_string()),
        app_cmd: Some(conform::app_cmd(&sh)),
        app_ready_timeout: Some(cmd.app_ready_timeout()),
        ..TargetFlags::default()
    };
    let library =
        crate::scenario::target::with_target(conform::library_base(&preset), &flags, &target)
            .map_err(|e| UsageError::new(format!("the library's side: {e}")))?;
    Ok(conform::sides(decl, app, preset, library, admission))
}

#[cfg(test)]
#[path = "conform_tests.rs"]
mod tests;
