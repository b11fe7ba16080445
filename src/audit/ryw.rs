//! read-your-write: a read right after an update returns the new value. For `--rounds` keys
//! one after the other: read (fills the cache), update (`--update`, `--update-body`), read at
//! once, which must show `--expect`. Then on as many fresh keys with three readers racing the
//! one writer (the seed's race): of the reads that started after the update completed, the
//! share that still showed the old value must not pass `--stale-after-update-max`.
//!
//! A pass must show that the check could have failed: the bug it exists for (the entry
//! deleted, then the row updated) lives *inside* the update, so the reads that count as proof
//! are those the app answered while the update was in flight — sent after the update was sent
//! and answered before its answer. None of them, and the check is SKIP, never PASS.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use super::lab::Lab;
use super::{CheckResult, Settings, Verdict};

/// Readers racing each update, as in the seed's experiment.
const READERS: usize = 3;
/// How long the readers go on after the update completed.
const RACE_AFTER: Duration = Duration::from_millis(200);
/// How long the readers run before the update is sent.
const RACE_BEFORE: Duration = Duration::from_millis(20);

/// What the rounds saw.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    /// Sequential rounds whose update was accepted, and of them those whose read at once
    /// did not show the new value.
    pub sequential: u64,
    pub sequential_stale: u64,
    /// Racing rounds: reads started after the update completed, and of them the stale.
    pub after_update: u64,
    pub stale_after_update: u64,
    /// Racing rounds: reads sent after the update was sent and answered before its answer —
    /// served by the app while the update was in flight.
    pub during_update: u64,
    /// Updates answered with something other than 2xx (status, or none).
    pub updates_refused: u64,
}

pub fn decide(t: &Tally, max_share: f64) -> Verdict {
    if t.sequential + t.after_update == 0 {
        return Verdict::skip(format!(
            "the update was never accepted ({} refused): check --update and --update-body",
            t.updates_refused
        ));
    }
    if t.sequential_stale > 0 {
        return Verdict::fail(format!(
            "{} of {} reads right after an update returned the old value",
            t.sequential_stale, t.sequential
        ));
    }
    let share = if t.after_update == 0 {
        0.0
    } else {
        t.stale_after_update as f64 / t.after_update as f64
    };
    if share > max_share {
        return Verdict::fail(format!(
            "with readers racing the update, {} of {} reads after it completed ({:.1}%) returned the old value (--stale-after-update-max {max_share})",
            t.stale_after_update,
            t.after_update,
            share * 100.0
        ));
    }
    if t.during_update == 0 {
        return Verdict::skip(
            "could not race the update: the app answered no read while it was in flight (sent after the update was sent and answered before its answer), so a delete-then-update bug would go unseen",
        );
    }
    Verdict::pass(format!(
        "{} sequential reads after an update and {} raced ones all showed the new value ({} reads answered while the update was in flight){}",
        t.sequential,
        t.after_update,
        t.during_update,
        if t.stale_after_update > 0 {
            format!(" but {} (within the allowed share)", t.stale_after_update)
        } else {
            String::new()
        }
    ))
}

/// What one update writes: a token (`{value}`) and a decimal integer (`{num}`, for an app whose
/// update takes a number, e.g. `{"price": {num}}`), both unique to the update.
struct Written {
    value: String,
    num: u64,
}

impl Written {
    /// The `i`-th update of the audit; `base` is drawn once per audit, so two audits of one
    /// app write different numbers too. Ten digits each, so one never contains another.
    fn new(prefix: &str, i: u64, base: u64) -> Written {
        Written {
            value: format!("{prefix}{i}x{:08x}", rand::random::<u32>()),
            num: base + i,
        }
    }
}

/// The first number of this audit's updates: ten digits, room for a million updates.
fn num_base() -> u64 {
    1_000_000_000 + u64::from(rand::random::<u32>() % 8_000) * 1_000_000
}

fn fill(template: &str, key: u64, w: &Written) -> String {
    template
        .replace("{key}", &key.to_string())
        .replace("{value}", &w.value)
        .replace("{num}", &w.num.to_string())
}

async fn update(lab: &Lab, s: &Settings, key: u64, value: &Written) -> bool {
    let Some((method, path)) = &s.update else {
        return false;
    };
    let url = format!("{}{}", lab.app.origin, fill(path, key, value));
    lab.send(
        method.clone(),
        &url,
        Some(fill(&s.update_body, key, value)),
        None,
    )
    .await
    .ok()
}

/// A latency for the evidence: ms to two decimals.
fn round2(ms: f64) -> f64 {
    (ms * 100.0).round() / 100.0
}

/// What one racing round saw.
struct Race {
    /// Reads sent after the update's answer, and of them those that showed the old value.
    after: u64,
    stale: u64,
    /// Reads sent after the update was sent and answered before its answer.
    during: u64,
    /// The update's own latency, ms.
    update_ms: f64,
}

/// One read of a racing reader: when it was sent, when answered, whether it showed the write.
type Read = (Instant, Instant, bool);

