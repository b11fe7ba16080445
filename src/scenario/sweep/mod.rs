//! A sweep resolved: its axes ([`axes`]: a run flag or a fault's key and its values), the
//! boundary's range, and the resolver of a point's scenarios, one per strategy. The sweep's
//! run (laying its points out, each resolved before any server starts) is `session::sweep`;
//! this is the only part of it that reads the flags.

pub mod axes;

use std::path::PathBuf;

use crate::cli::{RunFlags, SweepCmd};
use crate::error::UsageError;
use crate::scenario::{LoadShape, Scenario};
use crate::values::{Dur, Rate};
use axes::Axis;

/// How the sweep runs, from its flags: where it writes, how many runs a bisection may take,
/// trials per cell, the knee's latency.
pub struct Options {
    pub out: PathBuf,
    pub quiet: bool,
    pub resume: bool,
    pub max_runs: u32,
    /// Trials per cell (`--repeat`), each with its own seed unless `--same-seed`.
    pub repeat: u32,
    pub same_seed: bool,
    pub knee_p99: Dur,
}

/// The sweep's flags, kept to resolve the points a bisection picks while it runs.
pub struct Points(SweepCmd);

/// What the sweep will run: its axes, the boundary's range, and the resolver of every
/// point's scenarios (`session::sweep` lays the points out and resolves each before any
/// server starts).
pub struct Plan {
    pub axes: Vec<Axis>,
    /// --boundary rps: the rate's two ends.
    pub boundary: Option<(f64, f64)>,
    /// The sweep's `boundary_rps_min` threshold, if any.
    pub boundary_rps_min: Option<f64>,
    /// Resolves the scenarios of a point.
    pub points: Points,
}

/// The scenarios of one point: the sweep's flags with the point's `--flag value` set by
/// clap, one per strategy, without the sweep's own threshold (each run judges the rest).
impl Points {
    /// The scenarios of one point: the sweep's flags with the point's `--flag value` set by
    /// clap, one per strategy, without the sweep's own threshold (each run judges the rest).
    pub fn at(&self, set: &[(&str, &str)]) -> Result<Vec<Scenario>, UsageError> {
        let cmd = &self.0;
        let flags: RunFlags = axes::flags_at(&cmd.flags, set)?;
        let mut out =
            crate::scenario::compare::of_strategies(&cmd.strategies, cmd.scenario.as_ref(), &flags)
                .map_err(|e| {
                    if set.is_empty() {
                        return e;
                    }
                    let at: Vec<String> = set.iter().map(|(f, v)| format!("{f}={v}")).collect();
                    UsageError::new(format!("at the sweep's point {}: {e}", at.join(", ")))
                })?;
        for sc in &mut out {
            sc.thresholds = sc.thresholds.clone().without_boundary();
            // A sweep with a shock maps verdicts: each point must be able to have one.
            if !sc.faults.is_empty() {
                crate::fault::verdict_possible(&sc.faults, sc.duration, &sc.recovery).map_err(
                    |why| {
                        UsageError::new(format!(
                            "a sweep with a shock needs a recovery verdict at every point, and {why}"
                        ))
                    },
                )?;
            }
        }
        Ok(out)
    }
}

/// `--boundary rps`'s range, checked against the rest of the sweep: `--boundary-min` and
/// `--boundary-max`, or without them an eighth to four times the scenario's own rate (`sc`, an
/// open loop), which the sweep says it chose (`note`).
fn boundary_range(
    cmd: &SweepCmd,
    axes: &[Axis],
    sc: &Scenario,
    note: &mut Option<String>,
) -> Result<(f64, f64), UsageError> {
    if let Some(a) = axes.iter().find(|a| a.flag == "rps") {
        return Err(UsageError::new(format!(
            "--axis {}: --boundary rps bisects the rate itself between --boundary-min and --boundary-max: drop the rps axis",
            a.flag
        )));
    }
    if axes.len() > 1 {
        return Err(UsageError::new(
            "--boundary rps takes at most one other --axis: the boundary is found for each of its values",
        ));
    }
    if cmd.flags.load.clients.is_some() {
        return Err(UsageError::new(
            "--boundary rps bisects the open loop's rate: drop --clients",
        ));
    }
    let (lo, hi) = match (cmd.boundary_min, cmd.boundary_max, &sc.load) {
        (Some(lo), Some(hi), _) => (lo, hi),
        (None, None, LoadShape::Open { rps, .. }) => {
            let (lo, hi) = (Rate(rps / 8.0), Rate(rps * 4.0));
            *note = Some(format!(
                "boundary: bisecting the rate between {lo} and {hi} req/s, an eighth to four times the scenario's {} req/s (--boundary-min and --boundary-max choose)",
                Rate(*rps)
            ));
            (lo, hi)
        }
        // Both bounds or neither (clap requires them together).
        _ => {
            return Err(UsageError::new(
                "--boundary rps needs --boundary-min RATE and --boundary-max RATE: a closed-loop scenario (--clients) has no rate to start from",
            ));
        }
    };
    if !(lo.0 > 0.0 && hi.0 > lo.0) {
        return Err(UsageError::new(format!(
            "--boundary-min {} and --boundary-max {}: the minimum must be above 0 and below the maximum",
            lo, hi
        )));
    }
    Ok((lo.0, hi.0))
}

/// The sweep `cmd` asks for, every point resolved and checked before any server starts.
pub fn plan(cmd: SweepCmd) -> Result<(Plan, Options), UsageError> {
    let opts = Options {
        out: cmd.out.clone(),
        quiet: cmd.quiet,
        resume: cmd.resume,
        max_runs: cmd.max_runs,
        repeat: cmd.trials.repeat,
        same_seed: cmd.trials.same_seed,
        knee_p99: cmd.knee_p99,
    };
    let points = Points(cmd);
    let cmd = &points.0;
    let axes: Vec<Axis> = cmd
        .axes
        .iter()
        .map(|a| axes::parse(a))
        .collect::<Result<_, _>>()?;
    if axes.len() > 2 {
        return Err(UsageError::new(format!(
            "--axis is given {} times: a sweep has one axis (a curve) or two (a survival map)",
            axes.len()
        )));
    }
    if axes.len() == 2 && axes[0].flag == axes[1].flag {
        return Err(UsageError::new(format!(
            "--axis {} is given twice: give its values in one --axis",
            axes[0].flag
        )));
    }
    if cmd.boundary.is_none() && axes.is_empty() {
        return Err(UsageError::new(
            "a sweep needs --axis NAME=VALUES (e.g. --axis rps=1k..16k:x2), or --boundary rps",
        ));
    }
    let flags = axes::flags_at(&cmd.flags, &[])?;
    let (sc, _) = crate::scenario::resolve_one(cmd.scenario.as_ref(), flags)?;
    let mut note = None;
    let boundary = match cmd.boundary {
        Some(_) => Some(boundary_range(cmd, &axes, &sc, &mut note)?),
        None => None,
    };
    if let Some(n) = note
        && !opts.quiet
    {
        eprintln!("{n}");
    }
    let boundary_rps_min = sc.thresholds.boundary_rps_min();
    if boundary_rps_min.is_some() && cmd.boundary.is_none() {
        return Err(UsageError::new(format!(
            "{}: only a sweep with --boundary rps finds a boundary rate: add --boundary rps with --boundary-min and --boundary-max, or drop the threshold",
            crate::thresholds::BOUNDARY_RPS_MIN
        )));
    }
    Ok((
        Plan {
            axes,
            boundary,
            boundary_rps_min,
            points,
        },
        opts,
    ))
}
