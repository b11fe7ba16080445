//! A run's every effective setting as one typed [`Scenario`]. [`resolve`] builds it from a
//! scenario file and the command-line flags.

use serde::{Deserialize, Serialize};

use crate::fault::{FaultSpec, RecoveryCriteria, Server};
use crate::memory::MemoryLimit;
use crate::origin::{DbQuery, LoadCost, OwnLoad};
use crate::protect::BreakerSpec;
use crate::protect::rate::RateSpec;
use crate::redact;
use crate::sizes::{SizeDist, Sizes};
use crate::stats::{Purpose, derive_seed};
use crate::strategy::StrategySpec;
use crate::strategy::invalidate::Invalidate;
use crate::thresholds::Thresholds;
use crate::tls::RedisTls;
use crate::values::{Dur, Percent};
use crate::workload::{Client, Start};

/// Every effective setting of a run, after defaults. Serialized whole into the results file so a
/// result says exactly what produced it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scenario {
    /// The scenario file the settings came from, if any.
    pub scenario_file: Option<String>,
    pub strategy: StrategySpec,
    pub load: LoadShape,
    pub duration: Dur,
    pub warmup: Dur,
    pub keys: u64,
    pub zipf: f64,
    pub seed: u64,
    /// Bytes of payload per item; with `value_size_dist`, the distribution's mean (rounded).
    pub value_size: usize,
    /// Each item's own payload size, drawn from this with the run's seed
    /// (`--value-size-dist`); absent when every item has `value_size` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_size_dist: Option<SizeDist>,
    /// The managed Redis's memory limit (`--maxmemory`, `--maxmemory-policy`,
    /// `--maxmemory-samples`); absent: no limit, as before limits existed (and always on an
    /// external Redis, whose configuration is reported, never changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryLimit>,
    pub ttl: Dur,
    pub db_cost: Dur,
    pub db_pool: u32,
    pub db_timeout: Option<Dur>,
    pub instances: u32,
    pub redis_conns: u32,
    pub max_inflight: u32,
    pub backlog: u32,
    /// What the cache holds when traffic starts.
    #[serde(default = "start_cold")]
    pub start: Start,
    pub warm: u64,
    #[serde(serialize_with = "redact::ser_url")]
    pub redis_url: Option<String>,
    #[serde(serialize_with = "redact::ser_url")]
    pub pg_url: Option<String>,
    pub redis_timeout: Dur,
    /// Every value read from Redis checked against its key (`--check-values`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_values: bool,
    /// The client library whose behaviour the app's Redis client takes (`--redis-client`);
    /// None: the tool's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_client: Option<crate::cache::RedisClient>,
    /// The round trip added between the app instances and Redis (`--redis-rtt`, `--net-rtt`):
    /// through the tool's proxy. None: loopback, no proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_rtt: Option<crate::values::Rtt>,
    /// The same between the app instances and Postgres (`--pg-rtt`, `--net-rtt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pg_rtt: Option<crate::values::Rtt>,
    pub interval: Dur,
    pub beta: f64,
    pub stale: Dur,
    /// The lock's settings (`--lock-ttl`, `--lock-wait`, …), under their own names.
    #[serde(flatten)]
    pub lock: crate::strategy::lock::LockSpec,
    pub jitter: Percent,
    pub missing_ratio: Percent,
    /// How the missing ids are drawn: Zipf-shaped (a few, often) or each one new.
    #[serde(default)]
    pub missing_ids: crate::workload::MissingIds,
    pub negative_ttl: Option<Dur>,
    pub db_query: DbQuery,
    /// Most loads in flight at once per instance (`--db-limit`); null: no bulkhead.
    #[serde(default)]
    pub db_limit: Option<u32>,
    /// The circuit breaker on each instance's loads (`--breaker`); null: none.
    #[serde(default)]
    pub breaker: Option<BreakerSpec>,
    /// The rate limit on loads (`--db-rate`, `--db-burst`, `--db-rate-scope`); null: none.
    #[serde(default)]
    pub db_rate: Option<RateSpec>,
    /// The re-warm job (`--rewarm-every`, `--rewarm-top`); null: none.
    #[serde(default)]
    pub rewarm: Option<Rewarm>,
    /// The in-process tier in front of Redis (`--l1`, `--l1-ttl`, `--l1-invalidate`); null:
    /// none.
    #[serde(default)]
    pub l1: Option<crate::l1::L1Spec>,
    /// The fail-safe (`--fail-safe`, `--fail-safe-throttle`, `--soft-timeout`); null: off.
    #[serde(default)]
    pub fail_safe: Option<FailSafe>,
    /// `--eager-refresh`: the share of its TTL after which a read refreshes an entry in the
    /// background; null: off.
    #[serde(default)]
    pub eager_refresh: Option<Percent>,
    /// Faults to inject, sorted by `at` (relative to the start of the measured window).
    pub faults: Vec<FaultSpec>,
    /// External Redis only: the shell command that starts it again (secrets in it redacted
    /// when written).
    #[serde(serialize_with = "redact::ser_command")]
    pub redis_restart_cmd: Option<String>,
    /// Whether a pause-redis fault may stall an external Redis (`--allow-pause-external`).
    #[serde(default)]
    pub allow_pause_external: bool,
    /// Whether a kill-redis fault may shut an external Redis down without saving
    /// (`--allow-kill-external`).
    #[serde(default)]
    pub allow_kill_external: bool,
    /// External Postgres only: the shell commands that crash it and start it again (secrets
    /// in them redacted when written).
    #[serde(default, serialize_with = "redact::ser_command")]
    pub pg_kill_cmd: Option<String>,
    #[serde(default, serialize_with = "redact::ser_command")]
    pub pg_restart_cmd: Option<String>,
    /// Limits that make the run exit 1 when broken: the file's `[thresholds]` with
    /// `--threshold` on top.
    pub thresholds: Thresholds,
    /// `--tls`: the managed servers run with TLS, on certificates made for the run.
    #[serde(default)]
    pub tls: bool,
    /// TLS to an external Redis (`--redis-ca`, `--redis-cert`/`--redis-key`, `--redis-insecure`).
    #[serde(default)]
    pub redis_tls: RedisTls,
    /// A Redis Cluster run's settings: the managed cluster's shape, replica reads, the node a
    /// fault strikes, the slot a migration moves (all default on one server).
    #[serde(default, skip_serializing_if = "ClusterSettings::is_default")]
    pub cluster: ClusterSettings,
    /// `--db-sql`: the user's query is the load, on keys of theirs (`keys` is then how many
    /// the run used; 0 before they are read: all of them).
    #[serde(default)]
    pub own_load: Option<OwnLoad>,
    /// Writes sent alongside the reads (`--write-rps`); absent without writes, so a run
    /// without them reads (and is compared) as before writes existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteLoad>,
    /// What a write does to the cache after its commit (`--invalidate`); absent without
    /// writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidate: Option<Invalidate>,
    /// How long a lease token lives unless its SET consumes it (`--lease-ttl`); only under
    /// the lease coordination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl: Option<Dur>,
    /// The app under test (`--target`); null: the built-in app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::app::TargetSpec>,
    /// The simulated client's timeout and retries (`--request-timeout`, `--retries`); null
    /// when it waits for every answer and never retries.
    #[serde(default)]
    pub client: Option<Client>,
    /// How long an answer may take and still count as goodput: `--goodput-within`, else the
    /// request timeout, else 1 s.
    #[serde(default = "crate::workload::default_goodput_within")]
    pub goodput_within: Dur,
    /// When a run with a shock counts as back (`--baseline-window`, `--recovery-goodput`,
    /// `--recovery-hit-points`, `--settle`, `--observe`).
    #[serde(default = "default_recovery")]
    pub recovery: RecoveryCriteria,
    /// The recorded trace replayed as the traffic (`--trace`); absent for a synthetic workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::replay::TraceSpec>,
}

