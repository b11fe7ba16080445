//! `stampede audit`: the cache review checklist (docs/audit.md) run against a real app. Each
//! check gathers its evidence from the servers (SCAN/TTL, INFO, pg_stat_statements) and from
//! the app's HTTP answers through [`lab::Lab`], then hands it to a pure decision function of
//! its own module, unit-tested on its own. This module holds what the checks share: their
//! names, the verdict, the settings resolved from the flags, and the order they run in.

pub mod breakeven;
pub mod card;
pub mod commands;
pub mod herd;
pub mod lab;
pub mod outage;
pub mod ryw;
pub mod settings;
pub mod ttl;
pub mod users;

use std::time::Instant;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::EnvError;
pub use settings::Settings;

/// The checks, in the order they run and are printed.
pub const CHECKS: &[&str] = &[
    "ttl",
    "users",
    "read-your-write",
    "outage",
    "herd",
    "break-even",
    "commands",
];

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// What a decision function hands back: the status and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: Status,
    pub reason: String,
}

impl Verdict {
    pub fn pass(reason: impl Into<String>) -> Verdict {
        Verdict {
            status: Status::Pass,
            reason: reason.into(),
        }
    }
    pub fn fail(reason: impl Into<String>) -> Verdict {
        Verdict {
            status: Status::Fail,
            reason: reason.into(),
        }
    }
    pub fn skip(reason: impl Into<String>) -> Verdict {
        Verdict {
            status: Status::Skip,
            reason: reason.into(),
        }
    }
}

/// One line of the report card, as `audit.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub name: &'static str,
    pub status: Status,
    pub reason: String,
    /// The figures the verdict rests on, each named with where it came from.
    pub evidence: Value,
    /// The check's raw observations (every answer's latency, every key's TTL …), written to
    /// `DIR/checks/<name>.json`, not to the card.
    #[serde(skip)]
    pub raw: Value,
    /// Wall time of the check, ms.
    pub ms: u64,
}

impl CheckResult {
    pub fn new(name: &'static str, v: Verdict, evidence: Value, raw: Value) -> CheckResult {
        CheckResult {
            name,
            status: v.status,
            reason: v.reason,
            evidence,
            raw,
            ms: 0,
        }
    }
}

/// The whole audit, as `audit.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    /// The target, its credentials redacted.
    pub target: String,
    /// "managed" or "external".
    pub servers: &'static str,
    /// The thresholds and inputs in force, by flag.
    pub thresholds: Vec<(String, String)>,
    pub checks: Vec<CheckResult>,
    /// Wall time of the whole audit, servers and app included, ms.
    pub ms: u64,
}

impl Audit {
    /// Whether the audit fails: a FAIL, or a SKIP of a check `--require` names.
    pub fn failed(&self, require: &[String]) -> bool {
        self.checks.iter().any(|c| {
            c.status == Status::Fail
                || (c.status == Status::Skip && require.iter().any(|r| r == c.name))
        })
    }
}

/// Run the selected checks against the app, in order, on one lab (servers, schema, app).
pub async fn run(
    s: &Settings,
    shutdown: CancellationToken,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Audit> {
    let started = Instant::now();
    let mut lab = lab::Lab::open(s, say).await?;
    let result = async {
        let mut checks = Vec::new();
        let mut cmd_stats = commands::Tally::default();
        cmd_stats.begin(&lab).await;
        for &name in CHECKS {
            if shutdown.is_cancelled() {
                return Err(EnvError("interrupted: the audit was stopped".to_string()).into());
            }
            if !s.selected(name) {
                continue;
            }
            say(&format!("check {name}…"));
            let t = Instant::now();
            let mut r = match name {
                "ttl" => ttl::check(&mut lab, s).await?,
                "users" => users::check(&mut lab, s).await?,
                "read-your-write" => ryw::check(&mut lab, s).await?,
                "outage" => outage::check(&mut lab, s, &mut cmd_stats).await?,
                "herd" => herd::check(&mut lab, s).await?,
                "break-even" => breakeven::check(&mut lab, s, say).await?,
                _ => commands::check(&lab, &mut cmd_stats).await?,
            };
            r.ms = t.elapsed().as_millis() as u64;
            say(&format!(
                "  {} {} ({} ms)",
                r.status.label(),
                r.reason,
                r.ms
            ));
            checks.push(r);
        }
        if let Some(st) = lab.app_exited() {
            return Err(EnvError(format!(
                "the app exited during the audit ({st}): its verdicts would not be its own; see its log {}",
                lab.app_log()
            ))
            .into());
        }
        Ok::<_, anyhow::Error>(checks)
    }
    .await;
    lab.close().await;
    Ok(Audit {
        target: crate::redact::url(&s.target.url),
        servers: if s.managed_redis {
            "managed"
        } else {
            "external"
        },
        thresholds: s.shown(),
        checks: result?,
        ms: started.elapsed().as_millis() as u64,
    })
}
