//! The audit's lab: the servers (managed, or the app's own given by URL), the seeded schema,
//! the app started with them in its environment, and the instruments the checks read —
//! an HTTP client for the answers, a Redis connection of the tool's own for SCAN, TTL and
//! INFO, a Postgres connection for pg_stat_statements. Everything is stopped or removed by
//! [`Lab::close`], and the servers and the app also by their own drops on any way out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use redis::aio::ConnectionManager;

use super::Settings;
use crate::app;
use crate::app::process::{ManagedApp, Ready};
use crate::error::EnvError;
use crate::origin::Db;
use crate::origin::role;
use crate::redact;
use crate::servers::postgres::PgStartOptions;
use crate::servers::{ManagedPostgres, ManagedRedis};
use crate::sizes::Sizes;
use crate::tls::RedisTls;

/// How long one reading of a server may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of each seeded payload.
const PAYLOAD_BYTES: usize = 64;

/// One HTTP answer as a check sees it.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status; None when no answer came (refused, reset, timed out).
    pub status: Option<u16>,
    pub body: String,
    /// From the send to the end of the body, ms.
    pub ms: f64,
}

impl Answer {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// A running app of the audit's (the main one, or a variant).
pub struct RunningApp {
    app: Option<ManagedApp>,
    pub origin: String,
    /// The port it was given (`{port}`), when stampede started it.
    pub port: Option<u16>,
}

pub struct Lab {
    redis: Option<ManagedRedis>,
    pg: Option<ManagedPostgres>,
    pub redis_url: String,
    pub pg_url: String,
    pub db: Db,
    role: Option<String>,
    pub prefix: String,
    pub app: RunningApp,
    http: reqwest::Client,
    conn: ConnectionManager,
    pg_client: tokio_postgres::Client,
    settings: Settings,
}

fn origin_of(url: &str) -> Result<String> {
    let u = reqwest::Url::parse(&url.replace(app::KEY_MARK, "1"))
        .with_context(|| format!("--target {}", redact::url(url)))?;
    Ok(u.origin().ascii_serialization())
}

impl Lab {
    pub async fn open(s: &Settings, say: &(dyn Fn(&str) + Sync)) -> Result<Lab> {
        let (redis, redis_url) = match &s.redis_url {
            Some(u) => (None, u.clone()),
            None => {
                let r = ManagedRedis::start().await?;
                let u = r.url();
                (Some(r), u)
            }
        };
        let (pg, pg_url) = match &s.pg_url {
            Some(u) => (None, u.clone()),
            None => {
                let p = ManagedPostgres::start(PgStartOptions {
                    max_connections: 100,
                })
                .await?;
                let u = p.url();
                (Some(p), u)
            }
        };
        if redis.is_some() {
            say(&format!(
                "managed servers up: redis {redis_url}, postgres {pg_url}"
            ));
        }
        let run_id = format!("{:08x}", rand::random::<u32>());
        let schema = s
            .target
            .schema
            .clone()
            .unwrap_or_else(|| format!("stampede_{run_id}"));
        let db = Db::setup_in(
            &pg_url,
            &schema,
            s.seeded_keys(),
            &Sizes::Fixed(PAYLOAD_BYTES),
            None,
            false,
            s.db_cost,
        )
        .await
        .with_context(|| format!("seeding schema {schema} for the app"))?;
        let role = pg.is_some().then(|| format!("stampede_app_{run_id}"));
        if let Some(r) = &role
            && let Err(e) = role::create(&pg_url, r, &schema).await
        {
            let _ = db.teardown().await;
            return Err(e);
        }
        // On the managed Redis the app's keys are all there is: a short prefix keeps the
        // ttl check's patterns readable; on an external one, the run's own namespace.
        let prefix = match (&s.cache_prefix, redis.is_some()) {
            (Some(p), _) => p.clone(),
            (None, true) => "app:".to_string(),
            (None, false) => format!("stampede:{run_id}:"),
        };
        let conn = crate::cache::connect(&redis_url, &RedisTls::default(), READ_TIMEOUT).await?;
        let (pg_client, _) = crate::tls::pg_connect(&pg_url)
            .await
            .context("connecting to Postgres to read pg_stat_statements")?;
        crate::app::http::install_crypto_provider();
        let mut headers = reqwest::header::HeaderMap::new();
        for h in &s.target.headers {
            if let Some((n, v)) = h.split_once(':')
                && let (Ok(n), Ok(v)) = (
                    reqwest::header::HeaderName::from_bytes(n.trim().as_bytes()),
                    reqwest::header::HeaderValue::from_str(v.trim()),
                )
            {
                headers.insert(n, v);
            }
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(s.target.http_timeout.0)
            .pool_max_idle_per_host(256)
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let mut lab = Lab {
            redis,
            pg,
            redis_url,
            pg_url,
            db,
            role,
            prefix,
            app: RunningApp {
                app: None,
                origin: String::new(),
                port: None,
            },
            http,
            conn,
            pg_client,
            settings: s.clone(),
        };
        match lab.start_app(&[], say).await {
            Ok(a) => lab.app = a,
            Err(e) => {
                lab.close().await;
                return Err(e);
            }
        }
        Ok(lab)
    }

    /// Start the app (`--app-cmd`) with the lab's servers and `extra` in its environment, or
    /// take the running one; wait until it is ready.
    pub async fn start_app(
        &self,
        extra: &[(String, String)],
        say: &(dyn Fn(&str) + Sync),
    ) -> Result<RunningApp> {
        let t = &self.settings.target;
        let Some(cmd) = &t.app_cmd else {
            return Ok(RunningApp {
                app: None,
                origin: origin_of(&t.url)?,
                port: None,
            });
        };
        let port = crate::servers::free_port().context("finding a free port for the app")?;
        let database_url = match &self.role {
            Some(r) => role::with_user(&self.pg_url, r),
            None => self.pg_url.clone(),
        };
        let mut vars = vec![
            ("REDIS_URL".to_string(), self.redis_url.clone()),
            ("DATABASE_URL".to_string(), database_url),
            ("DB_SCHEMA".to_string(), self.db.schema.clone()),
            ("PORT".to_string(), port.to_string()),
            ("CACHE_PREFIX".to_string(), self.prefix.clone()),
            (
                "CACHE_TTL_MS".to_string(),
                self.settings.ttl.as_millis().to_string(),
            ),
        ];
        vars.extend(extra.iter().cloned());
        let log = match &t.app_log {
            Some(p) => std::path::PathBuf::from(p),
            None => std::env::temp_dir().join(format!("stampede-audit-app-{port}.log")),
        };
        let mut app = ManagedApp::start(cmd, &vars, &log).await?;
        say(&format!(
            "app started (pid {}), output in {}",
            app.pid().unwrap_or(0),
            log.display()
        ));
        let url = t.url_for(Some(port));
        let origin = origin_of(&url)?;
        let ready = match &t.app_ready {
            Some(u) => Ready::Url(app::fill_port(u, Some(port))),
            None => Ready::Tcp(origin.trim_start_matches("http://").to_string()),
        };
        app.wait_ready(&ready, t.app_ready_timeout.0).await?;
        Ok(RunningApp {
            app: Some(app),
            origin,
            port: Some(port),
        })
    }

    pub fn app_exited(&mut self) -> Option<std::process::ExitStatus> {
        self.app.app.as_mut().and_then(ManagedApp::exited)
    }

    pub fn app_log(&self) -> String {
        self.app
            .app
            .as_ref()
            .map_or_else(String::new, |a| a.log().display().to_string())
    }

    /// `template` (default `--target`) for `key`, `{port}` as the running app's.
    pub fn url(&self, template: Option<&str>, key: u64) -> String {
        let t = template.unwrap_or(&self.settings.target.url);
        app::fill_port(t, self.app.port).replace(app::KEY_MARK, &key.to_string())
    }

    /// One request; `user` sets the identity (`--user-header`/`--user-cookie`).
    pub async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<String>,
        user: Option<&str>,
    ) -> Answer {
        let mut req = self.http.request(method, url);
        if let (Some(u), Some((via, name))) = (user, &self.settings.user_via) {
            req = match *via {
                "header" => req.header(name.as_str(), u),
                _ => req.header("cookie", format!("{name}={u}")),
            };
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let t = Instant::now();
        match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let body = r.text().await.unwrap_or_default();
                Answer {
                    status: Some(status),
                    body,
                    ms: t.elapsed().as_secs_f64() * 1e3,
                }
            }
            Err(_) => Answer {
                status: None,
                body: String::new(),
                ms: t.elapsed().as_secs_f64() * 1e3,
            },
        }
    }

