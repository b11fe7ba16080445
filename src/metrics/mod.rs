//! Measurement without a shared lock on the hot path: each worker thread records into its own
//! shard (an uncontended mutex, never held across an await), the timeline ticker and the final
//! tally merge the shards; loads and rare events use atomics. Nothing is kept per request.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use hdrhistogram::Histogram;
use serde::Serialize;

mod by_instance;
mod causes;
mod consistency;
mod cost;
mod counters;
mod loads;

pub use by_instance::{InstanceRead, InstanceTally};
pub use causes::{CAUSES, Cause, CauseBook, Why};
pub use consistency::{Probes, Versions, Writes};
pub use cost::{CostSums, CostTimes};
pub use counters::{Counters, CountersSnapshot, ServerHealth, bump};
pub use loads::{LoadGuard, LoadTracker, Phase, StatementGuard};

/// What the fault schedule reads of a running run: its counters and its load tracker.
#[derive(Clone)]
pub struct Gauges {
    pub counters: std::sync::Arc<Counters>,
    pub loads: std::sync::Arc<LoadTracker>,
}

/// How a request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A usable value was in the cache.
    Hit,
    /// The request loaded the value from the database itself.
    Miss,
    /// A stale value was served (SWR) while a refresh runs behind it.
    Stale,
    /// The request got its value after waiting for another loader (single-flight or lock).
    Waited,
    /// The request loaded after its wait for the lock ran out.
    Fallback,
    /// The request failed (database error or timeout, lock timeout under the error policy).
    Error,
    /// Its load was refused by `--db-limit`, the breaker or `--db-rate` and there was no
    /// stale value to serve: it failed fast, by design, without reaching the database.
    Rejected,
    /// The app under test (`--target`) answered as expected; whether from its cache is not
    /// visible from outside (Redis INFO and the load ledger tell that).
    Ok,
    /// The client gave up at `--request-timeout` (the work it started went on).
    TimedOut,
    /// A usable value was in the instance's in-process tier (`--l1`): Redis was not asked.
    L1Hit,
    /// The wait for another loader ran out and the request was answered "retry after D"
    /// (`--lock-timeout-policy retry-after`): no value, a hint the client's retries follow.
    RetryAfter,
}

impl Outcome {
    /// Every outcome, in the order of their discriminants (arrays are indexed by them).
    pub const ALL: [Outcome; Outcome::COUNT] = [
        Outcome::Hit,
        Outcome::Miss,
        Outcome::Stale,
        Outcome::Waited,
        Outcome::Fallback,
        Outcome::Error,
        Outcome::Rejected,
        Outcome::Ok,
        Outcome::TimedOut,
        Outcome::L1Hit,
        Outcome::RetryAfter,
    ];
    pub const COUNT: usize = 11;
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::Stale => "stale",
            Outcome::Waited => "waited",
            Outcome::Fallback => "fallback",
            Outcome::Error => "error",
            Outcome::Rejected => "rejected",
            Outcome::Ok => "ok",
            Outcome::TimedOut => "timed-out",
            Outcome::L1Hit => "l1-hit",
            Outcome::RetryAfter => "retry-after",
        }
    }

    /// Whether the client got a value (goodput, when in time): not an error, a rejection or
    /// a timeout.
    #[inline]
    pub fn answered(self) -> bool {
        !matches!(
            self,
            Outcome::Error | Outcome::Rejected | Outcome::TimedOut | Outcome::RetryAfter
        )
    }
}

/// Highest latency a histogram tracks: one hour in µs. Larger values are clamped.
const MAX_US: u64 = 3_600_000_000;

fn histogram(sigfig: u8) -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, MAX_US, sigfig).expect("valid histogram bounds")
}

/// Figures of one timeline bucket, gathered from every shard.
#[derive(Debug, Clone)]
pub struct Interval {
    pub requests: u64,
    /// Requests by outcome (indexed by the outcome's discriminant), for the live metrics.
    pub outcomes: [u64; Outcome::COUNT],
    pub hits: u64,
    pub stale: u64,
    pub errors: u64,
    pub rejected: u64,
    /// Requests that served a version older than one committed before they started.
    pub stale_reads: u64,
    pub latency: Histogram<u64>,
}

impl Interval {
    fn new() -> Self {
        Interval {
            requests: 0,
            outcomes: [0; Outcome::COUNT],
            hits: 0,
            stale: 0,
            errors: 0,
            rejected: 0,
            stale_reads: 0,
            latency: histogram(2),
        }
    }
    fn absorb(&mut self, o: &Interval) {
        self.requests += o.requests;
        for (a, b) in self.outcomes.iter_mut().zip(o.outcomes) {
            *a += b;
        }
        self.hits += o.hits;
        self.stale += o.stale;
        self.errors += o.errors;
        self.rejected += o.rejected;
        self.stale_reads += o.stale_reads;
        let _ = self.latency.add(&o.latency);
    }
    fn clear(&mut self) {
        self.requests = 0;
        self.outcomes = [0; Outcome::COUNT];
        self.hits = 0;
        self.stale = 0;
        self.errors = 0;
        self.rejected = 0;
        self.stale_reads = 0;
        self.latency.reset();
    }
}

/// Whole-run figures of measured requests.
#[derive(Debug, Clone)]
pub struct Totals {
    pub outcomes: [u64; Outcome::COUNT],
    /// From the scheduled start (open loop) to completion, µs.
    pub latency: Histogram<u64>,
    /// From the actual start to completion, µs.
    pub service: Histogram<u64>,
    pub by_outcome: [Histogram<u64>; Outcome::COUNT],
    /// Stale reads: how long the newer version had been committed when each started, µs
    /// (its count is the number of stale reads).
    pub staleness: Histogram<u64>,
}

