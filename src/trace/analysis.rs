//! The figures `trace-stats` prints about a trace: volume, rate, key popularity (the fitted
//! Zipf exponent and how well it fits), the working set, the op mix and the value-size and
//! TTL distributions. docs/traces.md defines each figure.
//!
//! Keys are told apart by a 64-bit hash of their bytes ([`super::key_hash`]), not stored: a
//! trace of a hundred million keys then needs a few GB less, and two keys share a hash with
//! probability about K²/2⁶⁵ (under 10⁻⁵ at ten million keys).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{Op, Reader, Record, TraceError, key_hash};

/// A hasher for keys that are already hashes: the identity.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Percentiles of a distribution (value sizes in bytes, TTLs in seconds), over the requests
/// that carry the value.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dist {
    /// Requests that carried the value.
    pub requests: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

fn dist(h: &Histogram<u64>) -> Option<Dist> {
    // The bottom of each value's bucket: exact below 2048 and for round figures above (a TTL
    // of 3600 reads 3600, not its bucket's top, 3601), within 0.1% otherwise.
    let q = |p: f64| h.lowest_equivalent(h.value_at_quantile(p));
    (!h.is_empty()).then(|| Dist {
        requests: h.len(),
        mean: h.mean(),
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        max: h.lowest_equivalent(h.max()),
    })
}

/// Requests per whole second, from the first second of the trace to its last (seconds with
/// no request count as 0).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rates {
    pub seconds: u64,
    pub mean: f64,
    pub median: u64,
    pub p99: u64,
    pub max: u64,
}

/// Shares of the requests by op.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ops {
    pub get: u64,
    pub set: u64,
    pub delete: u64,
    pub read_share: f64,
    pub write_share: f64,
    pub delete_share: f64,
}

/// What `trace-stats` reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceStats {
    pub format: String,
    /// Lines that were not blank.
    pub lines: u64,
    /// Get, set and delete requests, Meta's `op_count` expanded.
    pub requests: u64,
    /// Lines of other commands (and MONITOR's banner): not requests.
    pub skipped: u64,
    pub distinct_keys: u64,
    /// Last timestamp minus first; None when the trace has no times.
    pub duration_s: Option<f64>,
    pub rate_per_s: Option<Rates>,
    /// Keys requested exactly once.
    pub one_hit_wonders: u64,
    /// One-hit wonders over distinct keys.
    pub one_hit_wonder_share: f64,
    /// The maximum-likelihood exponent s of a Zipf law over the keys' frequency ranks.
    pub zipf_exponent: f64,
    /// Kolmogorov–Smirnov distance between the ranks' empirical CDF and the fitted law's.
    pub zipf_ks_distance: f64,
    pub working_set_objects: u64,
    /// The sum over distinct keys of their last value size (keys with none count 0).
    pub working_set_bytes: u64,
    pub ops: Ops,
    pub value_size: Option<Dist>,
    pub ttl_s: Option<Dist>,
    /// The share of requests on the most requested 1% (10%) of keys, at least one key.
    pub top_1pct_share: f64,
    pub top_10pct_share: f64,
}

/// The figures accumulated one record at a time.
pub struct Accumulator {
    ids: IdMap<u32>,
    /// Per key: requests and last value size (u32::MAX: none seen).
    keys: Vec<(u64, u32)>,
    lines: u64,
    skipped: u64,
    ops: [u64; 3],
    first_s: f64,
    last_s: f64,
    per_second: IdMap<u64>,
    cur_second: Option<i64>,
    cur_count: u64,
    sizes: Histogram<u64>,
    ttls: Histogram<u64>,
}

