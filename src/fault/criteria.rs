//! When a run with a shock counts as back: the criterion of the recovery verdict
//! (docs/survival.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

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

impl Default for RecoveryCriteria {
    fn default() -> Self {
        RecoveryCriteria {
            baseline_window: Dur(Duration::from_secs(2)),
            goodput: Percent(0.95),
            hit_points: 5.0,
            settle: Dur(Duration::from_secs(2)),
            observe: Dur(Duration::from_secs(10)),
        }
    }
}
