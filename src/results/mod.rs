//! The results of a run as typed data: the versioned JSON document (every field says what it
//! counts and in what unit), read and written here and nowhere else, with the scenario that
//! produced it; the figures the metric list names; thresholds judged against it. Every reader
//! (check, compare, the renderers) works on these types, never on loose JSON.

pub mod causes;
pub mod check;
pub mod comparable;
pub mod conclusion;
pub mod cost;
pub mod diagnose;
pub mod faults;
pub mod known;
pub mod l1;
pub mod measure;
pub mod merge;
pub mod recovery;
pub mod row;
pub mod schema;
pub mod shard;
pub mod stores;
pub mod summary;
pub mod sweep;
pub mod undisturbed;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

pub use crate::fault::report::{FaultReport, Served};
use crate::metrics::pct_ms;
use crate::protect::breaker::State;
use crate::scenario::Scenario;
use crate::values::start::Start;
pub use known::Known;
pub use stores::{DbFigures, LockFigures, RedisFigures};

/// Version of the results document; bump when a field changes meaning or disappears.
/// 2: `db.calls` counts the measured window's statements only (no warm loads, no loads that
/// never got a connection), `db.peak_concurrent` counts statements (loads in flight are
/// `db.peak_in_flight`), `db.errors`/`db.timeouts` became `statement_errors`,
/// `statement_timeouts` and `pool_timeouts`. `check` reads schema 1 too, and refuses to judge
/// one against the other without `--force`.
/// 3: a figure the tool could not obtain is null with a `<name>_unknown` reason beside it
/// (`hit_rate`, `db.calls`, `db.peak_in_flight`, `db.peak_key_herd`, `db.redundant_loads`,
/// `consistency.divergent_keys`), never 0; an app under test's server-side figures have their
/// own names (`redis.keyspace_hit_rate`, `db.peak_active_sampled`), and so do a merged run's
/// ledger herds (`db.ledger_peak_key_herd`, `db.ledger_redundant_loads`); a threshold records
/// `measured: null` and `unknown` when its figure is unknown. No figure of a built-in
/// 1-process run changed meaning, so `check` judges schema 2 against schema 3.
/// 4: an unknown figure is null with its reason in the one top-level `unknown` map (field
/// path → reason, e.g. `db.calls`, `thresholds[0].measured`) instead of a `<name>_unknown`
/// string beside it (`thresholds[].unknown` is gone too); a merged result sums the counts
/// the merge used to take from shard 0. No figure changed meaning: `check` reads and judges
/// schemas 2, 3 and 4 together, converting the older forms on reading.
/// 5: a timeline bucket holds its cost inputs (`timeline[].cost`), and a run with a fault reads
/// its break-even (`cost.undisturbed`, `cost.hit_rate`, `cost.unknown`) and its herd model
/// (`db.herd_model.undisturbed`) from the undisturbed part of its window only; `--app-cmd`
/// starts one process per `--instances` (`app.processes` lists them; `app.pid` and `app.log`
/// are instance 0's), so an app under test's figures with `--instances` N are N processes'
/// where they were one's; a 1-process built-in run may carry ledger herds
/// (`scenario.load_via_ledger`, set by `conform`). `check` reads and judges schemas 2 to 5
/// together.
pub const SCHEMA: u32 = 5;

/// Whether results of these two schema versions count the same things under the same names
/// for the figures `check` judges: schema 1 counted DB calls and peaks differently; 2, 3 and
/// 4 differ only in how they say unknown, which `check` reports as not comparable.
pub fn schemas_comparable(a: u32, b: u32) -> bool {
    a == b || (a >= 2 && b >= 2)
}

