//! The report card: one line per check (status, name, reason), the evidence under it, the
//! thresholds in force; for the terminal and, as Markdown, for a CI summary.

use std::fmt::Write as _;

use serde_json::Value;

use super::{Audit, Status};

/// `value` compact, for one evidence line.
fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn totals(a: &Audit) -> String {
    let n = |s: Status| a.checks.iter().filter(|c| c.status == s).count();
    format!(
        "{} passed, {} failed, {} skipped",
        n(Status::Pass),
        n(Status::Fail),
        n(Status::Skip)
    )
}

fn thresholds(a: &Audit) -> String {
    a.thresholds
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join("  ")
}

/// The card for the terminal.
pub fn text(a: &Audit) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "audit of {} ({} servers, {:.1} s)",
        a.target,
        a.servers,
        a.ms as f64 / 1e3
    );
    let _ = writeln!(o, "thresholds: {}", thresholds(a));
    for c in &a.checks {
        let _ = writeln!(o, "\n  {}  {:<16} {}", c.status.label(), c.name, c.reason);
        if let Value::Object(m) = &c.evidence {
            for (k, v) in m {
                if v.is_null() {
                    continue;
                }
                let _ = writeln!(o, "        {k}: {}", compact(v));
            }
        }
    }
    let _ = writeln!(o, "\n{}", totals(a));
    o
}

/// The card in Markdown (`audit.md`).
pub fn markdown(a: &Audit) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Cache audit of `{}`\n", a.target);
    let _ = writeln!(
        o,
        "{} servers, {:.1} s. {}.\n",
        a.servers,
        a.ms as f64 / 1e3,
        totals(a)
    );
    let _ = writeln!(o, "| check | status | reason |\n|---|---|---|");
    for c in &a.checks {
        let _ = writeln!(
            o,
            "| {} | **{}** | {} |",
            c.name,
            c.status.label(),
            c.reason.replace('|', "\\|")
        );
    }
    let _ = writeln!(o, "\nThresholds: `{}`\n", thresholds(a));
    for c in &a.checks {
        let _ = writeln!(
            o,
            "## {} — {}\n\n```json\n{}\n```\n",
            c.name,
            c.status.label(),
            serde_json::to_string_pretty(&c.evidence).unwrap_or_default()
        );
    }
    o
}
