//! The cache as traffic would have left it: which keys are in Redis at the start of a run, and
//! how long each has left to live.
//!
//! A run that starts on an empty cache measures a cold start, and one whose keys were all
//! written at once measures a synchronized expiry; neither is the steady state of a cache that
//! has been serving for a while. Under cache-aside a key requested at rate λ stays cached for
//! its TTL T after each miss, then stays absent until the next request (1/λ on average), so it
//! is present a fraction T·λ / (T·λ + 1) of the time; seen at a random instant while present,
//! its remaining TTL is uniform over (0, T]. [`draw`] samples that state key by key,
//! [`synchronized`] gives the all-at-once state for contrast.
//!
//! Pure: the randomness comes from a seed the caller derives (see
//! [`crate::stats::derive_seed`] with [`crate::stats::Purpose::Steady`]).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// One key present in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyState {
    /// Popularity rank, 1 = most requested (the item id the key sampler draws).
    pub rank: u64,
    /// The TTL the key was written with, ms (the nominal TTL spread by the jitter).
    pub ttl_ms: u64,
    /// What is left of it at the start of the run, ms, in 1..=`ttl_ms`.
    pub remaining_ms: u64,
}

/// What shapes the steady state: the workload and the cache writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyParams {
    /// Number of keys, ranks 1..=keys.
    pub keys: u64,
    /// Zipf exponent s of the key popularity (p_k ∝ 1/k^s).
    pub zipf: f64,
    /// Requests per second over all keys (those for ids that exist: leave out the share that
    /// asks for missing ids, which never fills these keys).
    pub rps: f64,
    /// Nominal TTL of a cache write, ms.
    pub ttl_ms: u64,
    /// Spread of each written TTL as a fraction, uniform within ±jitter (0.1 = ±10%), as the
    /// cache writes do; clamped to [0, 1].
    pub jitter: f64,
    /// The most popular keys, ranks 1..=warm_top, are taken as just written (full TTL): a warm
    /// up that requests them right before the run leaves them so.
    pub warm_top: u64,
    /// Stale-while-revalidate's window, ms (0 for the other freshness policies): an entry
    /// past its soft expiry (`ttl_ms`) lives this much longer, and the first request in that
    /// window refreshes it. A hot key therefore spends about 1/λ stale, not the whole
    /// window: drawing its age over the whole life would start most keys stale at once, and
    /// their refreshes together (a transient that is the tool's, not swr's).
    pub stale_ms: u64,
}

/// Sum of k^-s over k = 1..=keys, added smallest first so the long tail of tiny terms is not
/// lost against the large head (it matters at millions of keys).
fn zipf_norm(keys: u64, s: f64) -> f64 {
    (1..=keys).rev().map(|k| (k as f64).powf(-s)).sum()
}

/// The probability of each rank under a Zipf law: element k-1 is p_k = k^-s / Σ_j j^-s, rank 1
/// the most popular. Empty for no keys. Computes every term, which is fine up to tens of
/// millions of keys (10 million take 80 MB and well under a second).
#[cfg(test)]
pub fn zipf_probabilities(keys: u64, s: f64) -> Vec<f64> {
    let norm = zipf_norm(keys, s);
    (1..=keys).map(|k| (k as f64).powf(-s) / norm).collect()
}

/// The fraction of time a key requested at `rate_per_s` is cached under cache-aside with a TTL
/// of `ttl_ms`: T·λ / (T·λ + 1). 0 for no traffic or no TTL, 1 for an unbounded rate.
pub fn expected_fraction(rate_per_s: f64, ttl_ms: u64) -> f64 {
    let x = rate_per_s * ttl_ms as f64 / 1000.0;
    if x.is_nan() || x <= 0.0 {
        0.0
    } else if x.is_infinite() {
        1.0
    } else {
        x / (x + 1.0)
    }
}

