//! The database behind the cache: the run's own schema in Postgres (created, seeded and
//! dropped by the run), a connection pool per app instance, and the one loader statement whose
//! every execution is one DB call, its cost spent inside Postgres on a real connection: a
//! sleep (holds a connection, no CPU) or a heavy aggregate (burns the server's CPU).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::ValueEnum;
use deadpool_postgres::{
    Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, TimeoutType, Timeouts,
};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use tokio_postgres::types::Type;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{EnvError, UsageError};
use crate::ledger::{self, LedgerLoad};
use crate::sizes::Sizes;

mod own;
pub mod role;
use crate::metrics::{LoadGuard, Phase};
use crate::redact;
pub use own::OwnLoad;

/// What one load (one DB call) costs the database.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum DbQuery {
    /// `pg_sleep(--db-cost)` inside Postgres: a fixed cost that holds a real connection but
    /// no CPU, so only the pool saturates.
    Sleep,
    /// A CPU-bound aggregate over a seeded `reviews` table: the server's CPU saturates for real.
    Heavy,
}

/// Why a load did not produce an answer. Copy, so a single-flight leader can hand it to every
/// follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadFailure {
    /// Postgres returned an error or the connection broke.
    Db,
    /// The statement ran out of `statement_timeout` (`--db-timeout`).
    Timeout,
    /// The wait for a pooled connection ran out (`--db-timeout`): no statement was sent.
    PoolTimeout,
    /// The loader this request was waiting on was cancelled or panicked.
    Abandoned,
    /// The wait for the lock ran out under `--lock-timeout-policy error`.
    LockTimeout,
    /// Refused before it started, nothing sent to Postgres: `--db-limit` loads of this
    /// instance were in flight.
    Limited,
    /// Refused before it started, nothing sent to Postgres: the instance's breaker is open.
    BreakerOpen,
    /// Refused before it started, nothing sent to Postgres: `--db-rate` had no token left.
    RateLimited,
}

impl LoadFailure {
    /// Whether the load was refused by a protection (the request is served stale or rejected,
    /// not failed).
    pub fn refused(self) -> bool {
        matches!(
            self,
            LoadFailure::Limited | LoadFailure::BreakerOpen | LoadFailure::RateLimited
        )
    }
}

/// Rows seeded into `reviews` under `--db-query heavy`. Sized so that one aggregate over them
/// costs several ms of one core on the reference machine (see docs/faults.md): enough
/// for a herd to saturate a 2-core server, little enough that seeding takes well under a second.
pub const REVIEW_ROWS: i64 = 100_000;

/// What one load costs the database.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadCost {
    /// `pg_sleep` for this long on a held connection.
    Sleep(Duration),
    /// A CPU-bound aggregate over every row of `reviews` (seeded by [`Db::seed_reviews`]).
    Heavy,
}

/// The heavy loader's aggregate: the item's own mean rating and a helpfulness-weighted mean
/// over the whole catalogue, so every call scans and computes over every review. `$1` is the
/// item id; kept in one place so the cost measured before traffic is the cost paid in it.
fn heavy_aggregate(schema: &str) -> String {
    format!(
        "SELECT avg(r.rating) FILTER (WHERE r.item_id = $1) AS rating, \
         sum(r.rating * (r.helpful + 1))::float8 / sum(r.helpful + 1) AS catalogue_rating FROM {schema}.reviews r"
    )
}

/// Alias of the version column in the statement sent in the measured window: with
/// `{schema}.items` it is what [`Db::server_calls`] finds the statement by in
/// pg_stat_statements.
const MEASURED_ALIAS: &str = "stampede_load_version";

/// What loads outside the measured window add to the statement, so the server counts them
/// apart, exactly: pg_stat_statements identifies a statement by its parse tree, in which
/// aliases do not count, so the difference is one more output column.
const UNMEASURED_COLUMN: &str = ", 0 AS stampede_unmeasured";

/// The loader statement, in the measured window or outside it.
fn loader_sql(schema: &str, cost: LoadCost, measured: bool) -> String {
    let (alias, extra) = (
        MEASURED_ALIAS,
        if measured { "" } else { UNMEASURED_COLUMN },
    );
    match cost {
        LoadCost::Sleep(_) => format!(
            "SELECT i.payload, i.version AS {alias}{extra} FROM pg_sleep($2) LEFT JOIN {schema}.items i ON i.id = $1"
        ),
        LoadCost::Heavy => format!(
            "SELECT i.payload, i.version AS {alias}, a.rating, a.catalogue_rating{extra} FROM ({}) a LEFT JOIN {schema}.items i ON i.id = $1",
            heavy_aggregate(schema)
        ),
    }
}

