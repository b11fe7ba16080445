//! A sweep for people: with one axis a table per strategy of its figures along the axis with
//! the knee marked, with two the survival map (rows the first axis, columns the second), and
//! the boundaries found with their sentence; aligned text for a terminal, Markdown for
//! summary.md. The verdicts are the sweep document's (`results::sweep`).

use crate::results::sweep::{
    self as doc, BoundaryEntry, Cell, SweepDoc, boundary_sentence, map_label, num, recovery_s,
};

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".to_string(), |x| format!("{x:.digits$}"))
}

/// One cell's figures in a line.
pub fn cell_line(c: &Cell) -> String {
    let f = &c.figures;
    format!(
        "goodput {:.0}/s of {:.0}/s offered, DB calls {}/s ({}), p99 {} ms, peak herd {} — {}",
        f.goodput_per_s,
        f.offered_per_s,
        opt(f.db_calls_per_s, 0),
        f.by_cause
            .map_or("causes unknown".to_string(), |b| b.short()),
        opt(f.p99_ms, 1),
        opt(f.peak_key_herd, 0),
        if c.shock {
            map_label(c)
        } else if c.below_knee {
            "below the knee".to_string()
        } else {
            "past the knee".to_string()
        }
    )
}

/// One boundary in words.
pub fn boundary_line(e: &BoundaryEntry) -> String {
    match e.bound.as_deref() {
        Some("lower") => format!(
            "at least {} req/s (the maximum tried held), {} runs",
            num(e.rps),
            e.runs
        ),
        Some("upper") => format!(
            "below {} req/s (the minimum tried did not hold), {} run(s)",
            num(e.rps),
            e.runs
        ),
        _ => format!(
            "{} req/s ({} did not hold), {} runs",
            num(e.rps),
            e.fails_at.map_or("—".to_string(), |f| num(f).to_string()),
            e.runs
        ),
    }
}

/// Rows (the first is the header) as aligned text or a Markdown table.
fn table(rows: &[Vec<String>], md: bool) -> String {
    let mut o = String::new();
    if rows.is_empty() {
        return o;
    }
    if md {
        for (i, r) in rows.iter().enumerate() {
            o.push_str(&format!("| {} |\n", r.join(" | ")));
            if i == 0 {
                o.push_str(&format!("|{}\n", "---|".repeat(r.len())));
            }
        }
        return o;
    }
    let n = rows[0].len();
    let w: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        o.push_str(line.join("  ").trim_end());
        o.push('\n');
    }
    o
}

fn heading(o: &mut String, md: bool, text: &str) {
    if md {
        o.push_str(&format!("\n### {text}\n\n"));
    } else {
        o.push_str(&format!("\n{text}\n"));
    }
}

/// One axis: a row per point, the knee marked at the first point past it.
fn curve(o: &mut String, d: &SweepDoc, strategy: &str, md: bool) {
    let Some(axis) = d.axes.first() else { return };
    let cells: Vec<&Cell> = axis
        .values
        .iter()
        .filter_map(|v| d.cell(strategy, &[(axis.name.clone(), *v)]))
        .collect();
    let shock = cells.iter().any(|c| c.shock);
    let mut header = vec![
        axis.header(),
        "offered/s".into(),
        "goodput/s".into(),
        "DB calls/s".into(),
        "p99 ms".into(),
        "peak herd".into(),
        "db calls by cause".into(),
    ];
    // Along a memory axis what changes first is the hit rate.
    // Beside it, an exact LRU of the entries the budget holds, on the same requests.
    let lru = axis.is_size() && cells.iter().any(|c| c.figures.lru_hit_rate.is_some());
    if axis.is_size() {
        header.insert(4, "hit rate".into());
        if lru {
            header.insert(5, "entries".into());
            header.insert(6, "exact LRU".into());
            header.insert(7, "gap".into());
        }
    }
    if shock {
        header.push("recovery".into());
    }
    header.push("knee".into());
    let mut rows = vec![header];
    let knee = cells.iter().position(|c| !c.below_knee);
    for (i, c) in cells.iter().enumerate() {
        let f = &c.figures;
        let mut r = vec![
            c.params
                .get(&axis.name)
                .map_or(String::new(), |v| axis.show(v)),
            format!("{:.0}", f.offered_per_s),
            format!("{:.0}", f.goodput_per_s),
            opt(f.db_calls_per_s, 0),
            opt(f.p99_ms, 1),
            opt(f.peak_key_herd, 0),
            f.by_cause.map_or("—".to_string(), |b| b.short()),
        ];
        if axis.is_size() {
            r.insert(
                4,
                f.hit_rate
                    .map_or("—".into(), |h| format!("{:.1}%", h * 100.0)),
            );
            if lru {
                r.insert(5, opt(f.lru_objects, 0));
                r.insert(
                    6,
                    f.lru_hit_rate
                        .map_or("—".into(), |h| format!("{:.1}%", h * 100.0)),
                );
                r.insert(
                    7,
                    match (f.hit_rate, f.lru_hit_rate) {
                        (Some(m), Some(e)) => format!("{:+.1} pts", (m - e) * 100.0),
                        _ => "—".into(),
                    },
                );
            }
        }
        if shock {
            r.push(match recovery_s(c) {
                Some(s) => format!("{s:.1} s"),
                None => map_label(c),
            });
        }
        r.push(match knee {
            Some(k) if k == i => "<- knee".into(),
            Some(k) if i > k => "past".into(),
            _ => String::new(),
        });
        rows.push(r);
    }
    heading(
        o,
        md,
        &format!(
            "{strategy}: {}",
            match knee.and_then(|k| cells[k].params.get(&axis.name)) {
                Some(v) => format!("knee at {}={}", axis.name, axis.show(v)),
                None => "no knee in the range".to_string(),
            }
        ),
    );
    o.push_str(&table(&rows, md));
    if lru {
        let policy = cells
            .iter()
            .find_map(|c| c.figures.policy.as_deref())
            .unwrap_or("unknown");
        o.push_str(&format!(
            "{}entries: what the budget holds at the bytes per key Redis measured (used_memory / keys); exact LRU: an ideal LRU of that many entries on the same requests and window; gap: Redis ({policy}) less exact LRU\n",
            if md { "\n" } else { "" }
        ));
    }
}