/// A TTL spread by the jitter as a cache write spreads it: `u` uniform in [0, 1) maps to
/// ttl · (1 ± jitter), rounded to whole ms and at least 1.
fn jittered_ttl(ttl_ms: u64, jitter: f64, u: f64) -> u64 {
    let spread = 1.0 + jitter * (2.0 * u - 1.0);
    ((ttl_ms as f64) * spread).round().max(1.0) as u64
}

/// Draw the steady-state cache: the keys present at the start of a run, in rank order.
///
/// For each rank: within `warm_top`, present with its full nominal TTL left. Otherwise the
/// key's own TTL T is drawn first (within ±jitter of the nominal one, as the write would have
/// stamped it), then whether it is present, with probability T·λ / (T·λ + 1) for its rate
/// λ = rps · p_k under that T, then its remaining TTL, uniform in 1..=T ms. Every key outside
/// `warm_top` consumes exactly three draws whether or not it turns out present, so a key's
/// state depends only on the seed and its rank, not on the outcome for the keys before it.
///
/// The same `rng_seed` gives the same state. No keys are present with a TTL of 0.
pub fn draw(params: &SteadyParams, rng_seed: u64) -> Vec<KeyState> {
    let p = params;
    if p.keys == 0 || p.ttl_ms == 0 {
        return Vec::new();
    }
    let norm = zipf_norm(p.keys, p.zipf);
    draw_by(params, rng_seed, |rank| {
        p.rps * (rank as f64).powf(-p.zipf) / norm
    })
}