/// Alias of the version a write returns: what [`Db::server_writes`] finds the write statement
/// by in pg_stat_statements, apart from the loader's.
const WRITE_ALIAS: &str = "stampede_write_version";

/// One write: the row's version bumped and its payload changed (its first 8 characters become
/// the new version in hex, so the length stays `--value-size`), in one statement that is its
/// own transaction, returning what the cache is to hold.
fn write_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.items SET version = version + 1, payload = overlay(payload placing lpad(to_hex(version + 1), 8, '0') from 1 for 8) WHERE id = $1 RETURNING version AS {WRITE_ALIAS}, payload"
    )
}

/// The loader statement of a sharded run: the load goes through the run's load ledger
/// ([`crate::ledger`]), which spends the `sleep` cost and records the load on the server's
/// clock, so that herds across shards on different machines are counted on one clock. One row
/// whether or not the item exists (payload null when not), like the built-in loader.
fn ledger_loader_sql(schema: &str, measured: bool) -> String {
    let extra = if measured { "" } else { UNMEASURED_COLUMN };
    format!(
        "SELECT l.payload, l.version AS {MEASURED_ALIAS}{extra} FROM (SELECT 1) one LEFT JOIN LATERAL {schema}.{}($1) l ON true",
        crate::ledger::LOAD_FUNCTION
    )
}

fn loader_types(cost: LoadCost) -> &'static [Type] {
    match cost {
        LoadCost::Sleep(_) => &[Type::INT8, Type::FLOAT8],
        LoadCost::Heavy => &[Type::INT8],
    }
}

/// How long a load's statement may run past `--db-timeout` before the app itself gives up on
/// it. Postgres's `statement_timeout` normally ends it first; this bounds a statement on a
/// server that stopped answering altogether.
const STATEMENT_GRACE: Duration = Duration::from_millis(100);

/// How long one probe of the fault schedule (connect, `SELECT 1`, reading the counts) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The run's schema on a Postgres server, and an admin connection for setup and read-back.
pub struct Db {
    /// Replaced by a new connection when a crash of the server closed it.
    admin: Mutex<Arc<tokio_postgres::Client>>,
    config: tokio_postgres::Config,
    /// TLS as the URL's sslmode asks (unused under sslmode=disable).
    tls: MakeRustlsConnect,
    url: String,
    pub schema: String,
    pub version: String,
    /// Whether the run's tables are logged: a crash of Postgres empties unlogged tables.
    logged: bool,
    /// Why the server's call count cannot be read, when it cannot.
    pub stat_statements_missing: Option<String>,
    /// `--db-sql`: the user's query is the loader, and nothing of the run is in the database.
    own: Option<Arc<own::OwnQuery>>,
    /// Whether the connection to the server is encrypted (pg_stat_ssl).
    pub ssl: bool,
}

/// Why pg_stat_statements cannot be read on this connection's database, or None.
async fn stat_statements_missing(admin: &tokio_postgres::Client) -> Option<String> {
    match admin
        .query_one("SELECT count(*) FROM pg_stat_statements", &[])
        .await
    {
        Ok(_) => None,
        Err(e) => Some(format!(
            "pg_stat_statements is not available on this server ({}); enable it with shared_preload_libraries = 'pg_stat_statements' and CREATE EXTENSION pg_stat_statements",
            e.as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_string())
        )),
    }
}

/// Whether this connection is encrypted, as the server sees it.
async fn ssl_in_use(admin: &tokio_postgres::Client) -> bool {
    admin
        .query_one(
            "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
            &[],
        )
        .await
        .is_ok_and(|r| r.get::<_, bool>(0))
}

async fn connect_admin(url: &str) -> Result<(tokio_postgres::Client, crate::tls::PgTarget)> {
    connect_admin_with(url, false).await
}

/// Add `-c name=value` to the options a connection starts with, after any the URL gave
/// (`?options=-c search_path=…`), which a later setting would otherwise replace.
fn add_option(config: &mut tokio_postgres::Config, option: &str) {
    let options = match config.get_options() {
        Some(o) if !o.trim().is_empty() => format!("{o} {option}"),
        _ => option.to_string(),
    };
    config.options(options);
}

/// Every transaction of a connection started with this is read-only unless it says
/// otherwise: under `--db-sql` the server itself refuses whatever would write in the user's
/// database (a COMMIT inside the user's SQL starts another read-only one).
pub(crate) const READ_ONLY: &str = "-c default_transaction_read_only=on";

