//! `stampede sweep`: every strategy at every point of one or two axes of run flags, each
//! point a full run (`session::run_on`) on a fresh cache namespace and fresh counters on one
//! session's servers, as `compare` runs its strategies; and with `--boundary rps`, the
//! bisection of the rate to the highest one that still holds. Every finished cell is written
//! at once and sweep.json after each, so a Ctrl-C or a failure keeps what ran.

pub mod axes;
mod lru;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use super::trials::Ended;
use super::{Env, Status, run_on, shutdown_on_signals};
use crate::cli::{CompareCmd, RunFlags, SweepCmd, TargetFlags};
use crate::error::UsageError;
use crate::report::sink;
use crate::report::sweep as render;
use crate::results::sweep::{
    self as doc, AxisDoc, BoundaryEntry, Cell, Figures, Params, SWEEP_FILE, SWEEP_SCHEMA, SweepDoc,
};
use crate::results::{self, RunResult};
use crate::scenario::Scenario;
use crate::session::Progress;
use axes::{Axis, Point};

/// How close the boundary's two rates must come: the next rate that fails is within 5% of
/// the one reported.
const BOUNDARY_WITHIN: f64 = 0.05;

/// One point of the grid: its values and one scenario per strategy.
struct GridPoint {
    params: Params,
    scenarios: Vec<Scenario>,
}

/// A point of the axis beside the boundary: its flag and value (empty without one).
type OtherPoint = Vec<(String, Point)>;

/// What `--boundary rps` bisects: each other point, and the rate's two ends.
type Bisection = (Vec<OtherPoint>, f64, f64);

/// What the sweep will run, every scenario validated before any server starts.
struct Plan {
    axes: Vec<Axis>,
    strategies: Vec<String>,
    /// The grid (without --boundary).
    grid: Vec<GridPoint>,
    /// --boundary rps: the other axis's points (one empty point without one), and the range.
    boundary: Option<Bisection>,
    boundary_rps_min: Option<f64>,
    /// The scenario the servers are sized for (the most DB connections).
    biggest: Scenario,
    /// The first strategy's scenario at the first point, whose workload the summary names.
    first: Scenario,
}

/// The scenarios of one point: the sweep's flags with the point's `--flag value` set by
/// clap, one per strategy, without the sweep's own threshold (each run judges the rest).
fn scenarios_at(cmd: &SweepCmd, set: &[(&str, &str)]) -> Result<Vec<Scenario>, UsageError> {
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
            crate::scenario::verdict_possible(&sc.faults, sc.duration, &sc.recovery).map_err(
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
            let scs = scenarios_at(cmd, &set)?;
            keep(biggest, &scs);
            firsts.get_or_insert(scs);
        }
    }
    Ok((firsts.unwrap_or_default(), (others, lo.0, hi.0)))
}

/// Every point of the grid of one or two axes, each resolved now.
fn grid_plan(
    cmd: &SweepCmd,
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
        let scenarios = scenarios_at(cmd, &set)?;
        keep(biggest, &scenarios);
        grid.push(GridPoint {
            params: Params(pt.iter().map(|(a, p)| (a.name.clone(), p.number)).collect()),
            scenarios,
        });
    }
    Ok(grid)
}

fn plan(cmd: &SweepCmd) -> Result<Plan, UsageError> {
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
        let (first, b) = boundary_plan(cmd, &axes, &mut biggest)?;
        boundary = Some(b);
        first
    } else {
        grid = grid_plan(cmd, &axes, &mut biggest)?;
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
    Ok(Plan {
        axes,
        strategies,
        grid,
        boundary,
        boundary_rps_min,
        biggest,
        first,
    })
}

