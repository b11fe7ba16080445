//! The orchestration of a run, apart from the commands that ask for it: `run`'s own ([`run`]:
//! one strategy, its `--repeat` trials or this process's part of a sharded run, with the live
//! metrics served while it goes and for `--metrics-linger` after the results are shown), the
//! servers of a session ([`env`]), one measured run in phases ([`lifecycle`]) of the built-in
//! app on them ([`builtin`]) or of an app under test ([`app_run`]), both starting from what
//! their setup made ([`setup`]), repeated trials and comparisons ([`trials`]), sharded runs
//! ([`shards`]) and the removal of dead runs' leftovers ([`cleanup`]). A command reads its
//! arguments, calls one function here and says how the process ends.

pub mod app_run;
pub mod build;
pub mod builtin;
pub mod cleanup;
pub mod env;
pub mod faults;
pub(crate) mod heartbeat;
pub mod lifecycle;
pub(crate) mod memory;
mod setup;
pub mod shards;
pub mod sweep;
pub mod traces;
pub mod trials;

use std::time::Duration;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

pub use env::{Env, Status, shutdown_on_signals};
pub use lifecycle::Progress;

use crate::exporter::{self, Export};
use crate::results::RunResult;
use crate::scenario::Scenario;
use crate::shard::Plan;
use crate::values::Dur;
use trials::{Ended, Output};

/// One strategy's run on servers that are already up: the app under test's when the scenario
/// has a `--target`, else the built-in app's. Shared by `run`, `compare` and their trials.
pub async fn run_on(
    sc: &Scenario,
    env: &mut Env,
    shutdown: CancellationToken,
    out: &Progress,
    status: &Status,
) -> Result<RunResult> {
    if sc.target.is_some() {
        return app_run::run_on(sc, env, shutdown, out, status).await;
    }
    builtin::run_on(sc, env, shutdown, out, status).await
}

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
        Some(p) => shards::run_shard(&sc, p, &mut env, shutdown.clone(), &output, &status).await,
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
