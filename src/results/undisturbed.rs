//! The undisturbed part of a run's window: the timeline buckets outside every fault (a shock,
//! a partition, a kill …) and the observation after it (`--observe`). The break-even, the herd
//! model and every sentence on whether caching pays are read from it, so that a fault's own
//! figures — commands that waited out their whole deadline in a partition, loads queued
//! behind a dropped cache — are not taken for caching's. A run without a fault is undisturbed
//! throughout and keeps its totals.

use serde::{Deserialize, Serialize};

use super::{Bucket, FaultReport};
use crate::scenario::Scenario;

/// A timeline bucket's cost inputs: its Redis reads, write-backs and loads (pool wait +
/// statement) with their times, and the hottest key's counts for the herd model. Taken by the
/// timeline from the run's running sums, so the request path pays nothing for them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct BucketCost {
    /// Requests' Redis reads (the GET before anything else) that ended in the bucket, and
    /// their time, µs.
    pub read_us: u64,
    pub reads: u64,
    /// Loads' write-backs (their SET) that ended in the bucket, and their time, µs.
    pub write_back_us: u64,
    pub write_backs: u64,
    /// Statements started in the bucket, and the pool wait and statement time that loads
    /// added in it, µs.
    pub load_us: u64,
    pub loads: u64,
    /// The hottest key's requests, loads, loads begun with none of it in flight, and its
    /// miss-to-write-back times (µs) and how many.
    pub hot_requests: u64,
    pub hot_loads: u64,
    pub hot_leaders: u64,
    pub hot_fill_us: u64,
    pub hot_fills: u64,
}

impl BucketCost {
    pub fn is_zero(&self) -> bool {
        *self == BucketCost::default()
    }

    /// What grew from `before` to `self` (both running sums).
    pub fn since(&self, before: &BucketCost) -> BucketCost {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        BucketCost {
            read_us: d(self.read_us, before.read_us),
            reads: d(self.reads, before.reads),
            write_back_us: d(self.write_back_us, before.write_back_us),
            write_backs: d(self.write_backs, before.write_backs),
            load_us: d(self.load_us, before.load_us),
            loads: d(self.loads, before.loads),
            hot_requests: d(self.hot_requests, before.hot_requests),
            hot_loads: d(self.hot_loads, before.hot_loads),
            hot_leaders: d(self.hot_leaders, before.hot_leaders),
            hot_fill_us: d(self.hot_fill_us, before.hot_fill_us),
            hot_fills: d(self.hot_fills, before.hot_fills),
        }
    }

    pub fn add(&mut self, o: &BucketCost) {
        self.read_us += o.read_us;
        self.reads += o.reads;
        self.write_back_us += o.write_back_us;
        self.write_backs += o.write_backs;
        self.load_us += o.load_us;
        self.loads += o.loads;
        self.hot_requests += o.hot_requests;
        self.hot_loads += o.hot_loads;
        self.hot_leaders += o.hot_leaders;
        self.hot_fill_us += o.hot_fill_us;
        self.hot_fills += o.hot_fills;
    }
}

/// The undisturbed buckets' sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    pub cost: BucketCost,
    pub requests: u64,
    /// Requests answered from the cache (fresh, stale or L1).
    pub served: u64,
    /// How much of the window the part covers, ms.
    pub ms: u64,
    /// Where it lies, in words: "the undisturbed 3.0 s of the 10.0 s window (outside the
    /// partition from 3.0 s to 5.0 s and the 10 s observation after it)".
    pub words: String,
}

impl Part {
    /// (hit + stale + L1 hit) / requests over the part.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.served as f64 / self.requests as f64)
    }
}

/// The spans under a fault or its observation, ms since the window started: each fault from
/// its time to its end as struck (a restart may take longer than planned) plus `--observe`
/// (at least a Redis command's deadline, so a command sent in the fault that waited it out
/// ends inside the span).
fn disturbed(sc: &Scenario, faults: &[FaultReport]) -> Vec<(u64, u64)> {
    let observe = sc.recovery.observe.0.max(sc.redis_timeout.0).as_millis() as u64;
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    let mut spans: Vec<(u64, u64)> = sc
        .faults
        .iter()
        .map(|f| (ms(f.at.0), ms(f.ends_at()) + observe))
        .chain(
            faults
                .iter()
                .map(|f| (f.at_ms, f.at_ms + f.down_ms + observe)),
        )
        .collect();
    spans.sort_unstable();
    spans
}

