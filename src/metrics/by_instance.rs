//! Each app instance's own figures (`instances[]` in the results): requests by outcome and a
//! latency histogram, so a fault on one instance can be read against the others. Lock-free:
//! the run-wide [`super::Recorder`] already takes a lock per request, and a second one per
//! instance on the hot path would be shared by every worker of that instance; an hdrhistogram
//! cannot be recorded into through `&self`, so the histogram is a fixed array of atomic
//! log-linear buckets (16 per power of two: a value is known within 1/16, about ±3%).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::Outcome;

/// Sub-buckets per power of two.
const SUB: u64 = 16;
/// Buckets: values below 16 µs one each, then 16 per power of two up to 2^64.
const BUCKETS: usize = 61 * SUB as usize;

/// One instance's requests and latencies.
pub struct InstanceTally {
    /// The instance's number in the run (from 0; a shard's instances keep the run's numbers).
    pub instance: u32,
    outcomes: [AtomicU64; Outcome::COUNT],
    latency: Box<[AtomicU64]>,
}

/// What [`InstanceTally::read`] gives: counts by outcome and the latency percentiles, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceRead {
    pub instance: u32,
    pub outcomes: [u64; Outcome::COUNT],
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - u64::from(v.leading_zeros());
    let sub = (v >> (e - 4)) & (SUB - 1);
    ((e - 3) * SUB + sub) as usize
}

/// The middle of bucket `i`'s values.
fn middle(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let (e, sub) = (i / SUB + 3, i % SUB);
    let low = (SUB + sub) << (e - 4);
    low + (1u64 << (e - 4)) / 2
}

impl InstanceTally {
    pub fn new(instance: u32) -> InstanceTally {
        InstanceTally {
            instance,
            outcomes: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One measured request of this instance.
    #[inline]
    pub fn record(&self, outcome: Outcome, latency_us: u64) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
        self.latency[bucket(latency_us)].fetch_add(1, Relaxed);
    }

    pub fn read(&self) -> InstanceRead {
        let counts: Vec<u64> = self.latency.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let at = |q: f64| -> Option<u64> {
            if total == 0 {
                return None;
            }
            let rank = ((q * total as f64).ceil() as u64).max(1);
            let mut seen = 0;
            counts.iter().enumerate().find_map(|(i, &n)| {
                seen += n;
                (seen >= rank).then(|| middle(i))
            })
        };
        InstanceRead {
            instance: self.instance,
            outcomes: std::array::from_fn(|i| self.outcomes[i].load(Relaxed)),
            p50_us: at(0.5),
            p99_us: at(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_a_value_within_a_sixteenth_and_percentiles_follow() {
        for v in [
            0,
            1,
            15,
            16,
            17,
            100,
            1_000,
            123_456,
            10_000_000,
            u64::MAX / 3,
        ] {
            let m = middle(bucket(v));
            let err = (m as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err <= 1.0 / 16.0, "{v} → {m}");
        }
        let t = InstanceTally::new(3);
        for us in 1..=1000u64 {
            t.record(Outcome::Hit, us * 10);
        }
        t.record(Outcome::Error, 5);
        let r = t.read();
        assert_eq!(r.instance, 3);
        assert_eq!(r.outcomes[Outcome::Hit as usize], 1000);
        assert_eq!(r.outcomes[Outcome::Error as usize], 1);
        let p50 = r.p50_us.unwrap() as f64;
        let p99 = r.p99_us.unwrap() as f64;
        assert!((p50 / 5_000.0 - 1.0).abs() < 0.07, "{p50}");
        assert!((p99 / 9_900.0 - 1.0).abs() < 0.07, "{p99}");
        assert_eq!(InstanceTally::new(0).read().p50_us, None);
    }
}
