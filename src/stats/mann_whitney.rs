//! The two-sided Mann–Whitney U test (exact for samples of up to 20 values, ties included;
//! normal approximation with tie and continuity corrections beyond), the Holm correction that
//! keeps several such tests of one pair of strategies from finding a difference by chance, and
//! what it takes for a difference to be decided.
//!
//! Trial figures are often zero-heavy counts (errors, rejections, divergent keys) where ties
//! are the rule, not the exception: the normal approximation is anti-conservative there
//! (`[0,0,0,0,0]` vs `[0,1,1,1,1]` gives p = 0.020 against the exact 0.048), so the exact
//! conditional distribution is counted whenever the samples are small enough to need it.

use super::median;

/// The result of a two-sided Mann–Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: the number of pairs (a, b) with a > b, ties counting one half.
    /// 0 means every value of `a` is below every value of `b`.
    pub u: f64,
    /// Two-sided p-value: how often samples this far apart arise when both come from one
    /// distribution.
    pub p: f64,
    /// Whether `p` is exact (both samples of at most 20 values) or the normal approximation.
    pub exact: bool,
}

/// Largest size of each sample for which the exact U distribution is counted. At 20 against 20
/// the count C(40, 20) ~ 1.4e11 still fits an i64 with room, and the table has only 401 terms;
/// past that the normal approximation is within a few percent of the exact p anyway.
const EXACT_MAX: usize = 20;

/// The two-sided Mann–Whitney U test of whether `a` and `b` come from the same distribution.
///
/// Exact p when both samples have at most 20 values: without ties by counting the U
/// distribution, with ties by the exact conditional (permutation) distribution of the
/// mid-rank sum given the tie groups seen. Two-sided p is twice the smaller tail, at most 1
/// (with ties the conditional distribution need not be symmetric). Beyond 20 values, the normal
/// approximation with the tie correction of the variance and a continuity correction of 1/2.
/// An empty sample tells nothing: p = 1. NaN values rank above everything (total order), so
/// they cannot make the test panic.
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
    if n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        let p = if ranked.ties {
            tied_exact_p(&ranked.groups, n1, ranked.rank_sum_x2)
        } else {
            let counts = u_counts(n1, n2);
            let total: i64 = counts.iter().sum();
            // Without ties U is a whole number; round only absorbs the float rank sum.
            let from = u_max.round() as usize;
            let upper: i64 = counts.iter().skip(from).sum();
            (2.0 * upper as f64 / total as f64).min(1.0)
        };
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
/// distribution" at `alpha` (usually [`super::DEFAULT_ALPHA`]).
pub fn distinguishable(a: &[f64], b: &[f64], alpha: f64) -> bool {
    mann_whitney_u(a, b).p < alpha
}

/// Holm's step-down adjustment of `p`, one p-value per hypothesis of one family (here: the
/// objectives on which two strategies are compared), in the same order. Rejecting every
/// hypothesis whose adjusted p is below α rejects any true one with probability at most α in
/// all, whatever the dependence between the tests (the objectives of one run are far from
/// independent: fewer DB calls and a lower p99 go together). The k-th smallest p is multiplied
/// by (m - k + 1), then the running maximum keeps the order, capped at 1. NaN counts as 1.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean = |x: f64| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| clean(p[i]).total_cmp(&clean(p[j])));
    let mut adjusted = vec![1.0; m];
    let mut running = 0.0f64;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * clean(p[i])).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The two-sided p of complete separation: `n` trials on each side, every one of one side
/// below every one of the other, 2 / C(2n, n). The smallest p any `n` against `n` trials can
/// give, ties or not.
pub fn separation_p(n: usize) -> f64 {
    // C(2n, n) as a running product in floats: exact far beyond the sizes that matter here.
    let choose = (1..=n).fold(1.0f64, |c, k| c * (n + k) as f64 / k as f64);
    (2.0 / choose).min(1.0)
}

/// The fewest trials per strategy at which complete separation on one of `objectives`
/// objectives passes Holm's first step (p < α / objectives): below it no difference can be
/// decided, however large. 5 for up to 6 objectives at α = 0.05, 6 for 7 to 23.
pub fn trials_to_separate(objectives: usize, alpha: f64) -> usize {
    let level = alpha / objectives.max(1) as f64;
    (1..=MAX_TRIALS_ESTIMATE)
        .find(|&n| separation_p(n) < level)
        .unwrap_or(MAX_TRIALS_ESTIMATE)
}

