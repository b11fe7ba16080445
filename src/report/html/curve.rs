//! Hit-rate curves: an LRU miss-ratio curve (`stampede mrc --json`, drawn by `report`) and, on a
//! sweep along `maxmemory`, the hit rates Redis measured at each budget over the exact LRU curve
//! of the same requests. Cache sizes span decades, so the x axis is logarithmic; the hit rate is
//! in percent from 0 to 100, so two charts of one page compare by eye.

use std::fmt::Write as _;

use anyhow::Result;
use plotters::prelude::*;
use serde::Deserialize;

use super::chart::{Look, hex, look, plot_err};
use super::esc;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 380;

/// A curve drawn as a line through its points (x, hit rate 0..1).
pub struct Line<'a> {
    pub label: &'a str,
    pub look: Look,
    pub points: Vec<(f64, f64)>,
}

/// Points drawn as markers: filled for what was measured, hollow for what was computed.
pub struct Marks<'a> {
    pub label: &'a str,
    pub look: Look,
    pub filled: bool,
    pub points: Vec<(f64, f64)>,
}

/// How the x axis's numbers are written: as object counts or as bytes.
#[derive(Clone, Copy)]
pub enum XUnit {
    Objects,
    Bytes,
}

impl XUnit {
    fn show(self, v: f64) -> String {
        match self {
            XUnit::Objects => super::chart::fmt_num(v),
            XUnit::Bytes => crate::values::Size(v.round().max(0.0) as u64).to_string(),
        }
    }
}

/// One chart of hit rate (percent) against a logarithmic x, as an SVG document.
pub fn draw(x_desc: &str, unit: XUnit, lines: &[Line], marks: &[Marks]) -> Result<String> {
    let xs = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .chain(marks.iter().flat_map(|m| m.points.iter()))
        .map(|p| p.0)
        .filter(|x| *x > 0.0 && x.is_finite());
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (lo / 1.5, (hi * 1.5).max(lo * 2.0))
    } else {
        (1.0, 10.0)
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(12)
            .margin_right(24)
            .margin_left(8)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..100f64)
            .map_err(plot_err)?;
        let x_fmt = |v: &f64| unit.show(*v);
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("hit rate (%)")
            .x_label_formatter(&x_fmt)
            .y_labels(6)
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .bold_line_style(RGBColor(0xD8, 0xD8, 0xD8))
            .draw()
            .map_err(plot_err)?;
        for l in lines {
            chart
                .draw_series(LineSeries::new(
                    l.points
                        .iter()
                        .filter(|p| p.0 > 0.0)
                        .map(|&(x, h)| (x, h * 100.0)),
                    l.look.color.stroke_width(2),
                ))
                .map_err(plot_err)?;
        }
        for m in marks {
            let style = if m.filled {
                m.look.color.filled()
            } else {
                m.look.color.stroke_width(2)
            };
            chart
                .draw_series(
                    m.points
                        .iter()
                        .filter(|p| p.0 > 0.0)
                        .map(|&(x, h)| Circle::new((x, h * 100.0), 5, style)),
                )
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A legend as HTML: a swatch in each series' colour, a line or a filled or hollow dot.
pub fn legend(lines: &[Line], marks: &[Marks]) -> String {
    let mut h = String::from("<p class=\"legend\">");
    for l in lines {
        let _ = write!(
            h,
            "<span style=\"color:{}\">━━</span> {} &nbsp; ",
            hex(l.look.color),
            esc(l.label)
        );
    }
    for m in marks {
        let _ = write!(
            h,
            "<span style=\"color:{}\">{}</span> {} &nbsp; ",
            hex(m.look.color),
            if m.filled { "●" } else { "○" },
            esc(m.label)
        );
    }
    h.push_str("</p>\n");
    h
}

/// `stampede mrc --json`'s document, as `report` reads it back.
#[derive(Debug, Deserialize)]
pub struct MrcDoc {
    pub requests: u64,
    pub distinct_keys: u64,
    pub sampling_rate: f64,
    pub mean_object_bytes: f64,
    pub curve: Vec<MrcPoint>,
}

#[derive(Debug, Deserialize)]
pub struct MrcPoint {
    pub objects: u64,
    pub bytes: u64,
    pub hit_rate: f64,
}

impl MrcDoc {
    /// The document in `text`, when it is one (`report` tells it from a run's result by its
    /// `curve` and `sampling_rate`).
    pub fn parse(text: &str) -> Option<MrcDoc> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        if v.get("curve").is_none() || v.get("sampling_rate").is_none() {
            return None;
        }
        serde_json::from_value(v).ok()
    }
}

