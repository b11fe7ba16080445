//! One measured run, in phases, whatever sends the traffic — the built-in app instances
//! ([`super::run_on`]), one shard of a sharded run ([`super::shards`]) or an app under test
//! (`session::app_run`):
//!
//! 1. servers and run space: the run's schema and cache namespace, held by a [`RunSpace`]
//!    that removes them on every way out (a result, an error, Ctrl-C, a dropped future);
//! 2. readings before: the Redis version, INFO and a cluster's nodes, the servers' pids;
//! 3. traffic and faults: [`traffic`] runs the driver and the fault schedule together and
//!    hands the managed servers back to the session;
//! 4. readings after: INFO again, the memory figures, the servers' own counts of the
//!    statements once the last ones have landed ([`settled_calls`], [`settled_writes`]);
//! 5. the result, built once by [`super::build::build`].
//!
//! The kinds supply only what differs: who seeds the schema, who warms the cache, who sends
//! the traffic and how the result is shaped afterwards.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use super::env::Env;
use super::faults::{finish_faults, start_faults};
use super::setup::Setup;
use crate::cache::{Admin, RedisStats};
use crate::driver::{Driver, Raw};
use crate::error::EnvError;
use crate::fault::chaos;
use crate::live::Live;
use crate::origin::Db;
use crate::redact;
use crate::results::RunResult;
use crate::scenario::Scenario;

/// What one run shows while it goes: its progress bar (none when `quiet`) and, under
/// `--metrics-listen`, the live metrics it feeds. Built by the command from its flags.
#[derive(Clone, Default)]
pub struct Progress {
    pub quiet: bool,
    pub export: Option<crate::exporter::Export>,
}

impl Progress {
    /// No bar and no live metrics: the runs of a comparison's trials and of a sweep's cells.
    pub fn quiet() -> Progress {
        Progress {
            quiet: true,
            export: None,
        }
    }
}

/// How long the removal of a run space may take when it happens from `Drop`, so a dead server
/// cannot hold the tool at exit (`stampede cleanup` removes what is left).
const DROP_REMOVAL_BOUND: Duration = Duration::from_secs(10);

/// The run's schema, cache namespace and (for an app under test on a managed Postgres) the
/// app's database role. [`RunSpace::release`] removes them once; dropping the space without
/// releasing it (an early `?`, a panic, a future dropped by a caller) removes them from `Drop`.
pub(crate) struct RunSpace {
    parts: Option<Parts>,
}

struct Parts {
    db: Db,
    admin: Option<Admin>,
    /// The app's role, dropped after the schema.
    role: Option<String>,
    pg_url: String,
    redis_url: String,
    /// Whether a failure to remove the keys is worth a warning: the managed Redis is the
    /// tool's own and stops with the session.
    warn_redis: bool,
    /// False for a shard that does not lead: the leading shard removes the run's space.
    owned: bool,
}

impl RunSpace {
    /// A run space whose schema exists from now on.
    pub(crate) fn new(db: Db, sc: &Scenario, env: &Env) -> RunSpace {
        RunSpace {
            parts: Some(Parts {
                db,
                admin: None,
                role: None,
                pg_url: env.pg_url.clone(),
                redis_url: env.redis_url.clone(),
                warn_redis: sc.redis_url.is_some(),
                owned: true,
            }),
        }
    }

    /// A shard's view of a run space another shard leads: nothing is removed from here.
    pub(crate) fn borrowed(mut self) -> RunSpace {
        if let Some(p) = &mut self.parts {
            p.owned = false;
        }
        self
    }

    /// The cache namespace, once its admin connection is open.
    pub(crate) fn with_admin(mut self, admin: Admin) -> RunSpace {
        if let Some(p) = &mut self.parts {
            p.admin = Some(admin);
        }
        self
    }

    /// The app's database role, to be dropped with the schema (set before it is created, so a
    /// half-made role is dropped too).
    pub(crate) fn with_role(mut self, role: Option<String>) -> RunSpace {
        if let Some(p) = &mut self.parts {
            p.role = role;
        }
        self
    }

    pub(crate) fn db(&self) -> &Db {
        match &self.parts {
            Some(p) => &p.db,
            None => unreachable!("a run space is used only before it is released"),
        }
    }

    /// Remove the run's keys, schema and role (warnings for what could not be removed).
    pub(crate) async fn release(mut self) {
        if let Some(p) = self.parts.take() {
            p.remove().await;
        }
    }
}

impl Parts {
    async fn remove(self) {
        if !self.owned {
            return;
        }
        // A managed Redis is shared by the runs of a comparison or a sweep: a run's entries
        // left there would take the next run's memory, so they go on either server.
        if let Some(admin) = &self.admin
            && let Err(e) = admin.remove_namespace().await
            && self.warn_redis
        {
            eprintln!(
                "warning: could not remove this run's keys from {}: {e:#}",
                redact::url(&self.redis_url)
            );
        }
        if let Err(e) = self.db.teardown().await {
            eprintln!("warning: {e:#}");
        }
        if let Some(r) = &self.role
            && let Err(e) = crate::origin::role::drop(&self.pg_url, r).await
        {
            eprintln!("warning: {e:#}");
        }
    }
}