impl Default for Accumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Accumulator {
    pub fn new() -> Accumulator {
        // 3 significant digits; the histograms grow to whatever value they are given.
        let h = || Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!("3 digits is valid"));
        Accumulator {
            ids: IdMap::default(),
            keys: Vec::new(),
            lines: 0,
            skipped: 0,
            ops: [0; 3],
            first_s: f64::INFINITY,
            last_s: f64::NEG_INFINITY,
            per_second: IdMap::default(),
            cur_second: None,
            cur_count: 0,
            sizes: h(),
            ttls: h(),
        }
    }

    pub fn add(&mut self, r: &Record) {
        self.lines += 1;
        let slot = match r.op {
            Op::Get => 0,
            Op::Set => 1,
            Op::Delete => 2,
            Op::Other => {
                self.skipped += 1;
                return;
            }
        };
        if r.count == 0 {
            return;
        }
        let n = u64::from(r.count);
        self.ops[slot] += n;
        let h = key_hash(r.key);
        let next = self.keys.len() as u32;
        let id = *self.ids.entry(h).or_insert(next) as usize;
        if id == self.keys.len() {
            self.keys.push((0, u32::MAX));
        }
        let k = &mut self.keys[id];
        k.0 += n;
        if let Some(v) = r.value_size {
            k.1 = v;
            // Auto-resizing: record_n grows the histogram (the saturating variant would clamp).
            let _ = self.sizes.record_n(u64::from(v), n);
        }
        if let Some(t) = r.ttl_s {
            let _ = self.ttls.record_n(u64::from(t), n);
        }
        if let Some(t) = r.time_s {
            self.first_s = self.first_s.min(t);
            self.last_s = self.last_s.max(t);
            let s = t.floor() as i64;
            if self.cur_second != Some(s) {
                self.flush_second();
                self.cur_second = Some(s);
            }
            self.cur_count += n;
        }
    }

    fn flush_second(&mut self) {
        if let Some(s) = self.cur_second.take() {
            *self.per_second.entry(s as u64).or_insert(0) += self.cur_count;
        }
        self.cur_count = 0;
    }

    fn rates(&self, requests: u64) -> Option<Rates> {
        let first = self.first_s.floor() as i64;
        let last = self.last_s.floor() as i64;
        if self.per_second.is_empty() {
            return None;
        }
        let span = (last - first) as u64 + 1;
        // Seconds with no request count, unless the timestamps span so long (a bad epoch)
        // that listing them would not fit: then only the seconds that had requests.
        let mut v: Vec<u64> = if span <= 100_000_000 {
            let mut v = vec![0u64; span as usize];
            for (&s, &c) in &self.per_second {
                v[(s as i64 - first) as usize] += c;
            }
            v
        } else {
            self.per_second.values().copied().collect()
        };
        v.sort_unstable();
        let q = |p: f64| v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Rates {
            seconds: v.len() as u64,
            mean: requests as f64 / v.len() as f64,
            median: q(0.5),
            p99: q(0.99),
            max: v[v.len() - 1],
        })
    }

    pub fn finish(mut self, format: &str) -> TraceStats {
        self.flush_second();
        let requests: u64 = self.ops.iter().sum();
        let share = |x: u64| {
            if requests == 0 {
                0.0
            } else {
                x as f64 / requests as f64
            }
        };
        let mut counts: Vec<u64> = self.keys.iter().map(|k| k.0).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let k = counts.len();
        let top = |p: f64| {
            let n = ((k as f64 * p).ceil() as usize).clamp(1.min(k), k);
            share(counts[..n].iter().sum())
        };
        let one_hit = counts.iter().rev().take_while(|&&c| c == 1).count() as u64;
        let (s, ks) = zipf_mle(&counts);
        TraceStats {
            format: format.to_string(),
            lines: self.lines,
            requests,
            skipped: self.skipped,
            distinct_keys: k as u64,
            duration_s: (self.last_s >= self.first_s).then_some(self.last_s - self.first_s),
            rate_per_s: self.rates(requests),
            one_hit_wonders: one_hit,
            one_hit_wonder_share: if k == 0 {
                0.0
            } else {
                one_hit as f64 / k as f64
            },
            zipf_exponent: s,
            zipf_ks_distance: ks,
            working_set_objects: k as u64,
            working_set_bytes: self
                .keys
                .iter()
                .filter(|x| x.1 != u32::MAX)
                .map(|x| u64::from(x.1))
                .sum(),
            ops: Ops {
                get: self.ops[0],
                set: self.ops[1],
                delete: self.ops[2],
                read_share: share(self.ops[0]),
                write_share: share(self.ops[1]),
                delete_share: share(self.ops[2]),
            },
            value_size: dist(&self.sizes),
            ttl_s: dist(&self.ttls),
            top_1pct_share: top(0.01),
            top_10pct_share: top(0.10),
        }
    }
}

/// Read the whole trace and compute its figures.
pub fn analyse(reader: &mut Reader) -> Result<TraceStats, TraceError> {
    let mut acc = Accumulator::new();
    let format = reader.format().name();
    while let Some(r) = reader.next_record()? {
        acc.add(&r);
    }
    Ok(acc.finish(format))
}

