//! The timeline charts of the HTML report, drawn with plotters' SVG backend: one chart per
//! metric on a shared time axis, one series per result, fault windows shaded, load bursts
//! (expiries) marked.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use crate::results::Bucket;

/// One timeline metric: how a bucket becomes a point, and how the chart is labelled.
pub struct Metric {
    /// Stable name, also the `data-metric` attribute of the chart in the page.
    pub key: &'static str,
    pub title: &'static str,
    /// Y-axis label, with the unit.
    pub y_label: &'static str,
    /// The value of a bucket of the given width in seconds; None where it is undefined
    /// (a rate of requests when no request completed).
    value: fn(&Bucket, f64) -> Option<f64>,
    /// Fixed upper bound of the y axis, when the metric has one.
    y_cap: Option<f64>,
    /// Start the y axis near the lowest value (in steps of 10) instead of at zero, when that
    /// is at least 50: a hit rate that dips from 100% to 96% at each expiry is invisible on
    /// a 0–100 axis. The axis is labelled, so the zoom is not hidden.
    zoom: bool,
}

pub const METRICS: [Metric; 5] = [
    Metric {
        key: "requests",
        title: "Requests completed per second",
        y_label: "requests/s",
        value: |b, w| Some(b.requests as f64 / w),
        y_cap: None,
        zoom: false,
    },
    Metric {
        key: "db_calls",
        title: "DB calls (loads) per second: a spike is a herd at an expiry or after a restart",
        y_label: "DB calls/s",
        value: |b, w| Some(b.db_calls as f64 / w),
        y_cap: None,
        zoom: false,
    },
    Metric {
        key: "hit_rate",
        title: "Hit rate: share of requests served from the cache (fresh or stale)",
        y_label: "hit rate (%)",
        value: |b, _| {
            (b.requests > 0).then(|| (b.hits + b.stale) as f64 * 100.0 / b.requests as f64)
        },
        y_cap: Some(100.0),
        zoom: true,
    },
    Metric {
        key: "p99",
        title: "p99 latency of the requests completed in each interval",
        y_label: "p99 latency (ms)",
        value: |b, _| (b.requests > 0).then_some(b.p99_ms),
        y_cap: None,
        zoom: false,
    },
    Metric {
        key: "errors",
        title: "Errors per second",
        y_label: "errors/s",
        value: |b, w| Some(b.errors as f64 / w),
        y_cap: None,
        zoom: false,
    },
];

/// Drawn only for results with writes (without them it is 0 throughout).
pub const STALE_READS: Metric = Metric {
    key: "stale_reads",
    title: "Stale reads per second: requests served a version older than one already committed",
    y_label: "stale reads/s",
    value: |b, w| Some(b.stale_reads as f64 / w),
    y_cap: None,
    zoom: false,
};

/// How one series looks: colour and dash pattern both differ, so series stay apart in grey print.
#[derive(Clone, Copy)]
pub struct Look {
    pub color: RGBColor,
    /// SVG `stroke-dasharray`, empty for a solid line.
    pub dash: &'static str,
    /// Marker shape of the load-burst marks: 0 triangle, 1 circle, 2 cross.
    pub marker: u8,
}

/// Okabe–Ito colours (distinguishable with colour-blindness), each paired with a dash pattern.
const LOOKS: [Look; 7] = [
    Look {
        color: RGBColor(0x00, 0x72, 0xB2),
        dash: "",
        marker: 0,
    },
    Look {
        color: RGBColor(0xD5, 0x5E, 0x00),
        dash: "9 4",
        marker: 1,
    },
    Look {
        color: RGBColor(0x00, 0x9E, 0x73),
        dash: "2 3",
        marker: 2,
    },
    Look {
        color: RGBColor(0xCC, 0x79, 0xA7),
        dash: "12 3 3 3",
        marker: 0,
    },
    Look {
        color: RGBColor(0xE6, 0x9F, 0x00),
        dash: "5 5",
        marker: 1,
    },
    Look {
        color: RGBColor(0x56, 0xB4, 0xE9),
        dash: "1 2",
        marker: 2,
    },
    Look {
        color: RGBColor(0x00, 0x00, 0x00),
        dash: "14 4 2 4 2 4",
        marker: 0,
    },
];

pub fn look(i: usize) -> Look {
    LOOKS[i % LOOKS.len()]
}

pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// Fill of a shaded fault window (Redis down); drawn translucent, so it prints as light grey.
pub const FAULT_FILL: RGBColor = RGBColor(0xE4, 0x1A, 0x1C);
const FAULT_OPACITY: f64 = 0.16;
/// The line where a run is back by the recovery verdict.
pub const RECOVERED: RGBColor = RGBColor(0x1A, 0x98, 0x50);
/// Vertical guides at load bursts, across every chart so a latency cliff lines up with its cause.
const GUIDE: RGBColor = RGBColor(0x99, 0x99, 0x99);
/// Beyond this many bursts the guides are noise (a wide Zipf key space expires continuously).
const MAX_GUIDES: usize = 40;
const SERIES_WIDTH: u32 = 2;
pub const WIDTH: u32 = 1100;
const HEIGHT: u32 = 250;

