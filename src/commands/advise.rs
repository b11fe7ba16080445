//! `stampede advise`: its flags turned into the typed plan the search takes ([`AdvicePlan`]):
//! the strategies, the settings searched as declared with them, and the resolver of each
//! candidate's scenario from the team's scenario file and flags.

use std::process::ExitCode;

use anyhow::Result;

use crate::advise::space::{self, Candidate};
use crate::advise::{AdvicePlan, Resolver};
use crate::cli::{AdviseCmd, RunFlags};
use crate::error::UsageError;
use crate::scenario::sweep::axes;

pub async fn run(cmd: AdviseCmd) -> Result<ExitCode> {
    crate::advise::run(plan(cmd)?).await
}

/// The plan of `cmd`, its strategies checked.
fn plan(cmd: AdviseCmd) -> Result<AdvicePlan, UsageError> {
    if cmd.flags.cache.strategy.is_some() {
        return Err(UsageError::new(
            "advise searches the strategies itself: name them with --strategies LIST, not --strategy",
        ));
    }
    let strategies = match &cmd.strategies {
        Some(l) => crate::scenario::compare::parse_list(l)?,
        None => space::default_strategies(),
    };
    Ok(AdvicePlan {
        minimize: cmd.minimize,
        strategies,
        vary: cmd.vary,
        knobs: RunFlags::knobs(),
        time: cmd.time.0,
        out: cmd.out,
        resume: cmd.resume,
        library: cmd.library,
        ci_out: cmd.ci_out,
        quiet: cmd.quiet,
        plan_only: cmd.plan_only,
        resolve: resolver(cmd.scenario, cmd.flags),
    })
}

/// A candidate's scenario: the team's flags with its strategy and its settings set (each
/// parsed as its flag), over the scenario file, resolved as `run` resolves them.
fn resolver(file: Option<std::path::PathBuf>, base: RunFlags) -> Resolver {
    Box::new(move |c: &Candidate| {
        let set: Vec<(&str, &str)> = c
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut flags = axes::flags_at(&base, &set)?;
        flags.cache.strategy = Some(c.strategy.clone());
        Ok(crate::scenario::resolve_one(file.as_ref(), flags)?.0)
    })
}

#[cfg(test)]
#[path = "advise_tests.rs"]
mod tests;