/// The maximum-likelihood exponent of a finite Zipf law P(r) = r^-s / H(K, s) over ranks
/// 1..K, given the requests of each rank (most requested first), and the Kolmogorov–Smirnov
/// distance between the observed and the fitted rank CDFs.
///
/// The log-likelihood is concave in s and its derivative vanishes where the law's mean of
/// ln r equals the observed one, so Newton's method on that equation (the law's variance of
/// ln r is the slope) converges in a few steps; a bracket keeps each step inside [0, 20].
pub fn zipf_mle(counts_desc: &[u64]) -> (f64, f64) {
    let k = counts_desc.len();
    let n: f64 = counts_desc.iter().map(|&c| c as f64).sum();
    if k < 2 || n == 0.0 {
        return (0.0, 0.0);
    }
    let ln: Vec<f64> = (1..=k).map(|r| (r as f64).ln()).collect();
    let target = counts_desc
        .iter()
        .zip(&ln)
        .map(|(&c, l)| c as f64 * l)
        .sum::<f64>()
        / n;
    // The law's mean and variance of ln r at s.
    let moments = |s: f64| {
        let (mut h, mut m1, mut m2) = (0.0, 0.0, 0.0);
        for l in &ln {
            let w = (-s * l).exp();
            h += w;
            m1 += w * l;
            m2 += w * l * l;
        }
        let mean = m1 / h;
        (mean, (m2 / h - mean * mean).max(1e-300))
    };
    let (mut lo, mut hi) = (0.0_f64, 20.0_f64);
    let mut s = 1.0;
    for _ in 0..100 {
        let (mean, var) = moments(s);
        // The mean falls as s grows: above the target, s is too small.
        if mean > target {
            lo = s;
        } else {
            hi = s;
        }
        let mut next = s + (mean - target) / var;
        if !(next > lo && next < hi) {
            next = (lo + hi) / 2.0;
        }
        let done = (next - s).abs() < 1e-9;
        s = next;
        if done || hi - lo < 1e-9 {
            break;
        }
    }
    // KS distance between the two CDFs over the ranks.
    let h: f64 = ln.iter().map(|l| (-s * l).exp()).sum();
    let (mut ce, mut cf, mut d) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (&c, l) in counts_desc.iter().zip(&ln) {
        ce += c as f64 / n;
        cf += (-s * l).exp() / h;
        d = d.max((ce - cf).abs());
    }
    (s, d)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn dist_line(out: &mut String, name: &str, unit: &str, d: &Option<Dist>) {
    let _ = match d {
        Some(d) => writeln!(
            out,
            "{name:<18} p50 {}{unit}, p90 {}{unit}, p99 {}{unit}, max {}{unit}, mean {:.1}{unit} ({} requests)",
            d.p50, d.p90, d.p99, d.max, d.mean, d.requests
        ),
        None => writeln!(out, "{name:<18} none in the trace"),
    };
}

impl TraceStats {
    /// The figures as `trace-stats` prints them.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let w = &mut o;
        let _ = writeln!(w, "{:<18} {}", "format", self.format);
        let _ = writeln!(
            w,
            "{:<18} {} ({} lines, {} skipped)",
            "requests", self.requests, self.lines, self.skipped
        );
        match (self.duration_s, &self.rate_per_s) {
            (Some(d), Some(r)) => {
                let _ = writeln!(w, "{:<18} {d:.3} s", "duration");
                let _ = writeln!(
                    w,
                    "{:<18} mean {:.1}, median {}, p99 {}, max {} (over {} whole seconds)",
                    "requests/s", r.mean, r.median, r.p99, r.max, r.seconds
                );
            }
            _ => {
                let _ = writeln!(w, "{:<18} none (the trace has no times)", "duration");
            }
        }
        let _ = writeln!(
            w,
            "{:<18} {} ({} one-hit wonders, {})",
            "distinct keys",
            self.distinct_keys,
            self.one_hit_wonders,
            pct(self.one_hit_wonder_share)
        );
        let _ = writeln!(
            w,
            "{:<18} {:.3} (maximum likelihood; KS distance {:.3})",
            "zipf exponent", self.zipf_exponent, self.zipf_ks_distance
        );
        let _ = writeln!(
            w,
            "{:<18} top 1% of keys {}, top 10% {}",
            "requests on",
            pct(self.top_1pct_share),
            pct(self.top_10pct_share)
        );
        let _ = writeln!(
            w,
            "{:<18} {} objects, {} bytes",
            "working set", self.working_set_objects, self.working_set_bytes
        );
        let _ = writeln!(
            w,
            "{:<18} get {}, set {}, delete {}",
            "ops",
            pct(self.ops.read_share),
            pct(self.ops.write_share),
            pct(self.ops.delete_share)
        );
        dist_line(w, "value size", " B", &self.value_size);
        dist_line(w, "ttl", " s", &self.ttl_s);
        o
    }
}
