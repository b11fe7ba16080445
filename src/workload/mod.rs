//! What the simulated users ask for and when: a seeded Zipf key sampler (the same seed gives
//! the same key sequence for every strategy) and the open-loop arrival schedule.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Zipf};

/// How open-loop requests are spaced.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Evenly spaced: one request every 1/rps seconds.
    Constant,
    /// Exponential gaps with mean 1/rps (a Poisson process), seeded.
    Poisson,
}

use clap::ValueEnum;

mod client;
pub use client::{Client, DEFAULT_GOODPUT_WITHIN, default_goodput_within};
use serde::{Deserialize, Serialize};

/// Ids of a key stream folded into its digest: enough to tell two sequences apart, and a
/// bounded cost (one branch per draw after that).
pub const DIGEST_DRAWS: u64 = 1000;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One step of FNV-1a over the 8 bytes of `v`: a cheap, stable fingerprint of a sequence.
pub fn fnv_step(mut h: u64, v: u64) -> u64 {
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// Draws item ids: rank r (1 = most popular) with probability ∝ r^-s; with probability
/// `missing` an id that is not in the database (above `keys`).
/// How the ids absent from the database are drawn (`--missing-ids`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum MissingIds {
    /// Zipf-shaped like the items, past the seeded range: a few missing ids asked for often,
    /// which negative caching answers.
    #[default]
    Zipf,
    /// A different id each time, drawn from 2^40 ids past the seeded range: each asked about
    /// (almost surely) once, so negative caching saves nothing.
    Unique,
}

pub struct KeySampler {
    zipf: Zipf<f64>,
    keys: u64,
    missing: f64,
    missing_ids: MissingIds,
    rng: SmallRng,
    drawn: u64,
    digest: u64,
}

impl KeySampler {
    pub fn new(keys: u64, s: f64, seed: u64, missing: f64) -> Result<KeySampler, String> {
        let zipf = Zipf::new(keys as f64, s)
            .map_err(|e| format!("invalid Zipf parameters (keys {keys}, exponent {s}): {e}"))?;
        Ok(KeySampler {
            zipf,
            keys,
            missing,
            missing_ids: MissingIds::Zipf,
            rng: SmallRng::seed_from_u64(seed),
            drawn: 0,
            digest: FNV_OFFSET,
        })
    }

    /// Draw the missing ids as `how` says.
    pub fn with_missing(mut self, how: MissingIds) -> KeySampler {
        self.missing_ids = how;
        self
    }

    pub fn next_id(&mut self) -> u64 {
        let rank = self.zipf.sample(&mut self.rng) as u64;
        let id = if self.missing > 0.0 && self.rng.random::<f64>() < self.missing {
            match self.missing_ids {
                // The Zipf shape, shifted past the seeded range.
                MissingIds::Zipf => self.keys + rank,
                MissingIds::Unique => self.keys + 1 + (self.rng.random::<u64>() >> 24),
            }
        } else {
            rank
        };
        if self.drawn < DIGEST_DRAWS {
            self.drawn += 1;
            self.digest = fnv_step(self.digest, id);
        }
        id
    }

    /// Fingerprint of the first [`DIGEST_DRAWS`] ids drawn (fewer if fewer were drawn), and
    /// how many it covers: two streams with equal digests drew the same keys.
    pub fn digest(&self) -> (u64, u64) {
        (self.digest, self.drawn)
    }
}

/// Combine per-stream digests, in stream order, into one fingerprint of all the draws.
pub fn combine_digests(parts: impl IntoIterator<Item = (u64, u64)>) -> (u64, u64) {
    parts
        .into_iter()
        .fold((FNV_OFFSET, 0), |(h, n), (d, c)| (fnv_step(h, d), n + c))
}

pub use crate::values::start::Start;

/// Spans of the schedule where the rate is multiplied (spikes), as a warp of time: the
/// schedule is drawn at the base rate on a virtual clock that runs `factor` times faster
/// inside a span, so a constant schedule stays exact and a Poisson one stays a (piecewise)
/// Poisson process with the same seed.
#[derive(Debug, Clone, Default)]
pub struct Warp {
    /// (start ns, length ns, factor), in real time from the start of traffic, sorted and not
    /// overlapping.
    spans: Vec<(f64, f64, f64)>,
}

impl Warp {
    /// Spans given as (start, length, factor), in ns from the start of traffic.
    pub fn new(mut spans: Vec<(u64, u64, f64)>) -> Warp {
        spans.sort_by_key(|s| s.0);
        Warp {
            spans: spans
                .into_iter()
                .filter(|s| s.1 > 0 && s.2 > 0.0)
                .map(|(a, l, k)| (a as f64, l as f64, k))
                .collect(),
        }
    }