/// One run's results. Written and read through [`known::lift`] and [`known::lower`] (the
/// derived serialization is `RunResult::serialize`/`deserialize`, wrapped below), so every
/// unknown figure is null in the file with its reason in the top-level `unknown` map.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(remote = "Self")]
pub struct RunResult {
    /// Version of this document's layout.
    pub schema: u32,
    /// Version of stampede that produced it.
    pub tool_version: String,
    /// Canonical name of the strategy (freshness+coordination+jitter).
    pub strategy: String,
    /// Unix time in ms when traffic started.
    pub started_at_ms: u64,
    /// True when the run was stopped early (Ctrl-C / SIGTERM); figures cover what ran.
    pub interrupted: bool,
    /// Every effective setting of the run (URLs with passwords redacted).
    pub scenario: Scenario,
    /// What the cache held when traffic started (null in results written before it existed).
    #[serde(default)]
    pub start: Option<StartFigures>,
    pub requests: Requests,
    pub outcomes: Outcomes,
    /// Share of completed requests served from the cache without a load: (hit + stale) /
    /// completed. Unknown when the tool cannot see the outcomes (an app under test: see
    /// `redis.keyspace_hit_rate`) or no request completed.
    pub hit_rate: Known<f64>,
    pub db: DbFigures,
    /// What a hit and a miss cost in this run, and the break-even hit rate (absent for an app
    /// under test, and in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<cost::CostFigures>,
    /// The in-process tier's figures (absent without `--l1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1: Option<l1::L1Figures>,
    pub redis: RedisFigures,
    pub lock: LockFigures,
    /// From the scheduled start (open loop; coordinated omission corrected) to completion.
    pub latency_ms: Latency,
    /// From the moment a worker actually started the request to completion.
    pub service_ms: Latency,
    /// Latency from the scheduled start, per outcome (only outcomes that occurred).
    pub latency_by_outcome_ms: BTreeMap<String, Latency>,
    /// Full latency distributions, mergeable across runs and shards.
    pub histograms: Histograms,
    /// One entry per `interval` of the measured window.
    pub timeline: Vec<Bucket>,
    /// The faults injected, in order, with what each outage and recovery cost (empty without faults).
    #[serde(default)]
    pub faults: Vec<FaultReport>,
    /// Whether the run came back by itself after its shocks (faults included); absent
    /// without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<recovery::Recovery>,
    /// Every state change of the instances' circuit breakers (`--breaker`), in order (empty
    /// without a breaker, or when none changed state).
    #[serde(default)]
    pub breaker: Vec<BreakerEvent>,
    /// Each app instance's own figures, by instance: a fault on one instance read against the
    /// others (empty in results before schema 4, and with --target).
    #[serde(default)]
    pub instances: Vec<InstanceFigures>,
    pub servers: Servers,
    /// How well the load generator kept its own schedule.
    pub generator: Generator,
    /// Every threshold the scenario set, judged against this run (empty when none were set).
    #[serde(default)]
    pub thresholds: Vec<ThresholdResult>,
    /// Why this run may not show what was asked (empty for a clean run): see
    /// [`diagnose::CODES`]. They never change the exit code.
    #[serde(default)]
    pub diagnoses: Vec<diagnose::Diagnosis>,
    /// How far the cache strayed from the database (all 0 without writes, and in results
    /// written before writes existed).
    #[serde(default)]
    pub consistency: Consistency,
    /// What the app under test answered (`--target`); null for the built-in app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<crate::app::http::HttpFigures>,
    /// The app under test: how it ran and where its figures come from (`--target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppFigures>,
    /// This result's part of a sharded run (absent for a 1-process run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<shard::ShardFigures>,
    /// The shards a merged result was made from (absent unless written by `stampede merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<shard::Merged>,
}

impl Serialize for RunResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut doc = RunResult::serialize(self, serde_json::value::Serializer)
            .map_err(serde::ser::Error::custom)?;
        known::lift(&mut doc);
        doc.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RunResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut doc = serde_json::Value::deserialize(d)?;
        known::lower(&mut doc);
        RunResult::deserialize(doc).map_err(serde::de::Error::custom)
    }
}

fn known_zero() -> Known<u64> {
    Known::Value(0)
}

