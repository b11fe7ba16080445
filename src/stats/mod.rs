//! Statistics for repeating a strategy comparison: one seed that every random stream of a run
//! is derived from, the median of repeated trials with a distribution-free confidence interval,
//! the Mann–Whitney U test that says whether two strategies differ beyond the noise between
//! trials, the Pareto front of strategies over several lower-is-better objectives, and the
//! interleaved order in which trials run.
//!
//! Everything here is pure: no I/O, no clock, no global randomness. Trial figures such as DB
//! calls or p99 latency are neither normal nor equal in spread between strategies, so the tests
//! and intervals are rank-based and make no assumption about the shape of the distribution.

/// Below this many trials per strategy [`median_ci`] gives no interval, and a comparison
/// should fall back to plainly comparing values: with 4 trials even the widest interval
/// (min, max) covers the median only 87.5% of the time, and the U test of 4 against 4 reaches
/// p < 0.05 only when the samples do not overlap at all (p = 2/70), so a verdict would rest on
/// one lucky ordering.
pub const MIN_TRIALS: usize = 5;

/// The significance level used when a caller has no reason to choose another.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// What a derived seed is for. Each purpose has its own fixed tag, so the streams of two
/// purposes never share a seed even at the same run seed and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// The Zipf key stream of the workload.
    Keys,
    /// One closed-loop client.
    Client,
    /// The draw of the steady-state cache at the start of a run.
    Steady,
    /// The open-loop (Poisson) arrival schedule.
    Arrivals,
    /// The keys the writes update (`--write-rps`).
    Writes,
    /// The entries a random cache drop removes.
    Drops,
    /// The payload sizes of `--value-size-dist`.
    Sizes,
}

impl Purpose {
    /// Every purpose, in declaration order.
    #[cfg(test)]
    pub const ALL: [Purpose; 7] = [
        Purpose::Keys,
        Purpose::Client,
        Purpose::Steady,
        Purpose::Arrivals,
        Purpose::Writes,
        Purpose::Drops,
        Purpose::Sizes,
    ];

    /// The purpose's fixed tag: its name in ASCII, padded to 8 bytes. Fixed, not the enum's
    /// discriminant, so that reordering the variants never changes a run's streams.
    pub const fn tag(self) -> u64 {
        u64::from_be_bytes(match self {
            Purpose::Keys => *b"keys____",
            Purpose::Client => *b"client__",
            Purpose::Steady => *b"steady__",
            Purpose::Arrivals => *b"arrivals",
            Purpose::Writes => *b"writes__",
            Purpose::Drops => *b"drops___",
            Purpose::Sizes => *b"sizes___",
        })
    }
}

/// The odd constant of SplitMix64 (2^64 / golden ratio): added before mixing so that a seed of
/// 0 does not start from the mixer's fixed point at 0.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 finalizer: a bijection on u64 in which every input bit flips about half of
/// the output bits.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of one random stream of a run: stream `index` of `purpose` under the run's `seed`.
///
/// Each of the three inputs is absorbed by its own round of a bijective mixer, so with the
/// other two fixed, different values of one input always give different seeds: the clients of
/// one run never share a stream, and client `c` of `--seed 42` is not client `c` of any other
/// seed. Unlike `seed + c`, where client 1 of seed 42 is client 0 of seed 43, two streams that
/// differ in more than one input coincide only by a 2^-64 accident of the mix.
pub const fn derive_seed(seed: u64, purpose: Purpose, index: u64) -> u64 {
    let h = mix64(seed.wrapping_add(GOLDEN_GAMMA));
    let h = mix64(h ^ purpose.tag());
    mix64(h.wrapping_add(GOLDEN_GAMMA) ^ index)
}

/// A sorted copy; NaN sorts last (total order) so that a bad figure cannot panic the sort.
fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The median: the middle value, or the mean of the two middle values for an even count.
/// `None` for no values.
pub fn median(xs: &[f64]) -> Option<f64> {
    let v = sorted(xs);
    let n = v.len();
    if n == 0 {
        return None;
    }
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The order statistics that bound a confidence interval of the median, and how often such an
/// interval covers the true median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CiRanks {
    /// 1-based rank of the lower bound in the sorted sample.
    pub lo: usize,
    /// 1-based rank of the upper bound in the sorted sample (`n + 1 - lo`).
    pub hi: usize,
    /// P(x(lo) <= true median <= x(hi)) for any continuous distribution.
    pub coverage: f64,
}

