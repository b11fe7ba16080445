//! The two stores' side of a run: the database's figures (calls, loads, peaks, herds,
//! refusals, writes), Redis's (errors, INFO, memory, a cluster's nodes) and the locks'.

use serde::{Deserialize, Serialize};

use super::{Known, Latency};
use crate::cluster::figures as cluster;
use crate::memory::figures as memory;

/// The database's side of the measured window. A *load* is a request's need for a value (it
/// waits for a pooled connection, then sends a statement); a *DB call* is a statement the
/// server received. Loads that never got a connection are not DB calls.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DbFigures {
    /// Statements sent to Postgres in the measured window (one per load that got a connection).
    /// An app under test's are the server's count; unknown when it could not be read.
    pub calls: Known<u64>,
    /// Executions of the measured window's loader statement that Postgres completed
    /// (pg_stat_statements counts a statement when it ends without error):
    /// `calls == calls_server + statement_errors`. Null when unavailable (see the note).
    pub calls_server: Option<u64>,
    /// Why `calls_server` is null, when it is.
    pub calls_server_note: Option<String>,
    /// How `calls_server` was read when it is not one reading at the end of the run: a
    /// Postgres crash empties pg_stat_statements, so the counts read just before each kill
    /// are added to the last reading. Null for a single reading.
    #[serde(default)]
    pub calls_server_read: Option<String>,
    /// Statements of the window the server received that ended in an error
    /// (`statement_timeout` included).
    #[serde(default)]
    pub statement_errors: u64,
    /// Of `statement_errors`, statements cancelled by `statement_timeout` (`--db-timeout`).
    #[serde(default)]
    pub statement_timeouts: u64,
    /// Loads that gave up waiting for a pooled connection (`--db-timeout`): no statement sent.
    #[serde(default)]
    pub pool_timeouts: u64,
    /// Loads that could not open a new connection (Postgres down or recovering): no
    /// statement sent.
    #[serde(default)]
    pub connect_errors: u64,
    /// Loads refused because `--db-limit` loads of their instance were in flight: no
    /// statement sent (the request was served stale, or rejected; an early recompute or a
    /// background refresh kept the value it had).
    #[serde(default)]
    pub limit_refusals: u64,
    /// Loads refused because their instance's breaker was open (or half-open with every
    /// probe out): no statement sent.
    #[serde(default)]
    pub breaker_refusals: u64,
    /// Loads refused because the rate limit (`--db-rate`) had no token left: no statement
    /// sent (served stale, or rejected, as under the bulkhead).
    #[serde(default)]
    pub rate_refusals: u64,
    /// Under `--db-rate-scope global`: how long, in the measured window, at least one
    /// instance limited its own loads to R / instances because Redis did not answer the
    /// global bucket's call, ms.
    #[serde(default)]
    pub rate_fallback_ms: u64,
    /// Of `calls`, the statements of the re-warm job (`--rewarm-every`).
    #[serde(default)]
    pub rewarm_calls: u64,
    /// Runs of the re-warm job that started in the measured window (each re-loads
    /// `--rewarm-top` keys, less those refused or left to another loader).
    #[serde(default)]
    pub rewarm_runs: u64,
    /// Statements sent during the warm-up (not in `calls`; sent under another statement text,
    /// so the server counts them apart).
    pub warmup_calls: u64,
    /// Most statements running in Postgres at once (at most instances × db-pool).
    pub peak_concurrent: u64,
    /// Most loads in flight at once, those waiting for a pooled connection included (unknown
    /// for an app under test, whose loads the tool cannot see: see `peak_active_sampled`).
    #[serde(default)]
    pub peak_in_flight: Known<u64>,
    /// An app under test's most statements active at once in pg_stat_activity, sampled (a
    /// shorter peak between two samples is not seen); absent for the built-in app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_active_sampled: Option<u64>,
    /// Most loads of one key in flight at once (the herd), queued ones included; unknown
    /// when it could not be measured.
    pub peak_key_herd: Known<u64>,
    /// Loads started while another load of the same key was in flight (queued ones
    /// included); unknown when it could not be measured.
    pub redundant_loads: Known<u64>,
    /// The DB calls by cause, adding up to `calls` (docs/results.md: the causes and their
    /// precedence). `herd` is the calls among `redundant_loads` (loads that never reached
    /// the server are not calls), so herd <= redundant_loads. Unknown for an app under test,
    /// whose loads the tool cannot see.
    #[serde(default)]
    pub by_cause: Known<super::causes::ByCause>,
    /// The herd a simple model predicts for the hottest key beside the one measured; absent
    /// for an app under test and a sharded run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub herd_model: Option<super::causes::HerdModel>,
    /// A sharded run's herd, from the load ledger on the server's clock: most loads of one
    /// key running in Postgres at once (loads queued for a connection are not in it), over
    /// every shard. A different quantity from `peak_key_herd`, hence its own name; absent
    /// for a 1-process run unless its loads went through the ledger (`load_via_ledger`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_peak_key_herd: Option<u64>,
    /// A sharded run's redundant loads from the load ledger (as `ledger_peak_key_herd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_redundant_loads: Option<u64>,
    /// Mean time a statement ran, ms (null without statements).
    #[serde(default)]
    pub statement_ms_mean: Option<f64>,
    /// Mean time a load waited for a pooled connection before its statement, ms.
    #[serde(default)]
    pub pool_wait_ms_mean: Option<f64>,
    /// Share of the pools' connection time spent running statements over the window and its
    /// drain: statement time / (instances × db-pool × wall time). Near 1 the pool is the
    /// bottleneck.
    #[serde(default)]
    pub pool_busy: f64,
    /// Refreshes run behind a read: swr's behind a stale read, `--eager-refresh`'s behind a
    /// fresh one.
    pub background_refreshes: u64,
    /// Such refreshes not run because another instance held the lock.
    pub refreshes_skipped: u64,
    /// XFetch recomputes started before the hard expiry.
    pub early_recomputes: u64,
    /// Mean time between an early recompute's start and the expiry it pre-empted, ms.
    pub early_lead_ms_mean: Option<f64>,
    /// Requests served a value kept past its expiry because their load failed (an error, a
    /// timeout, a refusal by a protection) under `--fail-safe` (outcome `stale`), the
    /// throttled ones included.
    #[serde(default)]
    pub fail_safe: u64,
    /// Of `fail_safe`, requests served it without a load: their key's load had failed on
    /// their instance within `--fail-safe-throttle`.
    #[serde(default)]
    pub fail_safe_throttled: u64,
    /// Requests answered with the kept value at `--soft-timeout` while their load went on
    /// behind them (outcome `stale`).
    #[serde(default)]
    pub soft_timeouts: u64,
    /// Loads that went on behind a soft timeout and wrote their value back (each after its
    /// request had been answered).
    #[serde(default)]
    pub soft_timeout_write_backs: u64,
    /// Background refreshes started by `--eager-refresh` (of `background_refreshes` when
    /// they loaded; one per key per instance at a time).
    #[serde(default)]
    pub eager_refreshes: u64,
    /// `rails-race-ttl`: entries written back with their expiry pushed by the race TTL, each
    /// by a reader that then recomputed the value.
    #[serde(default)]
    pub race_pushes: u64,
    /// Under `--db-query heavy`: what one heavy query cost on the idle server before traffic
    /// (median of a few runs), ms. Null under `sleep`, whose cost is `--db-cost`.
    #[serde(default)]
    pub heavy_query_ms: Option<f64>,
    /// A trace replay: the payload bytes of the seeded items as Postgres counts them
    /// (sum of octet_length), beside the trace's own sizes (`scenario.trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeded_bytes: Option<u64>,
    /// Writes committed (`--write-rps`): one UPDATE each, its own transaction, not in `calls`.
    #[serde(default)]
    pub writes: u64,
    /// Executions of the write statement Postgres completed (pg_stat_statements), for the
    /// same run: `writes == writes_server` (a failed UPDATE is in neither). Null without
    /// writes or without pg_stat_statements.
    #[serde(default)]
    pub writes_server: Option<u64>,
    /// Writes whose UPDATE failed or never got a connection: nothing committed.
    #[serde(default)]
    pub write_errors: u64,
    /// From each write's scheduled start to the end of its invalidation (null without writes).
    #[serde(default)]
    pub write_latency_ms: Option<Latency>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RedisFigures {
    /// keyspace_hits from INFO, change over the measured window (plus warm-up: INFO has no windows).
    pub keyspace_hits: Option<u64>,
    /// keyspace_misses from INFO, same window as `keyspace_hits`.
    pub keyspace_misses: Option<u64>,
    /// keyspace_hits / (keyspace_hits + keyspace_misses) over the window: every GET the server
    /// answered, lock polls and other clients' reads included (null when INFO could not be
    /// read at both ends, or Redis restarted).
    #[serde(default)]
    pub keyspace_hit_rate: Option<f64>,
    /// Why the keyspace figures may include other clients' traffic or are null.
    pub note: Option<String>,
    /// Redis commands that failed (connection down, error reply).
    pub errors: u64,
    /// Redis commands that missed their `--redis-timeout` deadline.
    pub timeouts: u64,
    /// Reads that found no entry (a cold miss), whatever happened next.
    pub cold_misses: u64,
    /// Reads served by a not-found sentinel (negative caching).
    pub negative_hits: u64,
    /// Entries that expired (soft expiry under swr) inside the measured window: those found
    /// at the start that ran out in it, and those written in it whose TTL ran out before it
    /// closed. Counted by the tool from the TTLs it wrote.
    #[serde(default)]
    pub expiries: u64,
    /// The run's Redis commands refused with OOM (a write at `maxmemory` under
    /// noeviction: a write-back, a lock or lease SET, a version marker), counted by the tool;
    /// also in `errors`. A refused write-back still serves the request from the database.
    #[serde(default)]
    pub oom_errors: u64,
    /// With --check-values: values read from Redis that were not their key's (a reply handed
    /// to the wrong request); null without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_mismatches: Option<u64>,
    /// Keys Redis evicted to stay under `maxmemory` (INFO `evicted_keys`, change from the
    /// start state written to the end: the warm-up's traffic included, as INFO has no
    /// windows; every client's on an external Redis). Null when INFO could not be read at both ends or Redis restarted.
    #[serde(default)]
    pub evicted_keys: Option<u64>,
    /// The server's memory: its limit, peak, what it held at the end, what a key cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<memory::MemoryFigures>,
    /// A Redis Cluster's nodes over the window, each with its commands, keyspace hits and
    /// misses, memory and share of the commands (absent on a single server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<cluster::NodeFigures>>,
    /// Cluster: the busiest primary's share of the commands the primaries processed in the
    /// window (0–1; a fair spread is 1 / primaries). Null when a primary's counters could not
    /// be read at both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hottest_node_share: Option<f64>,
    /// Cluster: MOVED redirects the nodes answered in the window (INFO errorstats, summed):
    /// requests sent to a node that no longer serves the key's slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<u64>,
    /// Cluster: ASK redirects the nodes answered in the window (INFO errorstats, summed):
    /// requests for a key of a slot being migrated that had already moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LockFigures {
    /// Locks taken.
    pub acquired: u64,
    /// Attempts that found the lock held by someone else.
    pub contended: u64,
    /// Waits that ran out of `--lock-wait`.
    pub timeouts: u64,
    /// Releases that found the lock gone or someone else's: the lease ran out under the holder.
    pub lost: u64,
    /// Lock attempts that failed because Redis was unreachable (the request loaded anyway).
    pub unavailable: u64,
    /// Leases extended by their holder while it loaded (`--lock-extend`).
    #[serde(default)]
    pub extended: u64,
    /// Loads past `--lock-wait` answered and not cached (`--fallback-writeback off`).
    #[serde(default)]
    pub unkept: u64,
    /// `--lock-ttl auto`: the longest lease given, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms_max: Option<u64>,
}
