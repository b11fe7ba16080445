//! The LRU miss-ratio curve: the hit rate an LRU cache of each size would have on a request
//! sequence, from one pass over it.
//!
//! Exact: Mattson's stack distances (the number of distinct keys touched since a key's last
//! request, itself included; an LRU of C objects hits exactly the requests at distance ≤ C),
//! counted in O(log K) per request with a Fenwick tree holding a 1 at each key's last-access
//! time. Times are renumbered when the tree fills, so memory stays O(distinct keys) however
//! long the sequence is.
//!
//! Sampled: SHARDS (Waldspurger et al., FAST '15) keeps the keys whose hash falls under
//! rate × 2²⁴, computes their stack distances exactly, and scales each by 1/rate; the
//! "adjusted" variant corrects the first bucket by the difference between the expected and
//! the actual number of sampled requests.
//!
//! The bytes axis is simple by definition: a cache of n objects is n × the mean value size of
//! the distinct keys seen with a size (their last one), not the bytes the n most recent keys hold.

use serde::Serialize;

use super::analysis::IdMap;
use super::{Op, Reader, TraceError, key_hash};

/// Above this many requests a curve comes from SHARDS at [`AUTO_RATE`] unless a rate is
/// given, provided SHARDS has sampled at least [`AUTO_MIN_SAMPLED_KEYS`] keys by then (a
/// million distinct keys at 1%): the exact curve's time grows with the requests and its memory
/// with the keys, SHARDS's by the rate less; but with few keys sampled, the few hottest keys
/// being in or out of the sample swings its estimate by tens of points, and the exact curve
/// is cheap anyway.
pub const AUTO_EXACT_LIMIT: u64 = 10_000_000;
pub const AUTO_RATE: f64 = 0.01;
pub const AUTO_MIN_SAMPLED_KEYS: u64 = 10_000;

/// SHARDS's smallest default size, in sampled distances (so 10/rate objects).
pub const SHARDS_MIN_SCALED: f64 = 10.0;

/// SHARDS's modulus P: keys whose hash mod P is under rate × P are sampled.
const SHARDS_P: u64 = 1 << 24;

/// Cache sizes in objects, as `--sizes 10,100,1k` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(pub Vec<u64>);

impl std::str::FromStr for Sizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Sizes, String> {
        let mut v = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let lower = part.to_ascii_lowercase();
            let (num, mult) = match lower.as_bytes().last() {
                Some(b'k') => (&lower[..lower.len() - 1], 1e3),
                Some(b'm') => (&lower[..lower.len() - 1], 1e6),
                Some(b'g') => (&lower[..lower.len() - 1], 1e9),
                _ => (&lower[..], 1.0),
            };
            let n: f64 = num
                .parse()
                .map_err(|_| format!("{part:?} is not a size (e.g. 100, 1k, 2.5m)"))?;
            let n = (n * mult).round();
            if !(1.0..1e15).contains(&n) {
                return Err(format!("{part:?}: a cache holds at least 1 object"));
            }
            v.push(n as u64);
        }
        if v.is_empty() {
            return Err("no sizes given".into());
        }
        Ok(Sizes(v))
    }
}

/// One point of the curve.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Point {
    pub objects: u64,
    pub bytes: u64,
    pub hit_rate: f64,
}

/// A miss-ratio curve (given as hit rates) over cache sizes.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// Requests in the sequence (all of them, sampled or not).
    pub requests: u64,
    /// Distinct keys (estimated as sampled / rate under SHARDS).
    pub distinct_keys: u64,
    /// 1 for the exact curve.
    pub sampling_rate: f64,
    /// The mean value size of the distinct keys, the bytes axis's scale.
    pub mean_object_bytes: f64,
    pub curve: Vec<Point>,
    /// Hits at each sampled stack distance or below (index = distance).
    #[serde(skip)]
    cum: Vec<u64>,
    /// What the hits are divided by: requests, or under SHARDS the expected sampled count.
    #[serde(skip)]
    denom: f64,
    /// SHARDS's first-bucket correction (0 for the exact curve).
    #[serde(skip)]
    adjust: f64,
}