    /// The real time of virtual time `v`.
    fn real(&self, v: f64) -> f64 {
        // How far the virtual clock is ahead of the real one after the spans so far.
        let mut ahead = 0.0;
        for &(start, len, k) in &self.spans {
            let vs = start + ahead;
            if v < vs {
                return v - ahead;
            }
            if v < vs + len * k {
                return start + (v - vs) / k;
            }
            ahead += len * (k - 1.0);
        }
        v - ahead
    }

    /// The virtual time of real time `r`.
    fn virtual_of(&self, r: f64) -> f64 {
        let mut ahead = 0.0;
        for &(start, len, k) in &self.spans {
            if r < start {
                return r + ahead;
            }
            if r < start + len {
                return start + ahead + (r - start) * k;
            }
            ahead += len * (k - 1.0);
        }
        r + ahead
    }
}

/// Open-loop start times, as offsets in ns from the start of traffic.
pub struct Schedule {
    interval_ns: f64,
    arrival: Arrival,
    exp: Option<Exp<f64>>,
    rng: SmallRng,
    next_ns: f64,
    index: u64,
    warp: Warp,
}

impl Schedule {
    pub fn new(rps: f64, arrival: Arrival, seed: u64) -> Schedule {
        Schedule {
            interval_ns: 1e9 / rps,
            arrival,
            exp: Exp::new(rps / 1e9).ok(),
            // The caller derives its own stream for it, so Poisson gaps do not shift the keys.
            rng: SmallRng::seed_from_u64(seed),
            next_ns: 0.0,
            index: 0,
            warp: Warp::default(),
        }
    }

    /// The same schedule with the rate multiplied over the spans of `warp`.
    pub fn warped(mut self, warp: Warp) -> Schedule {
        self.warp = warp;
        self
    }

    /// The next start offset in ns.
    pub fn next_offset(&mut self) -> u64 {
        let t = match self.arrival {
            // Computed from the index rather than accumulated, so rounding never drifts.
            Arrival::Constant => self.index as f64 * self.interval_ns,
            // A Poisson process's first arrival is one exponential gap in, like every other:
            // starting at 0 would put a request at the very start of every run.
            Arrival::Poisson => {
                let gap = self
                    .exp
                    .map_or(self.interval_ns, |e| e.sample(&mut self.rng));
                self.next_ns += gap;
                self.next_ns
            }
        };
        self.index += 1;
        if self.warp.spans.is_empty() {
            return t as u64;
        }
        self.warp.real(t) as u64
    }
}

impl Schedule {
    /// How many more start offsets fall before `end_ns`, without drawing each: exact for the
    /// constant schedule, drawn for Poisson as the one Poisson count of the remaining span
    /// (from this stream, so the same seed gives the same count).
    pub fn count_until(&mut self, end_ns: u64) -> u64 {
        let end_ns = if self.warp.spans.is_empty() {
            end_ns
        } else {
            self.warp.virtual_of(end_ns as f64) as u64
        };
        match self.arrival {
            Arrival::Constant => {
                let first = self.index;
                let last = (end_ns as f64 / self.interval_ns).ceil() as u64;
                self.index = last;
                last.saturating_sub(first)
            }
            Arrival::Poisson => {
                let span = (end_ns as f64 - self.next_ns).max(0.0);
                let mean = span / self.interval_ns;
                rand_distr::Poisson::new(mean.max(1e-9))
                    .map_or(0, |p| p.sample(&mut self.rng) as u64)
            }
        }
    }
}

/// Exact number of constant-rate requests that start within `duration_ns`.
#[cfg(test)]
pub fn constant_count(rps: f64, duration_ns: u64) -> u64 {
    let interval = 1e9 / rps;
    (duration_ns as f64 / interval).ceil() as u64
}

/// Open loop (a fixed arrival rate) or closed loop (a fixed number of clients).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum LoadShape {
    Open { rps: f64, arrival: Arrival },
    Closed { clients: u32 },
}

/// The writes of a run: an open loop of UPDATEs beside the reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WriteLoad {
    /// Writes per second, spread evenly over the measured window.
    pub rps: f64,
    /// Zipf exponent of the keys written (the reads' unless `--write-zipf`).
    pub zipf: f64,
    /// Writers of the same key per write event (`--writers-per-key`).
    #[serde(default = "one")]
    pub writers: u32,
    /// The wait between a writer's commit and its cache step (`--write-gap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<crate::values::DurRange>,
}

