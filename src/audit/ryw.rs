//! read-your-write: a read right after an update returns the new value. For `--rounds` keys
//! one after the other: read (fills the cache), update (`--update`, `--update-body`), read at
//! once, which must show `--expect`. Then on as many fresh keys with three readers racing the
//! one writer (the seed's race): of the reads that started after the update completed, the
//! share that still showed the old value must not pass `--stale-after-update-max`.

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
    Verdict::pass(format!(
        "{} sequential reads after an update and {} raced ones all showed the new value{}",
        t.sequential,
        t.after_update,
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
        let done: OnceLock<Instant> = OnceLock::new();
        let writer_gone = AtomicBool::new(false);
        let reader = || async {
            let mut after = (0u64, 0u64);
            loop {
                let started = Instant::now();
                let a = lab.get(&url, None).await;
                if let Some(d) = done.get()
                    && started >= *d
                {
                    after.0 += 1;
                    after.1 += u64::from(!(a.ok() && a.body.contains(&expect)));
                }
                if writer_gone.load(Relaxed)
                    || done.get().is_some_and(|d| d.elapsed() >= RACE_AFTER)
                {
                    return after;
                }
            }
        };
        let writer = async {
            tokio::time::sleep(RACE_BEFORE).await;
            let ok = update(lab, s, key, &value).await;
            if ok {
                let _ = done.set(Instant::now());
            } else {
                writer_gone.store(true, Relaxed);
            }
            ok
        };
        let (ok, a, b, c) = tokio::join!(writer, reader(), reader(), reader());
        if !ok {
            t.updates_refused += 1;
            continue;
        }
        let (n, stale) = (a.0 + b.0 + c.0, a.1 + b.1 + c.1);
        t.after_update += n;
        t.stale_after_update += stale;
        raw.push(
            json!({"round": r, "key": key, "raced": true, "reads_after_update": n, "stale": stale}),
        );
    }
    let v = decide(&t, s.stale_max);
    let evidence = json!({
        "source": "HTTP answers: reads of --target around the app's own update route",
        "sequential_reads": t.sequential,
        "sequential_stale": t.sequential_stale,
        "raced_reads_after_update": t.after_update,
        "raced_stale": t.stale_after_update,
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
}
