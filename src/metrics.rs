//! Measurement without a shared lock on the hot path: each worker thread records into its own
//! shard (an uncontended mutex, never held across an await), the timeline ticker and the final
//! tally merge the shards; loads and rare events use atomics. Nothing is kept per request.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;

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
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Hit,
        Outcome::Miss,
        Outcome::Stale,
        Outcome::Waited,
        Outcome::Fallback,
        Outcome::Error,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::Stale => "stale",
            Outcome::Waited => "waited",
            Outcome::Fallback => "fallback",
            Outcome::Error => "error",
        }
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
    pub hits: u64,
    pub stale: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

impl Interval {
    fn new() -> Self {
        Interval {
            requests: 0,
            hits: 0,
            stale: 0,
            errors: 0,
            latency: histogram(2),
        }
    }
    fn absorb(&mut self, o: &Interval) {
        self.requests += o.requests;
        self.hits += o.hits;
        self.stale += o.stale;
        self.errors += o.errors;
        let _ = self.latency.add(&o.latency);
    }
    fn clear(&mut self) {
        self.requests = 0;
        self.hits = 0;
        self.stale = 0;
        self.errors = 0;
        self.latency.reset();
    }
}

/// Whole-run figures of measured requests.
#[derive(Debug, Clone)]
pub struct Totals {
    pub outcomes: [u64; 6],
    /// From the scheduled start (open loop) to completion, µs.
    pub latency: Histogram<u64>,
    /// From the actual start to completion, µs.
    pub service: Histogram<u64>,
    pub by_outcome: [Histogram<u64>; 6],
}

impl Totals {
    fn new() -> Self {
        Totals {
            outcomes: [0; 6],
            latency: histogram(3),
            service: histogram(3),
            by_outcome: std::array::from_fn(|_| histogram(2)),
        }
    }
    fn absorb(&mut self, o: &Totals) {
        for i in 0..6 {
            self.outcomes[i] += o.outcomes[i];
            let _ = self.by_outcome[i].add(&o.by_outcome[i]);
        }
        let _ = self.latency.add(&o.latency);
        let _ = self.service.add(&o.service);
    }
    pub fn completed(&self) -> u64 {
        self.outcomes.iter().sum()
    }
}

struct Shard {
    totals: Totals,
    interval: Interval,
}

const SHARDS: usize = 8;