/// The cache against the database, exact because every write goes through the tool, which
/// records each committed version and when its commit was acknowledged.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Consistency {
    /// Completed requests that served a version older than one whose commit was acknowledged
    /// before the request started. A value served past its soft expiry (swr) with no newer
    /// version committed is not one (it stays in `outcomes.stale`).
    pub stale_reads: u64,
    /// `stale_reads` / completed requests.
    pub stale_read_ratio: f64,
    /// Over the stale reads: how long the oldest newer version had been committed when the
    /// read started, ms.
    pub staleness_ms: Staleness,
    /// Keys written at least once in the window.
    pub keys_written: u64,
    /// Of those, keys whose cached entry held another version than the database's row once
    /// writes had stopped and in-flight work had ended: wrong until their TTL runs out.
    /// Unknown when the written keys could not be read back. Absent (files written before
    /// writes existed): no writes, so 0.
    #[serde(default = "known_zero")]
    pub divergent_keys: Known<u64>,
    /// Writes read back (one GET each, apart from the traffic) once their own invalidation
    /// was done, every fill of the key in flight at the commit had written back, and no
    /// other write of the key was in flight.
    #[serde(default)]
    pub writes_probed: u64,
    /// Of those, writes whose read-back found an older version cached than the last
    /// committed one: the invalidation race, counted per write (healed later or not).
    #[serde(default)]
    pub writes_left_wrong: u64,
    /// `writes_left_wrong / writes_probed` (0 without probes).
    #[serde(default)]
    pub writes_left_wrong_ratio: f64,
    /// Writes never probed: their key did not settle within 5 s (overlapping writes), the
    /// GET failed, or the run ended first.
    #[serde(default)]
    pub writes_unprobed: u64,
    /// Key-milliseconds the probes saw the cache hold an older version than the committed
    /// one: from each such probe to the key's next commit, its entry's expiry or the end of
    /// the window, whichever came first.
    #[serde(default)]
    pub divergent_ms: u64,
    /// Cache SETs refused: by the versioned SET (an older version than the cache or the
    /// writers' marker held), or under a lease (the token deleted by a write, or run out).
    pub stale_sets_refused: u64,
    /// Invalidations after a committed write that failed or came back late (Redis down or
    /// slow): the one way the exact strategies (lease, versioned) can still diverge.
    pub invalidation_failures: u64,
    /// Why `divergent_keys` could not be measured, when it could not.
    #[serde(default)]
    pub note: Option<String>,
}

/// Without writes nothing can diverge: every figure 0 (as in results written before writes
/// existed).
impl Default for Consistency {
    fn default() -> Self {
        Consistency {
            stale_reads: 0,
            stale_read_ratio: 0.0,
            staleness_ms: Staleness::default(),
            keys_written: 0,
            divergent_keys: Known::Value(0),
            writes_probed: 0,
            writes_left_wrong: 0,
            writes_left_wrong_ratio: 0.0,
            writes_unprobed: 0,
            divergent_ms: 0,
            stale_sets_refused: 0,
            invalidation_failures: 0,
            note: None,
        }
    }
}

/// Percentiles of the staleness of stale reads, ms (all 0 without any).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Staleness {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The app under test's side of a run (`--target`). Its DB figures are in `db` as for the
/// built-in app, read from the servers: `db.calls` and the timeline's `db_calls` from
/// pg_stat_statements, `db.peak_concurrent` from pg_stat_activity samples, the herds from the
/// load ledger.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppFigures {
    /// The target, secrets in it redacted (`{key}` stands for the item id).
    pub target: String,
    /// The variant (`compare --variant`), with the environment it gave the app.
    pub variant: Option<String>,
    #[serde(default)]
    pub env: Vec<String>,
    /// The app's process id when stampede started it (`--app-cmd`), null otherwise; with
    /// `--instances` above 1, instance 0's (every one is in `processes`).
    pub pid: Option<u32>,
    /// Where its output went (instance 0's with several).
    pub log: Option<String>,
    /// Every process `--app-cmd` started, one per instance, when it started more than one
    /// (absent for one, as before instances were started).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<AppProcess>,
    /// How long it took to be ready, ms.
    pub ready_ms: Option<u64>,
    /// Which statements `db.calls` counts.
    pub db_calls_counted: String,
    /// How `db.peak_concurrent` was measured: pg_stat_activity sampled (a shorter peak
    /// between two samples is not seen).
    pub peak_concurrent_note: String,
    /// Redis keyspace hits and misses per timeline bucket (INFO; null where it could not be
    /// read, or Redis had restarted).
    #[serde(default)]
    pub redis_by_bucket: Vec<(Option<u64>, Option<u64>)>,
    /// Loads the app made through `stampede_load(id)`, from the ledger (null when it made
    /// none: see `notes`).
    pub ledger_loads: Option<u64>,
    /// Distinct keys those loads were for.
    pub ledger_keys: Option<u64>,
    /// Why a figure is missing or what it includes.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One process of the app under test that `--app-cmd` started.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct AppProcess {
    /// Its `INSTANCE`, 0 to `--instances` - 1.
    pub instance: u32,
    /// Its `PORT`.
    pub port: u16,
    pub pid: Option<u32>,
    /// Where its output went.
    pub log: String,
}

