//! commands: what the app sent Redis over the audit, from INFO commandstats and errorstats
//! (not MONITOR: it halves Redis's throughput and never shows a command the server
//! rejected). A command the server rejected (unknown, wrong arguments, not in this version)
//! fails, and so does `KEYS`, `FLUSHALL`/`FLUSHDB` or a blocking command on the request path.
//! The tool's own commands (SCAN, PTTL, UNLINK, INFO, CLIENT PAUSE) are none of those.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::json;

use super::lab::Lab;
use super::{CheckResult, Verdict};

/// Commands that scan or wipe the whole keyspace, or block the connection.
pub const FLAGGED: &[(&str, &str)] = &[
    ("keys", "scans the whole keyspace, blocking Redis"),
    ("flushall", "wipes every database"),
    ("flushdb", "wipes the database"),
    ("blpop", "blocks"),
    ("brpop", "blocks"),
    ("brpoplpush", "blocks"),
    ("blmove", "blocks"),
    ("blmpop", "blocks"),
    ("bzpopmin", "blocks"),
    ("bzpopmax", "blocks"),
    ("bzmpop", "blocks"),
    ("wait", "blocks"),
    ("waitaof", "blocks"),
];

/// Calls, rejected calls and failed calls of one command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub calls: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// What INFO says at one moment: commandstats by command, errorstats by error code.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub commands: BTreeMap<String, Calls>,
    pub errors: BTreeMap<String, u64>,
    /// Connections accepted (INFO stats total_connections_received).
    pub connections: u64,
}

/// `cmdstat_get:calls=3,usec=…,rejected_calls=0,failed_calls=0` and
/// `errorstat_ERR:count=2` lines (and INFO stats's connections) into a snapshot.
pub fn parse(
    commandstats: &BTreeMap<String, String>,
    errorstats: &BTreeMap<String, String>,
    stats: &BTreeMap<String, String>,
) -> Snapshot {
    let field = |v: &str, k: &str| {
        v.split(',')
            .filter_map(|p| p.split_once('='))
            .find(|(n, _)| *n == k)
            .and_then(|(_, x)| x.parse().ok())
            .unwrap_or(0u64)
    };
    Snapshot {
        commands: commandstats
            .iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("cmdstat_")?;
                Some((
                    name.to_string(),
                    Calls {
                        calls: field(v, "calls"),
                        rejected: field(v, "rejected_calls"),
                        failed: field(v, "failed_calls"),
                    },
                ))
            })
            .collect(),
        errors: errorstats
            .iter()
            .filter_map(|(k, v)| {
                Some((k.strip_prefix("errorstat_")?.to_string(), field(v, "count")))
            })
            .collect(),
        connections: stats
            .get("total_connections_received")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}

/// The audit's total: summed over the spans between restarts of Redis (a restart zeroes
/// INFO's counters).
#[derive(Debug, Default)]
pub struct Tally {
    base: Option<Snapshot>,
    pub sum: Snapshot,
    /// Spans whose end could not be read.
    pub lost_spans: u32,
}

impl Tally {
    /// Add `to - from` to the sum.
    pub fn add(&mut self, from: &Snapshot, to: &Snapshot) {
        for (k, c) in &to.commands {
            let b = from.commands.get(k).copied().unwrap_or_default();
            let e = self.sum.commands.entry(k.clone()).or_default();
            e.calls += c.calls.saturating_sub(b.calls);
            e.rejected += c.rejected.saturating_sub(b.rejected);
            e.failed += c.failed.saturating_sub(b.failed);
        }
        for (k, n) in &to.errors {
            *self.sum.errors.entry(k.clone()).or_default() +=
                n.saturating_sub(from.errors.get(k).copied().unwrap_or(0));
        }
        self.sum.connections += to.connections.saturating_sub(from.connections);
    }

