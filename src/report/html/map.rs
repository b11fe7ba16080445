//! A sweep's HTML page: one panel per strategy on the same axes, the survival map drawn as a
//! heatmap of inline SVG (rows the first axis, columns the second; one row with one axis),
//! each cell coloured by its verdict and labelled as the summary labels it, then the
//! boundaries found. Self-contained like the results report: no script, nothing fetched.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::esc;
use crate::error::UsageError;
use crate::results::sweep::{Cell, SWEEP_FILE, SweepDoc, boundary_sentence, map_label, num};

const CELL_W: f64 = 118.0;
const CELL_H: f64 = 34.0;
const LEFT: f64 = 90.0;
const TOP: f64 = 40.0;

/// Read a sweep directory's sweep.json.
pub fn load(dir: &Path) -> Result<SweepDoc> {
    let p = dir.join(SWEEP_FILE);
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError::new(format!(
            "{} is not a stampede sweep document ({e}): give the directory `stampede sweep --out` wrote",
            p.display()
        ))
        .into()
    })
}

/// The fill of a cell: green when it holds, red when it does not, grey when not judged.
fn colour(c: Option<&Cell>) -> &'static str {
    match c {
        None => "#eeeeee",
        Some(c) if c.shock && map_label(c) == "n/j" => "#c9c9c9",
        Some(c) if c.holds => "#7cc47f",
        Some(_) => "#e57373",
    }
}

fn panel(h: &mut String, d: &SweepDoc, strategy: &str) {
    let rows_axis = d.axes.first();
    let cols_axis = d.axes.get(1);
    let rows: Vec<Option<f64>> =
        rows_axis.map_or(vec![None], |a| a.values.iter().map(|v| Some(*v)).collect());
    let cols: Vec<Option<f64>> =
        cols_axis.map_or(vec![None], |a| a.values.iter().map(|v| Some(*v)).collect());
    let width = LEFT + CELL_W * cols.len() as f64 + 10.0;
    let height = TOP + CELL_H * rows.len() as f64 + 10.0;
    let _ = writeln!(h, "<div class=\"panel\"><h2>{}</h2>", esc(strategy));
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"survival map of {}\">",
        esc(strategy)
    );
    if let Some(a) = cols_axis {
        let _ = writeln!(
            h,
            "<text x=\"{LEFT}\" y=\"14\" font-size=\"12\">{} →</text>",
            esc(&a.header())
        );
    }
    if let Some(a) = rows_axis {
        let _ = writeln!(
            h,
            "<text x=\"4\" y=\"{}\" font-size=\"12\">{} ↓</text>",
            TOP - 6.0,
            esc(&a.header())
        );
    }
    for (j, cv) in cols.iter().enumerate() {
        if let Some(v) = cv {
            let _ = writeln!(
                h,
                "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
                LEFT + CELL_W * (j as f64 + 0.5),
                TOP - 8.0,
                cols_axis.map_or_else(|| num(*v).to_string(), |a| a.show(*v))
            );
        }
    }
    for (i, rv) in rows.iter().enumerate() {
        let y = TOP + CELL_H * i as f64;
        if let Some(v) = rv {
            let _ = writeln!(
                h,
                "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
                LEFT - 6.0,
                y + CELL_H / 2.0 + 4.0,
                rows_axis.map_or_else(|| num(*v).to_string(), |a| a.show(*v))
            );
        }
        for (j, cv) in cols.iter().enumerate() {
            let mut at = Vec::new();
            if let (Some(a), Some(v)) = (rows_axis, rv) {
                at.push((a.name.clone(), *v));
            }
            if let (Some(a), Some(v)) = (cols_axis, cv) {
                at.push((a.name.clone(), *v));
            }
            let cell = d.cell(strategy, &at);
            let x = LEFT + CELL_W * j as f64;
            let label = cell.map_or("—".to_string(), map_label);
            let title = cell.map_or(String::new(), |c| {
                format!(
                    "{} at {}: goodput {:.0}/s of {:.0}/s, p99 {} ms",
                    c.strategy,
                    c.params.key(),
                    c.figures.goodput_per_s,
                    c.figures.offered_per_s,
                    c.figures
                        .p99_ms
                        .map_or("—".to_string(), |p| format!("{p:.1}"))
                )
            });
            let _ = writeln!(
                h,
                "<g class=\"cell\"><title>{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#fff\"/><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text></g>",
                esc(&title),
                CELL_W - 2.0,
                CELL_H - 2.0,
                colour(cell),
                x + CELL_W / 2.0,
                y + CELL_H / 2.0 + 4.0,
                esc(&label)
            );
        }
    }
    h.push_str("</svg></div>\n");
}

/// The page of a sweep.
pub fn render(d: &SweepDoc) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stampede sweep</title>\n<style>body { font-family: sans-serif; margin: 24px; color: #111; max-width: 1160px; } .panel { display: inline-block; vertical-align: top; margin: 0 24px 18px 0; } h2 { font-size: 16px; margin: 12px 0 4px; } table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 3px 8px; font-size: 13px; }</style></head><body>\n");
    let _ = writeln!(
        h,
        "<h1>stampede sweep</h1><p class=\"scenario\">{}</p>",
        esc(&d.workload)
    );
    let _ = writeln!(
        h,
        "<p>Green: recovered from the shock, or with no shock below the knee (goodput at least 99% of the offered rate and p99 at most {} ms); red: not recovered (NOT) or past the knee; grey: not judged (n/j).{}</p>",
        num(d.knee_p99_ms),
        if d.interrupted {
            " Interrupted: the cells that finished."
        } else {
            ""
        }
    );
    // A boundary's cells are its bisection's probes, not a grid: its table stands alone.
    if d.boundary.is_none() {
        h.push_str("<div class=\"maps\">\n");
        for s in &d.strategies {
            panel(&mut h, d, s);
        }
        h.push_str("</div>\n");
    }
    if let Some(b) = &d.boundary {
        h.push_str("<h2>Boundary</h2><table><tr><th>strategy</th><th>at</th><th>req/s</th><th>fails at</th><th>runs</th><th>bound</th></tr>\n");
        for s in &d.strategies {
            for e in b.get(s).into_iter().flatten() {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(s),
                    esc(&e.at.key()),
                    num(e.rps),
                    e.fails_at.map_or("—".to_string(), |f| num(f).to_string()),
                    e.runs,
                    e.bound.as_deref().unwrap_or("found")
                );
            }
        }
        let _ = writeln!(
            h,
            "</table><p>{}.</p>",
            esc(&boundary_sentence(b, &d.strategies))
        );
    }
    h.push_str("</body></html>\n");
    h
}

/// Write the page of the sweep in `dir` to `out`.
pub fn write(d: &SweepDoc, out: &Path) -> Result<()> {
    std::fs::write(out, render(d))
        .with_context(|| format!("writing the HTML report to {}", out.display()))
}
