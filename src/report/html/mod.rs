//! The HTML report: one self-contained page (inline SVG and CSS, nothing loaded from the
//! network, no script) with the timelines of one or several results on a shared time axis,
//! fault windows shaded, load bursts marked, and a comparison table.
//!
//! `compare` and `run --html` call [`write`]; `stampede report` reads results with [`load`].

pub(crate) mod chart;
pub mod curve;
mod diff;
pub mod map;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::UsageError;
use crate::metric::Metric;
use crate::results::comparable::{WORKLOAD_SETTINGS, differences};
use crate::results::summary::{CompareSummary, cell};
use crate::results::{Bucket, FaultReport, RunResult, read_json};

use chart::{METRICS, Series};

/// A file in a compare directory that is not one strategy's result.
const SUMMARY_FILE: &str = "summary.json";

/// Read results from files and directories, in the order given; a directory contributes its
/// `*.json` files sorted by name, except `summary.json`, and trial 1 of each
/// `<strategy>/trial-N.json` directory. A named file that is not a results
/// file is an error; inside a directory such a file is skipped with a warning.
pub fn load(inputs: &[PathBuf]) -> Result<Vec<RunResult>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.extension().is_some_and(|x| x == "json")
                        && f.file_name().is_some_and(|n| n != SUMMARY_FILE)
                })
                .collect();
            files.sort();
            let before = out.len();
            for f in files {
                match read_json(&f) {
                    Ok(r) => out.push(r),
                    Err(e) => eprintln!("warning: skipping {}: {e:#}", f.display()),
                }
            }
            // `--repeat` writes <strategy>/trial-N.json: trial 1 (the scenario's own seed)
            // stands for each strategy, as in compare's own report, so every line ran the
            // same keys.
            let mut strategies: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|d| d.is_dir())
                .collect();
            strategies.sort();
            for d in strategies {
                if let Ok(r) = read_json(&d.join("trial-1.json")) {
                    out.push(r);
                }
            }
            if out.len() == before {
                return Err(UsageError::new(format!(
                    "{} holds no stampede results file (*.json written by `run --out` or `compare`)",
                    p.display()
                ))
                .into());
            }
        } else if p.exists() {
            out.push(read_json(p).map_err(|e| UsageError::new(format!("{e:#}")))?);
        } else {
            return Err(UsageError::new(format!(
                "{} does not exist: give a results file (`run --out FILE`) or a compare directory",
                p.display()
            ))
            .into());
        }
    }
    Ok(out)
}

/// A fault window, seconds since the measured window started.
struct Window {
    strategy: String,
    from: f64,
    to: f64,
    /// The fault's figures, when the result recorded it (not only a run of down buckets).
    fault: Option<FaultReport>,
}

/// Fault windows of a result: its `faults[]`, or else the runs of buckets with Redis down.
fn windows(r: &RunResult) -> Vec<Window> {
    if !r.faults.is_empty() {
        return r
            .faults
            .iter()
            .map(|f| Window {
                strategy: r.strategy.clone(),
                from: f.at_ms as f64 / 1000.0,
                // A drop is instant: shaded one bucket wide, so it shows.
                to: (f.at_ms + f.down_ms.max(r.scenario.interval.0.as_millis() as u64)) as f64
                    / 1000.0,
                fault: Some(f.clone()),
            })
            .collect();
    }
    down_runs(crate::results::whole(&r.timeline))
        .into_iter()
        .map(|(from, to)| Window {
            strategy: r.strategy.clone(),
            from,
            to,
            fault: None,
        })
        .collect()
}

/// Spans (s) of consecutive buckets with Redis down, from the start of the first to the end
/// of the last.
fn down_runs(timeline: &[Bucket]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut prev = 0u64;
    let mut open: Option<u64> = None;
    for b in timeline {
        match (b.redis_up, open) {
            (false, None) => open = Some(prev),
            (true, Some(from)) => {
                out.push((from, prev));
                open = None;
            }
            _ => {}
        }
        prev = b.t_ms;
    }
    if let Some(from) = open {
        out.push((from, prev));
    }
    out.into_iter()
        .map(|(a, b)| (a as f64 / 1000.0, b as f64 / 1000.0))
        .collect()
}

