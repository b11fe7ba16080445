//! The scenarios of a comparison: one per strategy (and per invalidation with `--invalidate
//! a,b`), or one per `--variant` of an app under test, each validated before any server
//! starts.

use std::path::PathBuf;

use crate::cli::{CompareCmd, RunFlags};
use crate::error::UsageError;
use crate::scenario::{self, Scenario};
use crate::strategy::{StrategySpec, invalidate};

/// The strategies named by `--strategies` ([`StrategySpec::parse_list`]).
pub fn parse_list(list: &str) -> Result<Vec<String>, UsageError> {
    StrategySpec::parse_list(list).map_err(|e| UsageError::new(format!("--strategies{e}")))
}

/// The invalidations of `--invalidate` (a comparison axis, [`invalidate::parse_list`]); None
/// when the flag is not given (the scenario file's, or the default, applies).
pub fn parse_invalidations(list: Option<&str>) -> Result<Option<Vec<String>>, UsageError> {
    list.map(|l| invalidate::parse_list(l).map_err(|e| UsageError::new(format!("--invalidate{e}"))))
        .transpose()
}

/// One scenario per strategy (and per invalidation, with `--invalidate a,b`: every pair,
/// strategy first): the file and flags with the strategy replaced, each validated before any
/// server starts (a strategy's defaults, such as the jitter preset's ±10%, apply).
pub fn scenarios(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    let out = any_scenarios(cmd)?;
    for sc in &out {
        super::invocation::refuse_boundary(sc)?;
    }
    Ok(out)
}

/// [`scenarios`] without the refusal of a sweep's own thresholds: the scenarios of one point
/// of a sweep.
pub fn any_scenarios(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    if !cmd.variant.is_empty() {
        return variants(cmd);
    }
    if cmd.target.target.is_some() {
        return Err(UsageError::new(
            "--strategies are the built-in app's: compare an app under test's own implementations with --variant NAME=ENV=VALUE (repeated)",
        ));
    }
    let list = cmd.strategies.as_deref().unwrap_or_default();
    of_strategies(list, cmd.scenario.as_ref(), &cmd.flags)
}

/// One scenario per strategy of `list` (and per invalidation of `--invalidate`'s list), each
/// resolved from the file and the flags with that strategy.
pub fn of_strategies(
    list: &str,
    file: Option<&PathBuf>,
    base: &RunFlags,
) -> Result<Vec<Scenario>, UsageError> {
    let invalidations = parse_invalidations(base.writes.invalidate.as_deref())?;
    let mut out = Vec::new();
    // A setting one strategy does not use is fine while another of the list uses it
    // (`--lease-ttl` with mutex,lease); refused when none does.
    let (mut unused, mut used) = (false, false);
    let names = parse_list(list)?;
    for name in &names {
        let axis: Vec<Option<String>> = match &invalidations {
            Some(v) => v.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for inv in axis {
            let mut flags = base.clone();
            flags.cache.strategy = Some(name.clone());
            if inv.is_some() {
                flags.writes.invalidate = inv;
            }
            let (sc, not_used) = scenario::resolve_one(file, flags)?;
            unused |= not_used.is_some();
            used |= not_used.is_none();
            out.push(sc);
        }
    }
    if unused && !used {
        return Err(UsageError::new(format!(
            "--lease-ttl is a setting of the lease coordination, and none of --strategies {} has one: add a strategy with lease (lease, swr+lease, xfetch+lease), or drop --lease-ttl (lease_ttl in a scenario file)",
            names.join(", ")
        )));
    }
    Ok(out)
}

/// One scenario per `--variant`: the app under test started with that variant's environment.
fn variants(cmd: &CompareCmd) -> Result<Vec<Scenario>, UsageError> {
    if cmd.target.target.is_none() || cmd.target.app_cmd.is_none() {
        return Err(UsageError::new(
            "--variant starts the app under test once per variant: give --target URL and --app-cmd CMD too",
        ));
    }
    let base = crate::scenario::target::with_target(
        scenario::resolve(cmd.scenario.as_ref(), cmd.flags.clone())?,
        &cmd.flags,
        &cmd.target,
    )?;
    let mut out: Vec<Scenario> = Vec::with_capacity(cmd.variant.len());
    for v in &cmd.variant {
        let (name, env) = crate::app::parse_variant(v)?;
        if out.iter().any(|s| s.label() == name) {
            return Err(UsageError::new(format!(
                "--variant names {name} twice: each variant runs once"
            )));
        }
        let mut sc = base.clone();
        if let Some(t) = sc.target.as_mut() {
            t.variant = Some(name);
            t.app_env = env;
        }
        out.push(sc);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(
            parse_list("all").unwrap().len(),
            crate::strategy::PRESETS.len()
        );
        assert_eq!(
            parse_list("mutex, swr+mutex").unwrap(),
            vec!["mutex".to_string(), "swr+mutex".to_string()]
        );
        assert!(parse_list("mutex,mutex").is_err());
        assert!(parse_list("cache-aside,expire").is_err());
        assert!(parse_list("magic").is_err());
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn invalidation_lists() {
        assert_eq!(parse_invalidations(None).unwrap(), None);
        assert_eq!(
            parse_invalidations(Some("delete, versioned")).unwrap(),
            Some(vec!["delete".to_string(), "versioned".to_string()])
        );
        assert!(parse_invalidations(Some("delete,delete")).is_err());
        assert!(parse_invalidations(Some("purge")).is_err());
        assert!(parse_invalidations(Some(",")).is_err());
    }
}
