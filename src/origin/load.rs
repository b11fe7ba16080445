//! The counted load statement: the loader and write SQL a run sends (in the measured window
//! and outside it, so the server counts them apart), and [`Origin`], one app instance's pool
//! that runs them, with why a load failed.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Pool, PoolError, TimeoutType, Timeouts};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use super::own;
use crate::metrics::{LoadGuard, Phase};

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
pub(super) fn heavy_aggregate(schema: &str) -> String {
    format!(
        "SELECT avg(r.rating) FILTER (WHERE r.item_id = $1) AS rating, \
         sum(r.rating * (r.helpful + 1))::float8 / sum(r.helpful + 1) AS catalogue_rating FROM {schema}.reviews r"
    )
}

/// Alias of the version column in the statement sent in the measured window: with
/// `{schema}.items` it is what [`Db::server_calls`] finds the statement by in
/// pg_stat_statements.
pub(super) const MEASURED_ALIAS: &str = "stampede_load_version";

/// What loads outside the measured window add to the statement, so the server counts them
/// apart, exactly: pg_stat_statements identifies a statement by its parse tree, in which
/// aliases do not count, so the difference is one more output column.
pub(super) const UNMEASURED_COLUMN: &str = ", 0 AS stampede_unmeasured";

/// The loader statement, in the measured window or outside it.
pub(super) fn loader_sql(schema: &str, cost: LoadCost, measured: bool) -> String {
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
pub(super) const WRITE_ALIAS: &str = "stampede_write_version";

/// One write: the row's version bumped and its payload changed (its first 8 characters become
/// the new version in hex, so the length stays `--value-size`), in one statement that is its
/// own transaction, returning what the cache is to hold.
pub(super) fn write_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.items SET version = version + 1, payload = overlay(payload placing lpad(to_hex(version + 1), 8, '0') from 1 for 8) WHERE id = $1 RETURNING version AS {WRITE_ALIAS}, payload"
    )
}

/// The loader statement of a sharded run: the load goes through the run's load ledger
/// ([`crate::ledger`]), which spends the `sleep` cost and records the load on the server's
/// clock, so that herds across shards on different machines are counted on one clock. One row
/// whether or not the item exists (payload null when not), like the built-in loader.
pub(super) fn ledger_loader_sql(schema: &str, measured: bool) -> String {
    let extra = if measured { "" } else { UNMEASURED_COLUMN };
    format!(
        "SELECT l.payload, l.version AS {MEASURED_ALIAS}{extra} FROM (SELECT 1) one LEFT JOIN LATERAL {schema}.{}($1) l ON true",
        crate::ledger::LOAD_FUNCTION
    )
}

pub(super) fn loader_types(cost: LoadCost) -> &'static [Type] {
    match cost {
        LoadCost::Sleep(_) => &[Type::INT8, Type::FLOAT8],
        LoadCost::Heavy => &[Type::INT8],
    }
}

/// How long a load's statement may run past `--db-timeout` before the app itself gives up on
/// it. Postgres's `statement_timeout` normally ends it first; this bounds a statement on a
/// server that stopped answering altogether.
pub(super) const STATEMENT_GRACE: Duration = Duration::from_millis(100);

/// One app instance's database access.
pub struct Origin {
    pub(super) pool: Pool,
    /// The loader statement: in the measured window, and outside it.
    pub(super) sql: [String; 2],
    /// The write statement (prepared on first use: a run without writes never sends it).
    pub(super) write_sql: String,
    /// `--db-sql`: the user's query and its keys.
    pub(super) own: Option<Arc<own::OwnQuery>>,
    pub(super) cost: LoadCost,
    /// Loads go through the run's load ledger (a sharded run): `$1` is the only parameter.
    pub(super) via_ledger: bool,
    /// Bounds of a load's wait for a connection and of opening a new one.
    pub(super) timeouts: Timeouts,
    /// When the app gives up on a statement itself (`--db-timeout` plus a grace).
    pub(super) statement_deadline: Option<Duration>,
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
