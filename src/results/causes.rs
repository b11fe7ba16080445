//! Where the database load came from: the measured window's DB calls by cause (they add up to
//! `db.calls`), the one line that says so, and the herd a simple model predicts for the
//! hottest key beside the one measured. The causes and their precedence are
//! [`crate::metrics::Cause`]'s (docs/results.md).

use serde::{Deserialize, Serialize};

use crate::metrics::{CAUSES, Cause};

/// DB calls of the measured window by cause: each call has exactly one, so they add up to
/// `db.calls`. Nothing else is in this object.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ByCause {
    /// Reloads of an entry that had expired (gone past its TTL, or found past its expiry);
    /// under a steady start also keys the start left absent, as a long-running service's
    /// would have expired.
    pub expiry: u64,
    /// The key's first load in the run: it had never been cached (compulsory).
    pub first: u64,
    /// Reloads of an entry gone before its expiry under a memory limit (evicted).
    pub eviction: u64,
    /// Reloads of an entry a write deleted.
    pub invalidation: u64,
    /// Loads begun while another load of the same key was in flight: what a perfect
    /// coordination would have saved (the stampede's share).
    pub herd: u64,
    /// Early recomputes (XFetch), background refreshes (swr, eager refresh) and re-warms.
    pub refresh: u64,
    /// Loads after a fault: the cache read failed, a wait for another loader ran out, the
    /// key's previous load failed, or its entry was lost to a fault before it expired.
    pub after_fault: u64,
    /// None of these: values no cache keeps (no-cache; a missing id without negative
    /// caching), entries gone early with nothing to explain it.
    pub other: u64,
}

impl ByCause {
    /// The count of `c`.
    pub fn get(&self, c: Cause) -> u64 {
        match c {
            Cause::Expiry => self.expiry,
            Cause::First => self.first,
            Cause::Eviction => self.eviction,
            Cause::Invalidation => self.invalidation,
            Cause::Herd => self.herd,
            Cause::Refresh => self.refresh,
            Cause::AfterFault => self.after_fault,
            Cause::Other => self.other,
        }
    }

    /// From counts read by cause.
    pub fn of(count: impl Fn(Cause) -> u64) -> ByCause {
        ByCause {
            expiry: count(Cause::Expiry),
            first: count(Cause::First),
            eviction: count(Cause::Eviction),
            invalidation: count(Cause::Invalidation),
            herd: count(Cause::Herd),
            refresh: count(Cause::Refresh),
            after_fault: count(Cause::AfterFault),
            other: count(Cause::Other),
        }
    }

    /// Every cause's count added: `db.calls`.
    pub fn total(&self) -> u64 {
        CAUSES.iter().map(|&c| self.get(c)).sum()
    }

    /// The causes that are not zero, largest first (ties in the list's order).
    pub fn ranked(&self) -> Vec<(Cause, u64)> {
        let mut v: Vec<(Cause, u64)> = CAUSES
            .iter()
            .map(|&c| (c, self.get(c)))
            .filter(|&(_, n)| n > 0)
            .collect();
        v.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        v
    }

    /// The one line: `db 15148 = expiry 12003 + first 2810 + herd 312 (2.1%: what a perfect
    /// coordination would have saved)`.
    pub fn line(&self) -> String {
        let total = self.total();
        let parts: Vec<String> = self
            .ranked()
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        let mut s = format!(
            "db {total} = {}",
            if parts.is_empty() {
                "0".to_string()
            } else {
                parts.join(" + ")
            }
        );
        s.push_str(&format!(
            "; the stampede's share (herd, what a perfect coordination would have saved): {} ({})",
            self.herd,
            pct(self.herd, total)
        ));
        s
    }

