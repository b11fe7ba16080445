//! `stampede sweep`: every strategy at every point of one or two axes of run flags, each
//! point a full run (`session::run_on`) on a fresh cache namespace and fresh counters on one
//! session's servers, as `compare` runs its strategies; and with `--boundary rps`, the
//! bisection of the rate to the highest one that still holds. Every finished cell is written
//! at once and sweep.json after each, so a Ctrl-C or a failure keeps what ran.

mod layout;
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
use crate::report::sink;
use crate::report::sweep as render;
use crate::results::sweep::{
    self as doc, AxisDoc, BoundaryEntry, Cell, Figures, Params, SWEEP_FILE, SWEEP_SCHEMA, SweepDoc,
};
use crate::results::{self, RunResult};
use crate::scenario::Scenario;
use crate::scenario::sweep::axes;
use crate::scenario::sweep::{Options, Plan, Points};
use crate::session::Progress;
use crate::values::points::Point;

/// How close the boundary's two rates must come: the next rate that fails is within 5% of
/// the one reported.
const BOUNDARY_WITHIN: f64 = 0.05;

/// A sweep in progress: its servers, its document and how its cells are run and written.
struct Sweep<'a> {
    cmd: &'a Options,
    /// Resolves the points the bisection picks.
    points: &'a Points,
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
        let repeat = self.cmd.repeat.max(1);
        let scenarios: Vec<Scenario> = (0..repeat)
            .map(|t| {
                let mut s = sc.clone();
                if !self.cmd.same_seed {
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
        let sc = self.points.at(&set)?.swap_remove(si);
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
pub async fn run(plan: Plan, cmd: &Options) -> Result<Ended> {
    // Every point resolved before the output directory or a server exists.
    let lay = layout::layout(&plan)?;
    std::fs::create_dir_all(&cmd.out)
        .with_context(|| format!("creating the output directory {}", cmd.out.display()))?;
    let status = Status::new(cmd.quiet);
    let shutdown = shutdown_on_signals();
    let total: u64 = match &lay.boundary {
        Some((others, _, _)) => {
            (others.len() * lay.strategies.len()) as u64 * u64::from(cmd.max_runs)
        }
        None => (lay.grid.len() * lay.strategies.len()) as u64,
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
    let env = Env::start(&lay.biggest, &status).await?;
    let workload = crate::report::describe(&lay.first).join(", ")
        + &match (&lay.boundary, plan.axes.is_empty()) {
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
        &lay.first,
        &plan.axes.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
    );
    let mut s = Sweep {
        cmd,
        points: &plan.points,
        dir: cmd.out.clone(),
        env,
        shutdown,
        status,
        bar,
        doc: SweepDoc {
            schema: SWEEP_SCHEMA,
            workload,
            strategies: lay.strategies.clone(),
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
            boundary: lay.boundary.as_ref().map(|_| BTreeMap::new()),
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
    let outcome = drive(&mut s, &lay, total).await;
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

async fn drive(s: &mut Sweep<'_>, lay: &layout::Layout, total: u64) -> Result<()> {
    match &lay.boundary {
        None => {
            for g in &lay.grid {
                for sc in &g.scenarios {
                    if s.cell(sc, Params(g.params.clone()), total).await?.is_none() {
                        s.doc.interrupted = true;
                        return Ok(());
                    }
                }
            }
        }
        Some((others, lo, hi)) => {
            let mut left = total;
            for o in others {
                for (si, name) in lay.strategies.iter().enumerate() {
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