/// Beyond this many trials per strategy no estimate is given: a difference that needs more is
/// too small for a comparison to wait for.
pub const MAX_TRIALS_ESTIMATE: usize = 100;

/// How many trials per strategy would decide that `a` is lower than `b` at `level` (a
/// Holm-corrected α), if further trials overlapped as these do: the smallest n above
/// `at_least - 1` at which n against n trials with the same share of pairs in which `a` is the
/// larger (U / (n1 n2)) give a two-sided p below `level`. None when `a` is not the lower at
/// all (that share is a half or more) or when it takes more than [`MAX_TRIALS_ESTIMATE`].
pub fn trials_to_decide(a: &[f64], b: &[f64], level: f64, at_least: usize) -> Option<usize> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let share = mann_whitney_u(a, b).u / (a.len() * b.len()) as f64;
    if share >= 0.5 {
        return None;
    }
    (at_least.max(1)..=MAX_TRIALS_ESTIMATE).find(|&n| overlap_p(n, share) < level)
}

/// The two-sided p of n against n values without ties whose U is `share` of n², as the exact
/// distribution counts it up to 20 values and the normal approximation beyond.
fn overlap_p(n: usize, share: f64) -> f64 {
    let cells = (n * n) as f64;
    let u = (share * cells).round();
    let u_max = u.max(cells - u);
    if n <= EXACT_MAX {
        let counts = u_counts(n, n);
        let total: i64 = counts.iter().sum();
        let upper: i64 = counts.iter().skip(u_max as usize).sum();
        return (2.0 * upper as f64 / total as f64).min(1.0);
    }
    let nn = 2.0 * n as f64;
    let var = cells / 12.0 * (nn + 1.0);
    let z = (u_max - cells / 2.0 - 0.5) / var.sqrt();
    (2.0 * normal_sf(z)).min(1.0)
}

/// Whether `a`'s median is lower than `b`'s (false when either is empty).
pub fn median_lower(a: &[f64], b: &[f64]) -> bool {
    matches!((median(a), median(b)), (Some(x), Some(y)) if x < y)
}

/// The rank sum of the first sample in the pooled ranking, and what ties there were.
struct Ranked {
    rank_sum: f64,
    /// Twice the rank sum: a whole number even with mid-ranks, for exact counting.
    rank_sum_x2: usize,
    /// Sum over groups of tied values of t^3 - t (t = group size).
    tie_term: f64,
    ties: bool,
    /// Every group of equal values in rank order: (size, twice its mid-rank).
    groups: Vec<(usize, usize)>,
}

/// Equal as figures: NaNs (unequal to themselves) sort together and tie with each other, so a
/// column of unknown figures counts as one tie group rather than as distinct values.
fn same(x: f64, y: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan())
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
        rank_sum_x2: 0,
        tie_term: 0.0,
        ties: false,
        groups: Vec::new(),
    };
    let mut i = 0;
    while i < pooled.len() {
        // A group of equal values shares the mean of the ranks i+1..=j.
        let mut j = i + 1;
        while j < pooled.len() && same(pooled[j].0, pooled[i].0) {
            j += 1;
        }
        let t = j - i;
        let mid_x2 = i + 1 + j;
        let firsts = pooled[i..j].iter().filter(|p| p.1).count();
        out.rank_sum += mid_x2 as f64 / 2.0 * firsts as f64;
        out.rank_sum_x2 += mid_x2 * firsts;
        out.groups.push((t, mid_x2));
        if t > 1 {
            out.ties = true;
            let t = t as f64;
            out.tie_term += t * t * t - t;
        }
        i = j;
    }
    out
}

