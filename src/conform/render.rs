//! A conformance run for people: the table on the terminal and in Markdown (conform.md), one
//! row per figure with both sides' medians and intervals, the ratio and the verdict, the
//! latencies beside without one, then the notes.

use std::fmt::Write as _;

use super::figures::{Conformity, SideValues};

/// A value as printed: whole numbers without decimals, none as `unknown`.
fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() && v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) if v.is_finite() => format!("{v:.1}"),
        _ => "unknown".to_string(),
    }
}

/// A side: its median and its interval over the trials (`5 [4–7]`).
fn side(s: &SideValues, unit: &str) -> String {
    if s.unknown.is_some() || s.median.is_none() {
        return "unknown".to_string();
    }
    let u = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    if s.min == s.max {
        return format!("{}{u}", num(s.median));
    }
    format!("{}{u} [{}–{}]", num(s.median), num(s.min), num(s.max))
}

fn ratio(r: Option<f64>) -> String {
    match r {
        Some(v) if v.is_finite() => format!("{v:.2}×"),
        _ => "—".to_string(),
    }
}

/// The rows: figure, preset, library, ratio, verdict.
fn rows(c: &Conformity) -> Vec<[String; 5]> {
    let mut out: Vec<[String; 5]> = c
        .figures
        .iter()
        .map(|f| {
            [
                f.title.clone(),
                side(&f.preset, &f.unit),
                side(&f.library, &f.unit),
                ratio(f.ratio),
                f.verdict.clone(),
            ]
        })
        .collect();
    for l in &c.latencies {
        out.push([
            format!("{} (for information)", l.title),
            format!("{} ms", num(l.preset_median_ms)),
            format!("{} ms", num(l.library_median_ms)),
            match (l.preset_median_ms, l.library_median_ms) {
                (Some(p), Some(q)) if p > 0.0 => ratio(Some(q / p)),
                _ => "—".to_string(),
            },
            "—".to_string(),
        ]);
    }
    out
}

fn heading(c: &Conformity) -> String {
    format!(
        "{} preset `{}` beside {} ({}), {} trial(s), seeds {}",
        c.library,
        c.preset,
        c.measured,
        c.app,
        c.trials,
        c.seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The table for the terminal.
pub fn terminal(c: &Conformity) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n{}", heading(c));
    let _ = writeln!(s, "workload: {}", c.workload);
    if !c.app_env.is_empty() {
        let _ = writeln!(s, "library settings: {}", c.app_env.join(" "));
    }
    let header = [
        "figure".to_string(),
        "preset".to_string(),
        "library".to_string(),
        "ratio".to_string(),
        "verdict".to_string(),
    ];
    let rows = rows(c);
    let mut width = [0usize; 5];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (w, cell)) in width.iter().zip(r).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i == 0 {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    for f in c.figures.iter().filter(|f| f.verdict == "differs") {
        let _ = writeln!(s, "differs: {}: {}", f.title, f.detail);
    }
    let _ = writeln!(
        s,
        "(median [lowest–highest] over the trials; agrees: the intervals meet or the medians are within the figure's tolerance)"
    );
    for n in &c.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if c.interrupted {
        let _ = writeln!(s, "INTERRUPTED: the figures cover the trials that ran");
    }
    s
}

/// conform.md.
pub fn markdown(c: &Conformity) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# conform: {}\n", heading(c));
    let _ = writeln!(s, "Workload: {}.\n", c.workload);
    if !c.app_env.is_empty() {
        let _ = writeln!(s, "Library settings: `{}`.\n", c.app_env.join(" "));
    }
    let _ = writeln!(s, "| figure | preset | library | ratio | verdict |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for r in rows(c) {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    let _ = writeln!(
        s,
        "\nEach side: the median [lowest–highest] over the trials. A verdict `agrees` when the two intervals meet or the medians are within the figure's tolerance:\n"
    );
    for f in &c.figures {
        let _ = writeln!(
            s,
            "- {}: {} ({}; tolerance: {})",
            f.title, f.verdict, f.detail, f.tolerance
        );
    }
    if !c.notes.is_empty() {
        let _ = writeln!(s, "\nNotes:\n");
        for n in &c.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    if c.interrupted {
        let _ = writeln!(
            s,
            "\n**Interrupted**: the figures cover the trials that ran."
        );
    }
    s
}
