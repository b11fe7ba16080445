//! A sweep's HTML page: one panel per strategy on the same axes, the survival map drawn as a
//! heatmap of inline SVG (rows the first axis, columns the second; one row with one axis),
//! each cell coloured by its verdict and labelled as the summary labels it, then the
//! boundaries found. Self-contained like the results report: no script, nothing fetched.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::chart::look;
use super::curve::{self, Line, Marks, XUnit};
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

/// The page of one or several sweeps (several: the same sweep under other policies, say), each
/// sweep's maps and boundaries in turn, and, along `maxmemory`, one chart of every sweep's
/// measured hit rates over the exact LRU curve.
pub fn render(docs: &[SweepDoc]) -> Result<String> {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stampede sweep</title>\n<style>body { font-family: sans-serif; margin: 24px; color: #111; max-width: 1160px; } .panel { display: inline-block; vertical-align: top; margin: 0 24px 18px 0; } h2 { font-size: 16px; margin: 12px 0 4px; } table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 3px 8px; font-size: 13px; }</style></head><body>\n");
    h.push_str("<h1>stampede sweep</h1>\n");
    h.push_str(&memory(docs)?);
    for d in docs {
        one(&mut h, d);
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

fn one(h: &mut String, d: &SweepDoc) {
    let _ = writeln!(h, "<p class=\"scenario\">{}</p>", esc(&d.workload));
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
            panel(h, d, s);
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
}

/// A sweep cell's memory budget, when it has one.
fn budget(c: &Cell) -> Option<f64> {
    c.params.get("maxmemory").filter(|m| *m > 0.0)
}

/// What a key cost Redis at `objects` entries: the cells' measured costs (entries, bytes per
/// key, sorted), interpolated on a log scale of entries, held flat past the ends.
fn per_key(cost: &[(f64, f64)], objects: f64) -> f64 {
    let (first, last) = (cost[0], cost[cost.len() - 1]);
    if objects <= first.0 {
        return first.1;
    }
    if objects >= last.0 {
        return last.1;
    }
    let k = cost.partition_point(|c| c.0 <= objects);
    let (a, b) = (cost[k - 1], cost[k]);
    let t = (objects.ln() - a.0.ln()) / (b.0.ln() - a.0.ln()).max(1e-12);
    a.1 + t * (b.1 - a.1)
}

/// The gap between Redis's hit rate and the exact LRU's, per cell with a budget.
fn memory_table(limited: &[(usize, &Cell)]) -> String {
    let mut h = String::new();
    h.push_str("<table><tr><th>strategy</th><th>policy</th><th>maxmemory</th><th>entries</th><th>hit rate</th><th>exact LRU</th><th>gap</th></tr>\n");
    let pct = |v: Option<f64>| v.map_or("—".to_string(), |h| format!("{:.1}%", h * 100.0));
    for (_, c) in limited {
        let f = &c.figures;
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.strategy),
            esc(f.policy.as_deref().unwrap_or("?")),
            budget(c).map_or(String::new(), |b| crate::values::Size(b as u64).to_string()),
            f.lru_objects.map_or("—".to_string(), |o| format!("{o:.0}")),
            pct(f.hit_rate),
            pct(f.lru_hit_rate),
            match (f.hit_rate, f.lru_hit_rate) {
                (Some(m), Some(e)) => format!("{:+.1} pts", (m - e) * 100.0),
                _ => "—".into(),
            }
        );
    }
    h.push_str("</table>\n");
    h
}

/// Along `maxmemory`: the hit rate Redis measured at each budget (filled) and the exact LRU of
/// as many entries as the budget held (hollow), at the budget's bytes, over the exact LRU curve
/// of the same requests, its objects turned into bytes at the bytes per key Redis measured
/// under the limits; then the gap per sweep, strategy and policy. Empty without such an axis.
fn memory(docs: &[SweepDoc]) -> Result<String> {
    let Some(first) = docs.iter().find(|d| d.lru_curve.is_some()) else {
        return Ok(String::new());
    };
    let limited: Vec<(usize, &Cell)> = docs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| d.cells.iter().map(move |c| (i, c)))
        .filter(|(_, c)| budget(c).is_some())
        .collect();
    // What a key costs falls as the budget grows (Redis's own ~1 MB is spread over more keys):
    // the curve takes each cell's measured cost at its entries, interpolated between cells, so
    // that an exact-LRU point lies on the curve at its budget.
    let mut cost: Vec<(f64, f64)> = limited
        .iter()
        .filter(|(i, _)| docs[*i].lru_curve.is_some())
        .filter_map(|(_, c)| Some((c.figures.lru_objects?, c.figures.bytes_per_key?)))
        .filter(|(o, b)| *o > 0.0 && *b > 0.0)
        .collect();
    cost.sort_by(|a, b| a.0.total_cmp(&b.0));
    if cost.is_empty() {
        return Ok(String::new());
    }
    let per_key = |objects: f64| per_key(&cost, objects);
    let curve = first.lru_curve.as_deref().unwrap_or_default();
    let smallest = limited
        .iter()
        .filter_map(|(_, c)| budget(c))
        .fold(f64::INFINITY, f64::min);
    let lines = [Line {
        label: "exact LRU of the same requests",
        look: look(6),
        // From a tenth of the smallest budget: the sizes nobody swept are not the question.
        points: curve
            .iter()
            .map(|p| (p.objects * per_key(p.objects), p.hit_rate))
            .filter(|p| p.0 >= smallest / 10.0)
            .collect(),
    }];
    // One series per sweep and strategy (and policy), measured and computed.
    let mut labels: Vec<(usize, String, String)> = Vec::new();
    for (i, c) in &limited {
        let policy = c.figures.policy.clone().unwrap_or_else(|| "?".into());
        if !labels
            .iter()
            .any(|(j, s, p)| j == i && *s == c.strategy && *p == policy)
        {
            labels.push((*i, c.strategy.clone(), policy));
        }
    }
    let names: Vec<String> = labels
        .iter()
        .map(|(_, s, p)| format!("{s}, Redis {p}"))
        .collect();
    let lru_names: Vec<String> = labels
        .iter()
        .map(|(_, s, p)| format!("{s}, exact LRU at Redis {p}'s entries"))
        .collect();
    let series = |k: usize, pick: &dyn Fn(&Cell) -> Option<f64>| -> Vec<(f64, f64)> {
        let (i, s, p) = &labels[k];
        limited
            .iter()
            .filter(|(j, c)| {
                j == i && c.strategy == *s && c.figures.policy.as_deref().unwrap_or("?") == p
            })
            .filter_map(|(_, c)| Some((budget(c)?, pick(c)?)))
            .collect()
    };
    let mut marks = Vec::new();
    for k in 0..labels.len() {
        marks.push(Marks {
            label: &names[k],
            look: look(k),
            filled: true,
            points: series(k, &|c| c.figures.hit_rate),
        });
        marks.push(Marks {
            label: &lru_names[k],
            look: look(k),
            filled: false,
            points: series(k, &|c| c.figures.lru_hit_rate),
        });
    }
    let mut h = String::from("<h2>Hit rate against maxmemory</h2>\n");
    let _ = writeln!(
        h,
        "<p>Each budget at its bytes. The curve's entries are turned into bytes at what a key cost Redis in the cells (used_memory / keys: value, key, TTL and the server's own share; {:.0} B at {} entries to {:.0} B at {}), interpolated between them, so a hollow point lies on the curve at its budget.</p>",
        cost[0].1,
        cost[0].0,
        cost[cost.len() - 1].1,
        cost[cost.len() - 1].0
    );
    h.push_str(&curve::legend(&lines, &marks));
    h.push_str(&curve::draw(
        "maxmemory (bytes)",
        XUnit::Bytes,
        &lines,
        &marks,
    )?);
    h.push_str(&memory_table(&limited));
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::sweep::{AxisDoc, Figures, LruPoint, Params};

    fn cell(policy: &str, mm: f64, hit: f64, lru: f64, objects: f64, per_key: f64) -> Cell {
        Cell {
            strategy: "cache-aside".into(),
            params: Params(vec![("maxmemory".into(), mm)]),
            result: String::new(),
            trials: 1,
            figures: Figures {
                hit_rate: Some(hit),
                lru_hit_rate: Some(lru),
                lru_objects: Some(objects),
                bytes_per_key: Some(per_key),
                policy: Some(policy.into()),
                ..Figures::default()
            },
            recovery: None,
            shock: false,
            below_knee: true,
            holds: true,
        }
    }

    fn doc(policy: &str, hit_at_2mb: f64) -> SweepDoc {
        SweepDoc {
            schema: 1,
            workload: "w".into(),
            strategies: vec!["cache-aside".into()],
            axes: vec![AxisDoc {
                name: "maxmemory".into(),
                unit: "bytes".into(),
                values: vec![0.0, 2097152.0, 4194304.0],
            }],
            knee_p99_ms: 100.0,
            cells: vec![
                cell(policy, 0.0, 0.762, 0.762, 4636.0, 1195.0),
                cell(policy, 2097152.0, hit_at_2mb, 0.580, 772.0, 2716.0),
                cell(policy, 4194304.0, 0.722, 0.725, 2573.0, 1630.0),
            ],
            boundary: None,
            interrupted: false,
            lru_curve: Some(
                [1.0, 10.0, 100.0, 772.0, 2573.0, 4636.0]
                    .iter()
                    .zip([0.01, 0.1, 0.3, 0.58, 0.725, 0.762])
                    .map(|(o, h)| LruPoint {
                        objects: *o,
                        hit_rate: h,
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn a_maxmemory_sweep_draws_its_points_over_the_curve_with_the_gap_per_policy() {
        let page = render(&[doc("allkeys-lru", 0.560), doc("allkeys-lfu", 0.625)]).unwrap();
        assert!(
            page.contains("<h2>Hit rate against maxmemory</h2>"),
            "{page}"
        );
        // The budgets only, not the unlimited cell, which has no place on a log axis.
        assert_eq!(
            page.matches("<tr><td>cache-aside</td>").count(),
            4,
            "{page}"
        );
        assert!(page.contains("<td>allkeys-lru</td><td>2mb</td><td>772</td><td>56.0%</td><td>58.0%</td><td>-2.0 pts</td>"), "{page}");
        assert!(page.contains("<td>allkeys-lfu</td><td>2mb</td><td>772</td><td>62.5%</td><td>58.0%</td><td>+4.5 pts</td>"), "{page}");
        // Measured points filled and computed hollow, for each policy.
        assert!(
            page.contains("●</span> cache-aside, Redis allkeys-lfu"),
            "{page}"
        );
        assert!(
            page.contains("○</span> cache-aside, exact LRU at Redis allkeys-lru"),
            "{page}"
        );
        // Both sweeps' maps follow.
        assert_eq!(page.matches("survival map of cache-aside").count(), 2);
    }

    #[test]
    fn a_sweep_along_another_axis_has_no_memory_chart() {
        let mut d = doc("allkeys-lru", 0.5);
        d.lru_curve = None;
        assert!(!render(&[d]).unwrap().contains("Hit rate against maxmemory"));
    }
}
