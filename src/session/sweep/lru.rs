//! Along a `maxmemory` axis: the exact LRU hit rate of the same request sequence at the number
//! of entries each budget holds, over the same measured requests, beside the hit rate Redis
//! measured there. The gap is what Redis's sampled eviction (and the start state) does against
//! an ideal LRU of that size.
//!
//! The measured window follows a warm-up: an LRU's hits over a prefix of the sequence do not
//! depend on what comes after it, so the window's hits are the whole sequence's less the
//! warm-up's, each from its own exact curve.

use crate::results::sweep::LruPoint;
use crate::scenario::{LoadShape, Scenario};
use crate::stats::{Purpose, derive_seed};
use crate::trace::mrc::{Curve, Mrc, exact_curve};

/// The exact curves of the whole sequence and of its warm-up, and their lengths.
pub(super) struct Lru {
    all: Curve,
    warmup: Option<(Curve, u64)>,
}
use crate::workload::KeySampler;

/// The exact LRU curve of what the sweep's first scenario sends (the synthetic key sequence,
/// warm-up included, or the trace's gets and sets), when an axis is `maxmemory`; None
/// otherwise or when it cannot be drawn (a closed loop has no fixed sequence).
pub(super) fn curve(sc: &Scenario, axes: &[String]) -> Option<Lru> {
    if !axes.iter().any(|a| a == "maxmemory") {
        return None;
    }
    match &sc.trace {
        // A replay: the reads it sends, at their run times (the warm-up by time).
        Some(t) => {
            let warmup_s = sc.warmup.0.as_secs_f64();
            let (mut all, mut pre, mut w) = (Mrc::exact(), Mrc::exact(), 0u64);
            crate::trace::replay::each_read(t, sc.value_size as u32, |at, id, size| {
                all.access(id, Some(size));
                if at < warmup_s {
                    pre.access(id, Some(size));
                    w += 1;
                }
            })
            .ok()?;
            Some(Lru {
                all: all.curve(None),
                warmup: (w > 0).then(|| (pre.curve(None), w)),
            })
        }
        None => {
            let LoadShape::Open { rps, .. } = sc.load else {
                return None;
            };
            let n = (rps * (sc.warmup.0 + sc.duration.0).as_secs_f64()) as u64;
            let w = (rps * sc.warmup.0.as_secs_f64()) as u64;
            let sizes = sc.sizes();
            let draw = |count: u64| -> Option<Curve> {
                let mut keys = KeySampler::new(
                    sc.keys,
                    sc.zipf,
                    derive_seed(sc.seed, Purpose::Keys, 0),
                    sc.missing_ratio.0,
                )
                .ok()?;
                Some(exact_curve(
                    (0..count).map(|_| {
                        let id = keys.next_id();
                        (id, sizes.of(id) as u32)
                    }),
                    None,
                ))
            };
            Some(Lru {
                all: draw(n)?,
                warmup: if w > 0 { Some((draw(w)?, w)) } else { None },
            })
        }
    }
}

/// The entries a budget of `maxmemory` bytes holds at the measured bytes per key, and the
/// exact LRU hit rate there (no limit: every key fits).
pub(super) fn at(lru: &Lru, maxmemory: f64, bytes_per_key: Option<f64>) -> Option<(f64, f64)> {
    let objects = if maxmemory <= 0.0 {
        lru.all.distinct_keys.max(1)
    } else {
        let per_key = bytes_per_key.filter(|b| *b > 0.0)?;
        (maxmemory / per_key).floor() as u64
    };
    Some((objects as f64, window_rate(lru, objects)))
}

/// The exact LRU hit rate of the measured window at `objects` entries.
fn window_rate(lru: &Lru, objects: u64) -> f64 {
    let n = lru.all.requests as f64;
    let hits = lru.all.hit_rate(objects) * n;
    let rate = match &lru.warmup {
        Some((w, len)) if (*len as f64) < n => {
            (hits - w.hit_rate(objects) * *len as f64) / (n - *len as f64)
        }
        _ => hits / n.max(1.0),
    };
    rate.clamp(0.0, 1.0)
}

/// Points of the window's curve: 12 sizes a decade, from one entry to every key, for the
/// report to draw the measured hit rates on.
pub(super) fn points(lru: &Lru) -> Vec<LruPoint> {
    let keys = lru.all.distinct_keys.max(1);
    let mut sizes: Vec<u64> = (0..)
        .map(|k| 10f64.powf(k as f64 / 12.0).round() as u64)
        .take_while(|s| *s < keys)
        .collect();
    sizes.push(keys);
    sizes.dedup();
    sizes
        .into_iter()
        .map(|o| LruPoint {
            objects: o as f64,
            hit_rate: window_rate(lru, o),
        })
        .collect()
}