/// One result's timeline, ready to draw.
pub struct Series<'a> {
    pub label: &'a str,
    pub look: Look,
    pub timeline: &'a [Bucket],
    /// Start of each load burst, s, with the burst's DB calls/s (the marker's height).
    pub bursts: Vec<(f64, f64)>,
}

impl Series<'_> {
    /// Points of a metric at each bucket's midpoint (s), split where the value is undefined.
    fn segments(&self, m: &Metric) -> Vec<Vec<(f64, f64)>> {
        let mut out = vec![Vec::new()];
        let mut prev = 0u64;
        for b in self.timeline {
            let w = b.t_ms.saturating_sub(prev);
            let mid = (prev + b.t_ms) as f64 / 2000.0;
            prev = b.t_ms;
            if w == 0 {
                continue;
            }
            match (m.value)(b, w as f64 / 1000.0) {
                Some(v) if v.is_finite() => out.last_mut().map_or((), |s| s.push((mid, v))),
                _ => {
                    if out.last().is_some_and(|s| !s.is_empty()) {
                        out.push(Vec::new());
                    }
                }
            }
        }
        out.retain(|s| !s.is_empty());
        out
    }
}

/// Starts of load bursts in a timeline: a bucket whose DB calls reach 3× the run's median
/// (at least 1) after a bucket below that. With few hot keys each burst is an expiry (or the
/// cold start, or the first load after Redis returns); with a wide key space loads are
/// continuous and few or no bursts stand out, which is the point.
pub fn bursts(timeline: &[Bucket]) -> Vec<(f64, f64)> {
    let mut calls: Vec<u64> = timeline.iter().map(|b| b.db_calls).collect();
    calls.sort_unstable();
    let median = calls.get(calls.len() / 2).copied().unwrap_or(0);
    let threshold = (median * 3).max(1);
    let mut out = Vec::new();
    let (mut prev_t, mut above) = (0u64, false);
    for b in timeline {
        let w = b.t_ms.saturating_sub(prev_t);
        let start = prev_t;
        prev_t = b.t_ms;
        let now_above = b.db_calls >= threshold;
        if now_above && !above && w > 0 {
            out.push((start as f64 / 1000.0, b.db_calls as f64 * 1000.0 / w as f64));
        }
        above = now_above;
    }
    out
}