/// The admin connection; with `read_only` (the user's own database, `--db-sql`) every
/// transaction on it, and on the connections made from its config, is read-only.
async fn connect_admin_with(
    url: &str,
    read_only: bool,
) -> Result<(tokio_postgres::Client, crate::tls::PgTarget)> {
    crate::tls::pg_connect_with(url, |config| {
        if read_only {
            add_option(config, READ_ONLY);
        }
    })
    .await
}

/// `CREATE TABLE` or `CREATE UNLOGGED TABLE`.
fn create_table(logged: bool) -> &'static str {
    if logged {
        "CREATE TABLE"
    } else {
        "CREATE UNLOGGED TABLE"
    }
}

/// The table in a run's schema whose one row a live run touches every second.
const HEARTBEAT_TABLE: &str = "stampede_heartbeat";

/// Schemas of runs that died without dropping them: named `stampede_<id>`, holding a heartbeat
/// table whose row the server's clock says is older than `stale`. A schema without one is
/// not this tool's run (or one still being created) and is never listed.
pub async fn dead_schemas(url: &str, stale: Duration) -> Result<Vec<String>> {
    let (admin, _) = connect_admin(url).await?;
    let rows = admin
        .query(
            "SELECT n.nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid WHERE n.nspname LIKE 'stampede\\_%' AND c.relname = $1",
            &[&HEARTBEAT_TABLE],
        )
        .await
        .context("listing stampede's schemas")?;
    let mut dead = Vec::new();
    for r in rows {
        let schema: String = r.get(0);
        let age: Option<f64> = admin
            .query_one(
                &format!(
                    "SELECT extract(epoch FROM now() - max(at))::float8 FROM {schema}.{HEARTBEAT_TABLE}"
                ),
                &[],
            )
            .await
            .ok()
            .and_then(|r| r.get(0));
        if age.is_some_and(|a| a > stale.as_secs_f64()) {
            dead.push(schema);
        }
    }
    Ok(dead)
}

/// Drop a dead run's schema.
pub async fn drop_schema(url: &str, schema: &str) -> Result<()> {
    let (admin, _) = connect_admin(url).await?;
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .with_context(|| format!("dropping schema {schema}"))
}

/// Refuse a run whose pools the server has no room for: max_connections less the reserved
/// slots and the client connections already open.
async fn check_room(admin: &tokio_postgres::Client, url: &str, connections: u32) -> Result<()> {
    let room = admin
            .query_one(
                "SELECT current_setting('max_connections')::int8 - current_setting('superuser_reserved_connections')::int8 - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
                &[],
            )
            .await
            .context("reading max_connections")?
            .get::<_, i64>(0);
    if i64::from(connections) > room {
        return Err(UsageError::new(format!(
                "the run needs {connections} database connections (instances × --db-pool) but {} has room for {} more (max_connections less the reserved and open ones): use fewer instances or a smaller pool",
                redact::url(url),
                room.max(0)
            ))
            .into());
    }
    Ok(())
}

/// Items sent per statement when each has its own size: one int4 array of this many.
const SIZED_CHUNK: u64 = 1_000_000;

/// Seed items 1..=keys into `schema.items`, item `id` with `sizes.of(id)` bytes. Generated
/// inside the server: no payload crosses the network, far faster than COPY for synthetic
/// payloads. Each payload differs (md5 of the id) so nothing compresses away. Per-item sizes
/// travel as an int array, unnested with its ordinality (one statement per million items).
async fn seed_items(
    admin: &tokio_postgres::Client,
    schema: &str,
    keys: u64,
    sizes: &Sizes,
) -> Result<()> {
    let fail = || format!("seeding {keys} items into {schema}.items");
    match sizes {
        Sizes::Fixed(value_size) => {
            let seed = format!(
                "INSERT INTO {schema}.items (id, version, payload)
                 SELECT g, 1, substr(repeat(md5(g::text), $2::int), 1, $3::int) FROM generate_series(1, $1::int8) g"
            );
            let repeats = value_size.div_ceil(32) as i32;
            admin
                .execute(&seed, &[&(keys as i64), &repeats, &(*value_size as i32)])
                .await
                .with_context(fail)?;
        }
        Sizes::PerItem(_) => {
            let seed = format!(
                "INSERT INTO {schema}.items (id, version, payload)
                 SELECT $1::int8 + g.n, 1, substr(repeat(md5(($1::int8 + g.n)::text), (g.len + 31) / 32), 1, g.len)
                 FROM unnest($2::int4[]) WITH ORDINALITY AS g(len, n)"
            );
            let mut from = 0u64;
            while from < keys {
                let to = (from + SIZED_CHUNK).min(keys);
                let lens: Vec<i32> = (from + 1..=to)
                    .map(|id| sizes.of(id).min(i32::MAX as usize) as i32)
                    .collect();
                admin
                    .execute(&seed, &[&(from as i64), &lens])
                    .await
                    .with_context(fail)?;
                from = to;
            }
        }
    }
    Ok(())
}