impl Curve {
    /// The hit rate of an LRU cache of `objects` objects. Under SHARDS a size falls between
    /// two sampled distances (objects × rate is fractional): the hits are interpolated
    /// linearly between them, and below the first one, from 0.
    pub fn hit_rate(&self, objects: u64) -> f64 {
        if self.denom <= 0.0 || objects == 0 {
            return 0.0;
        }
        let last = self.cum.len() - 1;
        let d = objects as f64 * self.sampling_rate;
        let lo = (d.floor() as usize).min(last);
        let hi = (d.ceil() as usize).min(last);
        let frac = if hi > lo { d - lo as f64 } else { 0.0 };
        // The correction goes to the first bucket, so it grows in with it too.
        let with_adjust = |i: usize| self.cum[i] as f64 + if i > 0 { self.adjust } else { 0.0 };
        let hits = with_adjust(lo) + frac * (with_adjust(hi) - with_adjust(lo));
        (hits / self.denom).clamp(0.0, 1.0)
    }
}

/// Fenwick (binary indexed) tree of counts over positions 0..n.
struct Fenwick(Vec<u32>);

impl Fenwick {
    /// A tree with a 1 at each of `ones` (all < n), built in O(n).
    fn with_ones(n: usize, ones: impl Iterator<Item = usize>) -> Fenwick {
        let mut t = vec![0u32; n + 1];
        for i in ones {
            t[i + 1] += 1;
        }
        for i in 1..=n {
            let j = i + (i & i.wrapping_neg());
            if j <= n {
                t[j] += t[i];
            }
        }
        Fenwick(t)
    }
    fn add(&mut self, i: usize, v: i32) {
        let mut i = i + 1;
        while i < self.0.len() {
            self.0[i] = self.0[i].wrapping_add_signed(v);
            i += i & i.wrapping_neg();
        }
    }
    /// The sum over positions 0..=i.
    fn prefix(&self, i: usize) -> u32 {
        let mut i = i + 1;
        let mut s = 0;
        while i > 0 {
            s += self.0[i];
            i -= i & i.wrapping_neg();
        }
        s
    }
    fn len(&self) -> usize {
        self.0.len() - 1
    }
}

/// No last access: the key was deleted (still counted as seen).
const ABSENT: u64 = u64::MAX;

/// Mattson stack distances over a sequence, one access at a time.
pub struct StackDistances {
    /// Per key: last access time (or ABSENT) and last size.
    keys: IdMap<(u64, u32)>,
    tree: Fenwick,
    now: u64,
    /// Keys with a last access (in the tree).
    live: u64,
    /// hist[d]: accesses at stack distance d (1-based; 0 unused).
    hist: Vec<u64>,
    accesses: u64,
    /// The sum of the keys' last sizes, over the `sized` keys that had one.
    bytes_sum: u64,
    sized: u64,
}

impl Default for StackDistances {
    fn default() -> Self {
        Self::new()
    }
}

impl StackDistances {
    pub fn new() -> StackDistances {
        StackDistances {
            keys: IdMap::default(),
            tree: Fenwick::with_ones(1 << 16, std::iter::empty()),
            now: 0,
            live: 0,
            hist: vec![0],
            accesses: 0,
            bytes_sum: 0,
            sized: 0,
        }
    }

    /// Renumber the live keys' last accesses 0..live in their order, in a tree with room.
    fn compact(&mut self) {
        let mut order: Vec<(u64, u64)> = self
            .keys
            .iter()
            .filter(|(_, v)| v.0 != ABSENT)
            .map(|(&k, v)| (v.0, k))
            .collect();
        order.sort_unstable();
        for (i, &(_, k)) in order.iter().enumerate() {
            if let Some(v) = self.keys.get_mut(&k) {
                v.0 = i as u64;
            }
        }
        let n = order.len();
        let size = (4 * n).max(1 << 16);
        self.tree = Fenwick::with_ones(size, 0..n);
        self.now = n as u64;
    }

