//! The orchestration of a run, apart from the commands that ask for it: the servers of a
//! session ([`env`]), one measured run in phases ([`lifecycle`]) of the built-in app on them
//! ([`builtin`]) or of an app under test ([`app_run`]), repeated trials and comparisons ([`trials`],
//! [`comparison`]), sharded runs ([`shards`]) and the removal of dead runs' leftovers
//! ([`cleanup`]). A command reads its arguments, calls one function here and says how the
//! process ends.

pub mod app_run;
pub mod build;
pub mod builtin;
pub mod cleanup;
pub mod env;
pub mod faults;
pub(crate) mod heartbeat;
pub mod lifecycle;
pub(crate) mod memory;
pub mod shards;
pub mod single;
pub mod sweep;
pub mod traces;
pub mod trials;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

pub use env::{Env, Status, shutdown_on_signals};
pub use lifecycle::Progress;

use crate::results::RunResult;
use crate::scenario::Scenario;

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
