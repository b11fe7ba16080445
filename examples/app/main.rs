//! A small real web service to put under test with `stampede run --target`: it serves
//! `GET /items/{id}` by reading the item through Redis from Postgres, the way many services
//! do, with one of three ways to fill the cache (`APP_STRATEGY`):
//!
//! - `cache-aside`: every request that misses loads the item itself (herds on a hot key);
//! - `single-flight`: requests of this process that miss the same key wait for one load;
//! - `lock`: a Redis lock (`SET NX PX`) lets one request of any process load a key, the
//!   others poll the cache until the value appears (or load anyway once their wait runs out).
//!
//! Redis failing (down, or slower than its deadline) reads as a miss and the item is loaded
//! from Postgres: the service fails open, as the built-in strategies do.
//!
//! Configuration, all from the environment (stampede's `--app-cmd` sets them):
//! `PORT`, `REDIS_URL`, `DATABASE_URL`, `APP_STRATEGY`, `DB_SCHEMA` (where the seeded
//! `items` table and the `stampede_load(id)` function live), and optionally `CACHE_PREFIX`
//! (default `app:`), `CACHE_TTL_MS` (default 3000), `APP_DB_POOL` (default 16) and
//! `APP_LOADER` (`ledger`, the default, loads through `stampede_load(id)` so stampede can
//! see every load; `query` reads the table with a plain SELECT).
//!
//! Build and run: `cargo build --release --example app`, then
//! `stampede run --target 'http://127.0.0.1:{port}/items/{key}' --app-cmd target/release/examples/app`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::watch;
use tokio_postgres::NoTls;

/// How long a Redis command may take before the service treats Redis as failed.
const REDIS_DEADLINE: Duration = Duration::from_millis(100);
/// The lock strategy: how long a lock is held at most, how often a waiter looks at the cache,
/// and how long it waits before loading itself.
const LOCK_TTL_MS: u64 = 2_000;
const LOCK_POLL: Duration = Duration::from_millis(20);
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Deletes the lock only if it still holds our token (a lease that ran out is someone else's).
const UNLOCK_LUA: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strategy {
    CacheAside,
    SingleFlight,
    Lock,
}

/// A load's result, shared with the requests that waited for it: the payload, none when the
/// item does not exist, or a failure.
type Loaded = Result<Option<Arc<str>>, ()>;

struct App {
    strategy: Strategy,
    redis: ConnectionManager,
    db: Pool,
    load_sql: String,
    prefix: String,
    ttl_ms: u64,
    /// Single-flight: the loads in flight in this process, by key.
    flights: Mutex<HashMap<i64, watch::Receiver<Option<Loaded>>>>,
    unlock: redis::Script,
}

fn env(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| format!("{name} is not set"))
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v} is not a valid value")),
        Err(_) => Ok(default),
    }
}

impl App {
    fn key(&self, id: i64) -> String {
        format!("{}item:{id}", self.prefix)
    }

