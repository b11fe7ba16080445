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

/// How two results that differ in a setting of the scenario compare (`results::comparable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// What the workload asks of the servers: two results that differ in it measured
    /// different things, whatever their strategies.
    Workload,
    /// The strategy under test: its parameters (which differ between strategies of one
    /// comparison by design, such as the jitter preset's own ±10%), the protections in front of
    /// its loads, the re-warm job, the fail-safe, eager refresh and the in-process tier.
    Strategy,
    /// Neither: where the servers are, how the timeline is cut, what the run is judged by.
    Neither,
}

/// Declares [`Scenario`] with each field's [`Compared`] after `=>` (`Strategy(flatten)`: a
/// flattened struct whose every key compares so), and [`Scenario::compared`], each key the
/// results file can hold with how it compares, generated from the same declaration.
macro_rules! scenario {
    ($(#[$smeta:meta])* pub struct $name:ident {
        $( $(#[$fmeta:meta])* pub $f:ident : $t:ty => $class:ident $(($flat:ident))?, )*
    }) => {
        $(#[$smeta])*
        pub struct $name { $( $(#[$fmeta])* pub $f: $t, )* }

        impl $name {
            /// Every key a results file's scenario can hold (an optional one too), with how two
            /// results that differ in it compare.
            pub fn compared() -> Vec<(String, Compared)> {
                let each = [$( (scenario!(@keys $f, $t $(, $flat)?), Compared::$class) ),*];
                each.into_iter().flat_map(|(keys, c)| keys.into_iter().map(move |k| (k, c))).collect()
            }
        }
    };
    (@keys $f:ident, $t:ty) => { vec![stringify!($f).to_string()] };
    // A flattened struct's keys are its own fields', as its schema lists them.
    (@keys $f:ident, $t:ty, flatten) => {
        schemars::schema_for!($t).get("properties").and_then(|p| p.as_object()).map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default()
    };
}

scenario! {
/// Every effective setting of a run, after defaults. Serialized whole into the results file so a
/// result says exactly what produced it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scenario {
    /// The scenario file the settings came from, if any.
    pub scenario_file: Option<String> => Neither,
    pub strategy: StrategySpec => Strategy,
    pub load: LoadShape => Workload,
    pub duration: Dur => Workload,
    pub warmup: Dur => Workload,
    pub keys: u64 => Workload,
    pub zipf: f64 => Workload,
    pub seed: u64 => Workload,
    /// Bytes of payload per item; with `value_size_dist`, the distribution's mean (rounded).
    pub value_size: usize => Workload,
    /// Each item's own payload size, drawn from this with the run's seed
    /// (`--value-size-dist`); absent when every item has `value_size` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_size_dist: Option<SizeDist> => Workload,
    /// The managed Redis's memory limit (`--maxmemory`, `--maxmemory-policy`,
    /// `--maxmemory-samples`); absent: no limit, as before limits existed (and always on an
    /// external Redis, whose configuration is reported, never changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryLimit> => Workload,
    pub ttl: Dur => Workload,
    pub db_cost: Dur => Workload,
    pub db_pool: u32 => Workload,
    pub db_timeout: Option<Dur> => Workload,
    pub instances: u32 => Workload,
    pub redis_conns: u32 => Workload,
    pub max_inflight: u32 => Workload,
    pub backlog: u32 => Workload,
    /// What the cache holds when traffic starts.
    #[serde(default = "start_cold")]
    pub start: Start => Workload,
    pub warm: u64 => Workload,
    #[serde(serialize_with = "redact::ser_url")]
    pub redis_url: Option<String> => Neither,
    #[serde(serialize_with = "redact::ser_url")]
    pub pg_url: Option<String> => Neither,
    pub redis_timeout: Dur => Workload,
    /// Every value read from Redis checked against its key (`--check-values`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_values: bool => Neither,
    /// The client library whose behaviour the app's Redis client takes (`--redis-client`);
    /// None: the tool's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_client: Option<crate::cache::RedisClient> => Workload,
    /// The round trip added between the app instances and Redis (`--redis-rtt`, `--net-rtt`):
    /// through the tool's proxy. None: loopback, no proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_rtt: Option<crate::values::Rtt> => Workload,
    /// The same between the app instances and Postgres (`--pg-rtt`, `--net-rtt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pg_rtt: Option<crate::values::Rtt> => Workload,
    pub interval: Dur => Neither,
    pub beta: f64 => Strategy,
    pub stale: Dur => Strategy,
    /// The lock's settings (`--lock-ttl`, `--lock-wait`, …), under their own names.
    #[serde(flatten)]
    pub lock: crate::strategy::lock::LockSpec => Strategy(flatten),
    pub jitter: Percent => Strategy,
    pub missing_ratio: Percent => Workload,
    /// How the missing ids are drawn: Zipf-shaped (a few, often) or each one new.
    #[serde(default)]
    pub missing_ids: crate::workload::MissingIds => Workload,
    pub negative_ttl: Option<Dur> => Strategy,
    pub db_query: DbQuery => Workload,
    /// Most loads in flight at once per instance (`--db-limit`); null: no bulkhead.
    #[serde(default)]
    pub db_limit: Option<u32> => Strategy,
    /// The circuit breaker on each instance's loads (`--breaker`); null: none.
    #[serde(default)]
    pub breaker: Option<BreakerSpec> => Strategy,
    /// The rate limit on loads (`--db-rate`, `--db-burst`, `--db-rate-scope`); null: none.
    #[serde(default)]
    pub db_rate: Option<RateSpec> => Strategy,
    /// The re-warm job (`--rewarm-every`, `--rewarm-top`); null: none.
    #[serde(default)]
    pub rewarm: Option<Rewarm> => Strategy,
    /// The in-process tier in front of Redis (`--l1`, `--l1-ttl`, `--l1-invalidate`); null:
    /// none.
    #[serde(default)]
    pub l1: Option<crate::l1::L1Spec> => Strategy,
    /// The fail-safe (`--fail-safe`, `--fail-safe-throttle`, `--soft-timeout`); null: off.
    #[serde(default)]
    pub fail_safe: Option<FailSafe> => Strategy,
    /// `--eager-refresh`: the share of its TTL after which a read refreshes an entry in the
    /// background; null: off.
    #[serde(default)]
    pub eager_refresh: Option<Percent> => Strategy,
    /// Faults to inject, sorted by `at` (relative to the start of the measured window).
    pub faults: Vec<FaultSpec> => Workload,
    /// External Redis only: the shell command that starts it again (secrets in it redacted
    /// when written).
    #[serde(serialize_with = "redact::ser_command")]
    pub redis_restart_cmd: Option<String> => Neither,
    /// Whether a pause-redis fault may stall an external Redis (`--allow-pause-external`).
    #[serde(default)]
    pub allow_pause_external: bool => Neither,
    /// Whether a kill-redis fault may shut an external Redis down without saving
    /// (`--allow-kill-external`).
    #[serde(default)]
    pub allow_kill_external: bool => Neither,
    /// External Postgres only: the shell commands that crash it and start it again (secrets
    /// in them redacted when written).
    #[serde(default, serialize_with = "redact::ser_command")]
    pub pg_kill_cmd: Option<String> => Neither,
    #[serde(default, serialize_with = "redact::ser_command")]
    pub pg_restart_cmd: Option<String> => Neither,
    /// Limits that make the run exit 1 when broken: the file's `[thresholds]` with
    /// `--threshold` on top.
    pub thresholds: Thresholds => Neither,
    /// `--tls`: the managed servers run with TLS, on certificates made for the run.
    #[serde(default)]
    pub tls: bool => Neither,
    /// TLS to an external Redis (`--redis-ca`, `--redis-cert`/`--redis-key`, `--redis-insecure`).
    #[serde(default)]
    pub redis_tls: RedisTls => Neither,
    /// A Redis Cluster run's settings: the managed cluster's shape, replica reads, the node a
    /// fault strikes, the slot a migration moves (all default on one server).
    #[serde(default, skip_serializing_if = "ClusterSettings::is_default")]
    pub cluster: ClusterSettings => Neither,
    /// `--db-sql`: the user's query is the load, on keys of theirs (`keys` is then how many
    /// the run used; 0 before they are read: all of them).
    #[serde(default)]
    pub own_load: Option<OwnLoad> => Workload,
    /// Writes sent alongside the reads (`--write-rps`); absent without writes, so a run
    /// without them reads (and is compared) as before writes existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteLoad> => Workload,
    /// What a write does to the cache after its commit (`--invalidate`); absent without
    /// writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidate: Option<Invalidate> => Strategy,
    /// How long a lease token lives unless its SET consumes it (`--lease-ttl`); only under
    /// the lease coordination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl: Option<Dur> => Strategy,
    /// The app under test (`--target`); null: the built-in app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::app::TargetSpec> => Neither,
    /// The simulated client's timeout and retries (`--request-timeout`, `--retries`); null
    /// when it waits for every answer and never retries.
    #[serde(default)]
    pub client: Option<Client> => Workload,
    /// How long an answer may take and still count as goodput: `--goodput-within`, else the
    /// request timeout, else 1 s.
    #[serde(default = "crate::workload::default_goodput_within")]
    pub goodput_within: Dur => Neither,
    /// When a run with a shock counts as back (`--baseline-window`, `--recovery-goodput`,
    /// `--recovery-hit-points`, `--settle`, `--observe`).
    #[serde(default = "default_recovery")]
    pub recovery: RecoveryCriteria => Neither,
    /// The recorded trace replayed as the traffic (`--trace`); absent for a synthetic workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::replay::TraceSpec> => Workload,
    /// The built-in app's loads go through the run's load ledger (`stampede_load(id)`), so
    /// its herds are also counted on the server's clock, as an app under test's are
    /// (`db.ledger_peak_key_herd`): set by `conform`, which compares the two. Absent when
    /// they do not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub load_via_ledger: bool => Neither,
}
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
