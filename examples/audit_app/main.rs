//! The app `stampede audit` is tested against: a small axum service reading items through
//! Redis from the seeded Postgres, with one switch per bug of the cache review checklist, so
//! each check can be shown to fail for its own reason and to pass once its bug is fixed.
//!
//! `APP_BUGS` is a comma-separated list (or `all`, or empty for none) of:
//!
//! - `ttl`: the `seen:{id}` marker written with every load has no expiry;
//! - `users`: `GET /me/items/{id}` caches its per-user answer under a key without the user;
//! - `ryw`: `PUT /items/{id}` deletes the cached entry *before* updating the row, so a reader
//!   in between puts the old value back, where it stays until it expires;
//! - `commands`: that invalidation finds its keys with `KEYS` (a scan of the whole keyspace
//!   that blocks Redis);
//! - `outage`: Redis calls have no deadline (a paused Redis holds every request);
//! - `herd`: no coordination: every request that misses loads (fixed: one load per key per
//!   process, the others wait for it);
//! - `slow`: a hit is decoded with a 40 ms pause, more than a load costs, so the cache makes
//!   the answers slower.
//!
//! `PUT /items/{id}` stores its body as the item; a body that is a JSON object (a shop's
//! `{"price": 12}`) must carry a numeric `price` (else 422, as such an app refuses a token)
//! and is stored as `price=N`.
//!
//! `APP_NO_CACHE=1` bypasses Redis (the audit's `--no-cache-variant`). `GET /stamp/{id}`
//! answers with the time and the user (`X-User`): volatile but correct, per user.
//! Environment as for examples/app: `PORT`, `REDIS_URL`, `DATABASE_URL`, `DB_SCHEMA`,
//! `CACHE_PREFIX`, `CACHE_TTL_MS`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio_postgres::NoTls;

/// A Redis call's deadline when the app has one (the `outage` bug removes it).
const REDIS_DEADLINE: Duration = Duration::from_millis(100);
/// The work an update does before its UPDATE statement (validation, other writes): the
/// window in which the `ryw` bug lets a reader put the old value back.
const UPDATE_WORK: Duration = Duration::from_millis(100);
/// The `slow` bug's cost of decoding a hit.
const SLOW_HIT: Duration = Duration::from_millis(40);

#[derive(Default)]
struct Bugs {
    ttl: bool,
    users: bool,
    ryw: bool,
    commands: bool,
    outage: bool,
    herd: bool,
    slow: bool,
}

impl Bugs {
    fn parse(s: &str) -> Result<Bugs> {
        let mut b = Bugs::default();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "all" => {
                    b = Bugs {
                        ttl: true,
                        users: true,
                        ryw: true,
                        commands: true,
                        outage: true,
                        herd: true,
                        slow: true,
                    }
                }
                "ttl" => b.ttl = true,
                "users" => b.users = true,
                "ryw" => b.ryw = true,
                "commands" => b.commands = true,
                "outage" => b.outage = true,
                "herd" => b.herd = true,
                "slow" => b.slow = true,
                other => bail!(
                    "APP_BUGS: unknown bug {other} (ttl, users, ryw, commands, outage, herd, slow, all)"
                ),
            }
        }
        Ok(b)
    }
}

struct App {
    bugs: Bugs,
    no_cache: bool,
    redis: ConnectionManager,
    db: Pool,
    load_sql: String,
    update_sql: String,
    prefix: String,
    ttl_ms: u64,
    /// One load per key per process: the requests that miss one key queue on its lock.
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

type Fail = (StatusCode, &'static str);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v} is not a valid value")),
        Err(_) => Ok(default),
    }
}

impl App {
    /// One Redis command, with the app's deadline unless the `outage` bug removed it; a
    /// failure is None (the caller fails open).
    async fn redis<T: redis::FromRedisValue>(&self, cmd: redis::Cmd) -> Option<T> {
        let mut c = self.redis.clone();
        if self.bugs.outage {
            cmd.query_async(&mut c).await.ok()
        } else {
            tokio::time::timeout(REDIS_DEADLINE, cmd.query_async(&mut c))
                .await
                .ok()
                .and_then(Result::ok)
        }
    }

    async fn get(&self, key: &str) -> Option<String> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        let v: Option<String> = self.redis(cmd).await.flatten();
        if v.is_some() && self.bugs.slow {
            tokio::time::sleep(SLOW_HIT).await;
        }
        v
    }

    async fn set(&self, key: &str, value: &str, expire: bool) {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        if expire {
            cmd.arg("PX").arg(self.ttl_ms);
        }
        let _: Option<()> = self.redis(cmd).await;
    }

    async fn load(&self, id: i64) -> Result<Option<String>, Fail> {
        const DOWN: Fail = (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n");
        let client = self.db.get().await.map_err(|_| DOWN)?;
        let stmt = client
            .prepare_cached(&self.load_sql)
            .await
            .map_err(|_| DOWN)?;
        let row = client.query_opt(&stmt, &[&id]).await.map_err(|_| DOWN)?;
        Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
    }

    /// The value under `key`, loaded from item `id` on a miss and written back (with
    /// `render` applied) — one load per key per process unless the `herd` bug is on.
    async fn through(
        &self,
        key: &str,
        id: i64,
        render: impl Fn(&str) -> String,
    ) -> Result<Option<String>, Fail> {
        if self.no_cache {
            return Ok(self.load(id).await?.map(|p| render(&p)));
        }
        if let Some(v) = self.get(key).await {
            return Ok(Some(v));
        }
        let _flight = if self.bugs.herd {
            None
        } else {
            let lock = self
                .flights
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.to_string())
                .or_default()
                .clone();
            let guard = lock.lock_owned().await;
            // Whoever held the lock before us has filled the key.
            if let Some(v) = self.get(key).await {
                return Ok(Some(v));
            }
            Some(guard)
        };
        let Some(payload) = self.load(id).await? else {
            return Ok(None);
        };
        let v = render(&payload);
        self.set(key, &v, true).await;
        self.set(&format!("{}seen:{id}", self.prefix), "1", !self.bugs.ttl)
            .await;
        Ok(Some(v))
    }
}

