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
    /// One instance of the service under test.
    Instance,
    /// One repeated trial of a comparison.
    Trial,
    /// One shard of a stream split across workers.
    Shard,
    /// The draw of the steady-state cache at the start of a run.
    Steady,
    /// The open-loop (Poisson) arrival schedule.
    Arrivals,
    /// Per-request choices (e.g. XFetch's early recompute draw).
    Request,
}

impl Purpose {
    /// Every purpose, in declaration order (for tests and for listing).
    pub const ALL: [Purpose; 8] = [
        Purpose::Keys,
        Purpose::Client,
        Purpose::Instance,
        Purpose::Trial,
        Purpose::Shard,
        Purpose::Steady,
        Purpose::Arrivals,
        Purpose::Request,
    ];

    /// The purpose's fixed tag: its name in ASCII, padded to 8 bytes. Fixed, not the enum's
    /// discriminant, so that reordering the variants never changes a run's streams.
    pub const fn tag(self) -> u64 {
        u64::from_be_bytes(match self {
            Purpose::Keys => *b"keys____",
            Purpose::Client => *b"client__",
            Purpose::Instance => *b"instance",
            Purpose::Trial => *b"trial___",
            Purpose::Shard => *b"shard___",
            Purpose::Steady => *b"steady__",
            Purpose::Arrivals => *b"arrivals",
            Purpose::Request => *b"request_",
        })
    }
}

/// The odd constant of SplitMix64 (2^64 / golden ratio): added before mixing so that a seed of
/// 0 does not start from the mixer's fixed point at 0.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 finalizer: a bijection on u64 in which every input bit flips about half of
/// the output bits.
const fn mix64(mut z: u64) -> u64 {
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

/// The result of a two-sided Mann–Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: the number of pairs (a, b) with a > b, ties counting one half.
    /// 0 means every value of `a` is below every value of `b`.
    pub u: f64,
    /// Two-sided p-value: how often samples this far apart arise when both come from one
    /// distribution.
    pub p: f64,
    /// Whether `p` is exact (small samples without ties) or the normal approximation.
    pub exact: bool,
}

/// Largest size of each sample for which the exact U distribution is counted. At 20 against 20
/// the count C(40, 20) ~ 1.4e11 still fits an i64 with room, and the table has only 401 terms;
/// past that the normal approximation is within a few percent of the exact p anyway.
const EXACT_MAX: usize = 20;

/// The two-sided Mann–Whitney U test of whether `a` and `b` come from the same distribution.
///
/// Exact p (by counting the U distribution) when both samples have at most 20 values and no
/// value repeats; otherwise the normal approximation with the tie correction of the variance
/// and a continuity correction of 1/2. An empty sample tells nothing: p = 1. NaN values rank
/// above everything (total order), so they cannot make the test panic.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> MannWhitney {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return MannWhitney {
            u: 0.0,
            p: 1.0,
            exact: true,
        };
    }
    let ranked = rank_sum_first(a, b);
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = ranked.rank_sum - f1 * (f1 + 1.0) / 2.0;
    let u2 = f1 * f2 - u1;
    // Two-sided: the larger of the two U's is as extreme as the smaller one, seen from the other
    // sample; doubling its upper tail covers both directions.
    let u_max = u1.max(u2);
    if !ranked.ties && n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        let counts = u_counts(n1, n2);
        let total: i64 = counts.iter().sum();
        // Without ties U is a whole number; round only absorbs the float rank sum.
        let from = u_max.round() as usize;
        let upper: i64 = counts.iter().skip(from).sum();
        let p = (2.0 * upper as f64 / total as f64).min(1.0);
        return MannWhitney {
            u: u1,
            p,
            exact: true,
        };
    }
    let n = f1 + f2;
    let mean = f1 * f2 / 2.0;
    // Tied values shrink the spread of the rank sum: subtract sum(t^3 - t) over tie groups.
    let var = f1 * f2 / 12.0 * ((n + 1.0) - ranked.tie_term / (n * (n - 1.0)));
    let p = if var > 0.0 {
        let z = (u_max - mean - 0.5) / var.sqrt();
        (2.0 * normal_sf(z)).min(1.0)
    } else {
        // Every value equal: nothing separates the samples.
        1.0
    };
    MannWhitney {
        u: u1,
        p,
        exact: false,
    }
}