/// What the cache held when traffic started.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartFigures {
    /// `steady`, `cold` or `synchronized`.
    pub mode: Start,
    /// Keys written into the cache before traffic.
    pub keys_cached: u64,
    /// Of those, keys whose TTL (soft expiry under swr) runs out inside the measured window.
    #[serde(default)]
    pub expiring_in_window: u64,
    /// How long reading and writing them took, ms.
    pub ms: u64,
    /// Under a memory limit: keys the start would have held that were not written because
    /// the limit's budget was reached (the most popular are written first). 0 without one.
    #[serde(default)]
    pub left_out_at_limit: u64,
    /// What the status line says of the limit (not written to the result).
    #[serde(skip)]
    pub budget_note: Option<String>,
}

/// One threshold judged against a run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThresholdResult {
    /// Threshold name, e.g. `p99_ms_max` (`_max`: measured must not exceed the limit; `_min`:
    /// must not fall below it).
    pub name: String,
    /// The limit, in the metric's unit (calls, ms, or a share between 0 and 1).
    pub limit: f64,
    /// What the run measured, same unit; unknown (null, its reason in `unknown`) when the
    /// figure is (then the threshold fails).
    pub measured: Known<f64>,
    /// Whether the measured value is within the limit.
    pub passed: bool,
}