/// The ranks of the distribution-free confidence interval of the median for `n` values.
///
/// Method (order statistics, the sign-test interval): the number B of values below the true
/// median is Binomial(n, 1/2) whatever the distribution, so (x(j), x(k)) covers the median
/// with probability P(j <= B < k). The ranks are symmetric, k = n + 1 - j, with j the largest
/// rank whose coverage is still at least `level` (the narrowest such interval). Where even
/// (min, max) falls short of `level` (n = 5 at 95% covers 93.75%), (min, max) is returned with
/// its true coverage, which the caller can show.
///
/// `None` below [`MIN_TRIALS`] values or for a `level` outside (0, 1).
pub fn median_ci_ranks(n: usize, level: f64) -> Option<CiRanks> {
    if n < MIN_TRIALS || !(level > 0.0 && level < 1.0) {
        return None;
    }
    // Coverage of rank j is 1 - 2 P(B <= j - 1) by symmetry of Bin(n, 1/2), falling as j grows,
    // so walk j up while accumulating the lower tail. The pmf is built in logs because 2^-n
    // underflows for n past ~1000.
    let nf = n as f64;
    let ln_half_n = -nf * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut tail = ln_half_n.exp(); // P(B <= 0)
    let mut best = CiRanks {
        lo: 1,
        hi: n,
        coverage: 1.0 - 2.0 * tail,
    };
    let mut j = 2;
    while j < n + 1 - j {
        // Move the tail from P(B <= j - 2) to P(B <= j - 1).
        let i = (j - 1) as f64;
        ln_choose += ((nf - i + 1.0) / i).ln();
        tail += (ln_choose + ln_half_n).exp();
        let coverage = 1.0 - 2.0 * tail;
        if coverage < level {
            break;
        }
        best = CiRanks {
            lo: j,
            hi: n + 1 - j,
            coverage,
        };
        j += 1;
    }
    Some(best)
}

/// A confidence interval of the median of `xs` at `level` (e.g. 0.95), by the distribution-free
/// order-statistic method of [`median_ci_ranks`]. `None` below [`MIN_TRIALS`] values ("no
/// interval below 5 trials") or for a `level` outside (0, 1).
pub fn median_ci(xs: &[f64], level: f64) -> Option<(f64, f64)> {
    let r = median_ci_ranks(xs.len(), level)?;
    let v = sorted(xs);
    Some((v[r.lo - 1], v[r.hi - 1]))
}

/// Bootstrap interval of `median(b) - median(a)` at `level` (e.g. 0.95): both samples are
/// resampled with replacement `resamples` times from a seeded generator (the same inputs give
/// the same interval), and the percentile interval of the differences is returned. None when
/// either sample is empty.
pub fn bootstrap_median_diff(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut buf_a = vec![0.0; a.len()];
    let mut buf_b = vec![0.0; b.len()];
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for x in buf_a.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in buf_b.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        diffs.push(median(&buf_b)? - median(&buf_a)?);
    }
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    let at = |q: f64| diffs[((q * (diffs.len() - 1) as f64).round() as usize).min(diffs.len() - 1)];
    Some((at(tail), at(1.0 - tail)))
}

/// The order in which to run `trials` repetitions of `strategies` strategies, as
/// `(trial, strategy)` pairs: even trials in order (A B C), odd trials reversed (C B A).
///
/// Machine drift (a warming page cache, a neighbour's build, thermal throttling) then falls on
/// every strategy alike instead of always favouring the one that runs first; alternating the
/// direction also gives every strategy the same average position.
pub fn interleaved_order(strategies: usize, trials: usize) -> Vec<(usize, usize)> {
    let mut order = Vec::with_capacity(strategies * trials);
    for t in 0..trials {
        if t % 2 == 0 {
            order.extend((0..strategies).map(|s| (t, s)));
        } else {
            order.extend((0..strategies).rev().map(|s| (t, s)));
        }
    }
    order
}

mod mann_whitney;
mod pareto;

