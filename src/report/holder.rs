//! A holder-crash in the terminal summary: which instance died holding what, how long its
//! locks blocked their keys (Redis's PTTL) and what the requests that waited on them got.

use std::fmt::Write;

use crate::fault::report::{FaultReport, HolderCrash};

/// Two lines (three with a note) for the fault `f` that did `h`.
pub(super) fn fault(o: &mut String, f: &FaultReport, h: &HolderCrash) {
    let secs = |ms: u64| format!("{:.2} s", ms as f64 / 1000.0);
    let back = if f.down_ms > 0 {
        format!("back (fresh) after {}", secs(f.down_ms))
    } else {
        "not back in the run".to_string()
    };
    let _ = writeln!(
        o,
        "  fault     holder-crash at {}: instance {} died holding {} locks ({} ms after the fault's time), {back}; {} requests in flight on it cut off (errors)",
        secs(f.at_ms),
        h.instance,
        h.locks_held,
        h.waited_for_holder_ms,
        h.requests_cut,
    );
    let got: Vec<String> = h
        .waiters_got
        .iter()
        .map(|(o, n)| format!("{o} {n}"))
        .collect();
    let _ = writeln!(
        o,
        "            {} keys blocked until their lease ran out, the longest {} ms (Redis PTTL), taken again after {}; {} requests waited on them, the longest {} ms; they got: {}; db calls meanwhile {}",
        h.keys_blocked,
        h.blocked_ms_max,
        h.retaken_ms_max
            .map_or_else(|| "- (not in the run)".to_string(), |ms| format!("{ms} ms")),
        h.waiters,
        h.waited_ms_max,
        if got.is_empty() {
            "-".to_string()
        } else {
            got.join(", ")
        },
        f.db_calls_during,
    );
    if let Some(n) = &f.note {
        let _ = writeln!(o, "            note: {n}");
    }
}
