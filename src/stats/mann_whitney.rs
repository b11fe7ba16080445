//! The two-sided Mann–Whitney U test (exact for small samples, normal approximation with tie
//! and continuity corrections otherwise), and the "beyond the noise" rules built on it.

use super::{MIN_TRIALS, median};

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

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_ALPHA;
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
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
}
