//! What the parts of resolution share, so that none imports another for it: where a setting
//! came from ([`Src`], for the errors), the workload's shape that the later checks depend on
//! ([`Shape`], made first by `resolve`), and the open loop's default rate.

use std::path::Path;

use super::LoadShape;
use crate::strategy::StrategySpec;
use crate::values::Dur;

/// Where a setting came from, so an error can say which flag or which key of which file.
pub(super) enum Src<'a> {
    /// The command line, with each fault's name as it was written there (`--fault …` or the
    /// shorthand flags), in the order of the flags' fault list.
    Flags(&'a [String]),
    File(&'a Path),
}

impl Src<'_> {
    pub(super) fn name(&self, key: &str) -> String {
        match self {
            Src::Flags(_) => format!("--{}", key.replace('_', "-")),
            Src::File(p) => format!("`{key}` in {}", p.display()),
        }
    }

    /// A declared check's finding about `key`, said after its name.
    pub(super) fn said(&self, key: &str, what: &str) -> String {
        if what.starts_with(':') {
            format!("{}{what}", self.name(key))
        } else {
            format!("{} {what}", self.name(key))
        }
    }
}

/// The open loop's rate when neither `--rps` nor `--clients` is given.
pub const DEFAULT_RPS: f64 = 10_000.0;

/// The workload's shape, resolved before the checks that depend on it.
pub(super) struct Shape {
    pub strategy: StrategySpec,
    pub trace: Option<crate::trace::replay::TraceSpec>,
    pub load: LoadShape,
    pub own_load: Option<super::OwnLoad>,
    pub keys: u64,
    pub duration: Dur,
}
