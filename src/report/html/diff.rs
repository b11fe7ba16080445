//! What a comparison turns on, drawn as differences from the baseline rather than as totals
//! that overlap: one small panel per objective (DB calls in %, p95 and p99 in ms, stale answers
//! in points), one bar per strategy, across the page's width. A bar is green when the strategy
//! is better beyond the noise, red when worse, grey inside it (the conclusion's own verdicts).

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{WIDTH, plot_err};
use crate::metric::Metric;
use crate::results::conclusion::Conclusion;
use crate::results::summary::Row;

const BETTER: RGBColor = RGBColor(0x1A, 0x98, 0x50);
const WORSE: RGBColor = RGBColor(0xD7, 0x30, 0x27);
const NOISE: RGBColor = RGBColor(0xB0, 0xB0, 0xB0);

/// The panels: the metric, its title, and how a difference is written.
const PANELS: [(Metric, &str); 4] = [
    (Metric::DbCalls, "DB calls vs baseline (%)"),
    (Metric::P95, "p95 vs baseline (ms)"),
    (Metric::P99, "p99 vs baseline (ms)"),
    (Metric::StaleRatio, "stale answers vs baseline (pp)"),
];

/// A strategy's difference from the baseline on `m`, in the panel's unit.
fn delta(m: Metric, r: &Row, b: &Row) -> f64 {
    let (v, bv) = (r.figure(m), b.figure(m));
    match m {
        Metric::DbCalls if bv > 0.0 => 100.0 * (v - bv) / bv,
        Metric::DbCalls => 0.0,
        Metric::StaleRatio => 100.0 * (v - bv),
        _ => v - bv,
    }
}

/// The panels as one SVG, or None without a baseline or with one strategy.
pub fn draw(rows: &[Row], c: &Conclusion) -> Result<Option<String>> {
    let Some(b) = c
        .baseline
        .as_deref()
        .and_then(|n| rows.iter().find(|r| r.strategy == n))
    else {
        return Ok(None);
    };
    let others: Vec<&Row> = rows.iter().filter(|r| r.strategy != b.strategy).collect();
    if others.is_empty() {
        return Ok(None);
    }
    let n = others.len();
    let height = 56 + 30 * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let panels = root.split_evenly((1, PANELS.len()));
        for (area, &(m, title)) in panels.iter().zip(&PANELS) {
            let verdict = c.objectives.iter().find(|o| o.metric == m.name());
            let ds: Vec<f64> = others.iter().map(|r| delta(m, r, b)).collect();
            let reach = ds.iter().fold(0.0f64, |a, d| a.max(d.abs())).max(1e-3) * 1.25;
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 14))
                .margin(6)
                .x_label_area_size(22)
                .y_label_area_size(0)
                .build_cartesian_2d(-reach..reach, 0f64..n as f64)
                .map_err(plot_err)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .disable_y_axis()
                .x_labels(5)
                .x_label_formatter(&|v| super::chart::fmt_num(*v))
                .label_style(("sans-serif", 11))
                .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
                .draw()
                .map_err(plot_err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, 0.0), (0.0, n as f64)],
                    BLACK.stroke_width(1),
                )))
                .map_err(plot_err)?;
            for (i, (r, d)) in others.iter().zip(&ds).enumerate() {
                let y = (n - 1 - i) as f64;
                let color = match verdict {
                    Some(o) if o.better.iter().any(|x| x.strategy == r.strategy) => BETTER,
                    Some(o) if o.worse.iter().any(|x| x.strategy == r.strategy) => WORSE,
                    _ => NOISE,
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y + 0.2), (*d, y + 0.8)],
                        color.filled(),
                    )))
                    .map_err(plot_err)?;
                // The name on the side away from the bar, so it never covers it.
                let (x, anchor) = if *d > 0.0 {
                    (-reach * 0.97, HPos::Left)
                } else {
                    (reach * 0.97, HPos::Right)
                };
                let style = ("sans-serif", 12)
                    .into_text_style(area)
                    .pos(Pos::new(anchor, VPos::Center));
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{} {}", r.strategy, signed(*d)),
                        (x, y + 0.5),
                        style,
                    )))
                    .map_err(plot_err)?;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(Some(svg))
}

fn signed(d: f64) -> String {
    if d.abs() >= 10.0 {
        format!("{d:+.0}")
    } else {
        format!("{d:+.2}")
    }
}
