//! `stampede advise`: its flags turned into the typed plan the search takes ([`AdvicePlan`]):
//! the strategies, the settings searched as declared with them, and the resolver of each
//! candidate's scenario from the team's scenario file and flags.

use std::process::ExitCode;

use anyhow::Result;

use crate::advise::app::AppSearch;
use crate::advise::space::{self, Candidate};
use crate::advise::{AdvicePlan, Resolver};
use crate::cli::{AdviseCmd, RunFlags, TargetFlags};
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
    if cmd.target.target.is_some() {
        return app_plan(cmd);
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
        file: file_settings(),
        quiet: cmd.quiet,
        plan_only: cmd.plan_only,
        resolve: resolver(cmd.scenario, cmd.flags),
        app: None,
    })
}

/// `advise --target`: the app's own settings searched, the app started for each candidate.
fn app_plan(cmd: AdviseCmd) -> Result<AdvicePlan, UsageError> {
    let mut p = crate::error::Problems::default();
    p.refuse([
        (
            cmd.target.app_cmd.is_none(),
            "advise --target starts the app again for every candidate: give --app-cmd CMD",
        ),
        (
            cmd.strategies.is_some(),
            "--strategies are the built-in app's: with --target the candidates are the app's own settings (--app-setting NAME=VALUES, --variant)",
        ),
        (
            !cmd.vary.is_empty(),
            "--vary searches the built-in app's settings: with --target give the app's own with --app-setting NAME=VALUES",
        ),
        (
            cmd.library.is_some(),
            "--for writes the answer in a library's terms from a built-in strategy: with --target the answer is the app's own settings",
        ),
        (
            cmd.ci_out.is_some(),
            "--ci-out writes a scenario for a built-in strategy: with --target, run the answer's settings in CI with run --target and its --app-cmd",
        ),
    ]);
    p.into_result()?;
    let app = AppSearch::parse(&cmd.app_setting, &cmd.variant)?;
    Ok(AdvicePlan {
        minimize: cmd.minimize,
        strategies: Vec::new(),
        vary: Vec::new(),
        knobs: Vec::new(),
        time: cmd.time.0,
        out: cmd.out,
        resume: cmd.resume,
        library: None,
        ci_out: None,
        file: file_settings(),
        quiet: cmd.quiet,
        plan_only: cmd.plan_only,
        resolve: app_resolver(cmd.scenario, cmd.flags, cmd.target),
        app: Some(app),
    })
}

/// How `run` reads a scenario file: for the one `--ci-out` writes.
fn file_settings() -> crate::advise::adopt::FileSettings {
    crate::advise::adopt::FileSettings {
        keys: RunFlags::file_keys(),
        set: |k, v| RunFlags::default().set(k, v),
    }
}

/// A candidate of the app's: the team's flags and target, the app started with the
/// candidate's settings in its environment, its runs named by the candidate.
fn app_resolver(file: Option<std::path::PathBuf>, base: RunFlags, target: TargetFlags) -> Resolver {
    Box::new(move |c: &Candidate| {
        let sc = crate::scenario::resolve(file.as_ref(), base.clone())?;
        let mut sc = crate::scenario::target::with_target(sc, &base, &target)?;
        if let Some(t) = sc.target.as_mut() {
            t.app_env = c.settings.clone();
            t.variant = Some(c.slug());
        }
        Ok(sc)
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
