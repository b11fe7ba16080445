//! Database work as the tool sees it, in two layers that are counted apart because they are
//! different things:
//!
//! - a *load* is a request's need for a value from the database: it starts when the request
//!   decides to load and ends when the answer is back, and includes the wait for a pooled
//!   connection. Herds (loads of one key in flight at once), redundant loads and the peak of
//!   loads in flight count loads, queued ones included.
//! - a *statement* (a DB call) is what the server receives: it starts once a connection is
//!   held. `calls`, the peak of statements running at once (`peak_concurrent`) and the
//!   statement errors count statements, so they can be set beside the server's own counts.
//!
//! Each load and statement belongs to a [`Phase`], decided when it starts: the warm-up, or the
//! measured window (cache warming reads Postgres in bulk and sends no loads). Only the measured window's figures are
//! reported; the phase is decided by the clock, not by a timer that fires late, so nothing
//! leaks across the boundary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::causes::{Cause, CauseBook, CauseCounts, HotKey, Why};

/// The part of a run a load or statement belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Traffic before the measured window (`--warmup`).
    WarmUp,
    /// The measured window, and the drain of requests scheduled in it.
    Measured,
}

const HERD_SHARDS: usize = 16;

/// Loads and statements in flight, their peaks, and the measured window's counts.
#[derive(Debug)]
pub struct LoadTracker {
    /// When the measured window opens; unset until the driver fixes it.
    measured_from: OnceLock<Instant>,
    /// Statements sent in the measured window (DB calls).
    pub calls: AtomicU64,
    /// Statements sent during the warm-up.
    pub warmup_calls: AtomicU64,
    /// Of `calls`, those of the re-warm job (`--rewarm-every`).
    pub rewarm_calls: AtomicU64,
    /// Measured statements started since the timeline last took this counter.
    pub interval_calls: AtomicU64,
    /// Measured statements that the server received and that ended in an error
    /// (`statement_timeout` included).
    pub statement_errors: AtomicU64,
    /// Of `statement_errors`, those cancelled by `statement_timeout` (`--db-timeout`).
    pub statement_timeouts: AtomicU64,
    /// Measured loads that gave up waiting for a pooled connection: no statement was sent.
    pub pool_timeouts: AtomicU64,
    /// Measured loads that could not open a new connection (Postgres down, refusing
    /// connections while it recovers, or too slow to answer): no statement was sent.
    pub connect_errors: AtomicU64,
    /// Time measured statements spent running, µs.
    pub statement_us: AtomicU64,
    /// Time measured statements waited for a pooled connection before starting, µs.
    pub pool_wait_us: AtomicU64,
    /// `pool_wait_us` since the timeline last took it.
    pub interval_pool_wait_us: AtomicU64,
    running: AtomicU64,
    /// Most statements running at once in the measured window.
    pub peak_concurrent: AtomicU64,
    in_flight: AtomicU64,
    /// Most loads in flight at once in the measured window, queued ones included.
    pub peak_in_flight: AtomicU64,
    /// Most loads of one key in flight at once in the measured window (the herd).
    pub peak_herd: AtomicU64,
    /// Measured loads started while another load of the same key was in flight.
    pub redundant: AtomicU64,
    /// Measured loads started (a request's need for a value: queued ones included).
    pub begun: AtomicU64,
    herds: Box<[Mutex<HashMap<u64, u32>>]>,
    /// Each key's history, for the causes of its loads.
    pub book: CauseBook,
    /// Measured statements by cause: they add up to `calls`.
    pub causes: CauseCounts,
    /// The hottest key's figures for the herd model.
    pub hot: HotKey,
    /// What a load costs now, in thousandths of its set cost (0: as set): a slow-db shock
    /// raises it for its duration.
    cost_milli: AtomicU64,
}

impl LoadTracker {
    /// Every load from now on costs `factor` times its set cost (1: back to normal).
    pub fn set_cost_factor(&self, factor: f64) {
        let m = (factor * 1000.0).round().max(0.0) as u64;
        self.cost_milli
            .store(if m == 1000 { 0 } else { m }, Relaxed);
    }

    /// How many times its set cost a load costs now.
    #[inline]
    pub fn cost_factor(&self) -> f64 {
        match self.cost_milli.load(Relaxed) {
            0 => 1.0,
            m => m as f64 / 1000.0,
        }
    }
}

impl Default for LoadTracker {
    fn default() -> Self {
        LoadTracker::for_run(CauseBook::default(), 0)
    }
}