impl Scenario {
    /// What one load costs the database under this scenario.
    pub fn load_cost(&self) -> LoadCost {
        match self.db_query {
            DbQuery::Sleep => LoadCost::Sleep(self.db_cost.0),
            DbQuery::Heavy => LoadCost::Heavy,
        }
    }

    /// The label of a run in tables and file names: the strategy, and with writes its
    /// invalidation (`mutex/delete`).
    pub fn label(&self) -> String {
        if let Some(t) = &self.target {
            return t.name().to_string();
        }
        match (self.writes, self.invalidate) {
            (Some(_), Some(i)) => format!("{}/{i}", self.strategy),
            _ => self.strategy.to_string(),
        }
    }

    /// Each item's payload size: drawn from `value_size_dist` with the run's seed, else
    /// `value_size` for every item.
    pub fn sizes(&self) -> Sizes {
        // A replay's items have the trace's sizes (its index is there once resolved; a
        // changed trace fails the replay itself, loudly).
        if let Some(i) = self
            .trace
            .as_ref()
            .and_then(|t| t.index(self.value_size as u32).ok())
        {
            return Sizes::per_item(i.sizes.clone());
        }
        match &self.value_size_dist {
            Some(d) => d.draw(self.keys, derive_seed(self.seed, Purpose::Sizes, 0)),
            None => Sizes::Fixed(self.value_size),
        }
    }

    /// The memory limit set on Redis, when there is one (a `maxmemory` above 0).
    pub fn memory_limit(&self) -> Option<&MemoryLimit> {
        self.memory.as_ref().filter(|m| m.maxmemory.0 > 0)
    }

    /// Whether a fault strikes this server.
    pub fn faults_on(&self, server: Server) -> bool {
        self.faults.iter().any(|f| f.kind.server() == server)
    }
}

/// Results written before `start` existed began from an empty cache.
fn start_cold() -> Start {
    Start::Cold
}

/// The recovery criterion of a results file written before it was recorded: the defaults.
fn default_recovery() -> RecoveryCriteria {
    optional::recovery(&Default::default())
}

mod cluster;
pub mod compare;
mod faults;
pub mod invocation;
mod memory;
mod needs;
mod optional;
pub mod policy;
mod resolve;
mod servers;
mod shape;
pub mod sweep;
pub mod target;
pub mod trace;

pub use crate::cluster::ClusterSettings;
pub use crate::strategy::{Rewarm, failsafe::FailSafe};
pub use crate::workload::{LoadShape, WriteLoad};
pub use resolve::{resolve, resolve_one};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RunFlags;

    #[test]
    fn writes_are_absent_unless_asked_for_and_label_the_run() {
        let s = resolve(None, RunFlags::default()).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        for k in ["writes", "invalidate", "lease_ttl"] {
            assert!(v.get(k).is_none(), "{k} written without writes");
        }
        assert_eq!(s.label(), "cache-aside");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let s = resolve(Some(&dir.join("invalidation.toml")), {
            let mut f: RunFlags = Default::default();
            f.cache.strategy = Some("swr+lease".into());
            f.writes.invalidate = Some("versioned".into());
            f
        })
        .unwrap();
        assert_eq!(s.writes.map(|w| (w.rps, w.zipf)), Some((100.0, 1.1)));
        assert_eq!(s.label(), "swr+lease/versioned");
        assert!(s.lease_ttl.is_some());
        let back: Scenario = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.invalidate, s.invalidate);
    }
}