/// Two axes: the survival map, rows the first axis, columns the second.
fn map(o: &mut String, d: &SweepDoc, strategy: &str, md: bool) {
    let (Some(a), Some(b)) = (d.axes.first(), d.axes.get(1)) else {
        return;
    };
    let mut header = vec![format!("{} \\ {}", a.header(), b.header())];
    header.extend(b.values.iter().map(|v| b.show(*v)));
    let mut rows = vec![header];
    for va in &a.values {
        let mut r = vec![a.show(*va)];
        for vb in &b.values {
            r.push(
                d.cell(strategy, &[(a.name.clone(), *va), (b.name.clone(), *vb)])
                    .map_or("—".to_string(), map_label),
            );
        }
        rows.push(r);
    }
    heading(o, md, &format!("{strategy}: survival map"));
    o.push_str(&table(&rows, md));
}

fn boundaries(o: &mut String, d: &SweepDoc, md: bool) {
    let Some(b) = &d.boundary else { return };
    let mut rows = vec![vec![
        "strategy".to_string(),
        "at".into(),
        "boundary req/s".into(),
        "fails at".into(),
        "runs".into(),
        "bound".into(),
    ]];
    for s in &d.strategies {
        for e in b.get(s).into_iter().flatten() {
            rows.push(vec![
                s.clone(),
                if e.at.0.is_empty() {
                    "—".into()
                } else {
                    e.at.key()
                },
                num(e.rps).to_string(),
                e.fails_at.map_or("—".into(), |f| num(f).to_string()),
                e.runs.to_string(),
                e.bound.clone().unwrap_or_else(|| "found".into()),
            ]);
        }
    }
    heading(o, md, "boundary (the highest rate that holds)");
    o.push_str(&table(&rows, md));
    let sentence = boundary_sentence(b, &d.strategies);
    if !sentence.is_empty() {
        o.push_str(&format!("\n{sentence}.\n"));
    }
}

fn render(d: &SweepDoc, md: bool) -> String {
    let mut o = String::new();
    if md {
        o.push_str("# stampede sweep\n\n");
    } else {
        o.push_str("stampede sweep\n");
    }
    o.push_str(&format!(
        "{}{}\n",
        d.workload,
        if d.interrupted {
            " [INTERRUPTED: the cells that finished]"
        } else {
            ""
        }
    ));
    o.push_str(&format!(
        "{}knee: goodput below {}% of the offered rate or p99 above {} ms\n",
        if md { "\n" } else { "" },
        doc::KNEE_GOODPUT_SHARE * 100.0,
        num(d.knee_p99_ms)
    ));
    if d.boundary.is_some() {
        boundaries(&mut o, d, md);
        return o;
    }
    for s in &d.strategies {
        match d.axes.len() {
            1 => curve(&mut o, d, s, md),
            _ => map(&mut o, d, s, md),
        }
    }
    o
}

/// The sweep as aligned text, for the terminal.
pub fn text(d: &SweepDoc) -> String {
    render(d, false)
}

/// The sweep as Markdown (summary.md).
pub fn markdown(d: &SweepDoc) -> String {
    render(d, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::sweep::{AxisDoc, Figures, Params};

    fn cell(rps: f64, p99: f64) -> Cell {
        let figures = Figures {
            offered_per_s: rps,
            goodput_per_s: rps,
            p99_ms: Some(p99),
            ..Figures::default()
        };
        Cell {
            strategy: "mutex".into(),
            params: Params(vec![("rps".into(), rps)]),
            result: String::new(),
            trials: 1,
            below_knee: doc::below_knee(&figures, 100.0),
            holds: doc::below_knee(&figures, 100.0),
            figures,
            recovery: None,
            shock: false,
        }
    }

    #[test]
    fn a_curve_marks_its_knee_at_the_first_point_past_it() {
        let d = SweepDoc {
            schema: 1,
            workload: "w".into(),
            strategies: vec!["mutex".into()],
            axes: vec![AxisDoc {
                name: "rps".into(),
                unit: "req/s".into(),
                values: vec![100.0, 200.0, 400.0],
            }],
            knee_p99_ms: 100.0,
            cells: vec![cell(100.0, 10.0), cell(200.0, 150.0), cell(400.0, 900.0)],
            boundary: None,
            interrupted: false,
            lru_curve: None,
        };
        let t = text(&d);
        assert!(t.contains("mutex: knee at rps=200"), "{t}");
        let row = t.lines().find(|l| l.starts_with("200")).unwrap();
        assert!(row.ends_with("<- knee"), "{t}");
        assert!(
            t.lines()
                .find(|l| l.starts_with("400"))
                .unwrap()
                .ends_with("past")
        );
        assert!(markdown(&d).contains("| rps (req/s) |"), "{}", markdown(&d));
    }
}