/// A sweep in progress: its servers, its document and how its cells are run and written.
struct Sweep<'a> {
    cmd: &'a SweepCmd,
    dir: PathBuf,
    env: Env,
    shutdown: CancellationToken,
    status: Status,
    bar: ProgressBar,
    doc: SweepDoc,
    knee_p99_ms: f64,
    started: Instant,
    ran: u32,
    skipped: u32,
    /// Cells done or skipped, for the ETA.
    seen: u64,
    /// Along a maxmemory axis, the exact LRU curve of the requests sent.
    lru: Option<lru::Lru>,
}

fn file_name(strategy: &str) -> String {
    // A label `strategy/invalidation` names one directory, as trials' files do.
    strategy.replace('/', "@")
}

/// The top-level settings in which two scenarios differ, as the results file writes them.
fn differing(a: &Scenario, b: &Scenario) -> Vec<String> {
    let (a, b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    let keys: std::collections::BTreeSet<&String> = a
        .as_object()
        .into_iter()
        .chain(b.as_object())
        .flat_map(|m| m.keys())
        .collect();
    keys.into_iter()
        .filter(|k| a.get(k.as_str()) != b.get(k.as_str()))
        .cloned()
        .collect()
}

impl Sweep<'_> {
    fn say(&self, line: &str) {
        if self.bar.is_hidden() {
            self.status.line(line);
        } else {
            self.bar.println(line);
        }
    }

    /// What the user must hear even with --quiet (why a cell runs again).
    fn warn(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn eta(&self, total: u64) -> String {
        let left = total.saturating_sub(self.seen);
        if self.ran == 0 || left == 0 {
            return String::new();
        }
        let per = self.started.elapsed().as_secs_f64() / f64::from(self.ran);
        format!(
            ", ETA {}",
            crate::values::Dur(std::time::Duration::from_secs((per * left as f64) as u64))
        )
    }

    fn write_doc(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.doc).context("encoding sweep.json")?;
        sink::write_text(&self.dir.join(SWEEP_FILE), &(text + "\n"))?;
        sink::write_text(&self.dir.join("summary.md"), &render::markdown(&self.doc))
    }

    /// The stored trials of a cell when every one exists with this sweep's scenario (and was
    /// not interrupted); says why it runs again when one differs.
    fn stored(
        &self,
        rel: &str,
        paths: &[PathBuf],
        scenarios: &[Scenario],
    ) -> Option<Vec<RunResult>> {
        if !self.cmd.resume || !paths.iter().all(|p| p.exists()) {
            return None;
        }
        let mut out = Vec::new();
        for (p, sc) in paths.iter().zip(scenarios) {
            let r = match results::read_json(p) {
                Ok(r) => r,
                Err(e) => {
                    self.warn(&format!("re-running {rel}: {e:#}"));
                    return None;
                }
            };
            if r.interrupted {
                self.warn(&format!("re-running {rel}: its run was interrupted"));
                return None;
            }
            let diff = differing(&r.scenario, sc);
            if !diff.is_empty() {
                self.warn(&format!(
                    "re-running {rel}: its stored scenario differs from this sweep's in {}",
                    diff.join(", ")
                ));
                return None;
            }
            out.push(r);
        }
        Some(out)
    }

    /// Run a cell's trials, each result written as it ends; None when interrupted.
    async fn run_trials(
        &mut self,
        scenarios: &[Scenario],
        paths: &[PathBuf],
        strategy: &str,
        key: &str,
    ) -> Result<Option<Vec<RunResult>>> {
        let quiet = Progress::quiet();
        let mut trials = Vec::new();
        for (s, p) in scenarios.iter().zip(paths) {
            if self.shutdown.is_cancelled() {
                return Ok(None);
            }
            let r = run_on(
                s,
                &mut self.env,
                self.shutdown.clone(),
                &quiet,
                // The cell's line says what a run's own status lines would.
                &Status::new(true),
            )
            .await
            .with_context(|| format!("running {strategy} at {key}"))?;
            if r.interrupted {
                return Ok(None);
            }
            if let Some(why) = results::check::unreliable(&r) {
                self.warn(&format!("warning ({strategy} at {key}): {why}"));
            }
            sink::write_result(p, &r)?;
            trials.push(r);
        }
        Ok(Some(trials))
    }

    /// Run (or, with --resume, reuse) one strategy at one point; None when interrupted.
    async fn cell(&mut self, sc: &Scenario, params: Params, total: u64) -> Result<Option<Cell>> {
        let strategy = sc.label();
        let key = params.key();
        let rel = format!("{}/{key}.json", file_name(&strategy));
        let repeat = self.cmd.trials.repeat.max(1);
        let scenarios: Vec<Scenario> = (0..repeat)
            .map(|t| {
                let mut s = sc.clone();
                if !self.cmd.trials.same_seed {
                    s.seed = s.seed.wrapping_add(u64::from(t));
                }
                s
            })
            .collect();
        let paths: Vec<PathBuf> = if repeat == 1 {
            vec![self.dir.join(&rel)]
        } else {
            (1..=repeat)
                .map(|t| {
                    self.dir
                        .join(file_name(&strategy))
                        .join(&key)
                        .join(format!("trial-{t}.json"))
                })
                .collect()
        };
        let (trials, skipped) = match self.stored(&rel, &paths, &scenarios) {
            Some(t) => (t, true),
            None => match self.run_trials(&scenarios, &paths, &strategy, &key).await? {
                Some(trials) => (trials, false),
                None => return Ok(None),
            },
        };
        let figures: Vec<(Figures, Option<serde_json::Value>)> =
            trials.iter().map(doc::figures).collect();
        let mut median =
            doc::median_figures(&figures.iter().map(|f| f.0.clone()).collect::<Vec<_>>());
        if let (Some(curve), Some(m)) = (&self.lru, params.get("maxmemory"))
            && let Some((objects, h)) = lru::at(curve, m, median.bytes_per_key)
        {
            median.lru_objects = Some(objects);
            median.lru_hit_rate = Some(h);
        }
        // The trial that stands for the cell: the median by p99.
        let mut order: Vec<usize> = (0..figures.len()).collect();
        order.sort_by(|&a, &b| {
            let p = |i: usize| figures[i].0.p99_ms.unwrap_or(f64::INFINITY);
            p(a).total_cmp(&p(b))
        });
        let rep = order[order.len() / 2];
        if repeat > 1 && !skipped {
            sink::write_result(&self.dir.join(&rel), &trials[rep])?;
        }
        let shock = !sc.faults.is_empty();
        let below_knee = doc::below_knee(&median, self.knee_p99_ms);
        let holding = figures
            .iter()
            .filter(|(f, r)| doc::holds(shock, r.as_ref(), f, self.knee_p99_ms))
            .count();
        let holds = if shock {
            2 * holding > figures.len()
        } else {
            below_knee
        };
        let cell = Cell {
            strategy: strategy.clone(),
            params,
            result: rel,
            trials: repeat,
            figures: median,
            recovery: figures[rep].1.clone(),
            shock,
            below_knee,
            holds,
        };
        self.seen += 1;
        if skipped {
            self.skipped += 1;
        } else {
            self.ran += 1;
        }
        self.bar.inc(1);
        self.say(&format!(
            "[{}/{total}] {strategy} {key}: {}{}{}",
            self.seen,
            render::cell_line(&cell),
            if skipped {
                " (skipped: already done)"
            } else {
                ""
            },
            self.eta(total)
        ));
        self.doc.cells.push(cell.clone());
        self.write_doc()?;
        Ok(Some(cell))
    }

    /// One run of a bisection: strategy `si` at `rate` and the other axis's point; whether it
    /// held (None when interrupted).
    async fn probe(
        &mut self,
        si: usize,
        other: &[(String, Point)],
        at: &Params,
        rate: f64,
        total: u64,
    ) -> Result<Option<bool>> {
        let r = axes::trim(rate);
        let mut set: Vec<(&str, &str)> = vec![("rps", r.as_str())];
        set.extend(other.iter().map(|(f, p)| (f.as_str(), p.text.as_str())));
        let sc = scenarios_at(self.cmd, &set)?.swap_remove(si);
        let mut params = vec![("rps".to_string(), rate)];
        params.extend(at.0.iter().cloned());
        Ok(self
            .cell(&sc, Params(params), total)
            .await?
            .map(|c| c.holds))
    }

    /// Bisect the rate for one strategy at one point of the other axis.
    async fn boundary(
        &mut self,
        si: usize,
        other: &[(String, Point)],
        (lo, hi): (f64, f64),
        total: u64,
    ) -> Result<Option<BoundaryEntry>> {
        let max_runs = self.cmd.max_runs;
        let mut runs = 0u32;
        let at = Params(
            other
                .iter()
                .map(|(f, p)| (f.replace('-', "_"), p.number))
                .collect(),
        );
        let entry = |rps, fails_at, runs, bound: Option<&str>| BoundaryEntry {
            at: at.clone(),
            rps,
            fails_at,
            runs,
            bound: bound.map(str::to_string),
        };
        runs += 1;
        let Some(low_holds) = self.probe(si, other, &at, lo, total).await? else {
            return Ok(None);
        };
        if !low_holds {
            return Ok(Some(entry(lo, Some(lo), runs, Some("upper"))));
        }
        runs += 1;
        let Some(high_holds) = self.probe(si, other, &at, hi, total).await? else {
            return Ok(None);
        };
        if high_holds {
            return Ok(Some(entry(hi, None, runs, Some("lower"))));
        }
        let (mut good, mut bad) = (lo, hi);
        while runs < max_runs && bad > good * (1.0 + BOUNDARY_WITHIN) {
            let mid = (good * bad).sqrt().round();
            if mid <= good || mid >= bad {
                break;
            }
            runs += 1;
            match self.probe(si, other, &at, mid, total).await? {
                None => return Ok(None),
                Some(true) => good = mid,
                Some(false) => bad = mid,
            }
        }
        Ok(Some(entry(good, Some(bad), runs, None)))
    }
}

