//! What a run produced, raw: the figures the driver hands back before the session shapes
//! them into a result.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::metrics::{CostSums, CountersSnapshot, LoadTracker, Totals, Writes};
use crate::results::{BreakerEvent, Bucket, DispatchLag};

/// What the traffic produced, before it is shaped into a result.
pub struct Raw {
    pub totals: Totals,
    /// The longest lease `--lock-ttl auto` gave, ms (None: not auto, or no lock taken).
    pub lease_max_ms: Option<u64>,
    pub scheduled: u64,
    pub shed: u64,
    /// Measured requests the generator could not dispatch before the window closed.
    pub unsent: u64,
    /// Measured requests still in flight when the drain ran out, dropped and counted as errors
    /// (their latency recorded at the moment they were given up).
    pub abandoned: u64,
    pub warmup_requests: u64,
    pub counters: CountersSnapshot,
    /// The measured window's database figures.
    pub db: DbRaw,
    /// The measured window's Redis reads and write-backs, timed (for the break-even).
    pub cost: CostSums,
    pub timeline: Vec<Bucket>,
    /// Every state change of the instances' breakers, in order.
    pub breaker: Vec<BreakerEvent>,
    /// Each instance's own requests and latency.
    pub instances: Vec<crate::metrics::InstanceRead>,
    pub interrupted: bool,
    /// How late the open loop dispatched its requests (None in closed loop: no schedule).
    pub lag: Option<DispatchLag>,
    pub started_at_ms: u64,
    /// Fingerprint of the key draws and how many ids it covers (see [`KeySampler::digest`]).
    pub key_digest: (u64, u64),
    /// CPU the whole process used from the start of traffic to the end of the drain.
    pub cpu: Duration,
    /// Wall-clock time of that same window.
    pub wall: Duration,
    /// Wall-clock length of the measured window, including the drain.
    pub window: Duration,
    /// Peak resident set size of the process, bytes.
    pub peak_rss: u64,
    /// The writes' figures; None without writes.
    pub writes: Option<WritesRaw>,
    /// Measured requests answered with a value within the goodput deadline.
    pub goodput: u64,
    /// Retries sent by the client (each attempt after the first).
    pub retries: u64,
    /// Retries that waited for a "retry after D" answer's D, and the shortest such wait, ms.
    pub retry_after_waits: u64,
    pub retry_after_wait_ms_min: Option<f64>,
    /// Runs of the re-warm job that started in the measured window.
    pub rewarm_runs: u64,
    /// How long, within the measured window and its drain, at least one instance limited its
    /// own loads because the global rate limit's Redis did not answer.
    pub rate_fallback: Duration,
}

/// What the writes did.
pub struct WritesRaw {
    pub committed: u64,
    pub errors: u64,
    /// Writes read back once their key settled, those found left wrong, those never
    /// probed, and the key-ms the probes saw wrong (see `metrics::Probes`).
    pub probed: u64,
    pub left_wrong: u64,
    pub unprobed: u64,
    pub divergent_ms: u64,
    /// From each write's scheduled start to the end of its invalidation, µs.
    pub latency: hdrhistogram::Histogram<u64>,
}

/// The load tracker's figures at the end of a run (see [`LoadTracker`]).
pub struct DbRaw {
    pub calls: u64,
    pub warmup_calls: u64,
    pub rewarm_calls: u64,
    pub statement_errors: u64,
    pub statement_timeouts: u64,
    pub pool_timeouts: u64,
    pub connect_errors: u64,
    pub statement_us: u64,
    pub pool_wait_us: u64,
    pub peak_concurrent: u64,
    pub peak_in_flight: u64,
    pub peak_herd: u64,
    pub redundant: u64,
    /// `calls` by cause.
    pub by_cause: crate::results::causes::ByCause,
    /// The hottest key's counts for the herd model.
    pub hot: crate::results::causes::HotCounts,
}

impl DbRaw {
    pub(super) fn of(t: &LoadTracker) -> DbRaw {
        DbRaw {
            calls: t.calls.load(Relaxed),
            warmup_calls: t.warmup_calls.load(Relaxed),
            rewarm_calls: t.rewarm_calls.load(Relaxed),
            statement_errors: t.statement_errors.load(Relaxed),
            statement_timeouts: t.statement_timeouts.load(Relaxed),
            pool_timeouts: t.pool_timeouts.load(Relaxed),
            connect_errors: t.connect_errors.load(Relaxed),
            statement_us: t.statement_us.load(Relaxed),
            pool_wait_us: t.pool_wait_us.load(Relaxed),
            peak_concurrent: t.peak_concurrent.load(Relaxed),
            peak_in_flight: t.peak_in_flight.load(Relaxed),
            peak_herd: t.peak_herd.load(Relaxed),
            redundant: t.redundant.load(Relaxed),
            by_cause: crate::results::causes::ByCause::of(|c| t.causes.get(c)),
            hot: crate::results::causes::HotCounts {
                key: t.hot.id,
                requests: t.hot.requests.load(Relaxed),
                loads: t.hot.loads.load(Relaxed),
                leaders: t.hot.leaders.load(Relaxed),
                peak: t.hot.peak.load(Relaxed),
                fill_us: t.hot.fill_us.load(Relaxed),
                fills: t.hot.fills.load(Relaxed),
            },
        }
    }
}

impl WritesRaw {
    /// The writes' figures at the end of a run.
    pub(super) fn of(w: &Writes) -> WritesRaw {
        WritesRaw {
            committed: w.committed.load(Relaxed),
            errors: w.errors.load(Relaxed),
            probed: w.probes.probed.load(Relaxed),
            left_wrong: w.probes.left_wrong.load(Relaxed),
            unprobed: w.probes.unprobed.load(Relaxed) + w.probes.pending.load(Relaxed),
            divergent_ms: w.probes.divergent_ms(&w.versions, Instant::now()),
            latency: w.latency(),
        }
    }
}