pub use mann_whitney::{distinguishable, separation_p, trials_to_separate};
pub use pareto::{Standing, verdicts};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn derive_seed_distinct_over_grid() {
        let mut seen = HashSet::new();
        for seed in 0..64u64 {
            for purpose in Purpose::ALL {
                for index in 0..64u64 {
                    assert!(
                        seen.insert(derive_seed(seed, purpose, index)),
                        "collision at seed {seed}, {purpose:?}, index {index}"
                    );
                }
            }
        }
        // The overlap that `seed + c` had: client 1 of seed 42 vs client 0 of seed 43.
        assert_ne!(
            derive_seed(42, Purpose::Client, 1),
            derive_seed(43, Purpose::Client, 0)
        );
        // Extreme seeds and indices too.
        for s in [u64::MAX, u64::MAX - 1, 1 << 63] {
            assert_ne!(
                derive_seed(s, Purpose::Keys, 0),
                derive_seed(s, Purpose::Keys, 1)
            );
        }
    }

    #[test]
    fn purpose_tags_distinct() {
        let tags: HashSet<u64> = Purpose::ALL.iter().map(|p| p.tag()).collect();
        assert_eq!(tags.len(), Purpose::ALL.len());
    }

    #[test]
    fn derive_seed_is_stable() {
        // Pinned: a change here changes every run's streams, so past results stop reproducing.
        assert_eq!(derive_seed(0, Purpose::Keys, 0), PIN_0_KEYS_0);
        assert_eq!(derive_seed(42, Purpose::Client, 3), PIN_42_CLIENT_3);
    }

    const PIN_0_KEYS_0: u64 = 4_516_559_296_822_930_447;
    const PIN_42_CLIENT_3: u64 = 16_494_325_814_427_500_368;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn median_ci_standard_ranks() {
        // n, lower rank, upper rank, coverage (sum of binomial terms, exact fractions).
        let table: [(usize, usize, usize, f64); 6] = [
            (5, 1, 5, 1.0 - 2.0 / 32.0),
            (6, 1, 6, 1.0 - 2.0 / 64.0),
            (7, 1, 7, 1.0 - 2.0 / 128.0),
            (8, 1, 8, 1.0 - 2.0 / 256.0),
            (9, 2, 8, 1.0 - 2.0 * 10.0 / 512.0),
            (10, 2, 9, 1.0 - 2.0 * 11.0 / 1024.0),
        ];
        for (n, lo, hi, cov) in table {
            let r = median_ci_ranks(n, 0.95).expect("n >= 5");
            assert_eq!((r.lo, r.hi), (lo, hi), "n = {n}");
            assert!(close(r.coverage, cov, 1e-12), "n = {n}: {}", r.coverage);
        }
        let r6 = median_ci_ranks(6, 0.95).expect("n = 6");
        assert!((r6.coverage - 0.969).abs() < 5e-4);
        let r10 = median_ci_ranks(10, 0.95).expect("n = 10");
        assert!((r10.coverage - 0.979).abs() < 5e-4);
    }

    #[test]
    fn median_ci_coverage_larger_n() {
        // n = 20: ranks (6, 15), coverage 1 - 2 P(B <= 5) = 0.958610..., and rank 7 would give
        // 1 - 2 P(B <= 6) = 0.884705... < 0.95.
        let r = median_ci_ranks(20, 0.95).expect("n = 20");
        assert_eq!((r.lo, r.hi), (6, 15));
        let tail5: f64 = [1.0, 20.0, 190.0, 1140.0, 4845.0, 15504.0]
            .iter()
            .sum::<f64>()
            / 1_048_576.0;
        assert!(close(r.coverage, 1.0 - 2.0 * tail5, 1e-12));
        // Large n does not underflow, and the interval sits near n/2 -+ 1.96 sqrt(n)/2.
        let r = median_ci_ranks(2000, 0.95).expect("n = 2000");
        assert!(r.coverage >= 0.95 && r.coverage < 0.96, "{r:?}");
        assert!((r.lo as f64 - (1000.0 - 1.96 * 2000f64.sqrt() / 2.0)).abs() < 3.0);
        assert_eq!(r.hi, 2001 - r.lo);
    }

    #[test]
    fn median_ci_values_and_limits() {
        assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0], 0.95), None);
        assert_eq!(median_ci(&[], 0.95), None);
        assert_eq!(median_ci(&[1.0; 6], 1.5), None);
        let xs = [10.0, 3.0, 7.0, 1.0, 9.0, 2.0, 8.0, 4.0, 6.0, 5.0];
        assert_eq!(median_ci(&xs, 0.95), Some((2.0, 9.0)));
        assert_eq!(median_ci(&xs[..6], 0.95), Some((1.0, 10.0)));
    }

    #[test]
    fn interleaved_order_alternates() {
        assert_eq!(
            interleaved_order(3, 3),
            vec![
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 2),
                (1, 1),
                (1, 0),
                (2, 0),
                (2, 1),
                (2, 2)
            ]
        );
        assert!(interleaved_order(0, 4).is_empty());
        assert!(interleaved_order(3, 0).is_empty());
        // Over an even number of trials every strategy has the same mean position.
        let order = interleaved_order(4, 6);
        let mut pos_sum = [0usize; 4];
        for (i, &(t, s)) in order.iter().enumerate() {
            pos_sum[s] += i - t * 4;
        }
        assert!(pos_sum.iter().all(|&p| p == pos_sum[0]));
    }

    #[test]
    fn bootstrap_interval_covers_a_known_shift_and_is_seeded() {
        let a: Vec<f64> = (0..9).map(|i| 100.0 + f64::from(i)).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 50.0).collect();
        let (lo, hi) = bootstrap_median_diff(&a, &b, 0.95, 2000, 7).unwrap();
        assert!(lo <= 50.0 && 50.0 <= hi, "[{lo}, {hi}]");
        assert!(
            lo > 40.0 && hi < 60.0,
            "a clean shift gives a tight interval: [{lo}, {hi}]"
        );
        assert_eq!(
            bootstrap_median_diff(&a, &b, 0.95, 2000, 7),
            Some((lo, hi)),
            "same seed, same interval"
        );
        let (lo, hi) = bootstrap_median_diff(&a, &a, 0.95, 2000, 7).unwrap();
        assert!(lo <= 0.0 && 0.0 <= hi, "no shift: [{lo}, {hi}]");
        assert_eq!(bootstrap_median_diff(&[], &a, 0.95, 10, 1), None);
    }
}