/// A count per scheduled request (attempts, DB calls), unknown with nothing scheduled.
pub fn per_scheduled(n: u64, scheduled: u64) -> Option<f64> {
    (scheduled > 0).then(|| n as f64 / scheduled as f64)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requests {
    /// Requests due to start in the measured window (open loop), or started in it (closed loop).
    pub scheduled: u64,
    /// Requests that finished, whatever their outcome (includes `abandoned`).
    pub completed: u64,
    /// Requests not started because the instance already had `max_inflight` in flight.
    pub shed: u64,
    /// Requests due in the window that the generator could not even dispatch by its end (the
    /// rate was beyond what this machine can send): `completed + shed + unsent == scheduled`.
    #[serde(default)]
    pub unsent: u64,
    /// Completed requests whose outcome is `error`.
    pub errors: u64,
    /// Requests still in flight when the run ended and given up on; counted as errors.
    pub abandoned: u64,
    /// Requests sent during the warm-up, excluded from every other figure.
    pub warmup: u64,
    /// Completed requests the client gave up on at `--request-timeout` (outcome `timed-out`;
    /// with `--target`, the HTTP timeouts of `--http-timeout`).
    #[serde(default)]
    pub timed_out: u64,
    /// Requests answered with a value (hit, stale, waited, loaded: not an error, a rejection
    /// or a timeout) within `scenario.goodput_within` of their scheduled start.
    #[serde(default)]
    pub goodput: u64,
    /// Retries the client sent (`--retries`): attempts after the first, each counted once;
    /// a request with retries is still one request of `scheduled`.
    #[serde(default)]
    pub retries: u64,
    /// Attempts sent to the cache layer: each completed request's first attempt plus every
    /// retry (`completed + retries`).
    #[serde(default)]
    pub attempts: u64,
    /// Attempts per scheduled request (`attempts / scheduled`): 1 without retries, up to
    /// 1 + `--retries` in a retry storm. Null with nothing scheduled.
    #[serde(default)]
    pub amplification: Option<f64>,
    /// Retries that waited for a "retry after D" answer's D instead of the client's backoff.
    #[serde(default)]
    pub retry_after_waits: u64,
    /// The shortest of those waits, ms, measured by the client from the answer to the next
    /// attempt (null without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_wait_ms_min: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcomes {
    pub hit: u64,
    pub miss: u64,
    pub stale: u64,
    pub waited: u64,
    pub fallback: u64,
    pub error: u64,
    /// Refused a load by `--db-limit`, the breaker or `--db-rate`, with no stale value to
    /// serve: failed fast by design, not counted as errors.
    #[serde(default)]
    pub rejected: u64,
    /// Requests the app under test (`--target`) answered as expected (status and body);
    /// zero for the built-in app, whose requests are counted by how they were served.
    #[serde(default)]
    pub ok: u64,
    /// The client gave up at `--request-timeout` (the work it started went on).
    #[serde(default)]
    pub timed_out: u64,
    /// Answered from the instance's in-process tier (`--l1`), Redis not asked.
    #[serde(default)]
    pub l1_hit: u64,
    /// Answered "retry after D" when a wait for another loader ran out
    /// (`--lock-timeout-policy retry-after`), after the client's last retry; in `error_rate`.
    #[serde(default)]
    pub retry_after: u64,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    /// Number of requests behind these figures.
    pub count: u64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            p50: pct_ms(h, 0.50),
            p95: pct_ms(h, 0.95),
            p99: pct_ms(h, 0.99),
            p999: pct_ms(h, 0.999),
            max: if h.is_empty() {
                0.0
            } else {
                h.max() as f64 / 1000.0
            },
            mean: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            count: h.len(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Histograms {
    /// Encoding of the histograms below.
    pub encoding: String,
    /// Latency from the scheduled start, µs.
    pub latency_us: String,
    /// Service time, µs.
    pub service_us: String,
    /// Latency from the scheduled start per outcome, µs (sharded runs, so that a merge keeps
    /// the per-outcome figures lossless).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_outcome_us: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bucket {
    /// End of the bucket, ms since the measured window started.
    pub t_ms: u64,
    /// Requests completed in the bucket.
    pub requests: u64,
    /// Statements (DB calls) started in the bucket.
    pub db_calls: u64,
    /// Mean time those statements' loads waited for a pooled connection, ms.
    #[serde(default)]
    pub pool_wait_ms: f64,
    /// Requests served from a fresh entry.
    pub hits: u64,
    /// Requests served stale.
    pub stale: u64,
    /// Requests with outcome error.
    pub errors: u64,
    /// Requests with outcome rejected (a protection refused their load).
    #[serde(default)]
    pub rejected: u64,
    /// 99th percentile latency of the bucket's requests, ms.
    pub p99_ms: f64,
    /// False when Redis was down (killed by a fault, not yet restarted) or paused at any
    /// moment of the bucket.
    #[serde(default = "yes")]
    pub redis_up: bool,
    /// False when Postgres was down (killed by a fault, not yet restarted) at any moment of
    /// the bucket.
    #[serde(default = "yes")]
    pub postgres_up: bool,
    /// True when some instance's breaker was open or half-open at any moment of the bucket.
    #[serde(default)]
    pub breaker_open: bool,
    /// Requests completed in the bucket that served a version older than one committed
    /// before they started (0 without writes).
    #[serde(default)]
    pub stale_reads: u64,
    /// Writes committed in the bucket.
    #[serde(default)]
    pub writes: u64,
    /// Requests due in the bucket (by scheduled start, unlike the other counts) that were
    /// answered with a value within the goodput deadline.
    #[serde(default)]
    pub goodput: u64,
    /// Retries the client sent in the bucket (those sent during the drain, in the last).
    #[serde(default)]
    pub retries: u64,
    /// A bucket shorter than `interval`: what finished in the drain after the window, or the
    /// last bucket of an interrupted run. Its counts are real, but as a rate it would read as
    /// a collapse, so charts and every verdict built on the timeline leave it out. Absent
    /// (false) for a whole bucket.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The bucket's cost inputs (Redis reads, write-backs, loads and the hottest key's
    /// counts), from which the break-even and the herd model of a run with a fault are read
    /// outside the fault; absent when all are 0 (and in results before schema 5).
    #[serde(default, skip_serializing_if = "undisturbed::BucketCost::is_zero")]
    pub cost: undisturbed::BucketCost,
}

/// The timeline without its trailing partial buckets (the drain, an interrupted last
/// bucket): what charts and every verdict built on the timeline read.
pub fn whole(timeline: &[Bucket]) -> &[Bucket] {
    let n = timeline
        .iter()
        .rposition(|b| !b.partial)
        .map_or(0, |i| i + 1);
    &timeline[..n]
}

/// An empty bucket, both servers up.
impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            t_ms: 0,
            requests: 0,
            db_calls: 0,
            pool_wait_ms: 0.0,
            hits: 0,
            stale: 0,
            errors: 0,
            rejected: 0,
            p99_ms: 0.0,
            goodput: 0,
            retries: 0,
            partial: false,
            redis_up: true,
            postgres_up: true,
            breaker_open: false,
            stale_reads: 0,
            writes: 0,
            cost: undisturbed::BucketCost::default(),
        }
    }
}