/// Overlapping spans merged: a compare runs the same fault schedule for every strategy, and
/// the same outage, a few ms apart per run, is one shaded area (stacked translucent areas
/// would darken into a block).
fn union(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Settings in which the results differ, beside the strategy: a report overlaying runs of
/// different workloads would compare nothing, so the page says so.
fn differing_settings(results: &[RunResult]) -> Vec<String> {
    let Some(first) = results.first() else {
        return Vec::new();
    };
    let mut keys: Vec<String> = results
        .iter()
        .flat_map(|r| differences(&first.scenario, &r.scenario, &WORKLOAD_SETTINGS))
        .map(|(k, _, _)| k)
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The page.
pub fn render(results: &[RunResult], summary: Option<&CompareSummary>) -> Result<String> {
    let first = results
        .first()
        .ok_or_else(|| UsageError::new("no results to report"))?;
    let labels = labels(results);
    let series: Vec<Series> = results
        .iter()
        .zip(&labels)
        .enumerate()
        .map(|(i, (r, label))| Series {
            label,
            look: chart::look(i),
            timeline: crate::results::whole(&r.timeline),
            bursts: chart::bursts(crate::results::whole(&r.timeline)),
        })
        .collect();
    let x_max = results
        .iter()
        .filter_map(|r| crate::results::whole(&r.timeline).last().map(|b| b.t_ms))
        .max()
        .unwrap_or(0) as f64
        / 1000.0;
    let all_windows: Vec<Window> = results.iter().flat_map(windows).collect();
    let shaded = union(all_windows.iter().map(|w| (w.from, w.to)).collect());
    let recovered: Vec<f64> = results
        .iter()
        .filter_map(|r| r.recovery.as_ref())
        .filter_map(|rc| rc.back_ms.map(|b| (rc.shock_end_ms + b) as f64 / 1000.0))
        .collect();
    let mut guides: Vec<f64> = series
        .iter()
        .flat_map(|s| s.bursts.iter().map(|b| b.0))
        .collect();
    guides.sort_by(f64::total_cmp);
    guides.dedup_by(|a, b| (*a - *b).abs() < 1e-6);

    let title = title(first, &labels);
    let mut h = String::with_capacity(256 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(h, "<title>{}</title>", esc(&title));
    h.push_str("<style>\n");
    h.push_str(CSS);
    h.push_str("</style>\n</head>\n<body>\n");
    let _ = writeln!(h, "<h1>{}</h1>", esc(&title));
    let _ = writeln!(h, "<p class=\"scenario\">{}</p>", esc(&describe(first)));
    let differ = differing_settings(results);
    if !differ.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"warn\">These results come from different workloads (they differ in {}): \
the lines are not a like-for-like comparison.</p>",
            esc(&differ.join(", "))
        );
    }
    if results.iter().any(|r| r.interrupted) {
        h.push_str("<p class=\"warn\">A run was interrupted: its figures cover what ran.</p>\n");
    }
    verdict(&mut h, results, summary)?;
    table(&mut h, results, &labels);
    diagnoses(&mut h, results, &labels);
    h.push_str("<div class=\"legend\">\n");
    let legend: Vec<(&str, chart::Look)> = series.iter().map(|s| (s.label, s.look)).collect();
    h.push_str(&chart::legend(&legend, !shaded.is_empty())?);
    h.push_str("</div>\n");
    let writes = results.iter().any(|r| r.scenario.writes.is_some());
    for m in METRICS.iter().chain(writes.then_some(&chart::STALE_READS)) {
        let _ = writeln!(
            h,
            "<figure class=\"chart\" data-metric=\"{}\" data-series=\"{}\">\n<figcaption>{}</figcaption>",
            m.key,
            esc(&labels.join(",")),
            esc(m.title)
        );
        h.push_str(&chart::draw(
            m, &series, x_max, &shaded, &guides, &recovered,
        )?);
        h.push_str("</figure>\n");
    }
    super::cluster::html(&mut h, results, &labels)?;
    faults_table(&mut h, &all_windows);
    recovery_table(&mut h, results, &labels);
    notes(&mut h, first);
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

/// The verdict that leads the page, the differences it rests on, and where the load came
/// from: the comparison's own summary when there is one (every trial), else one computed from
/// these results (one trial each). Nothing with a single strategy.
fn verdict(h: &mut String, results: &[RunResult], summary: Option<&CompareSummary>) -> Result<()> {
    let built;
    let s = match summary {
        Some(s) => s,
        None => {
            let mut groups: Vec<Vec<RunResult>> = Vec::new();
            for r in results {
                match groups.iter_mut().find(|g| g[0].strategy == r.strategy) {
                    Some(g) => g.push(r.clone()),
                    None => groups.push(vec![r.clone()]),
                }
            }
            if groups.len() < 2 {
                return Ok(());
            }
            built = CompareSummary::build(String::new(), &groups, Vec::new(), false);
            &built
        }
    };
    let c = &s.conclusion;
    let _ = writeln!(
        h,
        "<section class=\"verdict\"><h2>Verdict</h2>\n<p>{}</p></section>",
        esc(&c.text)
    );
    if let Some(svg) = diff::draw(&s.ranking, c)? {
        let _ = writeln!(
            h,
            "<figure class=\"chart diff\"><figcaption>Each strategy against {} (green: better beyond the noise, red: worse, grey: inside it)</figcaption>",
            esc(c.baseline.as_deref().unwrap_or("the baseline"))
        );
        h.push_str(&svg);
        h.push_str("</figure>\n");
    }
    if let Some((header, rows)) = crate::results::conclusion::cause_table(&s.ranking) {
        h.push_str("<h2>Where the DB calls came from</h2>\n<table class=\"causes\">\n<thead><tr>");
        for c in &header {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for r in rows {
            h.push_str("<tr>");
            for c in r {
                let _ = write!(h, "<td>{}</td>", esc(&c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table>\n<p class=\"note\">Each strategy's median trial; <code>herd</code> is what a perfect coordination would have saved (docs/results.md: the causes and their precedence).</p>\n");
    }
    Ok(())
}

/// Series labels: the strategy, made unique with an index when two results share one.
fn labels(results: &[RunResult]) -> Vec<String> {
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if results.iter().filter(|o| o.strategy == r.strategy).count() > 1 {
                format!("{} #{}", r.strategy, i + 1)
            } else {
                r.strategy.clone()
            }
        })
        .collect()
}

fn scenario_name(r: &RunResult) -> Option<String> {
    let file = r.scenario.scenario_file.as_deref()?;
    Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
}

fn title(first: &RunResult, labels: &[String]) -> String {
    let name = scenario_name(first).unwrap_or_else(|| "stampede".to_string());
    format!("{name}: {}", labels.join(" vs "))
}

/// One line saying what traffic the scenario sent.
fn describe(r: &RunResult) -> String {
    let mut parts = super::describe(&r.scenario);
    parts.push(format!("buckets of {}", r.scenario.interval));
    parts.join(" · ")
}

/// The comparison table, one column per ranked metric of [`crate::metric`] after the requests
/// completed; with several results the best figure of each column is bold.
fn table(h: &mut String, results: &[RunResult], labels: &[String]) {
    h.push_str("<table class=\"compare\">\n<thead><tr><th>strategy</th><th title=\"requests completed\">requests</th>");
    let writes = results.iter().any(|r| r.scenario.writes.is_some());
    for m in Metric::ranked_for(writes) {
        let d = m.def();
        let _ = write!(h, "<th title=\"{}\">{}</th>", esc(d.what), esc(d.header));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for (i, (r, label)) in results.iter().zip(labels).enumerate() {
        let look = chart::look(i);
        let _ = write!(
            h,
            "<tr><th scope=\"row\"><span class=\"swatch\" style=\"background:{}\"></span>{}</th><td>{}</td>",
            chart::hex(look.color),
            esc(label),
            r.requests.completed
        );
        for m in Metric::ranked_for(writes) {
            let v = r.figure(m);
            let best = results.len() > 1
                && m.has_best()
                && results.iter().all(|o| !m.worse(v, o.figure(m)));
            let text = esc(&cell(m, v));
            if best {
                let _ = write!(h, "<td class=\"best\">{text}</td>");
            } else {
                let _ = write!(h, "<td>{text}</td>");
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// What each run says it could not show (nothing for clean runs).
fn diagnoses(h: &mut String, results: &[RunResult], labels: &[String]) {
    if results.iter().all(|r| r.diagnoses.is_empty()) {
        return;
    }
    h.push_str("<h2>Diagnoses</h2>\n<ul class=\"diagnoses\">\n");
    for (r, label) in results.iter().zip(labels) {
        for d in &r.diagnoses {
            let _ = writeln!(
                h,
                "<li><strong>{}</strong> <code>{}</code>: {}</li>",
                esc(label),
                esc(&d.code),
                esc(&d.message)
            );
        }
    }
    h.push_str("</ul>\n");
}

fn faults_table(h: &mut String, windows: &[Window]) {
    if windows.is_empty() {
        return;
    }
    h.push_str(
        "<h2>Fault windows</h2>\n<table class=\"faults\">\n<thead><tr><th>strategy</th><th>fault</th>\
<th>from (s)</th><th title=\"until the server answered again\">to (s)</th>\
<th>DB calls during</th>\
<th title=\"DB calls in the first second after the restart\">recovery stampede</th>\
<th title=\"from the restart to a request's first success on that server (a Redis command; a load for kill-postgres)\">reconnected after (ms)</th>\
<th title=\"from the restart until the hit rate was back to 90% of its level before the fault\">hit rate back after (ms)</th>\
</tr></thead>\n<tbody>\n",
    );
    let opt = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| v.to_string());
    for w in windows {
        let f = w.fault.as_ref();
        let _ = writeln!(
            h,
            "<tr class=\"fault-window\" data-from-s=\"{:.3}\" data-to-s=\"{:.3}\"><td>{}</td><td>{}</td>\
<td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            w.from,
            w.to,
            esc(&w.strategy),
            esc(f.map_or("redis down", |f| f.kind.name())),
            w.from,
            w.to,
            opt(f.map(|f| f.db_calls_during)),
            opt(f.map(|f| f.recovery_stampede)),
            opt(f.and_then(|f| f.recovered_ms)),
            opt(f.and_then(|f| f.hit_rate_recovered_ms)),
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// The recovery verdict of each run with a shock (the green line on the charts is where it
/// was back).
fn recovery_table(h: &mut String, results: &[RunResult], labels: &[String]) {
    if results.iter().all(|r| r.recovery.is_none()) {
        return;
    }
    h.push_str(
        "<h2>Recovery</h2>\n<table class=\"recovery\">\n<thead><tr><th>strategy</th><th>verdict</th>\
<th title=\"from the last shock's end until back by the criterion (the green line)\">back after (s)</th>\
<th>why</th></tr></thead>\n<tbody>\n",
    );
    for (r, label) in results.iter().zip(labels) {
        let Some(rc) = &r.recovery else { continue };
        let _ = writeln!(
            h,
            "<tr class=\"verdict-{}\"><td>{}</td><td>{}</td><td>{}</td><td title=\"{}\">{}</td></tr>",
            rc.verdict.name(),
            esc(label),
            rc.verdict.name(),
            rc.back_ms
                .map_or_else(|| "–".to_string(), |b| format!("{:.1}", b as f64 / 1000.0)),
            esc(&rc.criterion),
            esc(&rc.reason)
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

fn notes(h: &mut String, first: &RunResult) {
    let interval = first.scenario.interval.to_string();
    let _ = writeln!(
        h,
        "<p class=\"notes\">Each point is one bucket of {} (plotted at its middle); rates are per second. \
Marks on the DB-calls chart, and the grey guides across every chart, are where a load burst starts: \
a bucket whose DB calls reach three times the run's median (at least one) after a bucket below that. \
With a few hot keys each burst is an expiry, the cold start, or the first loads after Redis returns. \
Written by stampede {}.</p>",
        esc(&interval),
        esc(&first.tool_version)
    );
}

/// Escape text for HTML content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = r#"body { font-family: sans-serif; margin: 24px; color: #111; background: #fff; max-width: 1160px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 20px 0 6px; }
p.scenario { margin: 0 0 14px; color: #333; }
p.warn { color: #a00; font-weight: bold; }
p.notes { color: #444; font-size: 13px; max-width: 1100px; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #ccc; padding: 3px 9px; text-align: right; }
thead th { border-bottom: 2px solid #555; }
tbody th { text-align: left; font-weight: normal; white-space: nowrap; }
td.best { font-weight: bold; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 6px; vertical-align: -1px; }
.legend { margin: 6px 0 0; }
.legend svg { width: 360px; height: auto; }
figure.chart { margin: 10px 0 4px; page-break-inside: avoid; }
figure.chart figcaption { font-size: 14px; font-weight: bold; margin: 0 0 2px 8px; }
figure.chart svg { width: 100%; height: auto; display: block; }
@media print { body { margin: 0; } }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_down_buckets_become_windows() {
        let tl: Vec<Bucket> = [true, false, false, true, true, false]
            .iter()
            .enumerate()
            .map(|(i, &up)| Bucket {
                t_ms: (i as u64 + 1) * 100,
                redis_up: up,
                ..Default::default()
            })
            .collect();
        assert_eq!(down_runs(&tl), vec![(0.1, 0.3), (0.5, 0.6)]);
    }

    #[test]
    fn the_same_outage_in_several_runs_is_one_window() {
        let spans = vec![(4.0, 7.03), (7.5, 8.0), (4.001, 7.02), (3.999, 7.04)];
        assert_eq!(union(spans), vec![(3.999, 7.04), (7.5, 8.0)]);
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