    /// The three largest causes with their shares, for a table cell: "expiry 80% herd 12%
    /// first 8%".
    pub fn short(&self) -> String {
        let total = self.total();
        let r = self.ranked();
        if r.is_empty() {
            return "—".to_string();
        }
        r.iter()
            .take(3)
            .map(|(c, n)| format!("{} {:.0}%", c.name(), 100.0 * *n as f64 / total as f64))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The two largest causes but the herd (a conclusion states it apart) in words:
    /// "reloads after expiry 79.2% and first loads 18.6%".
    pub fn main_causes(&self) -> String {
        let total = self.total();
        let mut r = self.ranked();
        r.retain(|(c, _)| *c != Cause::Herd);
        let named: Vec<String> = r
            .iter()
            .take(2)
            .map(|(c, n)| format!("{} {}", words(*c), pct(*n, total)))
            .collect();
        if named.is_empty() {
            "no DB calls".to_string()
        } else {
            named.join(" and ")
        }
    }
}

/// A cause in a sentence.
pub fn words(c: Cause) -> &'static str {
    match c {
        Cause::Expiry => "reloads after expiry",
        Cause::First => "first loads",
        Cause::Eviction => "reloads after eviction",
        Cause::Invalidation => "reloads after writes",
        Cause::Herd => "herd duplicates",
        Cause::Refresh => "early or background refreshes",
        Cause::AfterFault => "loads after a fault",
        Cause::Other => "other loads",
    }
}

fn pct(n: u64, total: u64) -> String {
    if total == 0 {
        return "0%".to_string();
    }
    let p = 100.0 * n as f64 / total as f64;
    if p > 0.0 && p < 0.1 {
        "<0.1%".to_string()
    } else {
        format!("{p:.1}%")
    }
}

/// The herd a simple model predicts for the hottest key beside the one measured: under plain
/// cache-aside every request for the key that arrives between its miss and its write-back
/// loads it too, so a herd holds on average 1 + λ·T loads (λ the key's request rate, T the time
/// from a miss to the write-back, both measured in this run). A measured herd well above it
/// points elsewhere (pool queueing, a slow Redis); well below, at a coordination at work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HerdModel {
    /// The key (rank 1 of the Zipf draw; a trace's most requested id).
    pub key: u64,
    /// Its measured requests per second over the window.
    pub requests_per_s: f64,
    /// Mean time from a miss of it to the write-back (its loads' admission, load and SET), ms;
    /// null when it was never loaded in the window.
    pub miss_to_write_back_ms: Option<f64>,
    /// 1 + λ·T: the mean herd plain cache-aside would form; null without T.
    pub predicted_mean: Option<f64>,
    /// Its loads per herd measured (loads / loads begun with none of it in flight); null
    /// when it was never loaded.
    pub measured_mean: Option<f64>,
    /// Most loads of it in flight at once.
    pub measured_peak: u64,
    /// Its loads in the window.
    pub loads: u64,
    /// In a run with a fault: the part of the window the model's figures come from (its
    /// undisturbed seconds), or null with the reason there is none; absent without a fault.
    /// The peak is the whole window's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undisturbed: Option<super::Known<String>>,
}

/// The hottest key's counts at the end of a run (see [`crate::metrics::Cause`]'s tracker).
#[derive(Debug, Clone, Copy, Default)]
pub struct HotCounts {
    pub key: u64,
    pub requests: u64,
    pub loads: u64,
    /// Loads begun with no other load of the key in flight (each starts a herd).
    pub leaders: u64,
    pub peak: u64,
    /// Miss-to-write-back time of its loads, µs, and how many.
    pub fill_us: u64,
    pub fills: u64,
}

impl HerdModel {
    /// From the hottest key's counts over a window of `window_s`; None without a hottest key.
    pub fn of(h: &HotCounts, window_s: f64) -> Option<HerdModel> {
        if h.key == 0 {
            return None;
        }
        let rate = if window_s > 0.0 {
            h.requests as f64 / window_s
        } else {
            0.0
        };
        let t_ms = (h.fills > 0).then(|| h.fill_us as f64 / 1000.0 / h.fills as f64);
        Some(HerdModel {
            key: h.key,
            requests_per_s: rate,
            miss_to_write_back_ms: t_ms,
            predicted_mean: t_ms.map(|t| 1.0 + rate * t / 1000.0),
            measured_mean: (h.leaders > 0).then(|| h.loads as f64 / h.leaders as f64),
            measured_peak: h.peak,
            loads: h.loads,
            undisturbed: None,
        })
    }