impl Totals {
    fn new() -> Self {
        Totals {
            outcomes: [0; Outcome::COUNT],
            latency: histogram(3),
            service: histogram(3),
            by_outcome: std::array::from_fn(|_| histogram(2)),
            staleness: histogram(2),
        }
    }
    fn absorb(&mut self, o: &Totals) {
        for i in 0..Outcome::COUNT {
            self.outcomes[i] += o.outcomes[i];
            let _ = self.by_outcome[i].add(&o.by_outcome[i]);
        }
        let _ = self.latency.add(&o.latency);
        let _ = self.service.add(&o.service);
        let _ = self.staleness.add(&o.staleness);
    }
    pub fn completed(&self) -> u64 {
        self.outcomes.iter().sum()
    }
}

struct Shard {
    totals: Totals,
    interval: Interval,
}

pub(crate) const SHARDS: usize = 8;

thread_local! {
    static SHARD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn shard_index() -> usize {
    SHARD_INDEX.with(|c| {
        let mut i = c.get();
        if i == usize::MAX {
            i = NEXT_SHARD.fetch_add(1, Relaxed);
            c.set(i);
        }
        i % SHARDS
    })
}

/// Per-request figures, sharded by worker thread.
pub struct Recorder {
    shards: Box<[Mutex<Shard>]>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        totals: Totals::new(),
                        interval: Interval::new(),
                    })
                })
                .collect(),
        }
    }
}

impl Recorder {
    /// Record one measured request.
    pub fn record(&self, outcome: Outcome, latency_us: u64, service_us: u64) {
        let mut s = self.shards[shard_index()]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let i = outcome as usize;
        let lat = latency_us.clamp(1, MAX_US);
        s.totals.outcomes[i] += 1;
        s.totals.latency.saturating_record(lat);
        s.totals
            .service
            .saturating_record(service_us.clamp(1, MAX_US));
        s.totals.by_outcome[i].saturating_record(lat);
        s.interval.requests += 1;
        s.interval.outcomes[i] += 1;
        match outcome {
            Outcome::Hit | Outcome::L1Hit => s.interval.hits += 1,
            Outcome::Stale => s.interval.stale += 1,
            Outcome::Error | Outcome::RetryAfter => s.interval.errors += 1,
            Outcome::Rejected => s.interval.rejected += 1,
            _ => {}
        }
        s.interval.latency.saturating_record(lat);
    }

    /// A measured request served a stale version: a newer one had been committed for
    /// `staleness_us` when it started. Called only for stale reads, besides [`Recorder::record`].
    pub fn record_stale_read(&self, staleness_us: u64) {
        let mut s = self.shards[shard_index()]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // 0 µs is a real staleness (committed the instant the read began) but not a value the
        // histogram holds: its least is 1.
        s.totals
            .staleness
            .saturating_record(staleness_us.clamp(1, MAX_US));
        s.interval.stale_reads += 1;
    }

    /// Take the figures recorded since the last call (for one timeline bucket).
    pub fn take_interval(&self, into: &mut Interval) {
        into.clear();
        for shard in self.shards.iter() {
            let mut s = shard.lock().unwrap_or_else(|p| p.into_inner());
            into.absorb(&s.interval);
            s.interval.clear();
        }
    }

    pub fn new_interval() -> Interval {
        Interval::new()
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::new();
        for shard in self.shards.iter() {
            t.absorb(&shard.lock().unwrap_or_else(|p| p.into_inner()).totals);
        }
        t
    }
}

/// What this process has used so far (all its threads, not the servers it started).
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// User + system CPU time.
    pub cpu: std::time::Duration,
    /// Peak resident set size, bytes.
    pub max_rss: u64,
}

/// getrusage(RUSAGE_SELF); zeros if the call fails (the figures are then reported as 0).
pub fn usage() -> Usage {
    // SAFETY: rusage is plain data; getrusage only writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF is always a valid target and `ru` is a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Usage::default();
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
    };
    Usage {
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss: (ru.ru_maxrss.max(0) as u64) * 1024,
    }
}

/// Return memory the allocator holds free to the OS (glibc keeps freed memory for reuse, so a
/// transient peak would otherwise stay in the RSS for the rest of the run). Takes well under a
/// millisecond on this process's heap; call it off the async workers.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; 0 keeps no padding.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Percentile of a µs histogram in ms.
pub fn pct_ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_listed_in_discriminant_order() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i, "{}", o.name());
        }
    }

    #[test]
    fn recorder_merges_shards_and_intervals() {
        let r = Recorder::default();
        r.record(Outcome::Hit, 500, 400);
        r.record(Outcome::Miss, 20_000, 20_000);
        r.record(Outcome::Rejected, 300, 300);
        std::thread::scope(|s| {
            s.spawn(|| r.record(Outcome::Error, 1_000, 1_000));
        });
        let mut iv = Recorder::new_interval();
        r.take_interval(&mut iv);
        assert_eq!((iv.requests, iv.hits, iv.errors, iv.rejected), (4, 1, 1, 1));
        r.take_interval(&mut iv);
        assert_eq!(iv.requests, 0);
        let t = r.totals();
        assert_eq!(t.completed(), 4);
        assert_eq!(t.outcomes[Outcome::Miss as usize], 1);
        assert_eq!(t.outcomes[Outcome::Rejected as usize], 1);
        assert!(pct_ms(&t.latency, 1.0) >= 19.9);
    }
}
