//! `run`'s orchestration: one strategy (or its `--repeat` trials, or this process's part of a
//! sharded run) on one session's servers, with the live metrics served while it goes and for
//! `--metrics-linger` after the results are shown.

use std::time::Duration;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use super::trials::{self, Ended, Output};
use super::{Env, Progress, Status, run_on, shutdown_on_signals};
use crate::cli::RunCmd;
use crate::error::UsageError;
use crate::exporter::{self, Export};
use crate::results::RunResult;
use crate::scenario::{self, Scenario};
use crate::values::Dur;

/// The scenario of `run`: the file and flags resolved, with the app under test if any.
pub fn scenario(cmd: &RunCmd) -> Result<Scenario> {
    let sc = crate::scenario::target::with_target(
        scenario::resolve(cmd.scenario.as_ref(), cmd.flags())?,
        &cmd.flags,
        &cmd.target,
    )?;
    super::comparison::refuse_boundary(&sc)?;
    Ok(sc)
}

/// What a run did: one result to show, or trials already written and shown.
pub enum Done {
    One(Box<RunResult>),
    Trials(Ended),
}

/// Run `cmd`; `show` writes and prints a single run's result (before the metrics linger, so
/// the last scrape sees what the user saw).
pub async fn run(cmd: &RunCmd, show: impl FnOnce(&RunResult) -> Result<()>) -> Result<Done> {
    let sc = scenario(cmd)?;
    let plan = super::shards::plan(&sc, &cmd.shard)?;
    if plan.is_some() {
        // What a shard cannot do yet, said before anything starts.
        let refused = if sc.writes.is_some() {
            Some(
                "--write-rps: the consistency figures are exact only when one process sees every commit; a sharded run cannot have writes yet (run the writes in one process)",
            )
        } else if sc.target.is_some() {
            Some(
                "--target: a sharded run drives the built-in app's instances; an app under test is driven from one process (its DB figures come from the servers either way)",
            )
        } else if sc.own_load.is_some() {
            Some(
                "--db-sql: shards count their loads in the load ledger that stampede installs in its own schema, and with --db-sql it creates nothing in your database: run --db-sql in one process",
            )
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(UsageError::new(why).into());
        }
    }
    if plan.is_some() && cmd.trials.repeat > 1 {
        return Err(UsageError::new(
            "--repeat runs trials one after another in one process; a sharded run is one trial: run the shards again for another",
        )
        .into());
    }
    if cmd.trials.repeat > 1 && cmd.metrics.metrics_listen.is_some() {
        return Err(UsageError::new(
            "--metrics-listen exports one run's figures: it cannot be combined with --repeat",
        )
        .into());
    }
    if cmd.trials.repeat > 1 {
        if let Some(p) = &cmd.output.out
            && p.extension().is_some_and(|x| x == "json")
        {
            return Err(UsageError::new(format!(
                "--out {} looks like a file, but with --repeat it is a directory that gets <strategy>/trial-N.json and summary.json: give a directory",
                p.display()
            ))
            .into());
        }
        // The same shape as compare writes, for one strategy.
        let out = Output {
            dir: cmd.output.out.clone(),
            html: cmd.output.html.clone(),
            quiet: cmd.output.quiet,
        };
        let ended = trials::run_trials(std::slice::from_ref(&sc), cmd.trials, &out).await?;
        return Ok(Done::Trials(ended));
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(cmd.output.quiet);
    let mut output = Progress {
        quiet: cmd.output.quiet,
        export: None,
    };
    let metrics = match cmd.metrics.metrics_listen {
        Some(addr) => {
            let label = plan.as_ref().map_or(String::new(), |p| p.spec.to_string());
            let export = Export::new(&sc.strategy.to_string(), &label);
            output.export = Some(export.clone());
            let stop = CancellationToken::new();
            let server = exporter::serve(addr, export, stop.clone()).await?;
            status.line(&format!("metrics at http://{addr}/metrics"));
            Some((stop, server))
        }
        None => None,
    };
    let mut env = Env::start(&sc, &status).await?;
    let outcome = match &plan {
        Some(p) => {
            super::shards::run_shard(&sc, p, &mut env, shutdown.clone(), &output, &status).await
        }
        None => run_on(&sc, &mut env, shutdown.clone(), &output, &status).await,
    };
    env.stop();
    let linger = cmd.metrics.metrics_linger.map_or(Duration::ZERO, |d| d.0);
    let written = outcome.and_then(|r| show(&r).map(|()| r));
    if let Some((stop, server)) = metrics {
        // The final values stay up for the last scrape, unless the user asked to stop.
        if written.is_ok() && !linger.is_zero() {
            status.line(&format!("serving the final metrics for {}", Dur(linger)));
            tokio::select! {
                _ = tokio::time::sleep(linger) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        stop.cancel();
        let _ = server.await;
    }
    Ok(Done::One(Box::new(written?)))
}