fn yes() -> bool {
    true
}

/// One app instance's requests and latency (`instances[]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstanceFigures {
    /// Which app instance (0-based, as `breaker[].instance` and a fault's `instance=`).
    pub instance: u32,
    /// Measured requests it completed (or abandoned).
    pub requests: u64,
    /// Of those, served a fresh cached value (outcome hit, or l1-hit).
    pub hits: u64,
    /// Served a stale value (outcome stale).
    pub stale: u64,
    /// Failed (outcome error).
    pub errors: u64,
    /// Given up on by the client at --request-timeout (outcome timed-out).
    pub timed_out: u64,
    /// Latency from the scheduled start, ms, within about ±3% (a per-instance histogram of 16
    /// buckets per power of two); null without requests.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl InstanceFigures {
    pub fn of(r: &crate::metrics::InstanceRead) -> InstanceFigures {
        use crate::metrics::Outcome as O;
        let n = |o: O| r.outcomes[o as usize];
        InstanceFigures {
            instance: r.instance,
            requests: r.outcomes.iter().sum(),
            hits: n(O::Hit) + n(O::L1Hit),
            stale: n(O::Stale),
            errors: n(O::Error),
            timed_out: n(O::TimedOut),
            p50_ms: r.p50_us.map(|us| us as f64 / 1e3),
            p99_ms: r.p99_us.map(|us| us as f64 / 1e3),
        }
    }
}

/// A state change of one instance's circuit breaker.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BreakerEvent {
    /// When, ms since the measured window started (negative: during the warm-up).
    pub at_ms: i64,
    /// Which app instance (0-based).
    pub instance: u32,
    /// `closed`, `open` or `half-open`.
    pub from: State,
    pub to: State,
    /// What decided it, with its figures.
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Servers {
    pub redis_version: String,
    pub postgres_version: String,
    /// True when the tool started (and stopped) the servers itself.
    pub managed: bool,
    /// Redis URL, password redacted.
    pub redis_url: String,
    /// Postgres URL, password redacted.
    pub pg_url: String,
    /// PIDs of the servers the tool started (gone after the run); `redis_pid` is the last
    /// redis-server of the run.
    pub redis_pid: Option<u32>,
    pub postgres_pid: Option<u32>,
    /// Temp dirs of the servers the tool started (removed after the run).
    pub redis_dir: Option<String>,
    pub postgres_dir: Option<String>,
    /// Every redis-server the tool started in this run, in order: a fault's restart starts a
    /// new process with a new PID (all gone after the run).
    #[serde(default)]
    pub redis_pids: Vec<u32>,
    /// Every postmaster the tool started in this run, in order: a kill-postgres fault's
    /// restart starts a new one on the same data dir (all gone after the run, with their
    /// backends). `postgres_pid` is the last.
    #[serde(default)]
    pub postgres_pids: Vec<u32>,
    /// Time to start the managed Redis and Postgres, ms.
    pub redis_startup_ms: Option<u64>,
    pub postgres_startup_ms: Option<u64>,
    /// Whether the managed Postgres came from the cached initdb template.
    pub postgres_template_reused: Option<bool>,
    /// Time to create and seed the items table (and the reviews table under `--db-query heavy`), ms.
    pub seed_ms: u64,
    /// Whether both connections were encrypted: Redis over rediss:// and Postgres over TLS
    /// (as the server reports it in pg_stat_ssl).
    #[serde(default)]
    pub tls: bool,
    /// How the run kept its heartbeats, the marks that tell `stampede cleanup` it is alive
    /// (absent in results written before they were reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatFigures>,
}

