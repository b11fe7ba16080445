//! `run`'s orchestration: one strategy (or its `--repeat` trials, or this process's part of a
//! sharded run) on one session's servers, with the live metrics served while it goes and for
//! `--metrics-linger` after the results are shown.

use std::time::Duration;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use super::trials::{self, Ended, Output};
use super::{Env, Progress, Status, run_on, shutdown_on_signals};
use crate::exporter::{self, Export};
use crate::results::RunResult;
use crate::scenario::Scenario;
use crate::shard::Plan;
use crate::values::Dur;

/// What a run did: one result to show, or trials already written and shown.
pub enum Done {
    One(Box<RunResult>),
    Trials(Ended),
}

/// How `run` runs its scenario: trials, live metrics and where the output goes.
pub struct Options {
    pub trials: trials::Trials,
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub metrics_linger: Option<Dur>,
    pub output: Output,
}

/// Run `sc` (this process's part of it under a shard `plan`); `show` writes and prints a
/// single run's result (before the metrics linger, so the last scrape sees what the user saw).
pub async fn run(
    sc: Scenario,
    plan: Option<Plan>,
    opts: &Options,
    show: impl FnOnce(&RunResult) -> Result<()>,
) -> Result<Done> {
    if opts.trials.repeat > 1 {
        let ended =
            trials::run_trials(std::slice::from_ref(&sc), opts.trials, &opts.output).await?;
        return Ok(Done::Trials(ended));
    }
    let shutdown = shutdown_on_signals();
    let status = Status::new(opts.output.quiet);
    let mut output = Progress {
        quiet: opts.output.quiet,
        export: None,
    };
    let metrics = match opts.metrics_listen {
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
    let linger = opts.metrics_linger.map_or(Duration::ZERO, |d| d.0);
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