impl LoadTracker {
    /// A tracker whose loads are given causes from `book`, with `hot_key` (0: none) watched
    /// for the herd model.
    pub fn for_run(book: CauseBook, hot_key: u64) -> Self {
        LoadTracker {
            measured_from: OnceLock::new(),
            calls: AtomicU64::new(0),
            warmup_calls: AtomicU64::new(0),
            rewarm_calls: AtomicU64::new(0),
            interval_calls: AtomicU64::new(0),
            statement_errors: AtomicU64::new(0),
            statement_timeouts: AtomicU64::new(0),
            pool_timeouts: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            statement_us: AtomicU64::new(0),
            pool_wait_us: AtomicU64::new(0),
            interval_pool_wait_us: AtomicU64::new(0),
            running: AtomicU64::new(0),
            peak_concurrent: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak_in_flight: AtomicU64::new(0),
            peak_herd: AtomicU64::new(0),
            redundant: AtomicU64::new(0),
            begun: AtomicU64::new(0),
            herds: (0..HERD_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            book,
            causes: CauseCounts::default(),
            hot: HotKey {
                id: hot_key,
                ..HotKey::default()
            },
            cost_milli: AtomicU64::new(0),
        }
    }
}

/// One load in flight; dropping it ends the load.
pub struct LoadGuard<'a> {
    tracker: &'a LoadTracker,
    key: u64,
    began: Instant,
    /// A load of the re-warm job, not of a request.
    rewarm: bool,
    /// Why it was made: its statement is counted under this cause.
    cause: Cause,
}

/// One statement running on a held connection; dropping it ends the statement.
pub struct StatementGuard<'a> {
    tracker: &'a LoadTracker,
    phase: Phase,
    began: Instant,
}

impl LoadTracker {
    /// The measured window opens at `at` (once per run).
    pub fn open_window(&self, at: Instant) {
        let _ = self.measured_from.set(at);
    }

    fn phase(&self, now: Instant) -> Phase {
        if self.measured_from.get().is_some_and(|t| now >= *t) {
            Phase::Measured
        } else {
            Phase::WarmUp
        }
    }

    /// A load of `key` starts: it is in flight (queued for a connection or running) until the
    /// guard drops.
    pub fn begin(&self, key: u64) -> LoadGuard<'_> {
        self.begin_as(key, Why::Absent, false)
    }

    /// [`LoadTracker::begin`] for a load made because the request saw `why`; for the re-warm
    /// job when `rewarm` (its statements are counted in `rewarm_calls` too).
    pub fn begin_as(&self, key: u64, why: Why, rewarm: bool) -> LoadGuard<'_> {
        let began = Instant::now();
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        let herd = {
            let mut m = self.herds[(key as usize) % HERD_SHARDS]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = m.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        let cause = self
            .book
            .cause(key, why, herd > 1, super::causes::unix_ms());
        if self.phase(began) == Phase::Measured {
            self.begun.fetch_add(1, Relaxed);
            self.peak_in_flight.fetch_max(now, Relaxed);
            self.peak_herd.fetch_max(u64::from(herd), Relaxed);
            if herd > 1 {
                self.redundant.fetch_add(1, Relaxed);
            }
            if key == self.hot.id {
                self.hot.loads.fetch_add(1, Relaxed);
                if herd == 1 {
                    self.hot.leaders.fetch_add(1, Relaxed);
                }
                self.hot.peak.fetch_max(u64::from(herd), Relaxed);
            }
        }
        LoadGuard {
            tracker: self,
            key,
            began,
            rewarm,
            cause,
        }
    }

    /// A measured request for `key` (the hottest key's are counted for the herd model).
    #[inline]
    pub fn note_request(&self, key: u64) {
        if key == self.hot.id {
            self.hot.requests.fetch_add(1, Relaxed);
        }
    }

    /// A load of `key` that began at `began` has been written back (or ended without).
    #[inline]
    pub fn note_fill(&self, key: u64, began: Instant) {
        if key == self.hot.id && self.phase(began) == Phase::Measured {
            self.hot
                .fill_us
                .fetch_add(began.elapsed().as_micros() as u64, Relaxed);
            self.hot.fills.fetch_add(1, Relaxed);
        }
    }

    /// Measured statements sent so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }
}

impl<'a> LoadGuard<'a> {
    /// How many times its set cost this load costs (a slow-db shock raises it).
    #[inline]
    pub fn cost_factor(&self) -> f64 {
        self.tracker.cost_factor()
    }