thread_local! {
    static SHARD_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

fn shard_index() -> usize {
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
        match outcome {
            Outcome::Hit => s.interval.hits += 1,
            Outcome::Stale => s.interval.stale += 1,
            Outcome::Error => s.interval.errors += 1,
            _ => {}
        }
        s.interval.latency.saturating_record(lat);
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

/// Counts of rare events, shared by every instance.
#[derive(Debug, Default)]
pub struct Counters {
    pub redis_errors: AtomicU64,
    pub redis_timeouts: AtomicU64,
    pub db_errors: AtomicU64,
    pub db_timeouts: AtomicU64,
    pub background_refreshes: AtomicU64,
    pub refreshes_skipped: AtomicU64,
    pub early_recomputes: AtomicU64,
    /// Sum over early recomputes of how long before the hard expiry they started, µs.
    pub early_lead_us: AtomicU64,
    pub lock_acquired: AtomicU64,
    pub lock_contended: AtomicU64,
    pub lock_timeouts: AtomicU64,
    pub lock_lost: AtomicU64,
    pub lock_unavailable: AtomicU64,
    pub negative_hits: AtomicU64,
    pub cold_misses: AtomicU64,
    /// Whether Redis is up, as the fault schedule knows it (not a counter: not in snapshots).
    pub redis_health: RedisHealth,
}

/// Redis's state as the fault schedule ([`crate::chaos`]) sets it, for the timeline, and the
/// moment requests first got a command through after a restart. The request path pays one
/// relaxed load per successful command; the lock is taken once per restart.
#[derive(Debug, Default)]
pub struct RedisHealth {
    down: AtomicBool,
    /// Down at some moment since the timeline last asked.
    went_down: AtomicBool,
    armed: AtomicBool,
    first_ok: Mutex<Option<Instant>>,
}

impl RedisHealth {
    /// Redis was just killed.
    pub fn set_down(&self) {
        self.down.store(true, Relaxed);
        self.went_down.store(true, Relaxed);
    }

    /// Redis answers again; the next successful command of a request is recorded.
    pub fn set_up(&self) {
        *self.first_ok.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.armed.store(true, Relaxed);
        self.down.store(false, Relaxed);
    }

    /// For one timeline bucket: true when Redis was up during the whole bucket since the last call.
    pub fn take_bucket_up(&self) -> bool {
        let down_now = self.down.load(Relaxed);
        let was_down = self.went_down.swap(down_now, Relaxed);
        !(was_down || down_now)
    }

    /// A request's Redis command succeeded.
    #[inline]
    pub fn note_ok(&self) {
        if self.armed.load(Relaxed) && self.armed.swap(false, Relaxed) {
            *self.first_ok.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }

    /// When the first command succeeded after the last [`RedisHealth::set_up`], if one has.
    pub fn first_ok(&self) -> Option<Instant> {
        *self.first_ok.lock().unwrap_or_else(|p| p.into_inner())
    }
}

macro_rules! counters_snapshot {
    ($($f:ident),* $(,)?) => {
        /// A copy of [`Counters`] at one moment; the difference of two is what happened between.
        #[derive(Debug, Default, Clone, Copy, Serialize)]
        pub struct CountersSnapshot { $(pub $f: u64,)* }
        impl Counters {
            pub fn snapshot(&self) -> CountersSnapshot {
                CountersSnapshot { $($f: self.$f.load(Relaxed),)* }
            }
        }
        impl std::ops::Sub for CountersSnapshot {
            type Output = CountersSnapshot;
            fn sub(self, o: Self) -> Self { CountersSnapshot { $($f: self.$f.saturating_sub(o.$f),)* } }
        }
    };
}
counters_snapshot!(
    redis_errors,
    redis_timeouts,
    db_errors,
    db_timeouts,
    background_refreshes,
    refreshes_skipped,
    early_recomputes,
    early_lead_us,
    lock_acquired,
    lock_contended,
    lock_timeouts,
    lock_lost,
    lock_unavailable,
    negative_hits,
    cold_misses,
);

pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// Why a load ran; warm loads are counted apart from traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadKind {
    Warm,
    Traffic,
}

const HERD_SHARDS: usize = 16;

/// Tracks database loads in flight: how many at once, how many of one key at once (the herd),
/// and how many started while another load of the same key was already running (redundant).
#[derive(Debug)]
pub struct LoadTracker {
    pub calls: AtomicU64,
    pub warm_loads: AtomicU64,
    /// Loads started since the timeline last took this counter.
    pub interval_calls: AtomicU64,
    pub in_flight: AtomicU64,
    pub peak_concurrent: AtomicU64,
    pub peak_herd: AtomicU64,
    pub redundant: AtomicU64,
    herds: Box<[Mutex<HashMap<u64, u32>>]>,
}

impl Default for LoadTracker {
    fn default() -> Self {
        LoadTracker {
            calls: AtomicU64::new(0),
            warm_loads: AtomicU64::new(0),
            interval_calls: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak_concurrent: AtomicU64::new(0),
            peak_herd: AtomicU64::new(0),
            redundant: AtomicU64::new(0),
            herds: (0..HERD_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }
}

/// One load in flight; dropping it ends the load in the tracker.
pub struct LoadGuard<'a> {
    tracker: &'a LoadTracker,
    key: u64,
}

impl LoadTracker {
    pub fn begin(&self, key: u64, kind: LoadKind) -> LoadGuard<'_> {
        self.calls.fetch_add(1, Relaxed);
        if kind == LoadKind::Warm {
            self.warm_loads.fetch_add(1, Relaxed);
        } else {
            self.interval_calls.fetch_add(1, Relaxed);
        }
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.peak_concurrent.fetch_max(now, Relaxed);
        let herd = {
            let mut m = self.herds[(key as usize) % HERD_SHARDS]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = m.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        if herd > 1 {
            self.redundant.fetch_add(1, Relaxed);
        }
        self.peak_herd.fetch_max(u64::from(herd), Relaxed);
        LoadGuard { tracker: self, key }
    }

    /// Forget the peaks seen so far (at the end of the warm-up), keeping what is in flight.
    pub fn reset_peaks(&self) {
        self.peak_concurrent
            .store(self.in_flight.load(Relaxed), Relaxed);
        let herd = self
            .herds
            .iter()
            .map(|m| {
                m.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .copied()
                    .max()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        self.peak_herd.store(u64::from(herd), Relaxed);
    }
}

impl Drop for LoadGuard<'_> {
    fn drop(&mut self) {
        self.tracker.in_flight.fetch_sub(1, Relaxed);
        let mut m = self.tracker.herds[(self.key as usize) % HERD_SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
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
    fn herd_and_redundant_loads() {
        let t = LoadTracker::default();
        let a = t.begin(1, LoadKind::Traffic);
        let b = t.begin(1, LoadKind::Traffic);
        let c = t.begin(2, LoadKind::Warm);
        assert_eq!(t.peak_herd.load(Relaxed), 2);
        assert_eq!(t.redundant.load(Relaxed), 1);
        assert_eq!(t.peak_concurrent.load(Relaxed), 3);
        drop((a, b, c));
        assert_eq!(t.in_flight.load(Relaxed), 0);
        let _d = t.begin(1, LoadKind::Traffic);
        assert_eq!(
            t.redundant.load(Relaxed),
            1,
            "a load after the others ended is not redundant"
        );
        assert_eq!(t.calls.load(Relaxed), 4);
        assert_eq!(t.warm_loads.load(Relaxed), 1);
        t.reset_peaks();
        assert_eq!(t.peak_herd.load(Relaxed), 1);
    }

    #[test]
    fn redis_health_marks_every_bucket_that_saw_an_outage() {
        let h = RedisHealth::default();
        assert!(h.take_bucket_up());
        h.set_down();
        assert!(!h.take_bucket_up(), "the bucket in which Redis died");
        assert!(!h.take_bucket_up(), "a bucket spent down");
        h.note_ok();
        assert_eq!(h.first_ok(), None, "not armed while down");
        h.set_up();
        assert!(!h.take_bucket_up(), "the bucket in which Redis came back");
        assert!(h.take_bucket_up());
        h.note_ok();
        let first = h.first_ok().expect("recorded");
        h.note_ok();
        assert_eq!(h.first_ok(), Some(first), "only the first command counts");
    }

    #[test]
    fn recorder_merges_shards_and_intervals() {
        let r = Recorder::default();
        r.record(Outcome::Hit, 500, 400);
        r.record(Outcome::Miss, 20_000, 20_000);
        std::thread::scope(|s| {
            s.spawn(|| r.record(Outcome::Error, 1_000, 1_000));
        });
        let mut iv = Recorder::new_interval();
        r.take_interval(&mut iv);
        assert_eq!((iv.requests, iv.hits, iv.errors), (3, 1, 1));
        r.take_interval(&mut iv);
        assert_eq!(iv.requests, 0);
        let t = r.totals();
        assert_eq!(t.completed(), 3);
        assert_eq!(t.outcomes[Outcome::Miss as usize], 1);
        assert!(pct_ms(&t.latency, 1.0) >= 19.9);
    }
}