/// Whether `a` and `b` differ beyond the noise: the two-sided U test rejects "same
/// distribution" at `alpha` (usually [`DEFAULT_ALPHA`]).
pub fn distinguishable(a: &[f64], b: &[f64], alpha: f64) -> bool {
    mann_whitney_u(a, b).p < alpha
}

/// Whether trials `a` are lower than trials `b` beyond the noise, by the rule the Pareto front
/// is meant to use: with at least [`MIN_TRIALS`] trials on each side, the U test tells them
/// apart at `alpha` and `a` has the lower median; with fewer, the median of `a` is plainly
/// lower (there is too little to test with, so the figures are taken at face value).
pub fn lower_beyond_noise(a: &[f64], b: &[f64], alpha: f64) -> bool {
    let (Some(ma), Some(mb)) = (median(a), median(b)) else {
        return false;
    };
    if a.len() >= MIN_TRIALS && b.len() >= MIN_TRIALS {
        ma < mb && distinguishable(a, b, alpha)
    } else {
        ma < mb
    }
}

/// The rank sum of the first sample in the pooled ranking, and what ties there were.
struct Ranked {
    rank_sum: f64,
    /// Sum over groups of tied values of t^3 - t (t = group size).
    tie_term: f64,
    ties: bool,
}

fn rank_sum_first(a: &[f64], b: &[f64]) -> Ranked {
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut out = Ranked {
        rank_sum: 0.0,
        tie_term: 0.0,
        ties: false,
    };
    let mut i = 0;
    while i < pooled.len() {
        // A group of equal values shares the mean of the ranks i+1..=j.
        let mut j = i + 1;
        while j < pooled.len() && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        let mid_rank = (i + 1 + j) as f64 / 2.0;
        let firsts = pooled[i..j].iter().filter(|p| p.1).count() as f64;
        out.rank_sum += mid_rank * firsts;
        if j - i > 1 {
            out.ties = true;
            out.tie_term += t * t * t - t;
        }
        i = j;
    }
    out
}

/// How many of the C(m+n, m) orderings of m values of one sample among n of the other give each
/// U = 0..=m*n. These are the coefficients of the Gaussian binomial [m+n choose m](q), built as
/// the product over i = 1..=m of (1 - q^(n+i)) / (1 - q^i): each step multiplies by the
/// numerator, then divides by the denominator, which is exact (a running sum with stride i), so
/// after step i the polynomial is [n+i choose i](q) with whole, non-negative coefficients.
fn u_counts(m: usize, n: usize) -> Vec<i64> {
    // Room for the intermediate product, whose degree peaks at m*n + m before the last division.
    let mut poly = vec![0i64; m * n + m + 1];
    poly[0] = 1;
    let mut degree = 0;
    for i in 1..=m {
        // Multiply by (1 - q^(n+i)), from the top so each coefficient reads the old ones.
        let shift = n + i;
        for d in (shift..=degree + shift).rev() {
            poly[d] -= poly[d - shift];
        }
        degree += shift;
        // Divide by (1 - q^i): c'[d] = c[d] + c'[d - i], from the bottom.
        for d in i..=degree {
            poly[d] += poly[d - i];
        }
        degree -= i;
        // The quotient has degree `degree`; what lies above it is zero in exact arithmetic.
    }
    poly.truncate(degree + 1);
    poly
}

/// The upper tail P(Z > z) of the standard normal distribution.
fn normal_sf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    if z >= 0.0 {
        0.5 * erfc(x)
    } else {
        1.0 - 0.5 * erfc(x)
    }
}