fn user(headers: &HeaderMap) -> String {
    headers
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("anonymous")
        .to_string()
}

fn answer(r: Result<Option<String>, Fail>) -> Response {
    match r {
        Ok(Some(v)) => v.into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such item\n").into_response(),
        Err(f) => f.into_response(),
    }
}

async fn get_item(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Response {
    let key = format!("{}item:{id}", app.prefix);
    answer(app.through(&key, id, str::to_string).await)
}

async fn get_mine(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
) -> Response {
    let u = user(&headers);
    let key = if app.bugs.users {
        format!("{}me:{id}", app.prefix)
    } else {
        format!("{}me:{u}:{id}", app.prefix)
    };
    answer(
        app.through(&key, id, |p| format!("item {id} for {u}: {p}"))
            .await,
    )
}

async fn get_stamp(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
) -> Response {
    let u = user(&headers);
    let key = format!("{}item:{id}", app.prefix);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    answer(
        app.through(&key, id, str::to_string)
            .await
            .map(|v| v.map(|p| format!("{u} at {now}: {p}"))),
    )
}

async fn put_item(State(app): State<Arc<App>>, Path(id): Path<i64>, body: String) -> Response {
    let body = if body.trim_start().starts_with('{') {
        let price = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("price").and_then(serde_json::Value::as_i64));
        match price {
            Some(p) => format!("price={p}"),
            None => {
                return (StatusCode::UNPROCESSABLE_ENTITY, "price must be a number\n")
                    .into_response();
            }
        }
    } else {
        body
    };
    let key = format!("{}item:{id}", app.prefix);
    let invalidate = || async {
        if app.bugs.commands {
            let mut keys = redis::cmd("KEYS");
            keys.arg(format!("{}*item:{id}", app.prefix));
            let found: Vec<String> = app.redis(keys).await.unwrap_or_default();
            for k in found {
                let mut del = redis::cmd("DEL");
                del.arg(k);
                let _: Option<i64> = app.redis(del).await;
            }
        } else {
            let mut del = redis::cmd("DEL");
            del.arg(&key);
            let _: Option<i64> = app.redis(del).await;
        }
    };
    if app.bugs.ryw {
        invalidate().await;
    }
    tokio::time::sleep(UPDATE_WORK).await;
    let updated = async {
        let client = app.db.get().await.ok()?;
        client.execute(&app.update_sql, &[&id, &body]).await.ok()
    }
    .await;
    if updated.is_none() {
        return (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response();
    }
    if !app.bugs.ryw {
        invalidate().await;
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn health() -> &'static str {
    "ok\n"
}

fn env(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| format!("{name} is not set"))
}

#[tokio::main]
async fn main() -> Result<()> {
    let bugs = Bugs::parse(&env_or("APP_BUGS", String::new())?)?;
    let port: u16 = env("PORT")?.parse().context("PORT is not a port number")?;
    let schema = env("DB_SCHEMA")?;
    if !schema
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        bail!("DB_SCHEMA={schema} is not a plain identifier");
    }
    let mut config = ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100))
        .set_number_of_retries(usize::MAX)
        .set_connection_timeout(Some(Duration::from_millis(500)));
    if !bugs.outage {
        config = config.set_response_timeout(Some(REDIS_DEADLINE));
    }
    let redis = redis::Client::open(env("REDIS_URL")?).context("REDIS_URL")?;
    let redis = ConnectionManager::new_with_config(redis, config)
        .await
        .context("connecting to Redis")?;
    let pg: tokio_postgres::Config = env("DATABASE_URL")?.parse().context("DATABASE_URL")?;
    let db = Pool::builder(Manager::from_config(
        pg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    ))
    .max_size(16)
    .build()
    .context("building the database pool")?;
    drop(db.get().await.context("connecting to Postgres")?);
    let app = Arc::new(App {
        no_cache: env_or("APP_NO_CACHE", 0u8)? == 1,
        bugs,
        redis,
        db,
        load_sql: format!("SELECT payload FROM {schema}.stampede_load($1)"),
        update_sql: format!(
            "UPDATE {schema}.items SET payload = $2, version = version + 1 WHERE id = $1"
        ),
        prefix: env_or("CACHE_PREFIX", "app:".to_string())?,
        ttl_ms: env_or("CACHE_TTL_MS", 30_000u64)?,
        flights: Mutex::new(HashMap::new()),
    });
    let router = Router::new()
        .route("/items/{id}", get(get_item).put(put_item))
        .route("/me/items/{id}", get(get_mine))
        .route("/stamp/{id}", get(get_stamp))
        .route("/health", get(health))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    eprintln!("audit_app: listening on 127.0.0.1:{port}");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving")?;
    Ok(())
}
