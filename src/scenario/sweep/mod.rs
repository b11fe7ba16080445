//! A sweep resolved: its axes ([`axes`]: a run flag or a fault's key and its values), the
//! grid of points (or the boundary's bisection and the axis beside it), and every point's
//! scenarios, one per strategy, checked before any server starts. The sweep's run is
//! `session::sweep`; this is the only part of it that reads the flags.

pub mod axes;

use std::path::PathBuf;

use crate::cli::{CompareCmd, RunFlags, SweepCmd, TargetFlags};
use crate::error::UsageError;
use crate::scenario::Scenario;
use crate::values::Dur;
use crate::values::points::Point;
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

/// One point of the grid: its values and one scenario per strategy.
pub struct GridPoint {
    pub params: Vec<(String, f64)>,
    pub scenarios: Vec<Scenario>,
}

/// A point of the axis beside the boundary: its flag and value (empty without one).
pub type OtherPoint = Vec<(String, Point)>;

/// What `--boundary rps` bisects: each other point, and the rate's two ends.
pub type Bisection = (Vec<OtherPoint>, f64, f64);

/// What the sweep will run, every scenario validated before any server starts.
pub struct Plan {
    pub axes: Vec<Axis>,
    pub strategies: Vec<String>,
    /// The grid (without --boundary).
    pub grid: Vec<GridPoint>,
    /// --boundary rps: the other axis's points (one empty point without one), and the range.
    pub boundary: Option<Bisection>,
    pub boundary_rps_min: Option<f64>,
    /// The scenario the servers are sized for (the most DB connections).
    pub biggest: Scenario,
    /// The first strategy's scenario at the first point, whose workload the summary names.
    pub first: Scenario,
    /// Resolves the scenarios of a point the bisection picks while it runs.
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
        let compare = CompareCmd {
            strategies: Some(cmd.strategies.clone()),
            scenario: cmd.scenario.clone(),
            flags,
            target: TargetFlags::default(),
            variant: Vec::new(),
            out: None,
            html: None,
            quiet: cmd.quiet,
            trials: cmd.trials,
        };
        let mut out = crate::scenario::compare::any_scenarios(&compare).map_err(|e| {
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

/// Keep the scenario that opens the most database connections: the servers are sized for it.
fn keep(biggest: &mut Option<Scenario>, scs: &[Scenario]) {
    let conns = |s: &Scenario| s.instances * s.db_pool;
    for sc in scs {
        if biggest.as_ref().is_none_or(|b| conns(sc) > conns(b)) {
            *biggest = Some(sc.clone());
        }
    }
}

/// The points of `--boundary rps`: each other axis's value at both ends of the rate, checked
/// now; the first point's scenarios and what the bisection runs between.
fn boundary_plan(
    cmd: &SweepCmd,
    points: &Points,
    axes: &[Axis],
    biggest: &mut Option<Scenario>,
) -> Result<(Vec<Scenario>, Bisection), UsageError> {
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
    let (Some(lo), Some(hi)) = (cmd.boundary_min, cmd.boundary_max) else {
        return Err(UsageError::new(
            "--boundary rps needs --boundary-min RATE and --boundary-max RATE",
        ));
    };
    if !(lo.0 > 0.0 && hi.0 > lo.0) {
        return Err(UsageError::new(format!(
            "--boundary-min {} and --boundary-max {}: the minimum must be above 0 and below the maximum",
            lo, hi
        )));
    }
    let others: Vec<OtherPoint> = match axes.first() {
        Some(a) => a
            .points
            .iter()
            .map(|p| vec![(a.flag.clone(), p.clone())])
            .collect(),
        None => vec![Vec::new()],
    };
    let mut firsts = None;
    for o in &others {
        for rate in [lo.0, hi.0] {
            let r = axes::trim(rate);
            let mut set: Vec<(&str, &str)> = vec![("rps", r.as_str())];
            set.extend(o.iter().map(|(f, p)| (f.as_str(), p.text.as_str())));
            let scs = points.at(&set)?;
            keep(biggest, &scs);
            firsts.get_or_insert(scs);
        }
    }
    Ok((firsts.unwrap_or_default(), (others, lo.0, hi.0)))
}

/// Every point of the grid of one or two axes, each resolved now.
fn grid_plan(
    resolver: &Points,
    axes: &[Axis],
    biggest: &mut Option<Scenario>,
) -> Result<Vec<GridPoint>, UsageError> {
    let mut grid = Vec::new();
    let mut points: Vec<Vec<(&Axis, &Point)>> = vec![Vec::new()];
    for a in axes {
        points = points
            .into_iter()
            .flat_map(|prefix| {
                a.points.iter().map(move |p| {
                    let mut v = prefix.clone();
                    v.push((a, p));
                    v
                })
            })
            .collect();
    }
    for pt in points {
        let set: Vec<(&str, &str)> = pt
            .iter()
            .map(|(a, p)| (a.flag.as_str(), p.text.as_str()))
            .collect();
        let scenarios = resolver.at(&set)?;
        keep(biggest, &scenarios);
        grid.push(GridPoint {
            params: pt.iter().map(|(a, p)| (a.name.clone(), p.number)).collect(),
            scenarios,
        });
    }
    Ok(grid)
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
    let mut biggest: Option<Scenario> = None;
    let mut grid = Vec::new();
    let mut boundary = None;
    // The file's [thresholds] and --threshold, as resolved for the first point.
    let first: Vec<Scenario> = if cmd.boundary.is_some() {
        let (first, b) = boundary_plan(cmd, &points, &axes, &mut biggest)?;
        boundary = Some(b);
        first
    } else {
        grid = grid_plan(&points, &axes, &mut biggest)?;
        grid.first()
            .map(|g| g.scenarios.clone())
            .unwrap_or_default()
    };
    // The sweep's own threshold, read as the runs would read it (file, then flags).
    let flags = axes::flags_at(&cmd.flags, &[])?;
    let (sc, _) = crate::scenario::resolve_one(cmd.scenario.as_ref(), flags)?;
    let boundary_rps_min = sc.thresholds.boundary_rps_min();
    if boundary_rps_min.is_some() && cmd.boundary.is_none() {
        return Err(UsageError::new(format!(
            "{}: only a sweep with --boundary rps finds a boundary rate: add --boundary rps with --boundary-min and --boundary-max, or drop the threshold",
            crate::thresholds::BOUNDARY_RPS_MIN
        )));
    }
    let strategies = first.iter().map(Scenario::label).collect();
    let biggest = biggest.ok_or_else(|| UsageError::new("the sweep has no point to run"))?;
    let first = first.first().cloned().unwrap_or_else(|| biggest.clone());
    Ok((
        Plan {
            axes,
            strategies,
            grid,
            boundary,
            boundary_rps_min,
            biggest,
            first,
            points,
        },
        opts,
    ))
}