impl Db {
    /// Create the run's schema and seed `keys` items, item `id` with `sizes.of(id)` bytes. The tables are
    /// unlogged (no WAL: faster to seed) unless `logged`: a Postgres crash empties unlogged
    /// tables, so a run with a Postgres fault needs logged ones, committed durably.
    /// `connections`, on a server the tool did not start, is what the run's pools will open:
    /// refused (a usage error, before anything is created) when the server cannot give that
    /// many. A managed server is sized for the pools when it starts.
    pub async fn setup(
        url: &str,
        run_id: &str,
        keys: u64,
        sizes: &Sizes,
        connections: Option<u32>,
        logged: bool,
        ledger_cost: Duration,
    ) -> Result<Db> {
        let schema = format!("stampede_{run_id}");
        Db::setup_in(url, &schema, keys, sizes, connections, logged, ledger_cost).await
    }

    /// [`Db::setup`] in a schema of the caller's naming (`--schema`: an app under test that
    /// was configured before the run). The schema must not exist yet.
    pub async fn setup_in(
        url: &str,
        schema: &str,
        keys: u64,
        sizes: &Sizes,
        connections: Option<u32>,
        logged: bool,
        ledger_cost: Duration,
    ) -> Result<Db> {
        let (admin, target) = connect_admin(url).await?;
        let version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .context("reading the Postgres server version")?
            .get(0);
        if let Some(connections) = connections {
            check_room(&admin, url, connections).await?;
        }
        if logged {
            // A managed server runs with synchronous_commit off: a commit whose WAL is still
            // in shared memory when the server is killed is lost. The seed must survive.
            admin
                .batch_execute("SET synchronous_commit = on")
                .await
                .context("setting synchronous_commit for the seed")?;
        }
        let schema = schema.to_string();
        let setup = format!(
            "CREATE SCHEMA {schema};
             {} {schema}.items (id bigint NOT NULL, version bigint NOT NULL, payload text NOT NULL);",
            create_table(logged)
        );
        admin.batch_execute(&setup).await.with_context(|| {
            format!("creating schema {schema} (the user needs CREATE on the database)")
        })?;
        // Says the run is alive; `stampede cleanup` drops schemas whose heartbeat went stale.
        admin
            .batch_execute(&format!(
                "CREATE TABLE {schema}.{HEARTBEAT_TABLE} (at timestamptz NOT NULL); INSERT INTO {schema}.{HEARTBEAT_TABLE} VALUES (now());"
            ))
            .await
            .context("creating the run's heartbeat")?;
        seed_items(&admin, &schema, keys, sizes).await?;
        admin
            .batch_execute(&format!(
                "ALTER TABLE {schema}.items ADD PRIMARY KEY (id); ANALYZE {schema}.items;"
            ))
            .await
            .context("indexing the seeded items")?;
        ledger::install(&admin, &schema, ledger_cost, logged).await?;
        Ok(Db::on_run_schema(admin, target, url, schema, version, logged).await)
    }

    /// The `Db` of a run schema that exists (made by this process or another).
    async fn on_run_schema(
        admin: tokio_postgres::Client,
        target: crate::tls::PgTarget,
        url: &str,
        schema: String,
        version: String,
        logged: bool,
    ) -> Db {
        let stat_statements_missing = stat_statements_missing(&admin).await;
        let ssl = ssl_in_use(&admin).await;
        Db {
            admin: Mutex::new(Arc::new(admin)),
            config: target.config,
            tls: target.tls,
            url: url.to_string(),
            schema,
            version,
            logged,
            stat_statements_missing,
            own: None,
            ssl,
        }
    }