/// The run's heartbeats: the key `stampede:<id>:heartbeat` in Redis (it expires 5 s after its
/// last renewal) and the row of the run's schema in Postgres, each renewed every second on
/// its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeartbeatFigures {
    /// Longest time the Redis heartbeat went without a renewal, ms. Past 5 s its key had
    /// expired, and a `stampede cleanup` could have taken the run for dead.
    pub redis_longest_gap_ms: Option<u64>,
    /// Longest time the Postgres heartbeat went without a renewal, ms (null when the run has
    /// no schema: `--db-sql`).
    pub postgres_longest_gap_ms: Option<u64>,
    /// Renewals that failed or did not complete within 1.5 s.
    pub failed_renewals: u64,
    /// What a gap longer than 5 s may have cost (null when there was none).
    pub note: Option<String>,
}

/// Percentiles of the open loop's dispatch lag, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DispatchLag {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Generator {
    /// Most a request was dispatched after its scheduled time, ms (open loop).
    pub max_dispatch_lag_ms: f64,
    /// How late after its scheduled time each request was dispatched, ms: the precision of the
    /// schedule. `max` equals `max_dispatch_lag_ms`. Null where there is no schedule (closed
    /// loop) and in files written before the field: unknown, never zeros.
    #[serde(default)]
    pub dispatch_lag_ms: Option<DispatchLag>,
    /// App instances simulated.
    pub instances: u32,
    /// FNV-1a fingerprint (hex) of the first 1000 ids drawn by each key stream (one stream in
    /// open loop; one per client in closed loop, combined in client order). Equal digests mean
    /// the same key draws, whatever the strategy.
    #[serde(default)]
    pub key_digest: String,
    /// Ids the digest covers, over all streams.
    #[serde(default)]
    pub key_digest_draws: u64,
    /// CPU time (user + system, all threads) stampede itself used from the start of traffic to
    /// the end of the drain (warm-up included), s. The servers it started are not included.
    #[serde(default)]
    pub cpu_seconds: f64,
    /// `cpu_seconds` per request scheduled in that window (warm-up included), µs.
    #[serde(default)]
    pub cpu_per_request_us: f64,
    /// `cpu_seconds` / (wall-clock time of the window × `cores`): the share of the machine the
    /// generator used. Near 1, the figures measure the tool as much as the system under test.
    #[serde(default)]
    pub cpu_utilization: f64,
    /// CPU cores available to the process.
    #[serde(default)]
    pub cores: u32,
    /// Peak resident memory of the stampede process, MiB.
    #[serde(default)]
    pub peak_rss_mib: f64,
}

/// Encode a histogram as base64 of HdrHistogram's V2 deflate format (readable by every
/// HdrHistogram implementation, and mergeable).
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(&buf),
        Err(_) => String::new(),
    }
}

pub fn decode_histogram(s: &str) -> Result<Histogram<u64>> {
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .context("histogram is not base64")?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| anyhow::anyhow!("histogram does not decode: {e:?}"))
}

pub fn read_json(path: &Path) -> Result<RunResult> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a stampede results file", path.display()))
}

#[cfg(test)]
mod tests;