    /// The load got a connection and sends its statement: one DB call, counted in the phase
    /// of this moment.
    pub fn statement(&self) -> StatementGuard<'a> {
        let t = self.tracker;
        let now = Instant::now();
        let phase = t.phase(now);
        let running = t.running.fetch_add(1, Relaxed) + 1;
        match phase {
            Phase::WarmUp => {
                t.warmup_calls.fetch_add(1, Relaxed);
            }
            Phase::Measured => {
                t.calls.fetch_add(1, Relaxed);
                t.causes.count(self.cause);
                t.interval_calls.fetch_add(1, Relaxed);
                if self.rewarm {
                    t.rewarm_calls.fetch_add(1, Relaxed);
                }
                t.peak_concurrent.fetch_max(running, Relaxed);
                let waited = (now - self.began).as_micros() as u64;
                t.pool_wait_us.fetch_add(waited, Relaxed);
                t.interval_pool_wait_us.fetch_add(waited, Relaxed);
            }
        }
        StatementGuard {
            tracker: t,
            phase,
            began: now,
        }
    }

    /// The load gave up waiting for a pooled connection: no statement was sent.
    pub fn pool_timeout(&self) {
        if self.tracker.phase(Instant::now()) == Phase::Measured {
            self.tracker.pool_timeouts.fetch_add(1, Relaxed);
        }
    }

    /// The load could not open a new connection: no statement was sent.
    pub fn connect_failed(&self) {
        if self.tracker.phase(Instant::now()) == Phase::Measured {
            self.tracker.connect_errors.fetch_add(1, Relaxed);
        }
    }
}

impl StatementGuard<'_> {
    /// The phase this statement was counted in (it decides which statement text is sent, so
    /// the server counts each phase apart).
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The server received the statement and it ended in an error; `timeout` when
    /// `statement_timeout` cancelled it.
    pub fn failed(&self, timeout: bool) {
        if self.phase == Phase::Measured {
            self.tracker.statement_errors.fetch_add(1, Relaxed);
            if timeout {
                self.tracker.statement_timeouts.fetch_add(1, Relaxed);
            }
        }
    }
}

impl Drop for StatementGuard<'_> {
    fn drop(&mut self) {
        self.tracker.running.fetch_sub(1, Relaxed);
        if self.phase == Phase::Measured {
            self.tracker
                .statement_us
                .fetch_add(self.began.elapsed().as_micros() as u64, Relaxed);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn herds_redundant_loads_and_statements_count_the_measured_window_only() {
        let t = LoadTracker::default();
        // Before the window opens: traffic is warm-up.
        let w = t.begin(1);
        let w2 = t.begin(1);
        let s = w.statement();
        assert_eq!(s.phase(), Phase::WarmUp);
        assert_eq!(
            t.redundant.load(Relaxed),
            0,
            "the warm-up's herd is not reported"
        );
        assert_eq!(t.peak_herd.load(Relaxed), 0);
        t.open_window(Instant::now());
        let a = t.begin(1);
        assert_eq!(
            t.peak_herd.load(Relaxed),
            3,
            "in flight with the warm-up's loads"
        );
        assert_eq!(t.redundant.load(Relaxed), 1);
        let b = t.begin(2);
        let sb = b.statement();
        assert_eq!(sb.phase(), Phase::Measured);
        assert_eq!(t.peak_concurrent.load(Relaxed), 2, "statements, not loads");
        assert_eq!(
            t.peak_in_flight.load(Relaxed),
            4,
            "loads, queued ones included"
        );
        sb.failed(true);
        a.pool_timeout();
        a.connect_failed();
        drop((s, sb, a, b, w, w2));
        assert_eq!(t.in_flight.load(Relaxed), 0);
        assert_eq!(t.running.load(Relaxed), 0);
        assert_eq!((t.calls(), t.warmup_calls.load(Relaxed)), (1, 1));
        assert_eq!(t.statement_errors.load(Relaxed), 1);
        assert_eq!(t.statement_timeouts.load(Relaxed), 1);
        assert_eq!(t.pool_timeouts.load(Relaxed), 1);
        assert_eq!(t.connect_errors.load(Relaxed), 1);
        let _d = t.begin(1);
        assert_eq!(
            t.redundant.load(Relaxed),
            1,
            "a load after the others ended is not redundant"
        );
    }

    #[test]
    fn a_window_opening_later_keeps_earlier_loads_out() {
        let t = LoadTracker::default();
        t.open_window(Instant::now() + Duration::from_secs(3600));
        let a = t.begin(1);
        assert_eq!(a.statement().phase(), Phase::WarmUp);
        assert_eq!(t.calls(), 0);
    }
}
