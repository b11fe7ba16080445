//! The run-time policy: every setting the request path applies, fixed for the run and
//! copied into each app instance. It is produced once, from the resolved scenario, by
//! `scenario::policy` (a pure function, where every derived default is worked out); the
//! instances only read it. The run's state (counters, the abort token, the writes, the
//! in-process tiers) is apart from it, in `instance::RunState`.

use super::failsafe;
use super::freshness;
use super::invalidate::Invalidate;
use super::lock;
use super::{Coordination, EntryStore};

/// What the request path applies, fixed for the run.
#[derive(Debug, Clone, Copy)]
pub struct RunPolicy {
    /// How an entry read is judged and how a written one is stamped (the grace included).
    pub freshness: freshness::Policy,
    /// Who performs a load on a miss or an early recompute.
    pub coordination: Coordination,
    /// Who performs a background refresh (the coordination, unless the strategy says else).
    pub refresh: Coordination,
    /// Whether a refresher that takes the key's lock reads the entry again first and skips
    /// when a newer one is there (a library preset's choice: see `LibraryDecl`).
    pub refresh_rechecks: bool,
    /// `--fail-safe`, `--fail-safe-throttle`, `--soft-timeout`.
    pub fail_safe: failsafe::Settings,
    pub lock: lock::Settings,
    /// How long a lease token lives unless a SET consumes it (`--lease-ttl`), ms.
    pub lease_ttl_ms: u64,
    /// Whether the run has writes (`--write-rps` above 0): without, nothing on the request
    /// path looks at versions.
    pub writes: bool,
    /// What a write does to the cache after its commit.
    pub invalidate: Invalidate,
    /// The wait between a writer's commit and its cache step (`--write-gap`).
    pub write_gap: Option<crate::values::DurRange>,
    /// How long a writer's version marker lives, ms (longer than any entry it guards).
    pub marker_px_ms: u64,
    /// Whether a read's staleness is looked up (always, but for a benchmark that measures
    /// what the bookkeeping costs: see [`Bench`]).
    pub track_staleness: bool,
    /// Whether an instance can crash holding locks (the holder-crash fault): the instances
    /// then track what they hold, and their requests can be cut off.
    pub crashable: bool,
    /// Where the entries are kept: Redis, or each instance's memory (a library preset's
    /// choice: see `LibraryDecl::store`).
    pub store: EntryStore,
}

impl RunPolicy {
    /// Whether a reader's SET goes through the versioned check.
    pub fn versioned(&self) -> bool {
        self.writes
            && matches!(
                self.invalidate,
                Invalidate::Versioned | Invalidate::DeleteGuarded
            )
    }
}

/// Switches for benchmarks only, read from the environment once per run and handed to the
/// policy's producer, which stays pure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bench {
    /// `STAMPEDE_BENCH_NO_STALENESS`: skip the stale-read lookup, so `scripts/bench` can
    /// measure what the bookkeeping costs a run with writes. The consistency figures are then
    /// wrong; never set it for a measurement.
    pub no_staleness: bool,
}

impl Bench {
    /// The switches as the environment sets them.
    pub fn from_env() -> Bench {
        Bench {
            no_staleness: std::env::var_os("STAMPEDE_BENCH_NO_STALENESS").is_some(),
        }
    }
}