fn one() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_keys() {
        let mut a = KeySampler::new(1000, 1.0, 7, 0.0).unwrap();
        let mut b = KeySampler::new(1000, 1.0, 7, 0.0).unwrap();
        let mut c = KeySampler::new(1000, 1.0, 8, 0.0).unwrap();
        let va: Vec<u64> = (0..1000).map(|_| a.next_id()).collect();
        let vb: Vec<u64> = (0..1000).map(|_| b.next_id()).collect();
        let vc: Vec<u64> = (0..1000).map(|_| c.next_id()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        assert!(va.iter().all(|&k| (1..=1000).contains(&k)));
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest());
        assert_eq!(a.digest().1, DIGEST_DRAWS);
    }

    /// Least-squares slope of log(frequency) against log(rank) over the well-sampled head.
    fn fitted_slope(keys: u64, s: f64) -> f64 {
        let mut sampler = KeySampler::new(keys, s, 42, 0.0).unwrap();
        let mut counts = vec![0u64; keys as usize + 1];
        for _ in 0..2_000_000 {
            counts[sampler.next_id() as usize] += 1;
        }
        let pts: Vec<(f64, f64)> = (1..=100)
            .map(|r| ((r as f64).ln(), (counts[r] as f64).ln()))
            .collect();
        let n = pts.len() as f64;
        let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let cov: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let var: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        cov / var
    }

    #[test]
    fn rank_frequency_follows_the_exponent() {
        for s in [0.8, 1.0, 1.3] {
            let slope = fitted_slope(10_000, s);
            assert!(
                (slope + s).abs() < 0.05,
                "exponent {s}: fitted slope {slope}"
            );
        }
    }

    #[test]
    fn missing_ids_lie_outside_the_table() {
        let mut k = KeySampler::new(100, 1.0, 1, 0.5).unwrap();
        let missing = (0..10_000).filter(|_| k.next_id() > 100).count();
        assert!((4_500..5_500).contains(&missing), "{missing}");
    }

    #[test]
    fn constant_schedule_is_exact() {
        let mut s = Schedule::new(1000.0, Arrival::Constant, 1);
        let offs: Vec<u64> = (0..3).map(|_| s.next_offset()).collect();
        assert_eq!(offs, vec![0, 1_000_000, 2_000_000]);
        assert_eq!(constant_count(1000.0, 1_000_000_000), 1000);
        assert_eq!(constant_count(3.0, 1_000_000_000), 3);
        let mut s = Schedule::new(3.0, Arrival::Constant, 1);
        let n = std::iter::from_fn(|| Some(s.next_offset()))
            .take_while(|&t| t < 1_000_000_000)
            .count();
        assert_eq!(n as u64, constant_count(3.0, 1_000_000_000));
    }

    #[test]
    fn a_spike_multiplies_the_rate_over_its_span_only() {
        // 1000/s for 10 s with a ×3 spike from 2 s to 4 s: 8000 + 2 × 3000 requests.
        let warp = Warp::new(vec![(2_000_000_000, 2_000_000_000, 3.0)]);
        let mut s = Schedule::new(1000.0, Arrival::Constant, 1).warped(warp.clone());
        let offs: Vec<u64> = std::iter::from_fn(|| Some(s.next_offset()))
            .take_while(|&t| t < 10_000_000_000)
            .collect();
        assert_eq!(offs.len(), 14_000);
        let per_sec = |a: u64| {
            offs.iter()
                .filter(|&&t| t >= a * 1_000_000_000 && t < (a + 1) * 1_000_000_000)
                .count()
        };
        assert_eq!(
            (per_sec(1), per_sec(2), per_sec(3), per_sec(4)),
            (1000, 3000, 3000, 1000)
        );
        assert!(offs.windows(2).all(|w| w[0] <= w[1]), "in order");
        // The count of the rest of the window agrees with drawing it.
        let mut c = Schedule::new(1000.0, Arrival::Constant, 1).warped(warp.clone());
        for _ in 0..500 {
            c.next_offset();
        }
        assert_eq!(c.count_until(10_000_000_000), 13_500);
        // The warp and its inverse agree.
        for r in [0.0, 1.5e9, 2.5e9, 3.99e9, 7e9] {
            assert!((warp.real(warp.virtual_of(r)) - r).abs() < 1.0, "{r}");
        }
    }

    #[test]
    fn poisson_schedule_has_the_mean_rate() {
        let mut s = Schedule::new(10_000.0, Arrival::Poisson, 3);
        let n = std::iter::from_fn(|| Some(s.next_offset()))
            .take_while(|&t| t < 10_000_000_000)
            .count();
        assert!((98_000..102_000).contains(&n), "{n}");
    }

    #[test]
    fn poisson_first_arrival_is_a_gap_in_not_at_zero() {
        let firsts: Vec<u64> = (0..20)
            .map(|seed| Schedule::new(1000.0, Arrival::Poisson, seed).next_offset())
            .collect();
        assert!(firsts.iter().all(|&t| t > 0), "{firsts:?}");
        // Exponential with mean 1 ms: the mean of 20 first arrivals is well within 0.3–3 ms.
        let mean = firsts.iter().sum::<u64>() as f64 / 20.0;
        assert!((300_000.0..3_000_000.0).contains(&mean), "{mean}");
    }
}