/// The complementary error function for x >= 0 (std has none on stable), accurate to about
/// 1e-12 relative: a series of positive terms below 2, where 1 - erf loses little, and the
/// continued fraction from 2 up, where it converges within a hundred terms.
fn erfc(x: f64) -> f64 {
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 2.0 {
        // erf(x) = 2/sqrt(pi) e^(-x^2) sum_k 2^k x^(2k+1) / (1*3*...*(2k+1)); every term is
        // positive, so the sum carries no cancellation.
        let x2 = x * x;
        let mut term = x;
        let mut sum = x;
        let mut k = 0.0;
        while term > sum * 1e-17 {
            k += 1.0;
            term *= 2.0 * x2 / (2.0 * k + 1.0);
            sum += term;
        }
        1.0 - two_over_sqrt_pi * (-x2).exp() * sum
    } else {
        // erfc(x) = e^(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from
        // the tail up. 200 levels are ample at x >= 2 and cost nothing next to a test.
        let mut t = x;
        for k in (1..=200).rev() {
            t = x + (k as f64 / 2.0) / t;
        }
        two_over_sqrt_pi / 2.0 * (-x * x).exp() / t
    }
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

/// Which rows of a set of objective vectors are dominated, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pareto {
    /// For each row, the lowest-indexed row that dominates it, or `None` if none does.
    pub dominated_by: Vec<Option<usize>>,
    /// The rows no other row dominates, in ascending order.
    pub front: Vec<usize>,
}