/// The faults in words: "the partition from 3.0 s to 5.0 s", "the drop-cache at 4.0 s".
fn faults_words(sc: &Scenario, faults: &[FaultReport]) -> String {
    let s = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    let mut parts: Vec<String> = Vec::new();
    for (i, f) in sc.faults.iter().enumerate() {
        let at = f.at.0.as_millis() as u64;
        let end = faults
            .get(i)
            .map_or(f.ends_at().as_millis() as u64, |r| r.at_ms + r.down_ms)
            .max(f.ends_at().as_millis() as u64);
        parts.push(if end > at {
            format!("the {} from {} to {}", f.kind, s(at), s(end))
        } else {
            format!("the {} at {}", f.kind, s(at))
        });
    }
    format!(
        "{} and the {} observation after {}",
        parts.join(", "),
        sc.recovery.observe,
        if parts.len() > 1 { "each" } else { "it" }
    )
}

/// The undisturbed part of the run's window: None without a fault (the whole window is, and
/// the run's totals stand); Err with the reason when every bucket was under a fault.
pub fn of(
    sc: &Scenario,
    faults: &[FaultReport],
    timeline: &[Bucket],
) -> Option<Result<Part, String>> {
    if sc.faults.is_empty() {
        return None;
    }
    let spans = disturbed(sc, faults);
    let window_ms = sc.duration.0.as_millis() as u64;
    let mut p = Part::default();
    let mut from = 0;
    let mut last_disturbed = false;
    for b in timeline {
        let (a, z) = (from, b.t_ms.max(from));
        from = z;
        // Under a fault when the bucket's span (a, z] meets a disturbed span; what finished in
        // the drain after the window was sent in its last bucket, and shares its fate.
        let drain = a >= window_ms;
        let disturbed = spans.iter().any(|&(f, t)| a < t && z > f) || (drain && last_disturbed);
        if !drain {
            last_disturbed = disturbed;
        }
        if disturbed {
            continue;
        }
        p.cost.add(&b.cost);
        p.requests += b.requests;
        p.served += b.hits + b.stale;
        p.ms += z.min(window_ms).saturating_sub(a.min(window_ms));
    }
    let what = faults_words(sc, faults);
    if p.ms == 0 {
        return Some(Err(format!(
            "every second of the window was under a fault ({what} cover the whole {:.1} s window): strike later, or lengthen --duration",
            window_ms as f64 / 1000.0
        )));
    }
    p.words = format!(
        "the undisturbed {:.1} s of the {:.1} s window (outside {what})",
        p.ms as f64 / 1000.0,
        window_ms as f64 / 1000.0
    );
    Some(Ok(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(t_ms: u64, reads: u64, read_us: u64) -> Bucket {
        Bucket {
            t_ms,
            requests: reads,
            hits: reads / 2,
            cost: BucketCost {
                reads,
                read_us,
                ..BucketCost::default()
            },
            ..Bucket::default()
        }
    }

    fn faulted(duration_s: u64, fault: &str) -> Scenario {
        let (mut s, _) = crate::scenario::resolve_one(None, Default::default()).unwrap();
        s.duration = crate::values::Dur::secs(duration_s);
        s.faults = vec![crate::fault::parse(fault).unwrap()];
        s.recovery.observe = crate::values::Dur::secs(2);
        s
    }

    #[test]
    fn a_partitions_seconds_and_their_observation_are_left_out() {
        // 1 s buckets; a partition from 3 s to 5 s and 2 s observed after: 7 s to 10 s and
        // 0 s to 3 s are undisturbed. Reads inside it took 1000 times longer.
        let sc = faulted(10, "partition@3s+2s,server=redis");
        let timeline: Vec<Bucket> = (1..=10)
            .map(|s| {
                let slow = (4..=7).contains(&s);
                bucket(s * 1000, 100, if slow { 100_000_000 } else { 10_000 })
            })
            .collect();
        let p = of(&sc, &[], &timeline).unwrap().unwrap();
        assert_eq!(p.ms, 6000);
        assert_eq!(p.cost.reads, 600);
        assert_eq!(p.cost.read_us, 60_000);
        assert_eq!(p.hit_rate(), Some(0.5));
        assert!(
            p.words
                .contains("the undisturbed 6.0 s of the 10.0 s window")
                && p.words.contains("the partition from 3.0 s to 5.0 s"),
            "{}",
            p.words
        );
    }

    #[test]
    fn a_window_under_a_fault_throughout_is_unknown() {
        let sc = faulted(4, "kill-redis@0s+3s");
        let mut timeline: Vec<Bucket> = (1..=4).map(|s| bucket(s * 1000, 10, 10)).collect();
        // The drain after the window: sent in its last second, under the fault's observation.
        timeline.push(Bucket {
            partial: true,
            ..bucket(4100, 3, 10)
        });
        let why = of(&sc, &[], &timeline).unwrap().unwrap_err();
        assert!(
            why.starts_with("every second of the window was under a fault"),
            "{why}"
        );
        let mut calm = sc.clone();
        calm.faults.clear();
        assert!(
            of(&calm, &[], &timeline).is_none(),
            "no fault: the totals stand"
        );
    }
}