/// The exact two-sided p of a rank sum with ties: under "same distribution" every choice of
/// which `n1` of the pooled values belong to the first sample is equally likely, so the
/// distribution of (twice) its mid-rank sum given the tie groups is counted by choosing k_g
/// values from each group g (C(t_g, k_g) ways, adding k_g times its doubled mid-rank): a
/// knapsack over the groups, exact in integers. p is twice the smaller tail at the observed
/// sum, at most 1.
fn tied_exact_p(groups: &[(usize, usize)], n1: usize, observed_x2: usize) -> f64 {
    let n: usize = groups.iter().map(|g| g.0).sum();
    let max_sum = n * (n + 1);
    // Pascal's triangle up to n: C(40, 20) ~ 1.4e11 fits with room.
    let mut choose = vec![vec![0i64; n + 1]; n + 1];
    for t in 0..=n {
        choose[t][0] = 1;
        for k in 1..=t {
            // choose[t - 1][t] is still 0 from the start.
            choose[t][k] = choose[t - 1][k - 1] + choose[t - 1][k];
        }
    }
    // ways[c][s]: orderings choosing c values so far with doubled mid-rank sum s; `reach` is
    // the largest s the groups so far can make, so each step only walks what can be nonzero.
    let mut ways = vec![vec![0i64; max_sum + 1]; n1 + 1];
    let mut next = ways.clone();
    ways[0][0] = 1;
    let (mut reach, mut seen) = (0, 0);
    for &(t, mid_x2) in groups {
        let (before, chosen_before) = (reach, seen.min(n1));
        seen += t;
        reach = (reach + t.min(n1) * mid_x2).min(max_sum);
        // `next` holds an older step, nonzero only below the reach then: clearing up to the
        // new reach clears it all.
        for row in next.iter_mut() {
            row[..=reach].fill(0);
        }
        for c in 0..=chosen_before {
            for s in 0..=before {
                let w = ways[c][s];
                if w == 0 {
                    continue;
                }
                for k in 0..=t.min(n1 - c) {
                    next[c + k][s + k * mid_x2] += w * choose[t][k];
                }
            }
        }
        std::mem::swap(&mut ways, &mut next);
    }
    let dist = &ways[n1];
    let total: i64 = dist.iter().sum();
    let lower: i64 = dist[..=observed_x2.min(max_sum)].iter().sum();
    let upper: i64 = dist[observed_x2.min(max_sum)..].iter().sum();
    (2.0 * lower.min(upper) as f64 / total as f64).min(1.0)
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
        // method=...) with the method named; without ties, where its exact method applies.
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
        assert!(median_lower(&b, &a) && !median_lower(&a, &b));
        assert!(!median_lower(&[], &a));
    }

    /// Every way of splitting the pooled values into the two samples, counted one by one: the
    /// definition of the exact conditional p, with mid-ranks, for small samples.
    fn brute_p(a: &[f64], b: &[f64]) -> f64 {
        let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
        let n = pooled.len();
        let mid = |x: f64| {
            let below = pooled.iter().filter(|&&y| y < x).count() as f64;
            let equal = pooled.iter().filter(|&&y| y == x).count() as f64;
            below + (equal + 1.0) / 2.0
        };
        let ranks: Vec<f64> = pooled.iter().map(|&x| mid(x)).collect();
        let observed: f64 = ranks[..a.len()].iter().sum();
        let (mut lower, mut upper, mut total) = (0u64, 0u64, 0u64);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != a.len() {
                continue;
            }
            let s: f64 = (0..n)
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ranks[i])
                .sum();
            total += 1;
            lower += u64::from(s <= observed + 1e-9);
            upper += u64::from(s >= observed - 1e-9);
        }
        (2.0 * lower.min(upper) as f64 / total as f64).min(1.0)
    }

    #[test]
    fn ties_get_the_exact_conditional_p() {
        // The zero-heavy case the normal approximation got wrong: it said 0.020. Exactly, 12 of
        // the 252 ways to pick five of the ten trials are as extreme (all five zeros: 6 ways;
        // one zero and the four ones: 6 ways), p = 12/252.
        let r = mann_whitney_u(&[0.0; 5], &[0.0, 1.0, 1.0, 1.0, 1.0]);
        assert!(r.exact);
        assert_eq!(r.u, 2.5);
        assert!(close(r.p, 12.0 / 252.0, 1e-12), "{}", r.p);
        assert!(!distinguishable(
            &[0.0; 5],
            &[0.0, 1.0, 1.0, 1.0, 1.0],
            0.04
        ));
        // Complete separation with ties inside each side is as rare as without: 2/252.
        let r = mann_whitney_u(&[0.0; 5], &[1.0; 5]);
        assert!(r.exact && close(r.p, 2.0 / 252.0, 1e-12), "{r:?}");
        // Fractions counted by enumerating every split (a script, independently of this code).
        for (a, b, u, p) in [
            (
                vec![1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0],
                vec![3.0, 4.0, 5.0, 5.0, 6.0, 6.0, 7.0, 8.0],
                8.0,
                7.0 / 715.0,
            ),
            (
                vec![0.0, 0.0, 0.0, 1.0, 1.0, 2.0],
                vec![1.0, 2.0, 2.0, 2.0, 3.0, 3.0],
                3.5,
                13.0 / 462.0,
            ),
            (
                vec![0.0, 0.0, 0.0, 0.0, 1.0],
                vec![0.0, 0.0, 1.0, 1.0, 2.0, 3.0],
                7.0,
                17.0 / 77.0,
            ),
        ] {
            let r = mann_whitney_u(&a, &b);
            assert!(r.exact, "{a:?} vs {b:?}");
            assert_eq!(r.u, u, "{a:?} vs {b:?}");
            assert!(close(r.p, p, 1e-12), "{a:?} vs {b:?}: {} vs {p}", r.p);
        }
    }

    #[test]
    fn exact_p_matches_enumeration_on_random_small_samples() {
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..300 {
            let (n1, n2) = (rng.random_range(1..=7), rng.random_range(1..=7));
            // Few distinct values, so most draws have ties; some have none.
            let levels = rng.random_range(2..=12);
            let mut draw = |n: usize| {
                (0..n)
                    .map(|_| f64::from(rng.random_range(0..levels)))
                    .collect::<Vec<f64>>()
            };
            let (a, b) = (draw(n1), draw(n2));
            let r = mann_whitney_u(&a, &b);
            assert!(r.exact);
            assert!(close(r.p, brute_p(&a, &b), 1e-9), "{a:?} vs {b:?}: {}", r.p);
        }
    }

    #[test]
    fn holm_adjusts_step_down() {
        // Sorted 0.01, 0.02, 0.03, 0.04 over four: 0.04, 0.06, 0.06 (running max), 0.06.
        let adj = holm(&[0.03, 0.01, 0.04, 0.02]);
        let want = [0.06, 0.04, 0.06, 0.06];
        for (x, w) in adj.iter().zip(want) {
            assert!(close(*x, w, 1e-12), "{adj:?}");
        }
        assert_eq!(holm(&[0.5, 0.9]), vec![1.0, 1.0]);
        assert_eq!(holm(&[f64::NAN, 0.01]), vec![1.0, 0.02]);
        assert!(holm(&[]).is_empty());
        // One hypothesis: unchanged.
        assert_eq!(holm(&[0.03]), vec![0.03]);
    }

    #[test]
    fn trials_to_separate_by_objectives() {
        assert!(close(separation_p(5), 2.0 / 252.0, 1e-12));
        assert!(close(separation_p(6), 2.0 / 924.0, 1e-12));
        assert_eq!(separation_p(1), 1.0);
        // 0.0079 passes 0.05/6 = 0.0083 but not 0.05/7 = 0.0071.
        assert_eq!(trials_to_separate(1, 0.05), 4);
        assert_eq!(trials_to_separate(5, 0.05), 5);
        assert_eq!(trials_to_separate(6, 0.05), 5);
        assert_eq!(trials_to_separate(7, 0.05), 6);
        assert_eq!(trials_to_separate(23, 0.05), 6);
        assert_eq!(trials_to_separate(24, 0.05), 7);
    }

    #[test]
    fn trials_to_decide_scales_the_overlap_seen() {
        // No overlap: the least that complete separation needs at the level, from `at_least`.
        let (lo, hi) = ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]);
        assert_eq!(trials_to_decide(&lo, &hi, 0.01, 1), Some(5));
        assert_eq!(trials_to_decide(&lo, &hi, 0.01, 7), Some(7));
        // The wrong way round, or no difference at all: nothing would decide it.
        assert_eq!(trials_to_decide(&hi, &lo, 0.01, 1), None);
        assert_eq!(trials_to_decide(&lo, &lo, 0.01, 1), None);
        assert_eq!(trials_to_decide(&[], &lo, 0.01, 1), None);
        // Some overlap (U = 3 of 25, not significant after a correction over 5): more trials.
        let (a, b) = ([1.0, 2.0, 3.0, 4.0, 6.5], [4.5, 5.0, 6.0, 7.0, 8.0]);
        let need = trials_to_decide(&a, &b, 0.01, 6).expect("decidable");
        assert!((6..=20).contains(&need), "{need}");
        // It is the first n at which that overlap passes: n - 1 does not.
        let share = mann_whitney_u(&a, &b).u / 25.0;
        assert!(overlap_p(need, share) < 0.01 && overlap_p(need - 1, share) >= 0.01);
        // A tiny difference needs more than anyone would run.
        let (a, b) = ([1.0, 2.0, 3.0, 4.0, 5.1], [1.1, 2.1, 3.1, 4.1, 5.0]);
        assert_eq!(trials_to_decide(&a, &b, 0.01, 6), None);
    }
}