/// [`draw`] with each key's request rate given (a replayed trace's own per-key rates) instead
/// of the Zipf law's; `zipf` and `rps` are then unused.
pub fn draw_by(
    params: &SteadyParams,
    rng_seed: u64,
    rate_of: impl Fn(u64) -> f64,
) -> Vec<KeyState> {
    let p = params;
    if p.keys == 0 || p.ttl_ms == 0 {
        return Vec::new();
    }
    let jitter = if p.jitter.is_finite() {
        p.jitter.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut rng = StdRng::seed_from_u64(rng_seed);
    let mut present = Vec::new();
    for rank in 1..=p.keys {
        if rank <= p.warm_top {
            present.push(KeyState {
                rank,
                ttl_ms: p.ttl_ms,
                remaining_ms: p.ttl_ms,
            });
            continue;
        }
        let (u_ttl, u_present, u_left) = (
            rng.random::<f64>(),
            rng.random::<f64>(),
            rng.random::<f64>(),
        );
        let ttl = jittered_ttl(p.ttl_ms, jitter, u_ttl);
        let rate = rate_of(rank);
        if p.stale_ms > 0 {
            if let Some(k) = swr_state(rank, ttl, p.stale_ms, rate, u_present, u_left) {
                present.push(k);
            }
            continue;
        }
        if u_present >= expected_fraction(rate, ttl) {
            continue;
        }
        // floor(u * T) is in 0..T, so the remaining TTL is in 1..=T; the min guards the one
        // rounding case where u * T lands on T.
        let elapsed = ((u_left * ttl as f64) as u64).min(ttl - 1);
        present.push(KeyState {
            rank,
            ttl_ms: ttl,
            remaining_ms: ttl - elapsed,
        });
    }
    present
}

/// One key under swr at a random instant of its renewal cycle: written (age 0), fresh for `ttl`
/// ms, then stale until the first request X ~ Exp(rate) after the soft expiry refreshes it
/// (a new cycle), or dropped at `ttl + stale` when none comes, and absent until the next
/// request. The mean cycle is ttl + 1/rate and the mean present part ttl + (1 − e^{−rate·stale})/rate,
/// so the key is present with their ratio; given present, its age is uniform over the fresh
/// part, or ttl plus an exponential truncated to the stale window, in proportion to their
/// means. None when absent. `u_present` and `u_age` are uniform draws in [0, 1).
fn swr_state(
    rank: u64,
    ttl: u64,
    stale: u64,
    rate: f64,
    u_present: f64,
    u_age: f64,
) -> Option<KeyState> {
    let life = ttl + stale;
    let (t, s) = (ttl as f64, stale as f64 / 1000.0);
    let t_s = t / 1000.0;
    // rate is per second; times below in seconds.
    let stale_part = if rate > 0.0 {
        (1.0 - (-rate * s).exp()) / rate
    } else {
        s
    };
    let cycle = if rate > 0.0 {
        t_s + 1.0 / rate
    } else {
        f64::INFINITY
    };
    if u_present >= (t_s + stale_part) / cycle {
        return None;
    }
    // One draw picks the part and the place in it.
    let fresh_share = t_s / (t_s + stale_part);
    let age_ms = if u_age < fresh_share {
        (u_age / fresh_share) * t
    } else {
        // Inverse CDF of Exp(rate) truncated to (0, s).
        let v = (u_age - fresh_share) / (1.0 - fresh_share);
        let x = -(1.0 - v * (1.0 - (-rate * s).exp())).ln() / rate.max(1e-12);
        t + x.min(s) * 1000.0
    };
    let elapsed = (age_ms as u64).min(life - 1);
    Some(KeyState {
        rank,
        ttl_ms: life,
        remaining_ms: life - elapsed,
    })
}

/// Every key present with its whole TTL left, as if all were written at the same instant (the
/// synchronized expiry that a cold warm-up or a mass invalidation leaves). Empty for a TTL of 0.
#[cfg(test)]
pub fn synchronized(keys: u64, ttl_ms: u64) -> Vec<KeyState> {
    if ttl_ms == 0 {
        return Vec::new();
    }
    (1..=keys)
        .map(|rank| KeyState {
            rank,
            ttl_ms,
            remaining_ms: ttl_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SteadyParams {
        SteadyParams {
            stale_ms: 0,
            keys: 1000,
            zipf: 1.0,
            rps: 500.0,
            ttl_ms: 1000,
            jitter: 0.0,
            warm_top: 0,
        }
    }

    #[test]
    fn zipf_probabilities_shape() {
        let p = zipf_probabilities(1000, 1.0);
        assert_eq!(p.len(), 1000);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p.windows(2).all(|w| w[0] > w[1]));
        assert!((p[0] / p[1] - 2.0).abs() < 1e-12);
        assert!((p[0] / p[9] - 10.0).abs() < 1e-9);
        // s = 0: every key alike.
        let u = zipf_probabilities(4, 0.0);
        assert!(u.iter().all(|&x| (x - 0.25).abs() < 1e-15));
        assert!(zipf_probabilities(0, 1.0).is_empty());
        // H_1000 = 7.485470860550343, so p_1 = 1 / H_1000.
        assert!((p[0] - 1.0 / 7.485470860550343).abs() < 1e-12);
    }

    #[test]
    fn zipf_probabilities_ten_million() {
        let p = zipf_probabilities(10_000_000, 1.1);
        assert_eq!(p.len(), 10_000_000);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(p[9_999_999] > 0.0);
    }

    #[test]
    fn expected_fraction_formula() {
        assert_eq!(expected_fraction(1.0, 1000), 0.5);
        assert!((expected_fraction(9.0, 1000) - 0.9).abs() < 1e-12);
        assert!((expected_fraction(0.5, 6000) - 0.75).abs() < 1e-12);
        assert_eq!(expected_fraction(0.0, 1000), 0.0);
        assert_eq!(expected_fraction(5.0, 0), 0.0);
        assert_eq!(expected_fraction(f64::INFINITY, 1000), 1.0);
        assert_eq!(expected_fraction(f64::NAN, 1000), 0.0);
    }

    /// Share of `seeds` draws in which each of `ranks` is present.
    fn empirical(p: &SteadyParams, ranks: &[u64], seeds: u64) -> Vec<f64> {
        let mut hits = vec![0u64; ranks.len()];
        for seed in 0..seeds {
            let state = draw(p, seed);
            for (h, r) in hits.iter_mut().zip(ranks) {
                if state.binary_search_by_key(r, |k| k.rank).is_ok() {
                    *h += 1;
                }
            }
        }
        hits.iter().map(|&h| h as f64 / seeds as f64).collect()
    }

    #[test]
    fn presence_matches_formula() {
        let p = params();
        let probs = zipf_probabilities(p.keys, p.zipf);
        let ranks = [1, 10, 100, 1000];
        // Expected about 0.985, 0.87, 0.40, 0.063; 4000 draws give a standard error below
        // 0.008, so 3 points is about 4 errors.
        let got = empirical(&p, &ranks, 4000);
        for (r, g) in ranks.iter().zip(got) {
            let want = expected_fraction(p.rps * probs[(*r - 1) as usize], p.ttl_ms);
            assert!((g - want).abs() < 0.03, "rank {r}: {g} vs {want}");
        }
    }

    #[test]
    fn presence_with_jitter_stays_close() {
        // The fraction is concave in T, so ±10% jitter lowers it only slightly.
        let p = SteadyParams {
            jitter: 0.1,
            ..params()
        };
        let probs = zipf_probabilities(p.keys, p.zipf);
        let ranks = [10, 100];
        let got = empirical(&p, &ranks, 3000);
        for (r, g) in ranks.iter().zip(got) {
            let want = expected_fraction(p.rps * probs[(*r - 1) as usize], p.ttl_ms);
            assert!((g - want).abs() < 0.03, "rank {r}: {g} vs {want}");
        }
    }

    #[test]
    fn remaining_uniform_within_ttl() {
        let p = SteadyParams {
            stale_ms: 0,
            keys: 20_000,
            rps: 100_000.0,
            ..params()
        };
        let state = draw(&p, 7);
        assert!(state.len() > 5000, "{}", state.len());
        let mut sum = 0.0;
        for k in &state {
            assert!(k.remaining_ms >= 1 && k.remaining_ms <= k.ttl_ms, "{k:?}");
            assert_eq!(k.ttl_ms, 1000);
            sum += k.remaining_ms as f64;
        }
        let mean = sum / state.len() as f64;
        // Uniform over 1..=1000 has mean 500.5 and spread 289; the standard error is < 5.
        assert!((mean - 500.5).abs() < 20.0, "mean {mean}");
        // Both ends of the range are reached.
        assert!(state.iter().any(|k| k.remaining_ms < 20));
        assert!(state.iter().any(|k| k.remaining_ms > 980));
    }

    #[test]
    fn warm_top_keys_have_full_ttl() {
        let p = SteadyParams {
            warm_top: 50,
            rps: 1.0, // so low that few other keys would be present at all
            jitter: 0.2,
            ..params()
        };
        let state = draw(&p, 3);
        for r in 1..=50 {
            let k = state[(r - 1) as usize];
            assert_eq!(
                k,
                KeyState {
                    rank: r,
                    ttl_ms: 1000,
                    remaining_ms: 1000
                }
            );
        }
        assert!(state.len() < 60, "{}", state.len());
        assert!(state.windows(2).all(|w| w[0].rank < w[1].rank));
    }

    #[test]
    fn seeded_draw_is_reproducible() {
        let p = SteadyParams {
            jitter: 0.1,
            ..params()
        };
        assert_eq!(draw(&p, 42), draw(&p, 42));
        assert_ne!(draw(&p, 42), draw(&p, 43));
        // Each key has its own three draws: with more traffic more keys are present, but a key
        // present under both keeps the TTL and remaining time it drew.
        let busy = SteadyParams { rps: 5000.0, ..p };
        let (quiet, busy) = (draw(&p, 42), draw(&busy, 42));
        assert!(busy.len() > quiet.len());
        for k in &quiet {
            let i = busy
                .binary_search_by_key(&k.rank, |b| b.rank)
                .expect("a key present at low traffic is present at higher");
            assert_eq!(busy[i], *k);
        }
    }

    #[test]
    fn jitter_bounds_respected() {
        let p = SteadyParams {
            stale_ms: 0,
            keys: 20_000,
            rps: 100_000.0,
            jitter: 0.1,
            ..params()
        };
        let state = draw(&p, 11);
        let (lo, hi) = state.iter().fold((u64::MAX, 0), |(lo, hi), k| {
            (lo.min(k.ttl_ms), hi.max(k.ttl_ms))
        });
        assert!(lo >= 900 && hi <= 1100, "{lo}..{hi}");
        // The spread is used, not just allowed.
        assert!(lo < 910 && hi > 1090, "{lo}..{hi}");
        assert!(
            state
                .iter()
                .all(|k| k.remaining_ms >= 1 && k.remaining_ms <= k.ttl_ms)
        );
        // Without jitter, every TTL is the nominal one.
        let flat = draw(&SteadyParams { jitter: 0.0, ..p }, 11);
        assert!(flat.iter().all(|k| k.ttl_ms == 1000));
    }

    #[test]
    fn jittered_ttl_matches_write_stamp() {
        assert_eq!(jittered_ttl(1000, 0.1, 0.0), 900);
        assert_eq!(jittered_ttl(1000, 0.1, 0.5), 1000);
        assert_eq!(jittered_ttl(1000, 0.1, 0.999_999), 1100);
        assert_eq!(jittered_ttl(1, 1.0, 0.0), 1);
    }

    #[test]
    fn synchronized_and_empty_cases() {
        let s = synchronized(3, 500);
        assert_eq!(s.len(), 3);
        assert!(
            s.iter()
                .enumerate()
                .all(|(i, k)| k.rank == i as u64 + 1 && k.ttl_ms == 500 && k.remaining_ms == 500)
        );
        assert!(synchronized(3, 0).is_empty());
        assert!(
            draw(
                &SteadyParams {
                    ttl_ms: 0,
                    ..params()
                },
                1
            )
            .is_empty()
        );
        assert!(
            draw(
                &SteadyParams {
                    stale_ms: 0,
                    keys: 0,
                    ..params()
                },
                1
            )
            .is_empty()
        );
        // No traffic and no warm keys: an empty cache.
        assert!(
            draw(
                &SteadyParams {
                    rps: 0.0,
                    ..params()
                },
                1
            )
            .is_empty()
        );
    }

    /// Under swr a requested key is refreshed by the first request after its soft expiry, so
    /// at a random instant few keys are stale — about 1/λ of a cycle of T + 1/λ — not the
    /// share of the stale window in the whole life, which started swr's runs with a burst
    /// of refreshes.
    #[test]
    fn under_swr_few_keys_start_stale() {
        let p = SteadyParams {
            stale_ms: 3000,
            keys: 1000,
            zipf: 1.0,
            rps: 10_000.0,
            ttl_ms: 3000,
            jitter: 0.0,
            warm_top: 0,
        };
        let ks = draw(&p, 7);
        let stale = ks.iter().filter(|k| k.remaining_ms <= 3000).count();
        let share = stale as f64 / ks.len() as f64;
        // Expected: Σ_k P(present)·P(stale | present) over keys, computed exactly.
        let norm = zipf_norm(p.keys, p.zipf);
        let (mut want_stale, mut want_present) = (0.0, 0.0);
        for k in 1..=p.keys {
            let l = p.rps * (k as f64).powf(-p.zipf) / norm;
            let st = (1.0 - (-l * 3.0f64).exp()) / l;
            want_present += (3.0 + st) / (3.0 + 1.0 / l);
            want_stale += st / (3.0 + 1.0 / l);
        }
        let want = want_stale / want_present;
        assert!(
            (share - want).abs() < 0.03,
            "stale share {share:.3}, expected {want:.3}"
        );
        assert!(share < 0.35, "{share}: the whole-life draw gave about 0.5");
        assert!(
            (ks.len() as f64 - want_present).abs() < 4.0 * want_present.sqrt(),
            "{} present, expected {want_present:.0}",
            ks.len()
        );
        assert!(
            ks.iter()
                .all(|k| k.ttl_ms == 6000 && (1..=6000).contains(&k.remaining_ms))
        );
    }
}