impl Drop for RunSpace {
    fn drop(&mut self) {
        let Some(parts) = self.parts.take() else {
            return;
        };
        if !parts.owned {
            return;
        }
        let schema = parts.db.schema.clone();
        // Async removal from a synchronous drop: possible on the tool's multi-threaded
        // runtime, by blocking this worker while another drives the removal.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| {
                    h.block_on(async {
                        if tokio::time::timeout(DROP_REMOVAL_BOUND, parts.remove())
                            .await
                            .is_err()
                        {
                            eprintln!(
                                "warning: removing run space {schema} took over {} s: `stampede cleanup` removes what is left",
                                DROP_REMOVAL_BOUND.as_secs()
                            );
                        }
                    })
                });
            }
            _ => eprintln!(
                "warning: run space {schema} was left behind: `stampede cleanup` removes it"
            ),
        }
    }
}

/// Redis's version, read before the traffic (a run cannot be described without it).
pub(crate) async fn redis_version(admin: &Admin) -> Result<String> {
    admin
        .version()
        .await
        .map_err(|e| EnvError(format!("reading Redis INFO: {e:#}")).into())
}

/// What the servers said just before the window and just after it.
#[derive(Default)]
pub(crate) struct Readings {
    pub(crate) stats: Option<RedisStats>,
    pub(crate) nodes: Option<Vec<crate::cluster::figures::NodeReading>>,
}

impl Readings {
    /// INFO (and a cluster's nodes' figures), as far as the server answers.
    pub(crate) async fn read(admin: &Admin) -> Readings {
        let stats = admin.stats().await.ok();
        let nodes = match admin.is_cluster() {
            true => Some(admin.live_node_stats().await),
            false => None,
        };
        Readings { stats, nodes }
    }
}

/// The traffic and the fault schedule, together: the fault schedule runs only when
/// `with_faults` (one shard executes a sharded run's faults), and the managed servers it took
/// come back to `env` before this returns, whatever the run's outcome.
pub(crate) async fn traffic(
    sc: &Scenario,
    env: &mut Env,
    driver: &Driver,
    setup: &Setup<'_>,
    with_faults: bool,
    shutdown: CancellationToken,
    live: Live,
) -> Result<(Raw, Option<chaos::Done>)> {
    let chaos = match with_faults {
        true => start_faults(sc, env, driver, setup, &shutdown),
        false => None,
    };
    let raw = driver.run(shutdown, live).await;
    let faults = finish_faults(chaos, env).await;
    Ok((raw?, faults?))
}

/// pg_stat_statements' count of the run's load statements, read until it has caught up with
/// the `statements` the tool saw complete (it records a statement as it ends), at most 1 s.
/// `read` returns None when the count cannot be read.
pub(crate) async fn settled_calls<F, Fut>(statements: u64, read: F) -> Option<u64>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<u64>>,
{
    let mut calls = read().await;
    let wait_until = Instant::now() + Duration::from_secs(1);
    while calls.is_some_and(|c| c < statements) && Instant::now() < wait_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        calls = read().await;
    }
    calls
}

/// The server's count of the run's load statements after the traffic: what a Postgres crash
/// erased from pg_stat_statements is added back (none when a reading before a kill failed:
/// the sum would be short).
pub(crate) async fn server_calls(db: &Db, raw: &Raw, faults: Option<&chaos::Done>) -> Option<u64> {
    // The server counts a statement when it completes without error.
    let tool_total = raw.db.calls.saturating_sub(raw.db.statement_errors);
    let erased = faults.map(|d| &d.server_calls);
    settled_calls(tool_total, || async {
        match erased {
            Some(e) if e.unreadable => None,
            Some(e) => Some(db.server_calls().await? + e.lost),
            None => db.server_calls().await,
        }
    })
    .await
}

/// The server's count of the write statement, once it has caught up with the commits.
pub(crate) async fn server_writes(db: &Db, raw: &Raw) -> Option<u64> {
    let committed = raw.writes.as_ref()?.committed;
    settled_calls(committed, || db.server_writes()).await
}

/// Whether a fault restarted Redis during the run (its memory figures then start over).
pub(crate) fn redis_restarted(faults: Option<&chaos::Done>) -> bool {
    faults.is_some_and(|d| !d.restarted_pids.is_empty())
}

/// The faults' notes, said on the terminal as well as in the result.
pub(crate) fn warn_fault_notes(r: &RunResult) {
    for f in r.faults.iter().filter_map(|f| f.note.as_deref()) {
        eprintln!("warning: fault: {f}");
    }
}