    /// The model again from the undisturbed part of a window with a fault (its own counts and
    /// seconds), or unknown with the reason there is none.
    pub fn within(self, part: &Result<super::undisturbed::Part, String>) -> HerdModel {
        match part {
            Ok(p) => {
                let c = &p.cost;
                let h = HotCounts {
                    key: self.key,
                    requests: c.hot_requests,
                    loads: c.hot_loads,
                    leaders: c.hot_leaders,
                    peak: self.measured_peak,
                    fill_us: c.hot_fill_us,
                    fills: c.hot_fills,
                };
                let m = HerdModel::of(&h, p.ms as f64 / 1000.0).unwrap_or(self);
                HerdModel {
                    undisturbed: Some(super::Known::Value(p.words.clone())),
                    ..m
                }
            }
            Err(why) => HerdModel {
                key: self.key,
                measured_peak: self.measured_peak,
                undisturbed: Some(super::Known::Unknown(why.clone())),
                ..HerdModel::default()
            },
        }
    }

    /// In one line: "herd of the hottest key (id 1, 812 req/s): 1 + λ·T = 1 + 812/s × 10.4 ms
    /// = 9.4 predicted per herd, 8.7 measured (peak 14)".
    pub fn line(&self) -> Option<String> {
        if let Some(super::Known::Unknown(why)) = &self.undisturbed {
            return Some(format!(
                "hottest key (id {}): herd model unknown: {why}",
                self.key
            ));
        }
        let (t, p) = (self.miss_to_write_back_ms?, self.predicted_mean?);
        let measured = self
            .measured_mean
            .map_or("none measured".to_string(), |m| format!("{m:.1} measured"));
        let from = match &self.undisturbed {
            Some(super::Known::Value(w)) => format!("; from {w}, the peak from the whole window"),
            _ => String::new(),
        };
        Some(format!(
            "hottest key (id {}): model 1 + λ·T = 1 + {:.0}/s × {t:.1} ms = {p:.1} loads per herd under plain cache-aside; {measured} (peak {}){from}",
            self.key, self.requests_per_s, self.measured_peak
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_adds_up_and_names_the_stampedes_share() {
        let b = ByCause {
            expiry: 12003,
            first: 2810,
            herd: 312,
            other: 23,
            ..ByCause::default()
        };
        assert_eq!(b.total(), 15148);
        assert_eq!(
            b.line(),
            "db 15148 = expiry 12003 + first 2810 + herd 312 + other 23; the stampede's share (herd, what a perfect coordination would have saved): 312 (2.1%)"
        );
        assert_eq!(
            b.main_causes(),
            "reloads after expiry 79.2% and first loads 18.6%"
        );
        let json = serde_json::to_value(b).unwrap();
        assert_eq!(
            json.as_object().unwrap().len(),
            8,
            "causes and nothing else"
        );
    }

    #[test]
    fn the_model_is_one_plus_rate_times_window() {
        let h = HotCounts {
            key: 1,
            requests: 8000,
            loads: 90,
            leaders: 10,
            peak: 14,
            fill_us: 10_000 * 100,
            fills: 100,
        };
        let m = HerdModel::of(&h, 10.0).unwrap();
        assert_eq!(m.requests_per_s, 800.0);
        assert_eq!(m.miss_to_write_back_ms, Some(10.0));
        assert!((m.predicted_mean.unwrap() - 9.0).abs() < 1e-9);
        assert_eq!(m.measured_mean, Some(9.0));
        assert!(m.line().unwrap().contains("= 9.0 loads per herd"));
    }
}
