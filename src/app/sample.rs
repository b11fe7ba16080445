//! What the servers say while an app under test runs: its DB calls (pg_stat_statements,
//! read once per `--interval` for the timeline), its statements running at once
//! (pg_stat_activity, *sampled*: a peak between two samples is not seen) and Redis's
//! keyspace hits and misses per bucket (INFO). These hold for any app in any language: the
//! app is not asked anything.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::cache::Admin;
use crate::error::EnvError;

/// How often pg_stat_activity is sampled for the peak of the app's running statements.
pub const ACTIVITY_EVERY: Duration = Duration::from_millis(10);
/// How long one reading of a server may take before it is given up (a killed Redis).
const READ_TIMEOUT: Duration = Duration::from_millis(300);

/// Which of the server's statements are the app's.
#[derive(Debug, Clone)]
pub enum AppStatements {
    /// Every statement of this role (the app's own, on a managed Postgres).
    Role(String),
    /// Statements whose text matches this Postgres regular expression (`--db-match`),
    /// of this role when there is one.
    Matching { regex: String, role: Option<String> },
    /// Statements naming this schema, less stampede's own bookkeeping.
    Schema(String),
}

impl AppStatements {
    /// The filter on pg_stat_statements (`s`) or pg_stat_activity (`a`), with its one
    /// parameter `$1` (and `$2`).
    fn clause(&self, activity: bool) -> String {
        let (role, text) = if activity {
            ("a.usename = $1", "a.query")
        } else {
            (
                "s.userid = (SELECT oid FROM pg_roles WHERE rolname = $1)",
                "s.query",
            )
        };
        match self {
            AppStatements::Role(_) => role.to_string(),
            AppStatements::Matching { role: Some(_), .. } => format!("{role} AND {text} ~ $2"),
            AppStatements::Matching { role: None, .. } => format!("{text} ~ $1"),
            AppStatements::Schema(_) => format!(
                "{text} LIKE '%' || $1 || '.%' AND {text} NOT LIKE '%stampede_heartbeat%' AND {text} NOT LIKE '%stampede_ledger%' AND {text} NOT LIKE '%pg_stat_%'"
            ),
        }
    }

    fn params(&self) -> Vec<String> {
        match self {
            AppStatements::Role(r) => vec![r.clone()],
            AppStatements::Matching {
                regex,
                role: Some(r),
            } => vec![r.clone(), regex.clone()],
            AppStatements::Matching { regex, role: None } => vec![regex.clone()],
            AppStatements::Schema(s) => vec![s.clone()],
        }
    }

    /// What the DB figures count, for the result's note.
    pub fn describe(&self) -> String {
        match self {
            AppStatements::Role(r) => format!("every statement of the app's role {r}"),
            AppStatements::Matching {
                regex,
                role: Some(r),
            } => {
                format!("statements of the app's role {r} matching --db-match {regex}")
            }
            AppStatements::Matching { regex, role: None } => {
                format!("statements matching --db-match {regex}")
            }
            AppStatements::Schema(s) => format!(
                "statements naming schema {s} (stampede's own excluded); other clients' statements on it would count: --db-match narrows it"
            ),
        }
    }
}

/// One timeline bucket's server figures; None where the server could not be read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerBucket {
    pub db_calls: Option<u64>,
    pub redis_hits: Option<u64>,
    pub redis_misses: Option<u64>,
}

/// What the sampler saw over the measured window.
#[derive(Debug, Clone, Default)]
pub struct Sampled {
    /// One per `--interval`, then one for what finished after the window closed.
    pub buckets: Vec<ServerBucket>,
    /// The app's statements completed over the window and the drain (pg_stat_statements);
    /// None when it could not be read at the start or the end.
    pub db_calls: Option<u64>,
    /// Most of the app's statements seen running at once.
    pub peak_active: u64,
    /// pg_stat_activity samples taken.
    pub activity_samples: u64,
    /// Redis keyspace hits and misses over the window, when INFO was read at both ends and
    /// Redis did not restart in between (its counters would start again).
    pub redis_hits: Option<u64>,
    pub redis_misses: Option<u64>,
    /// The server's clock when the window opened and when the sampler stopped, µs since the
    /// epoch: the load ledger is read between them.
    pub server_from_us: Option<i64>,
    pub server_to_us: Option<i64>,
}

/// The sampler's own connection to Postgres.
struct Pg {
    client: tokio_postgres::Client,
    calls_sql: String,
    active_sql: String,
    params: Vec<String>,
}

impl Pg {
    /// Connected with the run's TLS settings (the URL's sslmode), as every other
    /// connection of the run.
    async fn connect(url: &str, which: &AppStatements) -> Result<Pg> {
        let (client, _) = crate::tls::pg_connect(url)
            .await
            .context("connecting the sampler of the app's statements")?;
        Ok(Pg {
            client,
            calls_sql: format!(
                "SELECT coalesce(sum(s.calls), 0)::int8 FROM pg_stat_statements s WHERE {}",
                which.clause(false)
            ),
            active_sql: format!(
                "SELECT count(*)::int8 FROM pg_stat_activity a WHERE a.state = 'active' AND a.pid <> pg_backend_pid() AND {}",
                which.clause(true)
            ),
            params: which.params(),
        })
    }