/// Run the sweep `cmd` asks for; the caller turns how it ended into an exit code.
pub async fn run(cmd: &SweepCmd) -> Result<Ended> {
    let plan = plan(cmd)?;
    std::fs::create_dir_all(&cmd.out)
        .with_context(|| format!("creating the output directory {}", cmd.out.display()))?;
    let status = Status::new(cmd.quiet);
    let shutdown = shutdown_on_signals();
    let total: u64 = match &plan.boundary {
        Some((others, _, _)) => {
            (others.len() * plan.strategies.len()) as u64 * u64::from(cmd.max_runs)
        }
        None => (plan.grid.len() * plan.strategies.len()) as u64,
    };
    let bar = if cmd.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "sweep [{bar:30}] {pos}/{len} cells, {elapsed} elapsed, ETA {eta} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    };
    let env = Env::start(&plan.biggest, &status).await?;
    let workload = crate::report::describe(&plan.first).join(", ")
        + &match (&plan.boundary, plan.axes.is_empty()) {
            (Some(_), true) => " (at the minimum rate; the rate is bisected)".to_string(),
            (Some(_), false) => format!(
                " (at the minimum rate and the first {}; both vary)",
                plan.axes[0].name
            ),
            (None, _) => format!(
                " (at the first point; {} vary)",
                plan.axes
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        };
    let lru = lru::curve(
        &plan.first,
        &plan.axes.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
    );
    let mut s = Sweep {
        cmd,
        dir: cmd.out.clone(),
        env,
        shutdown,
        status,
        bar,
        doc: SweepDoc {
            schema: SWEEP_SCHEMA,
            workload,
            strategies: plan.strategies.clone(),
            axes: plan
                .axes
                .iter()
                .map(|a| AxisDoc {
                    name: a.name.clone(),
                    unit: a.unit.to_string(),
                    values: a.points.iter().map(|p| p.number).collect(),
                })
                .collect(),
            knee_p99_ms: cmd.knee_p99.0.as_secs_f64() * 1000.0,
            cells: Vec::new(),
            boundary: plan.boundary.as_ref().map(|_| BTreeMap::new()),
            interrupted: false,
            lru_curve: lru.as_ref().map(lru::points),
        },
        knee_p99_ms: cmd.knee_p99.0.as_secs_f64() * 1000.0,
        started: Instant::now(),
        ran: 0,
        skipped: 0,
        seen: 0,
        lru,
    };
    let outcome = drive(&mut s, &plan, total).await;
    s.env.stop();
    s.bar.finish_and_clear();
    s.doc.interrupted = s.doc.interrupted || s.shutdown.is_cancelled();
    let written = s.write_doc();
    outcome?;
    written?;
    if !cmd.quiet {
        print!("{}", render::text(&s.doc));
    }
    s.status.line(&format!(
        "sweep written to {}/ ({} cells: {} run, {} skipped as already done; sweep.json, summary.md)",
        s.dir.display(),
        s.doc.cells.len(),
        s.ran,
        s.skipped
    ));
    Ok(Ended {
        interrupted: s.doc.interrupted,
        broken: broken(&s.doc, plan.boundary_rps_min),
    })
}

async fn drive(s: &mut Sweep<'_>, plan: &Plan, total: u64) -> Result<()> {
    match &plan.boundary {
        None => {
            for g in &plan.grid {
                for sc in &g.scenarios {
                    if s.cell(sc, g.params.clone(), total).await?.is_none() {
                        s.doc.interrupted = true;
                        return Ok(());
                    }
                }
            }
        }
        Some((others, lo, hi)) => {
            let mut left = total;
            for o in others {
                for (si, name) in plan.strategies.iter().enumerate() {
                    let Some(e) = s.boundary(si, o, (*lo, *hi), total).await? else {
                        s.doc.interrupted = true;
                        return Ok(());
                    };
                    // The runs a bisection did not need leave the bar's length.
                    left -= u64::from(s.cmd.max_runs - e.runs);
                    s.bar.set_length(left);
                    s.say(&format!(
                        "boundary of {name}{}: {}",
                        if e.at.0.is_empty() {
                            String::new()
                        } else {
                            format!(" at {}", e.at.key())
                        },
                        render::boundary_line(&e)
                    ));
                    if let Some(b) = s.doc.boundary.as_mut() {
                        b.entry(name.clone()).or_default().push(e);
                    }
                    s.write_doc()?;
                }
            }
        }
    }
    Ok(())
}

/// One line per strategy whose boundary is below `boundary_rps_min`.
fn broken(d: &SweepDoc, limit: Option<f64>) -> String {
    let (Some(limit), Some(b)) = (limit, &d.boundary) else {
        return String::new();
    };
    let mut o = String::new();
    for (strategy, entries) in b {
        for e in entries {
            let below = e.bound.as_deref() == Some("upper") || e.rps < limit;
            if below {
                o.push_str(&format!(
                    "threshold broken ({strategy}): {} = {} req/s but its boundary{} is {}{} req/s\n",
                    crate::thresholds::BOUNDARY_RPS_MIN,
                    axes::trim(limit),
                    if e.at.0.is_empty() {
                        String::new()
                    } else {
                        format!(" at {}", e.at.key())
                    },
                    if e.bound.as_deref() == Some("upper") {
                        "below "
                    } else {
                        ""
                    },
                    axes::trim(e.rps)
                ));
            }
        }
    }
    o
}

/// Whether `dir` holds a sweep (its sweep.json), for `stampede report`.
pub fn is_sweep(dir: &Path) -> bool {
    dir.join(SWEEP_FILE).is_file()
}