    /// The cached payload; a Redis failure or a late answer reads as a miss (fail open).
    async fn cached(&self, id: i64) -> Option<String> {
        let mut c = self.redis.clone();
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.key(id));
        tokio::time::timeout(REDIS_DEADLINE, cmd.query_async(&mut c))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
    }

    async fn store(&self, id: i64, payload: &str) {
        let mut c = self.redis.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(id))
            .arg(payload)
            .arg("PX")
            .arg(self.ttl_ms);
        // A failed write-back still serves the request.
        let _ = tokio::time::timeout(REDIS_DEADLINE, cmd.query_async::<()>(&mut c)).await;
    }

    /// One load from Postgres, written back to the cache.
    async fn load(&self, id: i64) -> Loaded {
        let client = self.db.get().await.map_err(|_| ())?;
        let stmt = client
            .prepare_cached(&self.load_sql)
            .await
            .map_err(|_| ())?;
        let row = client.query_opt(&stmt, &[&id]).await.map_err(|_| ())?;
        let payload: Option<Arc<str>> = row
            .and_then(|r| r.get::<_, Option<String>>(0))
            .map(Arc::from);
        if let Some(p) = &payload {
            self.store(id, p).await;
        }
        Ok(payload)
    }

    async fn item(&self, id: i64) -> Loaded {
        if let Some(v) = self.cached(id).await {
            return Ok(Some(Arc::from(v)));
        }
        match self.strategy {
            Strategy::CacheAside => self.load(id).await,
            Strategy::SingleFlight => self.single_flight(id).await,
            Strategy::Lock => self.locked(id).await,
        }
    }

    async fn single_flight(&self, id: i64) -> Loaded {
        let (tx, mut rx) = {
            let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
            match flights.get(&id) {
                Some(rx) => (None, rx.clone()),
                None => {
                    let (tx, rx) = watch::channel(None);
                    flights.insert(id, rx.clone());
                    (Some(tx), rx)
                }
            }
        };
        let Some(tx) = tx else {
            // A follower: the leader's result, or a failure if the leader went away.
            return match rx.wait_for(Option::is_some).await {
                Ok(v) => v.clone().unwrap_or(Err(())),
                Err(_) => Err(()),
            };
        };
        // Removes the flight even if this request is cancelled mid-load (client gone).
        struct Land<'a>(&'a App, i64);
        impl Drop for Land<'_> {
            fn drop(&mut self) {
                self.0
                    .flights
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&self.1);
            }
        }
        let _land = Land(self, id);
        // A request that missed just before the last leader stored the value and landed finds
        // no flight and leads again: read the cache once more before loading, or it loads a
        // second time (the audit's herd check saw 2 loads for 100 cold requests).
        if let Some(v) = self.cached(id).await {
            let r: Loaded = Ok(Some(Arc::from(v)));
            let _ = tx.send(Some(r.clone()));
            return r;
        }
        let r = self.load(id).await;
        let _ = tx.send(Some(r.clone()));
        r
    }

    async fn locked(&self, id: i64) -> Loaded {
        let lock_key = format!("{}lock:{id}", self.prefix);
        let token: u64 = rand::random();
        let mut c = self.redis.clone();
        let mut take = redis::cmd("SET");
        take.arg(&lock_key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(LOCK_TTL_MS);
        match tokio::time::timeout(REDIS_DEADLINE, take.query_async::<Option<String>>(&mut c)).await
        {
            Ok(Ok(Some(_))) => {
                // Holding the lock: someone may have filled the key between our miss and now.
                let r = match self.cached(id).await {
                    Some(v) => Ok(Some(Arc::from(v))),
                    None => self.load(id).await,
                };
                let mut release = self.unlock.key(&lock_key);
                release.arg(token);
                let _ =
                    tokio::time::timeout(REDIS_DEADLINE, release.invoke_async::<i64>(&mut c)).await;
                r
            }
            Ok(Ok(None)) => {
                let deadline = tokio::time::Instant::now() + LOCK_WAIT;
                while tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(LOCK_POLL).await;
                    if let Some(v) = self.cached(id).await {
                        return Ok(Some(Arc::from(v)));
                    }
                }
                self.load(id).await
            }
            // Redis failed: no lock to take, load (fail open).
            _ => self.load(id).await,
        }
    }
}

async fn get_item(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Response {
    match app.item(id).await {
        Ok(Some(payload)) => payload.to_string().into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such item\n").into_response(),
        Err(()) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response(),
    }
}

async fn health() -> &'static str {
    "ok\n"
}

#[tokio::main]
async fn main() -> Result<()> {
    let strategy = match env("APP_STRATEGY")
        .unwrap_or_else(|_| "cache-aside".into())
        .as_str()
    {
        "cache-aside" => Strategy::CacheAside,
        "single-flight" => Strategy::SingleFlight,
        "lock" => Strategy::Lock,
        other => bail!("APP_STRATEGY={other}: use cache-aside, single-flight or lock"),
    };
    let port: u16 = env("PORT")?.parse().context("PORT is not a port number")?;
    let schema = env("DB_SCHEMA")?;
    if !schema
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        bail!("DB_SCHEMA={schema} is not a plain identifier");
    }
    let load_sql = match env_or("APP_LOADER", "ledger".to_string())?.as_str() {
        "ledger" => format!("SELECT payload FROM {schema}.stampede_load($1)"),
        "query" => format!("SELECT payload FROM {schema}.items WHERE id = $1"),
        other => bail!("APP_LOADER={other}: use ledger or query"),
    };
    let redis = redis::Client::open(env("REDIS_URL")?).context("REDIS_URL")?;
    let redis = ConnectionManager::new_with_config(
        redis,
        ConnectionManagerConfig::new()
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100))
            .set_number_of_retries(usize::MAX)
            .set_connection_timeout(Some(Duration::from_millis(500)))
            .set_response_timeout(Some(REDIS_DEADLINE)),
    )
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
    .max_size(env_or("APP_DB_POOL", 16usize)?)
    .build()
    .context("building the database pool")?;
    // Fail at start, not at the first request, when the database is not reachable.
    drop(db.get().await.context("connecting to Postgres")?);
    let app = Arc::new(App {
        strategy,
        redis,
        db,
        load_sql,
        prefix: env_or("CACHE_PREFIX", "app:".to_string())?,
        ttl_ms: env_or("CACHE_TTL_MS", 3_000u64)?,
        flights: Mutex::new(HashMap::new()),
        unlock: redis::Script::new(UNLOCK_LUA),
    });
    let router = Router::new()
        .route("/items/{id}", get(get_item))
        .route("/health", get(health))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    eprintln!("app: {strategy:?} listening on 127.0.0.1:{port}");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving")?;
    Ok(())
}