    async fn one(&self, sql: &str) -> Option<i64> {
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = self
            .params
            .iter()
            .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        tokio::time::timeout(READ_TIMEOUT, self.client.query_one(sql, &params))
            .await
            .ok()?
            .ok()
            .map(|r| r.get::<_, i64>(0))
    }

    async fn calls(&self) -> Option<u64> {
        self.one(&self.calls_sql).await.map(|c| c as u64)
    }

    async fn active(&self) -> Option<u64> {
        self.one(&self.active_sql).await.map(|c| c as u64)
    }

    async fn now_us(&self) -> Option<i64> {
        tokio::time::timeout(
            READ_TIMEOUT,
            self.client.query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
                &[],
            ),
        )
        .await
        .ok()?
        .ok()
        .map(|r| r.get(0))
    }
}

async fn redis_stats(admin: &Admin) -> Option<(u64, u64)> {
    tokio::time::timeout(READ_TIMEOUT, admin.stats())
        .await
        .ok()?
        .ok()
        .map(|s| (s.keyspace_hits, s.keyspace_misses))
}

/// The sampler, started before traffic: it takes its baselines when the measured window
/// opens and samples until `stop`, then takes its last readings.
pub struct Sampler {
    task: tokio::task::JoinHandle<Sampled>,
    stop: CancellationToken,
}

impl Sampler {
    /// Connect (a failure here ends the run: the figures would be missing) and start.
    pub async fn start(
        pg_url: &str,
        which: &AppStatements,
        admin: Admin,
        interval: Duration,
        mut window: tokio::sync::watch::Receiver<Option<Instant>>,
        live: std::sync::Arc<crate::metrics::LoadTracker>,
    ) -> Result<Sampler> {
        let pg = Pg::connect(pg_url, which).await?;
        if pg.calls().await.is_none() {
            return Err(EnvError(
                "reading pg_stat_statements for the app's DB calls failed: is the extension installed on this server (shared_preload_libraries = 'pg_stat_statements', CREATE EXTENSION pg_stat_statements)?".to_string(),
            )
            .into());
        }
        let stop = CancellationToken::new();
        let halt = stop.clone();
        let task = tokio::spawn(async move {
            let mut out = Sampled::default();
            let measure = loop {
                if let Some(m) = *window.borrow_and_update() {
                    break m;
                }
                tokio::select! {
                    r = window.changed() => if r.is_err() { return out },
                    _ = halt.cancelled() => return out,
                }
            };
            // Without a warm-up the window opens with the traffic: the baselines are taken
            // now, just before it, so no request of the window is missed.
            if measure > Instant::now() + Duration::from_millis(25) {
                tokio::time::sleep_until(measure.into()).await;
            }
            out.server_from_us = pg.now_us().await;
            let calls0 = pg.calls().await;
            let redis0 = redis_stats(&admin).await;
            let (mut last_calls, mut last_redis) = (calls0, redis0);
            let mut redis_broken = redis0.is_none();
            let mut tick = measure + interval;
            let mut bucket = |calls: Option<u64>, redis: Option<(u64, u64)>, out: &mut Sampled| {
                let db = calls.zip(last_calls).map(|(c, l)| c.saturating_sub(l));
                // For the live line and the timeline's ticker, which count the built-in app's
                // statements there (the result's figures are set from these readings exactly).
                live.interval_calls
                    .fetch_add(db.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
                // And for the fault schedule's "DB calls during the outage", at this granularity.
                live.calls
                    .fetch_add(db.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
                // A restarted Redis counts from zero again: that bucket has no figure.
                let r = redis
                    .zip(last_redis)
                    .filter(|((h, m), (lh, lm))| h >= lh && m >= lm)
                    .map(|((h, m), (lh, lm))| (h - lh, m - lm));
                if redis.is_none() || (redis.is_some() && last_redis.is_some() && r.is_none()) {
                    redis_broken = true;
                }
                out.buckets.push(ServerBucket {
                    db_calls: db,
                    redis_hits: r.map(|x| x.0),
                    redis_misses: r.map(|x| x.1),
                });
                if calls.is_some() {
                    last_calls = calls;
                }
                if redis.is_some() {
                    last_redis = redis;
                }
            };
            loop {
                if halt.is_cancelled() {
                    break;
                }
                if Instant::now() >= tick {
                    let (c, r) = (pg.calls().await, redis_stats(&admin).await);
                    bucket(c, r, &mut out);
                    tick += interval;
                    continue;
                }
                if let Some(a) = pg.active().await {
                    out.peak_active = out.peak_active.max(a);
                    out.activity_samples += 1;
                }
                tokio::select! {
                    _ = tokio::time::sleep(ACTIVITY_EVERY.min(tick.saturating_duration_since(Instant::now()))) => {}
                    _ = halt.cancelled() => {}
                }
            }
            let (c, r) = (pg.calls().await, redis_stats(&admin).await);
            bucket(c, r, &mut out);
            out.server_to_us = pg.now_us().await;
            out.db_calls = calls0.zip(c).map(|(a, b)| b.saturating_sub(a));
            if !redis_broken && let Some(((h0, m0), (h1, m1))) = redis0.zip(r) {
                out.redis_hits = Some(h1.saturating_sub(h0));
                out.redis_misses = Some(m1.saturating_sub(m0));
            }
            out
        });
        Ok(Sampler { task, stop })
    }

    /// Stop sampling and hand back what was seen.
    pub async fn finish(self) -> Sampled {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}