    /// INFO now; retried for a while, as the first commands after a restart of Redis find
    /// the tool's connection still reconnecting.
    async fn read(lab: &Lab) -> Option<Snapshot> {
        for _ in 0..20 {
            if let (Ok(c), Ok(e), Ok(st)) = (
                lab.info("commandstats").await,
                lab.info("errorstats").await,
                lab.info("stats").await,
            ) {
                return Some(parse(&c, &e, &st));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        None
    }

    /// Open a span: now.
    pub async fn begin(&mut self, lab: &Lab) {
        self.base = Tally::read(lab).await;
        if self.base.is_none() {
            self.lost_spans += 1;
        }
    }

    /// Close the span: what happened since `begin` is added.
    pub async fn close(&mut self, lab: &Lab) {
        if let Some(b) = self.base.take() {
            match Tally::read(lab).await {
                Some(now) => self.add(&b, &now),
                None => self.lost_spans += 1,
            }
        }
    }
}

/// Client libraries (redis-rs, redis-py, go-redis …) send `CLIENT SETINFO LIB-NAME` and
/// `LIB-VER` on every new connection and ignore the answer; a Redis before 7.2 rejects both
/// as unknown, and errorstats cannot tell them from the app's own unknown commands. So on
/// such a server two errors per connection accepted are not counted.
pub const HANDSHAKE_ERRORS_PER_CONNECTION: u64 = 2;

/// Whether a Redis of this version (`7.0.15`) rejects `CLIENT SETINFO`.
pub fn rejects_setinfo(version: &str) -> bool {
    let mut p = version.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    let (major, minor) = (p.next().unwrap_or(0), p.next().unwrap_or(0));
    (major, minor) < (7, 2)
}

/// The verdict over the audit's sum; `handshake_allowance`: errors not counted (above).
pub fn decide(sum: &Snapshot, handshake_allowance: u64) -> Verdict {
    let mut bad = Vec::new();
    for (name, why) in FLAGGED {
        if let Some(c) = sum.commands.get(*name).filter(|c| c.calls > 0) {
            bad.push(format!("{} ×{} ({why})", name.to_uppercase(), c.calls));
        }
    }
    let mut rejected_total = 0;
    for (name, c) in &sum.commands {
        if c.rejected > 0 {
            bad.push(format!("{} rejected ×{}", name.to_uppercase(), c.rejected));
        }
        rejected_total += c.rejected + c.failed;
    }
    // An unknown command has no commandstats line: it shows only in errorstats.
    let errors: u64 = sum.errors.values().sum();
    let unknown = errors
        .saturating_sub(rejected_total)
        .saturating_sub(handshake_allowance);
    if unknown > 0 {
        bad.push(format!(
            "{unknown} command(s) rejected as unknown (errorstats: {})",
            sum.errors
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !bad.is_empty() {
        return Verdict::fail(bad.join("; "));
    }
    let calls: u64 = sum.commands.values().map(|c| c.calls).sum();
    Verdict::pass(format!(
        "{calls} commands of {} kinds, none rejected, no KEYS, FLUSH* or blocking command",
        sum.commands.values().filter(|c| c.calls > 0).count()
    ))
}

pub async fn check(lab: &Lab, tally: &mut Tally) -> Result<CheckResult> {
    tally.close(lab).await;
    let version = lab
        .info("server")
        .await
        .ok()
        .and_then(|i| i.get("redis_version").cloned())
        .unwrap_or_default();
    let allowance = if rejects_setinfo(&version) {
        tally.sum.connections * HANDSHAKE_ERRORS_PER_CONNECTION
    } else {
        0
    };
    let v = decide(&tally.sum, allowance);
    let mut top: Vec<(&String, &Calls)> = tally
        .sum
        .commands
        .iter()
        .filter(|(_, c)| c.calls > 0)
        .collect();
    top.sort_by_key(|c| std::cmp::Reverse(c.1.calls));
    let evidence = json!({
        "source": "INFO commandstats and errorstats, summed over the audit (across Redis restarts); the tool's own SCAN, PTTL, UNLINK, INFO and CLIENT included",
        "commands": top.iter().take(12).map(|(k, c)| json!({"command": k, "calls": c.calls, "rejected": c.rejected, "failed": c.failed})).collect::<Vec<_>>(),
        "errors": tally.sum.errors.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect::<BTreeMap<_, _>>(),
        "spans_unread": tally.lost_spans,
        "redis_version": version,
        "connections_accepted": tally.sum.connections,
        "handshake_errors_not_counted": allowance,
    });
    let raw = json!(tally.sum.commands.iter().map(|(k, c)| json!({"command": k, "calls": c.calls, "rejected": c.rejected, "failed": c.failed})).collect::<Vec<_>>());
    Ok(CheckResult::new("commands", v, evidence, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn map(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn info_lines_parse_and_spans_add_up() {
        let a = parse(
            &map(&[(
                "cmdstat_get",
                "calls=3,usec=9,usec_per_call=3.00,rejected_calls=0,failed_calls=0",
            )]),
            &map(&[]),
            &map(&[("total_connections_received", "4")]),
        );
        let b = parse(
            &map(&[
                (
                    "cmdstat_get",
                    "calls=10,usec=30,rejected_calls=0,failed_calls=1",
                ),
                (
                    "cmdstat_keys",
                    "calls=2,usec=5,rejected_calls=0,failed_calls=0",
                ),
            ]),
            &map(&[("errorstat_WRONGTYPE", "count=1")]),
            &map(&[("total_connections_received", "7")]),
        );
        let mut t = Tally::default();
        t.add(&a, &b);
        t.add(&Snapshot::default(), &a);
        assert_eq!(
            t.sum.commands["get"],
            Calls {
                calls: 10,
                rejected: 0,
                failed: 1
            }
        );
        assert_eq!(t.sum.errors["WRONGTYPE"], 1);
        assert_eq!(t.sum.connections, 7);
        let v = decide(&t.sum, 0);
        assert_eq!(v.status, Status::Fail);
        assert!(v.reason.starts_with("KEYS ×2"), "{}", v.reason);
    }

    #[test]
    fn rejected_and_unknown_commands_fail_failed_ones_do_not() {
        let mut s = Snapshot::default();
        s.commands.insert(
            "get".into(),
            Calls {
                calls: 5,
                rejected: 0,
                failed: 1,
            },
        );
        s.errors.insert("NOSCRIPT".into(), 1);
        assert_eq!(decide(&s, 0).status, Status::Pass);
        s.errors.insert("ERR".into(), 2);
        let v = decide(&s, 0);
        assert!(
            v.reason.contains("2 command(s) rejected as unknown"),
            "{}",
            v.reason
        );
        // A reconnection's CLIENT SETINFO on Redis 7.0 is not the app's doing.
        assert_eq!(decide(&s, 2).status, Status::Pass);
        assert!(rejects_setinfo("7.0.15"));
        assert!(!rejects_setinfo("7.2.4"));
        assert!(!rejects_setinfo("8.0.0"));
        s.errors.remove("ERR");
        s.commands.insert(
            "getex".into(),
            Calls {
                calls: 0,
                rejected: 3,
                failed: 0,
            },
        );
        s.errors.insert("ERR".into(), 3);
        let v = decide(&s, 0);
        assert_eq!(v.reason, "GETEX rejected ×3");
    }
}
