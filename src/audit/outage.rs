//! outage: with Redis killed for `--outage`, then paused as long with CLIENT PAUSE, every
//! answer must come within `--deadline` — fail-open (2xx from the database) and fail-fast
//! (an error status, quickly) both pass; a hang or a slow answer fails. Once Redis is back
//! after the kill, hits (INFO keyspace_hits) must resume within `--recover-within` without
//! the app being restarted: it reconnected by itself. Managed Redis only: stampede kills only
//! a Redis it started.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use super::commands::Tally as CommandTally;
use super::lab::{Lab, spread};
use super::{CheckResult, Settings, Verdict};

/// Clients asking the app during a fault, each one request after the other.
const CLIENTS: u64 = 4;
/// Keys the clients cycle over.
const KEYS: u64 = 10;
/// How often the recovery is looked at.
const RECOVERY_POLL: Duration = Duration::from_millis(50);

/// The answers during one fault.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phase {
    /// Answers with a status, and their latencies (ms).
    pub answered_ms: Vec<f64>,
    /// Requests that got no answer (refused, reset, past --http-timeout), and how long
    /// each took to fail (ms).
    pub unanswered_ms: Vec<f64>,
    /// Of the answers, those with a 2xx status (the app failed open).
    pub ok: u64,
}

impl Phase {
    fn slow(&self, deadline_ms: f64) -> usize {
        self.answered_ms
            .iter()
            .filter(|m| **m > deadline_ms)
            .count()
    }

