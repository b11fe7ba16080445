//! Plain-text tables for a terminal or a CI log: the thresholds of a run, the ranking of a
//! `compare`, and the verdicts of a `check`.

use std::fmt::Write as _;

use crate::metric::Metric;
use crate::results::ThresholdResult;
use crate::results::check::Comparison;
use crate::results::summary::CompareSummary;

/// Columns padded to their widest cell; names and words left-aligned (`left(i)`), numbers right.
pub fn aligned(header: &[&str], rows: &[Vec<String>], left: impl Fn(usize) -> bool) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut o = String::new();
    let line = |o: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut parts = Vec::with_capacity(widths.len());
        for (i, (c, w)) in cells.zip(&widths).enumerate() {
            parts.push(if left(i) {
                format!("{c:<w$}")
            } else {
                format!("{c:>w$}")
            });
        }
        let _ = writeln!(o, "  {}", parts.join("  ").trim_end());
    };
    line(&mut o, &mut header.iter().copied());
    for r in rows {
        line(&mut o, &mut r.iter().map(String::as_str));
    }
    o
}

/// The thresholds of a run, one line each (nothing when none were set).
pub fn thresholds(ts: &[ThresholdResult]) -> String {
    let mut o = String::new();
    for t in ts {
        let u =
            Metric::by_threshold_name(&t.name).map_or(crate::metric::Unit::Count, |m| m.def().unit);
        let _ = writeln!(
            o,
            "  threshold {} {}: measured {}  {}",
            t.name,
            u.show(t.limit),
            match &t.measured {
                crate::results::Known::Value(v) => u.show(*v),
                crate::results::Known::Unknown(why) => format!("unknown ({why})"),
            },
            if t.passed { "ok" } else { "BROKEN" }
        );
    }
    o
}

/// The ranking of a `compare`, what it means, and the trade-offs.
pub fn compare(s: &CompareSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "stampede compare: {}{}",
        s.workload,
        if s.interrupted { "  [INTERRUPTED]" } else { "" }
    );
    let _ = writeln!(
        o,
        "verdict   {}",
        crate::results::conclusion::wrap(&s.conclusion.text, 100, "          ")
    );
    let (header, rows, numeric) = s.ranking_cells(false);
    o.push_str(&aligned(&header, &rows, |i| !numeric[i]));
    for n in s.notes() {
        let _ = writeln!(o, "  {n}");
    }
    if let Some((header, rows)) = crate::results::conclusion::cause_table(&s.ranking) {
        let _ = writeln!(
            o,
            "db calls by cause (each strategy's median trial; herd = what a perfect coordination saves):"
        );
        o.push_str(&aligned(&header, &rows, |i| i == 0));
    }
    let t = s.tradeoffs();
    if let (false, Some(base)) = (t.is_empty(), &s.tradeoff_baseline) {
        let _ = writeln!(
            o,
            "trade-offs against {base} (medians; Pareto front over {}):",
            s.objectives_in_words()
        );
        let header = s.tradeoff_header();
        o.push_str(&aligned(&header, &t, |i| i == 0 || i == header.len() - 1));
        for n in s.verdict_notes() {
            let _ = writeln!(o, "  {n}");
        }
        let _ = writeln!(o, "  Pareto front: {}", s.front_line());
    }
    if !s.not_run.is_empty() {
        let _ = writeln!(o, "  not run: {}", s.not_run.join(", "));
    }
    o
}

/// How a comparison with these trials (baseline, current) decides.
pub fn trials_note(t: (usize, usize)) -> String {
    let min = crate::stats::MIN_TRIALS;
    if t.0 >= min && t.1 >= min {
        format!(
            "{} vs {} trials: medians, and a regression only when the 95% interval of the change lies wholly beyond the tolerance",
            t.0, t.1
        )
    } else if t.0 > 1 || t.1 > 1 {
        format!(
            "{} vs {} trials: medians against the tolerance (intervals need {min} trials on both sides)",
            t.0, t.1
        )
    } else {
        "one run on each side: figures against the tolerance".to_string()
    }
}

/// The verdicts of a `check`, one table per strategy.
pub fn check(cs: &[Comparison], notes: &[String]) -> String {
    let mut o = String::new();
    for c in cs {
        let n = c.regressions();
        let _ = writeln!(
            o,
            "stampede check: {} — {} vs baseline {}: {}",
            c.strategy,
            c.current.display(),
            c.baseline.display(),
            if n == 0 {
                "no regression".to_string()
            } else {
                format!("{n} regression(s)")
            }
        );
        for f in &c.forced {
            let _ = writeln!(o, "  warning (--force): {f}");
        }
        let _ = writeln!(o, "  {}", trials_note(c.trials));
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.metric.name().to_string(),
                    r.show(r.baseline),
                    r.show(r.current),
                    r.change_with_interval(),
                    r.tolerance(),
                    r.verdict().to_string(),
                ]
            })
            .collect();
        o.push_str(&aligned(
            &[
                "metric",
                "baseline",
                "current",
                "change",
                "tolerance",
                "verdict",
            ],
            &rows,
            |i| i == 0 || i == 5,
        ));
    }
    for n in notes {
        let _ = writeln!(o, "note: {n}");
    }
    if cs.len() > 1 {
        let total: usize = cs.iter().map(Comparison::regressions).sum();
        let _ = writeln!(
            o,
            "stampede check: {} strategies compared, {}",
            cs.len(),
            if total == 0 {
                "no regression".to_string()
            } else {
                format!("{total} regression(s)")
            }
        );
    }
    o
}
