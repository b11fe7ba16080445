//! The database behind the cache: the run's own schema in Postgres (created, seeded and
//! dropped by the run), a connection pool per app instance, and the one loader statement whose
//! every execution is one DB call, its cost spent inside Postgres on a real connection: a
//! sleep (holds a connection, no CPU) or a heavy aggregate (burns the server's CPU).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::ValueEnum;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use serde::{Deserialize, Serialize};
use tokio_postgres::types::Type;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{EnvError, UsageError};
use crate::ledger;
use crate::sizes::Sizes;

mod counts;
mod load;
mod own;
mod probe;
pub mod role;
use crate::redact;
pub use load::{LoadCost, LoadFailure, Loaded, Origin};
use load::{
    STATEMENT_GRACE, UNMEASURED_COLUMN, heavy_aggregate, ledger_loader_sql, loader_sql,
    loader_types, write_sql,
};
pub use own::OwnLoad;
pub use probe::PgProbe;

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

impl std::fmt::Display for DbQuery {
    /// Its flag value, as `--help` and the settings table name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
    }
}

/// Rows seeded into `reviews` under `--db-query heavy`. Sized so that one aggregate over them
/// costs several ms of one core on the reference machine (see docs/faults.md): enough
/// for a herd to saturate a 2-core server, little enough that seeding takes well under a second.
pub const REVIEW_ROWS: i64 = 100_000;

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

/// `c` with its address replaced by `addr` (the network proxy's), everything else kept: the
/// config has no way to remove a host, so the rest is copied into a new one.
fn readdress(c: &tokio_postgres::Config, addr: std::net::SocketAddr) -> tokio_postgres::Config {
    let mut n = tokio_postgres::Config::new();
    if let Some(u) = c.get_user() {
        n.user(u);
    }
    if let Some(p) = c.get_password() {
        n.password(p);
    }
    if let Some(d) = c.get_dbname() {
        n.dbname(d);
    }
    if let Some(o) = c.get_options() {
        n.options(o);
    }
    if let Some(a) = c.get_application_name() {
        n.application_name(a);
    }
    if let Some(t) = c.get_connect_timeout() {
        n.connect_timeout(*t);
    }
    n.ssl_mode(c.get_ssl_mode());
    n.host(addr.ip().to_string()).port(addr.port());
    n
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
    /// The server's host and port, as the app's connections reach it (for the network proxy).
    pub fn address(&self) -> Option<(String, u16)> {
        let host = self.config.get_hosts().iter().find_map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => Some(h.clone()),
            #[allow(unreachable_patterns)]
            _ => None,
        })?;
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        Some((host, port))
    }

    pub async fn origin_with(
        &self,
        size: u32,
        cost: LoadCost,
        timeout: Option<Duration>,
        (via_ledger, via): (bool, Option<std::net::SocketAddr>),
    ) -> Result<Origin> {
        let via_ledger = via_ledger && matches!(cost, LoadCost::Sleep(_));
        // The config keeps the URL's options and, under --db-sql, the read-only default; `via`
        // (the network proxy, `--pg-rtt`) replaces only the address.
        let mut cfg = match via {
            Some(addr) => readdress(&self.config, addr),
            None => self.config.clone(),
        };
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

    /// Drop the run's schema (on an external server this is the whole clean-up). Loads the
    /// run abandoned may still be running in the server (a 30 s load after a Ctrl-C): their
    /// statements are cancelled first, since the DROP would otherwise wait for their locks
    /// until they end by themselves. Only statements that name this run's schema are
    /// cancelled; a cancel refused (another role's backend) leaves the DROP to wait as before.
    pub async fn teardown(&self) -> Result<()> {
        if self.own.is_some() {
            return Ok(());
        }
        let admin = self.admin().await?;
        let _ = admin
            .execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
                 WHERE pid <> pg_backend_pid() AND state = 'active' AND strpos(query, $1) > 0",
                &[&format!("{}.", self.schema)],
            )
            .await;
        admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .await
            .with_context(|| format!("dropping schema {}", self.schema))
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
