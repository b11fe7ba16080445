//! ttl: every key the app writes must expire. After a load phase over `--keys` keys (all
//! asked for at once, on a fresh cache), every key of the app's is SCANned and its PTTL read:
//! a key with no expiry fails, reported by pattern (digits as `{n}`) with counts and examples.
//! Keys that all expire within the load phase of each other (one TTL, no jitter) are a
//! warning with their share: they will all miss at once.

use std::collections::BTreeMap;

use anyhow::Result;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::lab::Lab;
use super::{CheckResult, Settings, Verdict};

/// Requests in flight during the load phase.
const LOAD_CONCURRENCY: usize = 16;
/// Below this many expiring keys the spread says nothing.
const SPREAD_MIN_KEYS: usize = 10;
/// Share of keys expiring together above which the spread is a warning.
const SPREAD_WARN_SHARE: f64 = 0.9;

/// A key's pattern: every run of digits as `{n}`.
pub fn pattern(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut in_digits = false;
    for c in key.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push_str("{n}");
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The largest share of `pttls` (ms, all > 0) lying within `window_ms` of each other.
pub fn together_share(pttls: &[i64], window_ms: i64) -> f64 {
    if pttls.is_empty() {
        return 0.0;
    }
    let mut v = pttls.to_vec();
    v.sort_unstable();
    let (mut best, mut lo) = (0usize, 0usize);
    for hi in 0..v.len() {
        while v[hi] - v[lo] > window_ms {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best as f64 / v.len() as f64
}

/// The verdict over `(key, pttl)` pairs read right after a load phase of `load_ms`.
pub fn decide(keys: &[(String, i64)], load_ms: i64) -> (Verdict, Value) {
    let mut without: BTreeMap<String, (u64, Vec<&str>)> = BTreeMap::new();
    let mut expiring = Vec::new();
    for (k, t) in keys {
        match *t {
            -1 => {
                let e = without.entry(pattern(k)).or_default();
                e.0 += 1;
                if e.1.len() < 3 {
                    e.1.push(k);
                }
            }
            t if t > 0 => expiring.push(t),
            _ => {} // gone between SCAN and PTTL
        }
    }
    let window = load_ms + 100;
    let share = together_share(&expiring, window);
    let spread = expiring
        .iter()
        .max()
        .zip(expiring.iter().min())
        .map(|(a, b)| a - b);
    let no_jitter = expiring.len() >= SPREAD_MIN_KEYS && share >= SPREAD_WARN_SHARE;
    let evidence = json!({
        "source": "SCAN and PTTL on the app's Redis",
        "keys": keys.len(),
        "expiring": expiring.len(),
        "without_expiry": without.iter().map(|(p, (n, ex))| json!({"pattern": p, "keys": n, "examples": ex})).collect::<Vec<_>>(),
        "ttl_spread_ms": spread,
        "expiring_together_share": (share * 1000.0).round() / 1000.0,
        "together_window_ms": window,
        "warning": no_jitter.then(|| format!("no jitter: {:.0}% of the expiring keys expire within {window} ms of each other (one TTL, written at once): they will miss together", share * 100.0)),
    });
    if keys.is_empty() {
        return (
            Verdict::skip(
                "the app wrote no key during the load phase: nothing to check (is it caching, and under CACHE_PREFIX?)",
            ),
            evidence,
        );
    }
    if !without.is_empty() {
        let n: u64 = without.values().map(|v| v.0).sum();
        let pats: Vec<String> = without
            .iter()
            .map(|(p, (c, _))| format!("{p} ({c})"))
            .collect();
        return (
            Verdict::fail(format!(
                "{n} of {} keys have no expiry: {}",
                keys.len(),
                pats.join(", ")
            )),
            evidence,
        );
    }
    let mut reason = format!("all {} keys expire", keys.len());
    if no_jitter {
        reason.push_str(&format!(
            "; warning: no jitter ({:.0}% expire within {window} ms of each other)",
            share * 100.0
        ));
    }
    (Verdict::pass(reason), evidence)
}

pub async fn check(lab: &mut Lab, s: &Settings) -> Result<CheckResult> {
    lab.fresh_cache().await?;
    let t = std::time::Instant::now();
    let lab_ref = &*lab;
    let answers: Vec<bool> = futures_util::stream::iter(1..=s.keys)
        .map(|k| async move { lab_ref.get(&lab_ref.url(None, k), None).await.ok() })
        .buffer_unordered(LOAD_CONCURRENCY)
        .collect()
        .await;
    let load_ms = t.elapsed().as_millis() as i64;
    let keys = lab.scan().await?;
    let pttls = lab.pttls(&keys).await?;
    let pairs: Vec<(String, i64)> = keys.into_iter().zip(pttls).collect();
    let (v, mut evidence) = decide(&pairs, load_ms);
    evidence["load_phase"] = json!({
        "requests": answers.len(),
        "ok": answers.iter().filter(|a| **a).count(),
        "ms": load_ms,
    });
    let raw = json!(pairs.iter().map(|(k, t)| json!([k, t])).collect::<Vec<_>>());
    Ok(CheckResult::new("ttl", v, evidence, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn keys(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|(k, t)| (k.to_string(), *t)).collect()
    }

    #[test]
    fn digits_become_n() {
        assert_eq!(pattern("app:item:42"), "app:item:{n}");
        assert_eq!(pattern("u7:x12y3"), "u{n}:x{n}y{n}");
    }

    #[test]
    fn a_key_without_expiry_fails_by_pattern() {
        let k = keys(&[
            ("app:item:1", 5000),
            ("app:seen:1", -1),
            ("app:seen:2", -1),
            ("app:item:2", 7000),
        ]);
        let (v, e) = decide(&k, 100);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.reason, "2 of 4 keys have no expiry: app:seen:{n} (2)");
        assert_eq!(e["without_expiry"][0]["examples"][1], "app:seen:2");
    }

    #[test]
    fn keys_expiring_together_pass_with_a_warning() {
        let k: Vec<(String, i64)> = (0..20).map(|i| (format!("k:{i}"), 30_000 - i)).collect();
        let (v, e) = decide(&k, 50);
        assert_eq!(v.status, Status::Pass);
        assert!(v.reason.contains("no jitter (100%"), "{}", v.reason);
        assert!(e["warning"].is_string());
        let spread: Vec<(String, i64)> = (0..20)
            .map(|i| (format!("k:{i}"), 20_000 + i * 500))
            .collect();
        let (v, e) = decide(&spread, 50);
        assert_eq!(v.reason, "all 20 keys expire");
        assert!(e["warning"].is_null());
    }

    #[test]
    fn no_key_is_a_skip_and_the_share_is_the_densest_window() {
        assert_eq!(decide(&[], 10).0.status, Status::Skip);
        assert_eq!(together_share(&[1, 2, 3, 100], 5), 0.75);
    }
}
