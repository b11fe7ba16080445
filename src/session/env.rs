//! The servers of a session and the signals that end it: managed servers started (and always
//! stopped — on success, error and Ctrl-C alike) or external ones given by URL, one shutdown
//! signal for every task, and the status lines a person watching reads.

use std::time::{Duration, Instant};

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::cluster::ManagedCluster;
use crate::scenario::Scenario;
use crate::servers::{ManagedPostgres, ManagedRedis, postgres::PgStartOptions};
use crate::tls::RedisTls;

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) all become one shutdown signal handed to
/// every task, so the servers are stopped however the tool is told to end.
pub fn shutdown_on_signals() -> CancellationToken {
    use tokio::signal::unix::{SignalKind, signal};
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(mut term), Ok(mut hup)) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        t.cancel();
    });
    token
}

/// Status lines for a person watching; silent with --quiet.
#[derive(Clone, Copy)]
pub struct Status {
    quiet: bool,
}

impl Status {
    pub fn new(quiet: bool) -> Status {
        Status { quiet }
    }

    pub fn line(&self, s: &str) {
        if !self.quiet {
            eprintln!("{s}");
        }
    }
}

/// The servers of a run: started by the tool (and stopped by it) or given by URL.
pub struct Env {
    pub redis_url: String,
    pub pg_url: String,
    /// How to speak TLS to Redis: the user's flags, or the managed server's own CA.
    pub redis_tls: RedisTls,
    pub(super) redis: Option<ManagedRedis>,
    /// A managed Redis Cluster (`--redis-cluster`), instead of `redis`.
    pub(super) cluster: Option<ManagedCluster>,
    pub(super) pg: Option<ManagedPostgres>,
    pub(super) redis_startup: Option<Duration>,
}

impl Env {
    pub async fn start(sc: &Scenario, status: &Status) -> Result<Env> {
        let mut env = Env {
            redis_url: String::new(),
            pg_url: String::new(),
            redis_tls: sc.redis_tls.clone(),
            redis: None,
            cluster: None,
            pg: None,
            redis_startup: None,
        };
        match &sc.redis_url {
            Some(u) => env.redis_url = u.clone(),
            None if sc.cluster.managed.is_some() => {
                let shape = sc.cluster.managed.unwrap_or_default();
                let t = Instant::now();
                let c = ManagedCluster::start(shape, sc.tls).await?;
                env.redis_startup = Some(t.elapsed());
                env.redis_url = c.url();
                env.redis_tls = c.redis_tls().clone();
                status.line(&format!(
                    "managed Redis Cluster up: {} primaries with {} replica(s) each, cluster-node-timeout {} ms, in {} ms",
                    shape.primaries,
                    shape.replicas,
                    ManagedCluster::node_timeout().as_millis(),
                    t.elapsed().as_millis()
                ));
                env.cluster = Some(c);
            }
            None => {
                let t = Instant::now();
                let r = ManagedRedis::start_with(sc.tls).await?;
                env.redis_startup = Some(t.elapsed());
                env.redis_url = r.url();
                if let Some(c) = r.certs() {
                    env.redis_tls = RedisTls {
                        ca: Some(c.ca.clone()),
                        ..RedisTls::default()
                    };
                }
                env.redis = Some(r);
            }
        }
        match &sc.pg_url {
            Some(u) => env.pg_url = u.clone(),
            None => {
                // Every instance's pool plus the admin connections, with headroom.
                let max_connections = sc.instances * sc.db_pool + 10;
                let p =
                    ManagedPostgres::start_with(PgStartOptions { max_connections }, sc.tls).await?;
                let (took, reused) = p.startup();
                status.line(&format!(
                    "managed servers up: redis {} in {} ms, postgres {} in {} ms ({})",
                    env.redis_url,
                    env.redis_startup.map_or(0, |d| d.as_millis()),
                    p.url(),
                    took.as_millis(),
                    if reused {
                        "from template"
                    } else {
                        "first run: template created"
                    }
                ));
                env.pg_url = p.url();
                env.pg = Some(p);
            }
        }
        Ok(env)
    }

    /// The managed cluster's nodes' pids (empty without one).
    pub fn cluster_pids(&self) -> Vec<u32> {
        self.cluster
            .as_ref()
            .map_or_else(Vec::new, ManagedCluster::pids)
    }

    /// The managed servers' pids (none for external ones).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        (
            self.redis.as_ref().and_then(|r| r.pid()),
            self.pg.as_ref().and_then(|p| p.pid()),
        )
    }

    pub fn managed(&self) -> bool {
        self.redis.is_some() || self.cluster.is_some() || self.pg.is_some()
    }

    pub fn stop(&mut self) {
        if let Some(mut r) = self.redis.take() {
            r.stop();
        }
        if let Some(mut c) = self.cluster.take() {
            c.stop();
        }
        if let Some(mut p) = self.pg.take() {
            p.stop();
        }
    }
}
