//! What a hit and a miss cost the app, measured in the run: the request's Redis read and a
//! load's write-back, timed on the request path (the load itself is the [`super::LoadTracker`]'s
//! pool wait and statement). From these the break-even hit rate is computed
//! ([`crate::results::cost`]). Each worker thread adds into its own cache-line-padded shard,
//! so the request path pays two clock reads and two uncontended atomic adds per timed step.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::{SHARDS, shard_index};

/// One shard's sums, on a line of its own (no false sharing between worker threads).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard {
    read_us: AtomicU64,
    reads: AtomicU64,
    write_back_us: AtomicU64,
    write_backs: AtomicU64,
}

/// The measured window's Redis reads and write-backs, summed.
#[derive(Debug, Default)]
pub struct CostTimes {
    /// When the measured window opens; unset until the driver fixes it (nothing counts before).
    measured_from: OnceLock<Instant>,
    shards: [Shard; SHARDS],
}

/// The sums at the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostSums {
    pub read_us: u64,
    pub reads: u64,
    pub write_back_us: u64,
    pub write_backs: u64,
}

impl CostTimes {
    /// The measured window opens at `at` (once per run).
    pub fn open_window(&self, at: Instant) {
        let _ = self.measured_from.set(at);
    }

    #[inline]
    fn measured(&self, began: Instant) -> bool {
        self.measured_from.get().is_some_and(|t| began >= *t)
    }

    /// A request's cache read that began at `began` just ended.
    #[inline]
    pub fn read(&self, began: Instant) {
        self.add(began, |s| (&s.read_us, &s.reads));
    }

    /// A load's write-back to Redis that began at `began` just ended.
    #[inline]
    pub fn write_back(&self, began: Instant) {
        self.add(began, |s| (&s.write_back_us, &s.write_backs));
    }

    /// One timed step into this thread's shard: its time and its count.
    #[inline]
    fn add(&self, began: Instant, pick: impl Fn(&Shard) -> (&AtomicU64, &AtomicU64)) {
        if self.measured(began) {
            let (us, n) = pick(&self.shards[shard_index()]);
            us.fetch_add(began.elapsed().as_micros() as u64, Relaxed);
            n.fetch_add(1, Relaxed);
        }
    }

    pub fn sums(&self) -> CostSums {
        let mut c = CostSums::default();
        for s in &self.shards {
            c.read_us += s.read_us.load(Relaxed);
            c.reads += s.reads.load(Relaxed);
            c.write_back_us += s.write_back_us.load(Relaxed);
            c.write_backs += s.write_backs.load(Relaxed);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_the_measured_window_counts_whatever_the_thread() {
        let t = CostTimes::default();
        t.read(Instant::now());
        assert_eq!(t.sums(), CostSums::default(), "before the window opens");
        let open = Instant::now();
        t.open_window(open);
        let early = open - Duration::from_millis(1);
        t.write_back(early);
        assert_eq!(t.sums().write_backs, 0, "began before the window");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    t.read(Instant::now());
                    t.write_back(Instant::now());
                });
            }
        });
        let c = t.sums();
        assert_eq!((c.reads, c.write_backs), (4, 4));
    }
}