    fn evidence(&self, deadline_ms: f64) -> Value {
        let s = spread(&self.answered_ms);
        let max = self
            .answered_ms
            .iter()
            .chain(&self.unanswered_ms)
            .copied()
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        json!({
            "requests": (self.answered_ms.len() + self.unanswered_ms.len()) as u64,
            "answered_2xx": self.ok,
            "answered_error_status": self.answered_ms.len() as u64 - self.ok,
            "unanswered": self.unanswered_ms.len(),
            "slower_than_deadline": self.slow(deadline_ms),
            "mean_ms": s.map(|x| round(x.0)),
            "p50_ms": s.map(|x| round(x.1)),
            "p95_ms": s.map(|x| round(x.2)),
            "max_ms": max.map(round),
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The verdict over both faults and the recovery (None: hits never resumed in the window).
pub fn decide(
    killed: &Phase,
    paused: &Phase,
    recovered_ms: Option<u64>,
    deadline: Duration,
    recover_within: Duration,
) -> Verdict {
    let dl = deadline.as_secs_f64() * 1e3;
    let mut bad = Vec::new();
    for (what, p) in [("killed", killed), ("paused", paused)] {
        let (slow, lost) = (p.slow(dl), p.unanswered_ms.len());
        if slow > 0 || lost > 0 {
            let worst = p
                .answered_ms
                .iter()
                .chain(&p.unanswered_ms)
                .copied()
                .fold(0.0, f64::max);
            bad.push(format!(
                "with Redis {what}, {} of {} requests {} (slowest {:.0} ms)",
                slow + lost,
                p.answered_ms.len() + lost,
                match (slow, lost) {
                    (_, 0) => format!(
                        "answered later than --deadline {}",
                        humantime::format_duration(deadline)
                    ),
                    (0, _) =>
                        "got no answer (a hang past --http-timeout, or the connection failed)"
                            .to_string(),
                    _ => format!(
                        "answered later than --deadline {} or not at all",
                        humantime::format_duration(deadline)
                    ),
                },
                worst,
            ));
        }
        if p.answered_ms.is_empty() && lost == 0 {
            bad.push(format!("with Redis {what}, no request completed"));
        }
    }
    match recovered_ms {
        Some(ms) if ms <= recover_within.as_millis() as u64 => {}
        Some(ms) => bad.push(format!(
            "hits resumed {ms} ms after Redis came back, later than --recover-within {}",
            humantime::format_duration(recover_within)
        )),
        None => bad.push(format!(
            "no hit within --recover-within {} of Redis coming back: the app did not reconnect (or stopped caching)",
            humantime::format_duration(recover_within)
        )),
    }
    if !bad.is_empty() {
        return Verdict::fail(bad.join("; "));
    }
    let how = |p: &Phase| {
        if p.ok as usize == p.answered_ms.len() {
            "failed open"
        } else if p.ok == 0 {
            "failed fast"
        } else {
            "failed open or fast"
        }
    };
    Verdict::pass(format!(
        "every answer within --deadline {} (killed: {}, paused: {}); hits resumed {} ms after Redis came back",
        humantime::format_duration(deadline),
        how(killed),
        how(paused),
        recovered_ms.unwrap_or(0)
    ))
}

/// Ask the app from `CLIENTS` clients, one request after the other each, for `d`.
async fn traffic(lab: &Lab, base: u64, d: Duration) -> Phase {
    let until = Instant::now() + d;
    let client = |c: u64| async move {
        let mut p = Phase::default();
        let mut i = c;
        while Instant::now() < until {
            let a = lab.get(&lab.url(None, base + i % KEYS), None).await;
            i += CLIENTS;
            match a.status {
                Some(_) => {
                    p.ok += u64::from(a.ok());
                    p.answered_ms.push(a.ms);
                }
                None => p.unanswered_ms.push(a.ms),
            }
        }
        p
    };
    let all = futures_util::future::join_all((0..CLIENTS).map(client)).await;
    let mut p = Phase::default();
    for x in all {
        p.answered_ms.extend(x.answered_ms);
        p.unanswered_ms.extend(x.unanswered_ms);
        p.ok += x.ok;
    }
    p
}

pub async fn check(lab: &mut Lab, s: &Settings, tally: &mut CommandTally) -> Result<CheckResult> {
    if !lab.redis_killable() {
        return Ok(CheckResult::new(
            "outage",
            Verdict::skip(
                "the app's Redis is external (--redis-url): give --allow-kill-external and --redis-restart-cmd CMD to let the audit shut it down (SHUTDOWN NOSAVE) and start it again",
            ),
            json!({}),
            Value::Null,
        ));
    }
    let base = s.key_base("outage");
    for k in 0..KEYS {
        lab.get(&lab.url(None, base + k), None).await;
    }
    // A killed Redis takes its counters with it: the commands check's tally is closed first.
    tally.close(lab).await;
    lab.kill_redis().await;
    let killed = traffic(lab, base, s.outage).await;
    lab.restart_redis().await?;
    tally.begin(lab).await;
    let back = Instant::now();
    let mut recovered_ms = None;
    while back.elapsed() < s.recover_within + Duration::from_secs(1) {
        lab.get(&lab.url(None, base), None).await;
        if lab.hits_misses().await.is_some_and(|(h, _)| h > 0) {
            recovered_ms = Some(back.elapsed().as_millis() as u64);
            break;
        }
        tokio::time::sleep(RECOVERY_POLL).await;
    }
    lab.pause_redis(s.outage).await?;
    let paused = traffic(lab, base, s.outage).await;
    let v = decide(&killed, &paused, recovered_ms, s.deadline, s.recover_within);
    let dl = s.deadline.as_secs_f64() * 1e3;
    let evidence = json!({
        "source": "HTTP answers' latencies from the audit's clients; recovery from INFO keyspace_hits",
        "clients": CLIENTS,
        "killed": killed.evidence(dl),
        "paused": paused.evidence(dl),
        "hits_resumed_after_ms": recovered_ms,
    });
    let raw = json!({
        "killed_answered_ms": killed.answered_ms,
        "killed_unanswered_ms": killed.unanswered_ms,
        "paused_answered_ms": paused.answered_ms,
        "paused_unanswered_ms": paused.unanswered_ms,
    });
    Ok(CheckResult::new("outage", v, evidence, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn phase(ms: &[f64], ok: u64, unanswered: usize) -> Phase {
        Phase {
            answered_ms: ms.to_vec(),
            ok,
            unanswered_ms: vec![5000.0; unanswered],
        }
    }

    const S1: Duration = Duration::from_secs(1);
    const S5: Duration = Duration::from_secs(5);

    #[test]
    fn quick_answers_pass_whether_open_or_fast() {
        let open = phase(&[20.0, 30.0], 2, 0);
        let fast = phase(&[2.0, 3.0], 0, 0);
        let v = decide(&open, &fast, Some(120), S1, S5);
        assert_eq!(v.status, Status::Pass);
        assert!(
            v.reason
                .contains("killed: failed open, paused: failed fast"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn a_slow_answer_a_hang_or_no_recovery_fails() {
        let ok = phase(&[20.0], 1, 0);
        let slow = phase(&[20.0, 2900.0], 2, 0);
        let v = decide(&ok, &slow, Some(100), S1, S5);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reason.contains("with Redis paused, 1 of 2 requests answered later than --deadline 1s (slowest 2900 ms)"),
            "{}",
            v.reason
        );
        assert_eq!(
            decide(&phase(&[], 0, 3), &ok, Some(1), S1, S5).status,
            Status::Fail
        );
        let v = decide(&ok, &ok, None, S1, S5);
        assert!(v.reason.contains("did not reconnect"), "{}", v.reason);
        assert_eq!(decide(&ok, &ok, Some(6000), S1, S5).status, Status::Fail);
    }
}