/// Three readers reading `url` in a loop from `RACE_BEFORE` before the update until
/// `RACE_AFTER` after its answer; None when the update was refused. Every read is timed and
/// placed against the update's own send and answer afterwards, once both are known.
async fn race(
    lab: &Lab,
    s: &Settings,
    key: u64,
    url: &str,
    value: &Written,
    expect: &str,
) -> Option<Race> {
    let sent: OnceLock<Instant> = OnceLock::new();
    let done: OnceLock<Instant> = OnceLock::new();
    let writer_gone = AtomicBool::new(false);
    let reader = || async {
        let mut reads: Vec<Read> = Vec::with_capacity(256);
        loop {
            let started = Instant::now();
            let a = lab.get(url, None).await;
            reads.push((started, Instant::now(), a.ok() && a.body.contains(expect)));
            if writer_gone.load(Relaxed) || done.get().is_some_and(|d| d.elapsed() >= RACE_AFTER) {
                return reads;
            }
        }
    };
    let writer = async {
        tokio::time::sleep(RACE_BEFORE).await;
        let _ = sent.set(Instant::now());
        let ok = update(lab, s, key, value).await;
        if ok {
            let _ = done.set(Instant::now());
        } else {
            writer_gone.store(true, Relaxed);
        }
        ok
    };
    let (ok, a, b, c) = tokio::join!(writer, reader(), reader(), reader());
    let (Some(&sent), Some(&done), true) = (sent.get(), done.get(), ok) else {
        return None;
    };
    let mut r = Race {
        after: 0,
        stale: 0,
        during: 0,
        update_ms: done.duration_since(sent).as_secs_f64() * 1e3,
    };
    for &(started, answered, fresh) in a.iter().chain(&b).chain(&c) {
        if started >= done {
            r.after += 1;
            r.stale += u64::from(!fresh);
        } else if started >= sent && answered < done {
            r.during += 1;
        }
    }
    Some(r)
}

pub async fn check(lab: &mut Lab, s: &Settings) -> Result<CheckResult> {
    if s.update.is_none() {
        return Ok(CheckResult::new(
            "read-your-write",
            Verdict::skip("no --update 'METHOD PATH': the audit does not know how the app writes"),
            json!({}),
            Value::Null,
        ));
    }
    let lab = &*lab;
    let mut t = Tally::default();
    let mut raw = Vec::new();
    let mut update_ms: Vec<f64> = Vec::new();
    let base = s.key_base("read-your-write");
    let nums = num_base();
    for r in 0..u64::from(s.rounds) {
        let key = base + r;
        let url = lab.url(None, key);
        let value = Written::new("rw", r, nums);
        let before = lab.get(&url, None).await;
        if !update(lab, s, key, &value).await {
            t.updates_refused += 1;
            continue;
        }
        let after = lab.get(&url, None).await;
        let fresh = after.ok() && after.body.contains(&fill(&s.expect, key, &value));
        t.sequential += 1;
        t.sequential_stale += u64::from(!fresh);
        raw.push(json!({"round": r, "key": key, "raced": false, "before_status": before.status, "after_status": after.status, "fresh": fresh}));
    }
    for r in 0..u64::from(s.rounds) {
        let key = base + u64::from(s.rounds) + r;
        let url = lab.url(None, key);
        let value = Written::new("rr", u64::from(s.rounds) + r, nums);
        let expect = fill(&s.expect, key, &value);
        lab.get(&url, None).await;
        let Some(race) = race(lab, s, key, &url, &value, &expect).await else {
            t.updates_refused += 1;
            continue;
        };
        t.after_update += race.after;
        t.stale_after_update += race.stale;
        t.during_update += race.during;
        update_ms.push(race.update_ms);
        raw.push(json!({"round": r, "key": key, "raced": true, "reads_after_update": race.after, "stale": race.stale, "reads_during_update": race.during, "update_ms": round2(race.update_ms)}));
    }
    let v = decide(&t, s.stale_max);
    let evidence = json!({
        "source": "HTTP answers: reads of --target around the app's own update route",
        "sequential_reads": t.sequential,
        "sequential_stale": t.sequential_stale,
        "raced_reads_after_update": t.after_update,
        "raced_stale": t.stale_after_update,
        "raced_reads_during_update": t.during_update,
        "raced_update_ms": super::lab::spread(&update_ms).map(|(mean, p50, p95)| json!({"mean": round2(mean), "p50": round2(p50), "p95": round2(p95)})),
        "stale_share": if t.after_update > 0 { Some(t.stale_after_update as f64 / t.after_update as f64) } else { None },
        "readers_per_update": READERS,
        "updates_refused": t.updates_refused,
    });
    Ok(CheckResult::new("read-your-write", v, evidence, json!(raw)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    #[test]
    fn stale_reads_fail_above_the_share() {
        let clean = Tally {
            sequential: 10,
            after_update: 300,
            during_update: 12,
            ..Tally::default()
        };
        assert_eq!(decide(&clean, 0.0).status, Status::Pass);
        let raced = Tally {
            stale_after_update: 30,
            ..clean.clone()
        };
        let v = decide(&raced, 0.0);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reason
                .contains("30 of 300 reads after it completed (10.0%)"),
            "{}",
            v.reason
        );
        assert_eq!(decide(&raced, 0.2).status, Status::Pass);
        let seq = Tally {
            sequential_stale: 1,
            ..clean
        };
        assert_eq!(decide(&seq, 1.0).status, Status::Fail);
        assert_eq!(
            decide(
                &Tally {
                    updates_refused: 3,
                    ..Tally::default()
                },
                0.0
            )
            .status,
            Status::Skip
        );
    }

    /// A pass needs a read the app answered while the update was in flight: without one the
    /// check could not have seen a delete-then-update bug.
    #[test]
    fn no_read_during_the_update_is_a_skip_not_a_pass() {
        let unraced = Tally {
            sequential: 10,
            after_update: 300,
            ..Tally::default()
        };
        let v = decide(&unraced, 0.0);
        assert_eq!(v.status, Status::Skip);
        assert!(
            v.reason.starts_with("could not race the update"),
            "{}",
            v.reason
        );
        // A stale read still fails: it is proof enough.
        let stale = Tally {
            stale_after_update: 1,
            ..unraced
        };
        assert_eq!(decide(&stale, 0.0).status, Status::Fail);
    }
}
