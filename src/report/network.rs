//! A network fault in the terminal summary: what the proxy did to whom, what the requests got
//! meanwhile, and the figures that tell a partition from a crash (deadlines waited, resets,
//! reconnects).

use std::fmt::Write;

use crate::fault::FaultKind;
use crate::fault::report::{FaultReport, NetFault};
use crate::results::RunResult;

/// One line per instance when a fault struck some instances and not others (a network fault
/// with `instance=`, a holder-crash): the struck ones read against the rest.
pub(super) fn instances(o: &mut String, r: &RunResult) {
    let some = r.faults.iter().any(|f| {
        f.holder.is_some()
            || f.net
                .as_ref()
                .is_some_and(|n| n.instances.len() < r.instances.len())
    });
    if !some || r.instances.len() < 2 {
        return;
    }
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for (n, i) in r.instances.iter().enumerate() {
        let _ = writeln!(
            o,
            "  {:<9} {}: requests {}  hits {}  stale {}  errors {}  timed out {}  p50 {} ms  p99 {} ms",
            if n == 0 { "instance" } else { "" },
            i.instance,
            i.requests,
            i.hits,
            i.stale,
            i.errors,
            i.timed_out,
            ms(i.p50_ms),
            ms(i.p99_ms),
        );
    }
}

/// Two lines (three with a note) for the network fault `f` that did `n`.
pub(super) fn fault(o: &mut String, f: &FaultReport, n: &NetFault) {
    let secs = |ms: u64| format!("{:.2} s", ms as f64 / 1000.0);
    let what = match f.kind {
        FaultKind::Partition => "every byte held (partition)".to_string(),
        FaultKind::Reset => "every connection reset".to_string(),
        FaultKind::Latency => format!("round trip +{:.2} ms", n.added_rtt_ms.unwrap_or_default()),
        FaultKind::SlowClose => format!("closes held {} ms", n.close_delay_ms.unwrap_or_default()),
        _ => format!(
            "at most {} bytes/s each way",
            n.rate_bytes_per_sec.unwrap_or_default()
        ),
    };
    let who = if n.instances.is_empty() {
        "no instance".to_string()
    } else {
        let list: Vec<String> = n.instances.iter().map(|i| i.to_string()).collect();
        format!("instance {}", list.join(","))
    };
    let s = &f.served_during;
    let _ = writeln!(
        o,
        "  fault     {} at {} for {}: {what} between {who} and {}; requests meanwhile {} ({} hits, {} stale, {} errors)",
        f.kind,
        secs(f.at_ms),
        secs(f.down_ms),
        match n.server.as_str() {
            "both" => "both servers",
            "redis" => "Redis",
            _ => "Postgres",
        },
        s.requests,
        s.hits,
        s.stale,
        s.errors,
    );
    let _ = writeln!(
        o,
        "            Redis commands that waited their whole deadline {}, other Redis errors {}, db errors {}; connections reset {}, reopened {}; first reply through after the heal {}; db calls in the {} ms after it {}",
        n.redis_deadlines_waited,
        f.redis_errors_during
            .saturating_sub(n.redis_deadlines_waited),
        n.db_errors,
        n.resets,
        n.reconnects,
        f.recovered_ms.map_or_else(
            || "- (none in the run)".to_string(),
            |ms| format!("after {ms} ms")
        ),
        f.recovery_window_ms,
        f.recovery_stampede,
    );
    if let Some(note) = &f.note {
        let _ = writeln!(o, "            note: {note}");
    }
}