    /// A request for `id` whose value is `bytes` long (None: the request does not say, the
    /// key keeps the size it had).
    pub fn access(&mut self, id: u64, bytes: Option<u32>) {
        if self.now as usize >= self.tree.len() {
            self.compact();
        }
        self.accesses += 1;
        let now = self.now;
        self.now += 1;
        let e = self.keys.entry(id).or_insert((ABSENT, u32::MAX));
        let prev = e.0;
        if let Some(b) = bytes {
            if e.1 == u32::MAX {
                self.sized += 1;
            } else {
                self.bytes_sum -= u64::from(e.1);
            }
            self.bytes_sum += u64::from(b);
            e.1 = b;
        }
        e.0 = now;
        if prev == ABSENT {
            self.live += 1;
        } else {
            // Keys touched after prev, plus this one.
            let newer = self.live - u64::from(self.tree.prefix(prev as usize));
            let d = (newer + 1) as usize;
            if d >= self.hist.len() {
                self.hist.resize(d + 1, 0);
            }
            self.hist[d] += 1;
            self.tree.add(prev as usize, -1);
        }
        self.tree.add(now as usize, 1);
    }

    /// The key leaves the cache: its next access misses.
    pub fn delete(&mut self, id: u64) {
        if let Some(e) = self.keys.get_mut(&id)
            && e.0 != ABSENT
        {
            self.tree.add(e.0 as usize, -1);
            e.0 = ABSENT;
            self.live -= 1;
        }
    }

    fn distinct(&self) -> u64 {
        self.keys.len() as u64
    }
}

/// The sizes a curve is evaluated at when none are given: 1, 2, 5, 10, 20, 50, … up to the
/// distinct keys, and the distinct keys themselves; under SHARDS from 10/rate up, where its
/// error is that docs/traces.md states (below, a size spans a handful of sampled distances
/// and the few hottest keys being in or out of the sample dominate).
pub fn default_sizes(distinct: u64, rate: f64) -> Vec<u64> {
    let from = if rate >= 1.0 {
        1
    } else {
        (SHARDS_MIN_SCALED / rate).ceil() as u64
    };
    let mut v = vec![from];
    let mut p = 1u64;
    'outer: loop {
        for m in [1, 2, 5] {
            let s = p.saturating_mul(m);
            if s >= distinct {
                break 'outer;
            }
            if s > from {
                v.push(s);
            }
        }
        p = p.saturating_mul(10);
    }
    if distinct > from {
        v.push(distinct);
    }
    v
}

/// A curve being built: exact, or SHARDS at a rate.
pub struct Mrc {
    sd: StackDistances,
    /// Sampled when hash mod P < threshold; None: every key.
    threshold: Option<u64>,
    rate: f64,
    requests: u64,
}

impl Mrc {
    pub fn exact() -> Mrc {
        Mrc {
            sd: StackDistances::new(),
            threshold: None,
            rate: 1.0,
            requests: 0,
        }
    }