    pub async fn get(&self, url: &str, user: Option<&str>) -> Answer {
        self.send(reqwest::Method::GET, url, None, user).await
    }

    /// The key pattern that is the app's: everything on the managed Redis, the prefix on an
    /// external one.
    fn pattern(&self) -> String {
        if self.redis.is_some() && self.settings.cache_prefix.is_none() {
            "*".to_string()
        } else {
            format!("{}*", self.prefix)
        }
    }

    async fn cmd<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd, what: &str) -> Result<T> {
        let mut c = self.conn.clone();
        tokio::time::timeout(READ_TIMEOUT, cmd.query_async(&mut c))
            .await
            .map_err(|_| EnvError(format!("Redis: {what} got no answer within 2 s")))?
            .with_context(|| format!("Redis: {what}"))
    }

    /// Every key of the app's, by SCAN.
    pub async fn scan(&self) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let mut c = redis::cmd("SCAN");
            c.arg(cursor)
                .arg("MATCH")
                .arg(self.pattern())
                .arg("COUNT")
                .arg(1000);
            let (next, batch): (u64, Vec<String>) = self.cmd(&c, "SCAN").await?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// PTTL of each key, pipelined (ms; -1 no expiry, -2 gone).
    pub async fn pttls(&self, keys: &[String]) -> Result<Vec<i64>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(1000) {
            let mut p = redis::pipe();
            for k in chunk {
                p.cmd("PTTL").arg(k);
            }
            let mut c = self.conn.clone();
            let v: Vec<i64> = tokio::time::timeout(READ_TIMEOUT, p.query_async(&mut c))
                .await
                .map_err(|_| EnvError("Redis: PTTL got no answer within 2 s".to_string()))?
                .context("Redis: PTTL")?;
            out.extend(v);
        }
        Ok(out)
    }

    /// A fresh cache: every key of the app's removed (SCAN and UNLINK, never FLUSH*: the
    /// commands check counts those as the app's).
    pub async fn fresh_cache(&self) -> Result<()> {
        let keys = self.scan().await?;
        for chunk in keys.chunks(1000) {
            let mut c = redis::cmd("UNLINK");
            for k in chunk {
                c.arg(k);
            }
            let _: u64 = self.cmd(&c, "UNLINK").await?;
        }
        Ok(())
    }

    /// An INFO section as `field -> value`.
    pub async fn info(&self, section: &str) -> Result<BTreeMap<String, String>> {
        let mut c = redis::cmd("INFO");
        c.arg(section);
        let text: String = self.cmd(&c, "INFO").await?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect())
    }

    /// Keyspace hits and misses since Redis started (INFO stats).
    pub async fn hits_misses(&self) -> Option<(u64, u64)> {
        let i = self.info("stats").await.ok()?;
        let n = |k: &str| i.get(k).and_then(|v| v.parse().ok());
        Some((n("keyspace_hits")?, n("keyspace_misses")?))
    }

    /// The app's statements completed so far (pg_stat_statements): of its role on a managed
    /// Postgres, else naming its schema.
    pub async fn app_statements(&self) -> Option<u64> {
        let (sql, param) = match &self.role {
            Some(r) => (
                "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = $1)",
                r.clone(),
            ),
            None => (
                "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE query LIKE '%' || $1 || '.%' AND query NOT LIKE '%stampede_heartbeat%' AND query NOT LIKE '%stampede_ledger%' AND query NOT LIKE '%pg_stat_%'",
                self.db.schema.clone(),
            ),
        };
        tokio::time::timeout(READ_TIMEOUT, self.pg_client.query_one(sql, &[&param]))
            .await
            .ok()?
            .ok()
            .map(|r| r.get::<_, i64>(0) as u64)
    }

    /// What the DB figures count, for the evidence.
    pub fn statements_source(&self) -> String {
        match &self.role {
            Some(r) => format!("pg_stat_statements, every statement of the app's role {r}"),
            None => format!(
                "pg_stat_statements, statements naming schema {}",
                self.db.schema
            ),
        }
    }

    /// Whether the outage check can kill and restart this Redis: a managed one, or an external
    /// one the user allowed it to shut down and gave a restart command for.
    pub fn redis_killable(&self) -> bool {
        self.redis.is_some() || self.settings.redis_restart_cmd.is_some()
    }

    /// SIGKILL the managed Redis; `SHUTDOWN NOSAVE` an external one (allowed by the user).
    pub async fn kill_redis(&mut self) {
        if let Some(r) = &mut self.redis {
            r.kill();
            return;
        }
        // The server closes the connection instead of answering: the error is the success.
        let mut c = redis::cmd("SHUTDOWN");
        c.arg("NOSAVE");
        let _ = self.cmd::<()>(&c, "SHUTDOWN NOSAVE").await;
    }

    /// Start Redis again: the managed one on its port, an external one with
    /// `--redis-restart-cmd`, then wait until it answers PING.
    pub async fn restart_redis(&mut self) -> Result<()> {
        if let Some(r) = &mut self.redis {
            r.restart().await?;
            return Ok(());
        }
        let Some(cmd) = self.settings.redis_restart_cmd.clone() else {
            anyhow::bail!("no --redis-restart-cmd to start the external Redis with");
        };
        let status = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .stdin(std::process::Stdio::null())
            .status()
            .await
            .context("running --redis-restart-cmd")?;
        if !status.success() {
            anyhow::bail!("--redis-restart-cmd failed ({status})");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self
            .cmd::<String>(&redis::cmd("PING"), "PING")
            .await
            .is_err()
        {
            if std::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "--redis-restart-cmd succeeded but Redis did not answer PING within 30 s"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// `CLIENT PAUSE d ALL`.
    pub async fn pause_redis(&self, d: Duration) -> Result<()> {
        let mut c = redis::cmd("CLIENT");
        c.arg("PAUSE").arg(d.as_millis().max(1) as u64).arg("ALL");
        self.cmd::<()>(&c, "CLIENT PAUSE").await
    }

    /// Stop the app and remove what the audit put on the servers; stop managed servers.
    pub async fn close(&mut self) {
        drop(self.app.app.take());
        if self.redis.is_none() {
            let _ = self.fresh_cache().await;
        }
        if let Err(e) = self.db.teardown().await {
            eprintln!("warning: {e:#}");
        }
        if let Some(r) = &self.role
            && let Err(e) = role::drop(&self.pg_url, r).await
        {
            eprintln!("warning: {e:#}");
        }
        if let Some(mut r) = self.redis.take() {
            r.stop();
        }
        if let Some(mut p) = self.pg.take() {
            p.stop();
        }
    }
}

/// Mean, p50 and p95 of latencies, ms (None when there are none).
pub fn spread(ms: &[f64]) -> Option<(f64, f64, f64)> {
    if ms.is_empty() {
        return None;
    }
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    Some((v.iter().sum::<f64>() / v.len() as f64, q(0.5), q(0.95)))
}