/// The Pareto front of `rows`, each a vector of objectives where lower is better (DB calls,
/// p99, stale responses, errors).
///
/// Row `d` dominates row `r` when `d` is at least as good on every objective, plainly
/// (`rows[d][o] <= rows[r][o]`, on the figures the caller passes, typically medians), and `better_beyond_noise(d, r, o)` holds for at least one
/// objective `o`, meaning row `d` is better than row `r` on `o` by more than the noise between
/// trials (the caller decides what that is; see [`lower_beyond_noise`]). A difference inside
/// the noise never makes a strategy dominated, so the front keeps every strategy that is not
/// clearly beaten.
///
/// Ties are broken deterministically: a dominated row names the lowest-indexed row that
/// dominates it. Rows of different lengths, or with NaN objectives, are not comparable and do
/// not dominate one another.
pub fn pareto_front<R, F>(rows: &[R], mut better_beyond_noise: F) -> Pareto
where
    R: AsRef<[f64]>,
    F: FnMut(usize, usize, usize) -> bool,
{
    let dominated_by: Vec<Option<usize>> = (0..rows.len())
        .map(|r| {
            (0..rows.len()).find(|&d| {
                let (vd, vr) = (rows[d].as_ref(), rows[r].as_ref());
                d != r
                    && vd.len() == vr.len()
                    && vd.iter().zip(vr).all(|(x, y)| x <= y)
                    && (0..vd.len()).any(|o| better_beyond_noise(d, r, o))
            })
        })
        .collect();
    let front = dominated_by
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_none())
        .map(|(i, _)| i)
        .collect();
    Pareto {
        dominated_by,
        front,
    }
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
    fn u_counts_match_binomial_and_symmetry() {
        for (m, n) in [(1, 1), (2, 3), (5, 5), (7, 4), (20, 20)] {
            let c = u_counts(m, n);
            assert_eq!(c.len(), m * n + 1);
            assert!(c.iter().all(|&x| x > 0));
            let total: i64 = c.iter().sum();
            let mut choose = 1i64;
            for k in 0..m {
                choose = choose * (m + n - k) as i64 / (k + 1) as i64;
            }
            assert_eq!(total, choose, "m {m} n {n}");
            let rev: Vec<i64> = c.iter().rev().copied().collect();
            assert_eq!(c, rev);
        }
        assert_eq!(u_counts(2, 2), vec![1, 1, 2, 1, 1]);
    }

    #[test]
    fn mann_whitney_separated_exact() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        let r = mann_whitney_u(&a, &b);
        assert!(r.exact);
        assert_eq!(r.u, 0.0);
        assert!(close(r.p, 2.0 / 252.0, 1e-12), "{}", r.p);
        let r = mann_whitney_u(&b, &a);
        assert_eq!(r.u, 25.0);
        assert!(close(r.p, 2.0 / 252.0, 1e-12));
    }

    #[test]
    fn mann_whitney_identical_samples() {
        let a = [3.0, 1.0, 2.0, 5.0, 4.0];
        let r = mann_whitney_u(&a, &a);
        assert_eq!(r.p, 1.0);
        assert_eq!(r.u, 12.5);
        assert!(!distinguishable(&a, &a, DEFAULT_ALPHA));
        let flat = [7.0; 6];
        assert_eq!(mann_whitney_u(&flat, &flat).p, 1.0);
        assert_eq!(mann_whitney_u(&[], &a).p, 1.0);
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        // References from scipy.stats.mannwhitneyu(a, b, alternative="two-sided",
        // method=...) with the method named.
        for (a, b, u, p, exact) in scipy_cases() {
            let r = mann_whitney_u(&a, &b);
            assert_eq!(r.exact, exact, "{a:?} vs {b:?}");
            assert!(close(r.u, u, 1e-12), "{a:?} vs {b:?}: U {}", r.u);
            assert!(close(r.p, p, 1e-9), "{a:?} vs {b:?}: p {} vs {p}", r.p);
        }
    }

    #[allow(clippy::type_complexity)]
    fn scipy_cases() -> Vec<(Vec<f64>, Vec<f64>, f64, f64, bool)> {
        // Spread-out values without ties, made by stepping modulo a prime.
        let a = |n: u64| (0..n).map(|i| ((i * 37) % 101) as f64).collect::<Vec<_>>();
        let b = |n: u64, off: f64| {
            (0..n)
                .map(|i| ((i * 53) % 103) as f64 + off)
                .collect::<Vec<_>>()
        };
        vec![
            (
                vec![1.1, 2.3, 3.7, 5.2, 6.8, 8.1],
                vec![2.9, 4.4, 7.5, 9.3, 10.6, 11.2, 12.0],
                8.0,
                0.07342657342657342,
                true,
            ),
            // 20 against 20: the largest exact case.
            (a(20), b(20, 0.5), 230.0, 0.42908164057750553, true),
            // Ties: normal approximation with tie and continuity corrections.
            (
                vec![1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0],
                vec![3.0, 4.0, 5.0, 5.0, 6.0, 6.0, 7.0, 8.0],
                8.0,
                0.012439175316984458,
                false,
            ),
            (
                vec![0.0, 0.0, 0.0, 1.0, 1.0, 2.0],
                vec![1.0, 2.0, 2.0, 2.0, 3.0, 3.0],
                3.5,
                0.02033072629585609,
                false,
            ),
            // Past 20 values: normal approximation even without ties.
            (a(25), b(30, 10.5), 305.0, 0.24008898082650276, false),
        ]
    }

    #[test]
    fn erfc_known_values() {
        // Reference values of erfc from scipy.special.erfc.
        for (x, v) in [
            (0.0, 1.0),
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028516),
            // Either side of the switch from the series to the continued fraction.
            (1.99, 0.004888586800383002),
            (2.0, 0.004677734981047266),
            (2.01, 0.004475150644751764),
            (2.9, 4.109787809945884e-05),
            (3.0, 2.2090496998585445e-05),
            (4.0, 1.541725790028002e-08),
            (5.0, 1.5374597944280347e-12),
            (10.0, 2.0884875837625446e-45),
        ] {
            assert!(close(erfc(x), v, 1e-12), "erfc({x}) = {} vs {v}", erfc(x));
        }
    }

    #[test]
    fn distinguishable_needs_separation() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [50.0, 52.0, 48.0, 51.0, 49.0];
        assert!(distinguishable(&a, &b, DEFAULT_ALPHA));
        let c = [100.0, 51.0, 98.0, 49.0, 99.0];
        assert!(!distinguishable(&a, &c, DEFAULT_ALPHA));
        assert!(lower_beyond_noise(&b, &a, DEFAULT_ALPHA));
        assert!(!lower_beyond_noise(&a, &b, DEFAULT_ALPHA));
        assert!(!lower_beyond_noise(&c, &a, DEFAULT_ALPHA));
        // Below 5 trials, plainly lower is enough.
        assert!(lower_beyond_noise(&[1.0], &[2.0], DEFAULT_ALPHA));
        assert!(!lower_beyond_noise(&[2.0], &[2.0], DEFAULT_ALPHA));
        assert!(!lower_beyond_noise(&[], &[2.0], DEFAULT_ALPHA));
    }

    #[test]
    fn pareto_small_set() {
        // Objectives: DB calls, p99, stale, errors.
        let rows = [
            vec![100.0, 50.0, 0.0, 0.0], // 0: front
            vec![10.0, 80.0, 5.0, 0.0],  // 1: front (fewer calls, worse p99)
            vec![100.0, 60.0, 0.0, 0.0], // 2: dominated by 0 (worse p99)
            vec![10.0, 80.0, 5.0, 3.0],  // 3: dominated by 1 (errors)
            vec![200.0, 90.0, 9.0, 3.0], // 4: dominated by 0, 1, 2, 3 -> lowest is 0
            vec![100.0, 50.5, 0.0, 0.0], // 5: worse than 0 only within the noise
        ];
        // "Beyond the noise": more than 1 unit lower.
        let plain = |d: usize, r: usize, o: usize| rows[d][o] + 1.0 < rows[r][o];
        let p = pareto_front(&rows, plain);
        assert_eq!(
            p.dominated_by,
            vec![None, None, Some(0), Some(1), Some(0), None]
        );
        assert_eq!(p.front, vec![0, 1, 5]);
    }

    #[test]
    fn pareto_equal_rows_and_noise() {
        // Equal rows never dominate each other: neither is better beyond the noise.
        let rows = [[1.0, 1.0], [1.0, 1.0]];
        let p = pareto_front(&rows, |d, r, o| rows[d][o] < rows[r][o]);
        assert_eq!(p.front, vec![0, 1]);
        // A predicate that calls nothing beyond the noise leaves everyone on the front.
        let rows = [[1.0, 1.0], [9.0, 9.0]];
        let p = pareto_front(&rows, |_, _, _| false);
        assert_eq!(p.front, vec![0, 1]);
        // Lower but not at least as good elsewhere: no domination.
        let rows = [[1.0, 2.0], [2.0, 1.0]];
        let p = pareto_front(&rows, |d, r, o| rows[d][o] < rows[r][o]);
        assert_eq!(p.dominated_by, vec![None, None]);
        let empty: [[f64; 2]; 0] = [];
        assert_eq!(
            pareto_front(&empty, |_, _, _| true).front,
            Vec::<usize>::new()
        );
    }

    #[test]
    fn pareto_with_trials_rule() {
        // Five trials per strategy; the rule of lower_beyond_noise on the samples.
        let calls = [
            vec![10.0, 11.0, 12.0, 10.5, 11.5],
            vec![50.0, 51.0, 52.0, 50.5, 51.5],
            vec![10.2, 11.2, 11.8, 10.4, 11.4],
        ];
        let medians: Vec<Vec<f64>> = calls
            .iter()
            .map(|c| vec![median(c).unwrap_or(f64::NAN)])
            .collect();
        let p = pareto_front(&medians, |d, r, _| {
            lower_beyond_noise(&calls[d], &calls[r], DEFAULT_ALPHA)
        });
        // 2 has a lower median than 0 but not beyond the noise: both stay on the front.
        assert_eq!(p.dominated_by, vec![None, Some(0), None]);
        assert_eq!(p.front, vec![0, 2]);
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