/// The page of `file` when it holds `mrc --json`'s document; None when it holds something else
/// (a run's result, which `report` reads as such).
pub fn mrc_report(file: &std::path::Path) -> Result<Option<String>> {
    if file.is_dir() {
        return Ok(None);
    }
    let Ok(text) = std::fs::read_to_string(file) else {
        return Ok(None);
    };
    match MrcDoc::parse(&text) {
        Some(d) => Ok(Some(mrc_page(&file.display().to_string(), &d)?)),
        None => Ok(None),
    }
}

/// The page of a miss-ratio curve: hit rate against objects, then against bytes, and the table.
pub fn mrc_page(name: &str, d: &MrcDoc) -> Result<String> {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stampede mrc</title>\n<style>body { font-family: sans-serif; margin: 24px; color: #111; max-width: 1160px; } table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 3px 8px; font-size: 13px; text-align: right; }</style></head><body>\n");
    let sampling = if d.sampling_rate >= 1.0 {
        "exact (Mattson stack distances)".to_string()
    } else {
        format!("SHARDS spatial sampling at rate {}", d.sampling_rate)
    };
    let _ = writeln!(
        h,
        "<h1>LRU hit rate against cache size</h1><p>{}: {} requests, {} distinct keys, {}; bytes = objects × {:.0} B, the mean value size of the distinct keys (no Redis overhead).</p>",
        esc(name),
        d.requests,
        d.distinct_keys,
        esc(&sampling),
        d.mean_object_bytes
    );
    let line = |by_bytes: bool| Line {
        label: "exact LRU",
        look: look(0),
        points: d
            .curve
            .iter()
            .map(|p| {
                let x = if by_bytes { p.bytes } else { p.objects };
                (x as f64, p.hit_rate)
            })
            .collect(),
    };
    for (desc, unit, by_bytes) in [
        ("cache size (objects)", XUnit::Objects, false),
        ("cache size (bytes)", XUnit::Bytes, true),
    ] {
        let _ = writeln!(h, "<figure><figcaption>{desc}</figcaption>");
        h.push_str(&draw(desc, unit, &[line(by_bytes)], &[])?);
        h.push_str("</figure>\n");
    }
    h.push_str("<table><tr><th>objects</th><th>bytes</th><th>hit rate</th></tr>\n");
    for p in &d.curve {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.2}%</td></tr>",
            p.objects,
            p.bytes,
            p.hit_rate * 100.0
        );
    }
    h.push_str("</table></body></html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mrc_document_is_told_from_a_result() {
        let doc = r#"{"requests": 10, "distinct_keys": 3, "sampling_rate": 1.0,
            "mean_object_bytes": 100.0,
            "curve": [{"objects": 1, "bytes": 100, "hit_rate": 0.2},
                      {"objects": 3, "bytes": 300, "hit_rate": 0.7}]}"#;
        let d = MrcDoc::parse(doc).expect("an mrc document");
        assert_eq!(d.curve.len(), 2);
        assert!(MrcDoc::parse(r#"{"schema": 3, "strategy": "mutex"}"#).is_none());
        let page = mrc_page("t.csv", &d).unwrap();
        assert!(page.contains("<svg"));
        assert!(page.contains("<td>70.00%</td>"));
    }
}