    /// The schema of run `run_id` that another process (a sharded run's shard 0, or `stampede
    /// prepare`) created and seeded: this process only uses it, and drops nothing.
    pub async fn attach_run(url: &str, run_id: &str, logged: bool) -> Result<Db> {
        let (admin, target) = connect_admin(url).await?;
        let version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .context("reading the Postgres server version")?
            .get(0);
        let schema = format!("stampede_{run_id}");
        let found: bool = admin
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'items')",
                &[&schema],
            )
            .await
            .context("looking for the run's schema")?
            .get(0);
        if !found {
            return Err(EnvError(format!(
                "the run's schema {schema} is not on {}: the shard that set the run up has not seeded it there (are all shards given the same --pg-url and --run-id?)",
                redact::url(url)
            ))
            .into());
        }
        Ok(Db::on_run_schema(admin, target, url, schema, version, logged).await)
    }

    /// The admin connection, opened again if a crash of the server closed it.
    async fn admin(&self) -> Result<Arc<tokio_postgres::Client>> {
        let current = self.admin.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !current.is_closed() {
            return Ok(current);
        }
        let (client, _) = connect_admin_with(&self.url, self.own.is_some()).await?;
        let client = Arc::new(client);
        *self.admin.lock().unwrap_or_else(|p| p.into_inner()) = client.clone();
        Ok(client)
    }

    /// The fault schedule's own connection to this server: it reads the counts before a
    /// crash and tells when the server is back.
    pub fn probe(&self) -> PgProbe {
        PgProbe {
            config: self.config.clone(),
            tls: self.tls.clone(),
            schema: self.schema.clone(),
            // The user's statement is not found by schema: read at the end only.
            stats: self.stat_statements_missing.is_none() && self.own.is_none(),
            client: None,
        }
    }

    /// The rows of `ids` (payload and version), read in one statement on the admin
    /// connection: cache warming reads in bulk, not one load per key through the app's pools,
    /// and is not a DB call.
    /// The payload bytes of every seeded item, as the server counts them.
    pub async fn payload_bytes(&self) -> Result<u64> {
        let admin = self.admin().await?;
        let row = admin
            .query_one(
                &format!(
                    "SELECT coalesce(sum(octet_length(payload)), 0)::int8 FROM {}.items",
                    self.schema
                ),
                &[],
            )
            .await
            .context("counting the seeded payload bytes")?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    pub async fn rows(&self, ids: &[i64]) -> Result<Vec<(i64, String, i64)>> {
        if let Some(own) = &self.own {
            return self.own_rows(own, ids).await;
        }
        let sql = format!(
            "SELECT id, payload, version FROM {}.items WHERE id = ANY($1)",
            self.schema
        );
        let rows = self
            .admin()
            .await?
            .query(&sql, &[&ids])
            .await
            .context("reading items to warm the cache")?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, String>(1), r.get(2)))
            .collect())
    }

    /// Seed `reviews` for `--db-query heavy` and measure what one heavy aggregate costs on
    /// the idle server (median of 5, ms). The statement measured is not the loader, so these
    /// runs are not counted as DB calls.
    pub async fn seed_reviews(&self, keys: u64) -> Result<f64> {
        let schema = &self.schema;
        let admin = self.admin().await?;
        admin
            .batch_execute(&format!(
                "{} {schema}.reviews (item_id bigint NOT NULL, rating int NOT NULL, helpful int NOT NULL)",
                create_table(self.logged)
            ))
            .await
            .with_context(|| format!("creating {schema}.reviews"))?;
        // Generated inside the server, spread over every item, deterministic.
        admin
            .execute(
                &format!(
                    "INSERT INTO {schema}.reviews SELECT g % $2::int8 + 1, (g * 7919) % 5 + 1, (g * 104729) % 1000 FROM generate_series(1, $1::int8) g"
                ),
                &[&REVIEW_ROWS, &(keys.max(1) as i64)],
            )
            .await
            .with_context(|| format!("seeding {REVIEW_ROWS} rows into {schema}.reviews"))?;
        // Sets hint bits and statistics now, so the first loads do not pay for it.
        admin
            .batch_execute(&format!("VACUUM ANALYZE {schema}.reviews"))
            .await
            .with_context(|| format!("vacuuming {schema}.reviews"))?;
        admin
            .batch_execute("SET max_parallel_workers_per_gather = 0")
            .await
            .context("disabling parallel query for the measurement")?;
        let stmt = admin
            .prepare_typed(&heavy_aggregate(schema), &[Type::INT8])
            .await
            .context("preparing the heavy aggregate")?;
        let mut times = Vec::with_capacity(5);
        for id in 1..=5i64 {
            let t = Instant::now();
            admin
                .query_one(&stmt, &[&id])
                .await
                .context("running the heavy aggregate")?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let _ = admin
            .batch_execute("RESET max_parallel_workers_per_gather")
            .await;
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    /// A pool of `size` connections for one app instance, already connected. With
    /// `via_ledger` (a `sleep` cost only) every load goes through the run's load ledger,
    /// recorded on the server's clock.
    pub async fn origin_with(
        &self,
        size: u32,
        cost: LoadCost,
        timeout: Option<Duration>,
        via_ledger: bool,
    ) -> Result<Origin> {
        let via_ledger = via_ledger && matches!(cost, LoadCost::Sleep(_));
        // The config keeps the URL's options and, under --db-sql, the read-only default.
        let mut cfg = self.config.clone();
        if let Some(t) = timeout {
            add_option(
                &mut cfg,
                &format!("-c statement_timeout={}", t.as_millis().max(1)),
            );
        }
        if cost == LoadCost::Heavy {
            // One load = one backend = one core, as in an OLTP app: parallel workers would let
            // a single query borrow the cores the herd is fighting over.
            add_option(&mut cfg, "-c max_parallel_workers_per_gather=0");
        }
        // Fast recycling checks that the connection is still open and discards it when not
        // (a crash of Postgres closes them all), so the pool opens new ones once it is back.
        let mgr = Manager::from_config(
            cfg,
            self.tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(size as usize)
            .wait_timeout(timeout)
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(Runtime::Tokio1)
            .build()
            .context("building the database pool")?;
        let (sql, types) = match &self.own {
            Some(own) => (own.sql.clone(), &own.types[..]),
            None if via_ledger => (
                [
                    ledger_loader_sql(&self.schema, true),
                    ledger_loader_sql(&self.schema, false),
                ],
                &[Type::INT8][..],
            ),
            None => (
                [
                    loader_sql(&self.schema, cost, true),
                    loader_sql(&self.schema, cost, false),
                ],
                loader_types(cost),
            ),
        };
        // Open every connection now: connecting inside the first herd would inflate its latency
        // with set-up cost a running app does not pay.
        let mut held = Vec::with_capacity(size as usize);
        for _ in 0..size {
            let c = pool.get().await.map_err(|e| {
                EnvError(format!(
                    "opening a database connection to {}: {e} (max_connections too low?)",
                    redact::url(&self.url)
                ))
            })?;
            for s in &sql {
                c.prepare_typed_cached(s, types)
                    .await
                    .context("preparing the loader statement")?;
            }
            held.push(c);
        }
        drop(held);
        // Under a deadline every step of a load has one: the wait for a pooled connection,
        // opening a new one (after a crash closed them), and the statement.
        let timeouts = Timeouts {
            wait: timeout,
            create: Some(timeout.unwrap_or(Duration::from_secs(10))),
            recycle: Some(timeout.unwrap_or(Duration::from_secs(10))),
        };
        Ok(Origin {
            pool,
            sql,
            write_sql: write_sql(&self.schema),
            own: self.own.clone(),
            cost,
            via_ledger,
            timeouts,
            statement_deadline: timeout.map(|t| t + STATEMENT_GRACE),
        })
    }

    /// Executions of the measured window's loader statement counted by the server
    /// (pg_stat_statements: statements that completed), or None when the extension is not
    /// available.
    pub async fn server_calls(&self) -> Option<u64> {
        if self.stat_statements_missing.is_some() {
            return None;
        }
        if let Some(own) = &self.own {
            return self.own_server_calls(own).await;
        }
        server_calls(&*self.admin().await.ok()?, &self.schema).await
    }

    /// The server's clock now, µs since the epoch: the clock the load ledger is written by.
    pub async fn server_now_us(&self) -> Result<i64> {
        ledger::server_now_us(&*self.admin().await?).await
    }

    /// The loads recorded in the run's ledger that started in `[from_us, to_us)`, server clock.
    pub async fn ledger_loads(&self, from_us: i64, to_us: i64) -> Result<Vec<LedgerLoad>> {
        ledger::read(&*self.admin().await?, &self.schema, from_us, to_us).await
    }

    /// Executions of the write statement counted by the server (pg_stat_statements), or None
    /// when the extension is not available.
    pub async fn server_writes(&self) -> Option<u64> {
        if self.stat_statements_missing.is_some() {
            return None;
        }
        let pattern = format!("%{}.items%{WRITE_ALIAS}%", self.schema);
        let row = self
            .admin()
            .await
            .ok()?
            .query_one(
                "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE query LIKE $1",
                &[&pattern],
            )
            .await
            .ok()?;
        Some(row.get::<_, i64>(0) as u64)
    }

    /// The current version of each of `ids` (on the admin connection: not a DB call).
    pub async fn versions(&self, ids: &[i64]) -> Result<Vec<(i64, i64)>> {
        let sql = format!(
            "SELECT id, version FROM {}.items WHERE id = ANY($1)",
            self.schema
        );
        let rows = self
            .admin()
            .await?
            .query(&sql, &[&ids])
            .await
            .context("reading the written items' versions")?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Whether the run has a heartbeat in this database: not under --db-sql, where nothing of
    /// the run is in it, so nothing to clean up.
    pub fn keeps_heartbeat(&self) -> bool {
        self.own.is_none()
    }

    /// Say this run is alive (see [`dead_schemas`]).
    pub async fn heartbeat(&self) -> Result<()> {
        self.heartbeat_ahead(Duration::ZERO).await
    }

    /// Say this run is alive for `ahead` from now on the server's clock: `stampede prepare`
    /// dates the heartbeat at its shards' start, so `cleanup` counts its age from then.
    pub async fn heartbeat_ahead(&self, ahead: Duration) -> Result<()> {
        if !self.keeps_heartbeat() {
            return Ok(());
        }
        // An integer of ours, so the one round trip of a simple query is safe.
        let ms = ahead.as_millis().min(i64::MAX as u128) as i64;
        self.admin()
            .await?
            .batch_execute(&format!(
                "UPDATE {}.{HEARTBEAT_TABLE} SET at = now() + interval '{ms} milliseconds'",
                self.schema
            ))
            .await
            .context("writing the run's heartbeat")
    }

    /// Drop the run's schema (on an external server this is the whole clean-up).
    pub async fn teardown(&self) -> Result<()> {
        if self.own.is_some() {
            return Ok(());
        }
        self.admin()
            .await?
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .await
            .with_context(|| format!("dropping schema {}", self.schema))
    }
}

/// The measured window's loader statement as pg_stat_statements counts it in `schema`.
async fn server_calls(client: &tokio_postgres::Client, schema: &str) -> Option<u64> {
    // The built-in loader reads `{schema}.items`; a sharded run's calls `{schema}.stampede_load`.
    let pattern = format!("%{MEASURED_ALIAS}%{schema}.items%");
    let ledger = format!(
        "%{MEASURED_ALIAS}%{schema}.{}(%",
        crate::ledger::LOAD_FUNCTION
    );
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE (query LIKE $1 OR query LIKE $2) AND query NOT LIKE '%stampede_unmeasured%'",
            &[&pattern, &ledger],
        )
        .await
        .ok()?;
    Some(row.get::<_, i64>(0) as u64)
}

/// The fault schedule's connection to Postgres: opened on demand and again after a crash,
/// every step bounded, so it can tell when the server is back and read its counts just
/// before a kill.
pub struct PgProbe {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    schema: String,
    /// Whether pg_stat_statements can be read.
    stats: bool,
    client: Option<tokio_postgres::Client>,
}

impl PgProbe {
    async fn client(&mut self) -> Option<&tokio_postgres::Client> {
        if self
            .client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            self.client = None;
            if let Ok(Ok((client, conn))) =
                tokio::time::timeout(PROBE_TIMEOUT, self.config.connect(self.tls.clone())).await
            {
                tokio::spawn(async move {
                    // Ends when the client is dropped or the server goes away.
                    let _ = conn.await;
                });
                self.client = Some(client);
            }
        }
        self.client.as_ref()
    }

    /// Whether the server answers a query now.
    pub async fn ready(&mut self) -> bool {
        let Some(c) = self.client().await else {
            return false;
        };
        let ok = matches!(
            tokio::time::timeout(PROBE_TIMEOUT, c.simple_query("SELECT 1")).await,
            Ok(Ok(_))
        );
        if !ok {
            self.client = None;
        }
        ok
    }

    /// The server's count of the measured loader statement now; None when it cannot be read.
    pub async fn server_calls(&mut self) -> Option<u64> {
        if !self.stats {
            return None;
        }
        let schema = self.schema.clone();
        let c = self.client().await?;
        tokio::time::timeout(PROBE_TIMEOUT, server_calls(c, &schema))
            .await
            .ok()
            .flatten()
    }
}

/// One app instance's database access.
pub struct Origin {
    pool: Pool,
    /// The loader statement: in the measured window, and outside it.
    sql: [String; 2],
    /// The write statement (prepared on first use: a run without writes never sends it).
    write_sql: String,
    /// `--db-sql`: the user's query and its keys.
    own: Option<Arc<own::OwnQuery>>,
    cost: LoadCost,
    /// Loads go through the run's load ledger (a sharded run): `$1` is the only parameter.
    via_ledger: bool,
    /// Bounds of a load's wait for a connection and of opening a new one.
    timeouts: Timeouts,
    /// When the app gives up on a statement itself (`--db-timeout` plus a grace).
    statement_deadline: Option<Duration>,
}

/// A loaded row: the item's payload and version.
pub struct Loaded(Row);

impl Loaded {
    pub fn payload(&self) -> &[u8] {
        self.0.get::<_, &str>(0).as_bytes()
    }
    pub fn version(&self) -> u64 {
        self.0.get::<_, i64>(1) as u64
    }
}

/// A committed write: the row's new version and payload.
pub struct Written(Row);

impl Written {
    pub fn version(&self) -> u64 {
        self.0.get::<_, i64>(0) as u64
    }
    pub fn payload(&self) -> &[u8] {
        self.0.get::<_, &str>(1).as_bytes()
    }
}

impl Origin {
    /// Write `id`: one UPDATE on a pooled connection, committed when it returns. None when
    /// it failed (no connection, an error, the deadline): nothing was committed, or nothing
    /// the tool can vouch for. Not a load and not a DB call.
    pub async fn write(&self, id: u64) -> Option<Written> {
        let client = self.pool.timeout_get(&self.timeouts).await.ok()?;
        let run = async {
            let stmt = client
                .prepare_typed_cached(&self.write_sql, &[Type::INT8])
                .await
                .ok()?;
            client.query_opt(&stmt, &[&(id as i64)]).await.ok()?
        };
        let row = match self.statement_deadline {
            Some(d) => tokio::time::timeout(d, run).await.ok()??,
            None => run.await?,
        };
        Some(Written(row))
    }

    /// Load `id`: wait for a connection, then run the loader statement (one DB call, counted
    /// on `load` when it is sent). `Ok(None)` when the id does not exist.
    pub async fn load(&self, id: u64, load: &LoadGuard<'_>) -> Result<Option<Loaded>, LoadFailure> {
        // An id past the user's keys is not in their table: nothing to ask.
        let own_key = match &self.own {
            Some(own) => match own.key(id) {
                Some(k) => Some(k),
                None => return Ok(None),
            },
            None => None,
        };
        let client = self
            .pool
            .timeout_get(&self.timeouts)
            .await
            .map_err(|e| match e {
                PoolError::Timeout(TimeoutType::Wait) => {
                    load.pool_timeout();
                    LoadFailure::PoolTimeout
                }
                // Opening a new connection failed or ran out of time: the server is down,
                // refusing connections while it recovers, or not answering.
                _ => {
                    load.connect_failed();
                    LoadFailure::Db
                }
            })?;
        let statement = load.statement();
        let sql = match statement.phase() {
            Phase::Measured => &self.sql[0],
            Phase::WarmUp => &self.sql[1],
        };
        let run = async {
            let types = match &self.own {
                Some(own) => &own.types[..],
                None if self.via_ledger => &[Type::INT8][..],
                None => loader_types(self.cost),
            };
            let stmt = client.prepare_typed_cached(sql, types).await.map_err(|_| {
                statement.failed(false);
                LoadFailure::Db
            })?;
            let id = id as i64;
            match (own_key, self.cost) {
                (Some(key), _) => client.query_one(&stmt, &[key]).await,
                (None, LoadCost::Sleep(_)) if self.via_ledger => {
                    client.query_one(&stmt, &[&id]).await
                }
                (None, LoadCost::Sleep(d)) => {
                    // A slow-db shock makes the server really work longer.
                    let secs = d.as_secs_f64() * load.cost_factor();
                    client.query_one(&stmt, &[&id, &secs]).await
                }
                (None, LoadCost::Heavy) => client.query_one(&stmt, &[&id]).await,
            }
            .map_err(|e| {
                if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
                    statement.failed(true);
                    LoadFailure::Timeout
                } else {
                    statement.failed(false);
                    LoadFailure::Db
                }
            })
        };
        let row = match self.statement_deadline {
            Some(d) => tokio::time::timeout(d, run).await.unwrap_or_else(|_| {
                // The server did not even cancel it: it is not answering.
                statement.failed(true);
                Err(LoadFailure::Timeout)
            })?,
            None => run.await?,
        };
        if row.get::<_, Option<&str>>(0).is_none() {
            return Ok(None);
        }
        Ok(Some(Loaded(row)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A setting added to a connection's options keeps the URL's (`search_path` under
    /// --db-sql matters to the user's query), and the read-only default reaches the loaders.
    #[test]
    fn added_options_keep_the_urls() {
        let mut c: tokio_postgres::Config =
            "postgres://u@127.0.0.1/db?options=-c%20search_path%3Dshop"
                .parse()
                .expect("a URL");
        add_option(&mut c, READ_ONLY);
        add_option(&mut c, "-c statement_timeout=100");
        assert_eq!(
            c.get_options(),
            Some(
                "-c search_path=shop -c default_transaction_read_only=on -c statement_timeout=100"
            )
        );
        let mut bare: tokio_postgres::Config = "postgres://u@127.0.0.1/db".parse().expect("a URL");
        add_option(&mut bare, READ_ONLY);
        assert_eq!(bare.get_options(), Some(READ_ONLY));
    }
}
