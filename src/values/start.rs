//! The start state a run asks for (`--start`): a value of the scenario, read by the warm
//! start that makes it and by the results that record it.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// What the cache holds when the measured traffic starts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// What a long-running service would hold under this workload: each key present with the
    /// probability its request rate and TTL imply, its remaining TTL spread (docs/design.md).
    Steady,
    /// Empty: every key's first request misses (a cold start).
    Cold,
    /// Every key present, all written at the same instant: the mass expiry TTL jitter is for.
    Synchronized,
}

impl Start {
    /// The name `--start` takes and results write.
    pub fn name(self) -> &'static str {
        match self {
            Start::Steady => "steady",
            Start::Cold => "cold",
            Start::Synchronized => "synchronized",
        }
    }
}