    /// SHARDS at `rate` in (0, 1]; a rate of 1 is the exact curve.
    pub fn shards(rate: f64) -> Mrc {
        if rate >= 1.0 {
            return Mrc::exact();
        }
        let threshold = ((rate * SHARDS_P as f64).round() as u64).max(1);
        Mrc {
            sd: StackDistances::new(),
            threshold: Some(threshold),
            rate: threshold as f64 / SHARDS_P as f64,
            requests: 0,
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn requests(&self) -> u64 {
        self.requests
    }

    fn sampled(&self, id: u64) -> bool {
        // Mixed again so that small ids (a synthetic workload's 1..K) spread as well as hashes.
        self.threshold
            .is_none_or(|t| crate::stats::mix64(id ^ 0x5348_4152_4453) % SHARDS_P < t)
    }

    pub fn access(&mut self, id: u64, bytes: Option<u32>) {
        self.requests += 1;
        if self.sampled(id) {
            self.sd.access(id, bytes);
        }
    }

    pub fn delete(&mut self, id: u64) {
        if self.sampled(id) {
            self.sd.delete(id);
        }
    }

    /// The curve at `sizes` (objects), or at [`default_sizes`].
    pub fn curve(&self, sizes: Option<&[u64]>) -> Curve {
        let sd = &self.sd;
        let mut cum = Vec::with_capacity(sd.hist.len());
        let mut acc = 0;
        for &h in &sd.hist {
            acc += h;
            cum.push(acc);
        }
        let (denom, adjust) = match self.threshold {
            None => (self.requests as f64, 0.0),
            Some(_) => {
                let expected = self.requests as f64 * self.rate;
                (expected, expected - sd.accesses as f64)
            }
        };
        let distinct = (sd.distinct() as f64 / self.rate).round() as u64;
        let mean = if sd.sized == 0 {
            0.0
        } else {
            sd.bytes_sum as f64 / sd.sized as f64
        };
        let mut c = Curve {
            requests: self.requests,
            distinct_keys: distinct,
            sampling_rate: self.rate,
            mean_object_bytes: mean,
            curve: Vec::new(),
            cum,
            denom,
            adjust,
        };
        let sizes = match sizes {
            Some(s) => s.to_vec(),
            None => default_sizes(distinct, self.rate),
        };
        c.curve = sizes
            .iter()
            .map(|&n| Point {
                objects: n,
                bytes: (n as f64 * mean).round() as u64,
                hit_rate: c.hit_rate(n),
            })
            .collect();
        c
    }
}

/// The exact LRU curve of a sequence of (key id, bytes).
pub fn exact_curve(seq: impl Iterator<Item = (u64, u32)>, sizes: Option<&[u64]>) -> Curve {
    let mut m = Mrc::exact();
    for (id, b) in seq {
        m.access(id, Some(b));
    }
    m.curve(sizes)
}

/// The SHARDS estimate of the LRU curve at `rate`.
pub fn shards_curve(
    seq: impl Iterator<Item = (u64, u32)>,
    rate: f64,
    sizes: Option<&[u64]>,
) -> Curve {
    let mut m = Mrc::shards(rate);
    for (id, b) in seq {
        m.access(id, Some(b));
    }
    m.curve(sizes)
}

/// A trace's curve. Gets and sets are accesses (a set writes the key, so it is in the cache
/// after), `op_count` of them for a Meta line; a delete removes the key; other lines are
/// skipped. Without a rate, the exact curve runs alongside SHARDS at [`AUTO_RATE`] until
/// [`AUTO_EXACT_LIMIT`] requests, and past that only SHARDS goes on if it has sampled
/// [`AUTO_MIN_SAMPLED_KEYS`] keys (else only the exact curve does).
pub fn trace_curve(
    reader: &mut Reader,
    rate: Option<f64>,
    sizes: Option<&[u64]>,
) -> Result<Curve, TraceError> {
    let mut exact = match rate {
        Some(r) if r < 1.0 => None,
        _ => Some(Mrc::exact()),
    };
    let mut sampled = match rate {
        Some(r) if r < 1.0 => Some(Mrc::shards(r)),
        Some(_) => None,
        None => Some(Mrc::shards(AUTO_RATE)),
    };
    while let Some(r) = reader.next_record()? {
        let id = key_hash(r.key);
        for m in exact.iter_mut().chain(sampled.iter_mut()) {
            match r.op {
                Op::Get | Op::Set => {
                    for _ in 0..r.count {
                        m.access(id, r.value_size);
                    }
                }
                Op::Delete => m.delete(id),
                Op::Other => {}
            }
        }
        if rate.is_none()
            && exact
                .as_ref()
                .is_some_and(|m| m.requests() > AUTO_EXACT_LIMIT)
        {
            exact = None;
        }
    }
    if exact.is_some() {
        sampled = None;
    }
    Ok(match (exact, sampled) {
        (Some(m), _) | (None, Some(m)) => m.curve(sizes),
        (None, None) => Mrc::exact().curve(sizes),
    })
}