pub(super) fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Draw one metric as an SVG document (a string).
pub fn draw(
    m: &Metric,
    series: &[Series],
    x_max: f64,
    faults: &[(f64, f64)],
    guides: &[f64],
    recovered: &[f64],
) -> Result<String> {
    let segments: Vec<Vec<Vec<(f64, f64)>>> = series.iter().map(|s| s.segments(m)).collect();
    let top = segments
        .iter()
        .flatten()
        .flatten()
        .map(|p| p.1)
        .fold(0.0f64, f64::max);
    let y_max = m.y_cap.unwrap_or((top * 1.1).max(1.0));
    let low = segments
        .iter()
        .flatten()
        .flatten()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    let y_min = if m.zoom && low.is_finite() && low >= 50.0 {
        ((low / 10.0).floor() * 10.0).min(y_max - 10.0)
    } else {
        0.0
    };
    let x_max = x_max.max(0.1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(12)
            .margin_right(24)
            .margin_left(8)
            .x_label_area_size(42)
            .y_label_area_size(74)
            .build_cartesian_2d(0f64..x_max, y_min..y_max)
            .map_err(plot_err)?;
        let x_fmt = |v: &f64| {
            if x_max > 20.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        };
        let y_fmt = |v: &f64| fmt_num(*v);
        chart
            .configure_mesh()
            .x_desc("time since the measured window started (s)")
            .y_desc(m.y_label)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .x_labels(12)
            .y_labels(6)
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .bold_line_style(RGBColor(0xD8, 0xD8, 0xD8))
            .draw()
            .map_err(plot_err)?;
        chart
            .draw_series(faults.iter().map(|&(a, b)| {
                Rectangle::new(
                    [(a.max(0.0), y_min), (b.min(x_max), y_max)],
                    FAULT_FILL.mix(FAULT_OPACITY).filled(),
                )
            }))
            .map_err(plot_err)?;
        if guides.len() <= MAX_GUIDES {
            chart
                .draw_series(guides.iter().map(|&x| {
                    PathElement::new(vec![(x, y_min), (x, y_max)], GUIDE.mix(0.6).stroke_width(1))
                }))
                .map_err(plot_err)?;
        }
        // Where each run was back by the recovery verdict.
        chart
            .draw_series(recovered.iter().map(|&x| {
                PathElement::new(vec![(x, y_min), (x, y_max)], RECOVERED.stroke_width(2))
            }))
            .map_err(plot_err)?;
        for (s, segs) in series.iter().zip(&segments) {
            let style = s.look.color.stroke_width(SERIES_WIDTH);
            for seg in segs {
                chart
                    .draw_series(LineSeries::new(seg.iter().copied(), style))
                    .map_err(plot_err)?;
            }
        }
        if m.key == "db_calls" {
            for s in series {
                draw_markers(&mut chart, s, y_max)?;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(dashed(svg, series.iter().map(|s| s.look)))
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A mark at the top of each load burst, in the series' colour and shape.
fn draw_markers(chart: &mut Chart, s: &Series, y_max: f64) -> Result<()> {
    let style = s.look.color.filled();
    let pts = s.bursts.iter().map(|&(x, y)| (x, y.min(y_max)));
    match s.look.marker {
        0 => chart
            .draw_series(pts.map(|p| TriangleMarker::new(p, 5, style)))
            .map(|_| ()),
        1 => chart
            .draw_series(pts.map(|p| Circle::new(p, 4, style)))
            .map(|_| ()),
        _ => chart
            .draw_series(pts.map(|p| Cross::new(p, 4, s.look.color.stroke_width(2))))
            .map(|_| ()),
    }
    .map_err(plot_err)
}

/// The legend: a sample of each series' line (colour and dash) with its label, drawn with
/// plotters too so it matches the charts exactly.
pub fn legend(series: &[(&str, Look)], faults: bool) -> Result<String> {
    let row = 22u32;
    let rows = series.len() as u32 + u32::from(faults) + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (360, rows * row + 8)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let font = ("sans-serif", 15).into_font();
        let mut y = 14i32;
        for (label, look) in series {
            root.draw(&PathElement::new(
                vec![(8, y), (58, y)],
                look.color.stroke_width(SERIES_WIDTH),
            ))
            .map_err(plot_err)?;
            root.draw(&Text::new(label.to_string(), (70, y - 8), font.clone()))
                .map_err(plot_err)?;
            y += row as i32;
        }
        if faults {
            root.draw(&Rectangle::new(
                [(8, y - 8), (58, y + 8)],
                FAULT_FILL.mix(FAULT_OPACITY).filled(),
            ))
            .map_err(plot_err)?;
            root.draw(&Text::new(
                "Redis down (fault window)",
                (70, y - 8),
                font.clone(),
            ))
            .map_err(plot_err)?;
            y += row as i32;
        }
        root.draw(&PathElement::new(
            vec![(33, y - 9), (33, y + 9)],
            GUIDE.mix(0.6).stroke_width(1),
        ))
        .map_err(plot_err)?;
        root.draw(&TriangleMarker::new((33, y), 5, BLACK.filled()))
            .map_err(plot_err)?;
        root.draw(&Text::new(
            "start of a load burst (expiry)",
            (70, y - 8),
            font,
        ))
        .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(dashed(svg, series.iter().map(|s| s.1)))
}

/// Give each series' lines their dash pattern. plotters' SVG backend has no dash attribute and
/// its DashedLineSeries draws every dash as an element of its own (hundreds per series), so the
/// series lines, identified by their unique colour and width, get `stroke-dasharray` instead.
fn dashed(svg: String, looks: impl Iterator<Item = Look>) -> String {
    let mut svg = svg;
    for l in looks {
        if l.dash.is_empty() {
            continue;
        }
        let from = format!(r#"stroke="{}" stroke-width="{SERIES_WIDTH}""#, hex(l.color));
        let to = format!(r#"{from} stroke-dasharray="{}""#, l.dash);
        svg = svg.replace(&from, &to);
    }
    svg
}

pub(crate) fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(t_ms: u64, db_calls: u64) -> Bucket {
        Bucket {
            t_ms,
            requests: 10,
            db_calls,
            ..Default::default()
        }
    }

    #[test]
    fn bursts_mark_the_start_of_each_spike() {
        let tl: Vec<Bucket> = [60, 0, 0, 0, 0, 58, 2, 0, 0, 0, 0, 61]
            .iter()
            .enumerate()
            .map(|(i, &c)| b((i as u64 + 1) * 100, c))
            .collect();
        let marks: Vec<f64> = bursts(&tl).iter().map(|m| m.0).collect();
        assert_eq!(marks, vec![0.0, 0.5, 1.1]);
    }

    #[test]
    fn a_flat_load_has_no_bursts_beyond_the_threshold() {
        let tl: Vec<Bucket> = (0..20).map(|i| b((i + 1) * 100, 30 + i % 3)).collect();
        assert!(bursts(&tl).is_empty());
    }

    #[test]
    fn series_lines_get_their_dash_pattern() {
        let tl: Vec<Bucket> = (0..10).map(|i| b((i + 1) * 100, i)).collect();
        let series: Vec<Series> = (0..2)
            .map(|i| Series {
                label: "s",
                look: look(i),
                timeline: &tl,
                bursts: bursts(&tl),
            })
            .collect();
        let svg = draw(&METRICS[1], &series, 1.0, &[(0.2, 0.4)], &[], &[]).unwrap();
        assert!(svg.contains(&format!(
            r#"stroke="{}" stroke-width="2" points"#,
            hex(look(0).color)
        )));
        assert!(svg.contains(&format!(r#"stroke-dasharray="{}""#, look(1).dash)));
        assert_eq!(
            svg.matches(&format!(r#"fill="{}""#, hex(FAULT_FILL)))
                .count(),
            1
        );
    }
}
