//! When a run with a shock counts as back: the criterion of the recovery verdict
//! (docs/survival.md).

use serde::{Deserialize, Serialize};

use super::FaultSpec;
use crate::values::{Dur, Percent};

/// When a run with a shock counts as back (docs/survival.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveryCriteria {
    /// `--baseline-window`: the steady seconds before the first shock the run must get back to.
    pub baseline_window: Dur,
    /// `--recovery-goodput`: the share of the baseline's goodput a second must reach.
    pub goodput: Percent,
    /// `--recovery-hit-points`: how many points under the baseline's hit rate a second may be.
    pub hit_points: f64,
    /// `--settle`: how long both must hold.
    pub settle: Dur,
    /// `--observe`: the least time the window must leave after the last shock for a verdict.
    pub observe: Dur,
}

/// Whether a run with these faults can have a verdict: a shock, a baseline before it, and
/// `--observe` after it. Err says why not.
pub fn verdict_possible(
    faults: &[FaultSpec],
    duration: Dur,
    c: &RecoveryCriteria,
) -> Result<(), String> {
    let (Some(first), Some(end)) = (
        faults.iter().map(|f| f.at.0).min(),
        faults.iter().map(|f| f.ends_at()).max(),
    ) else {
        return Err("the run has no shock: add one (--fault drop-cache@AT, --fault kill-redis@AT+FOR, --fault slow-db@AT+FOR, --fault spike@AT+FOR, …)".to_string());
    };
    if first < c.baseline_window.0 {
        return Err(format!(
            "the first shock at {} leaves no baseline of {} before it: strike later or shorten --baseline-window",
            Dur(first),
            c.baseline_window
        ));
    }
    let left = duration.0.saturating_sub(end);
    if left < c.observe.0 {
        return Err(format!(
            "the window leaves {} after the last shock ends at {}, less than --observe {}: lengthen --duration to at least {}, or shorten --observe",
            Dur(left),
            Dur(end),
            c.observe,
            Dur(end + c.observe.0)
        ));
    }
    Ok(())
}
