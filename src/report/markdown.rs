//! Markdown (GitHub-flavoured) for CI summaries such as `$GITHUB_STEP_SUMMARY`: the ranking of
//! a `compare` and the verdicts of a `check`, one table row per strategy or per metric.

use std::fmt::Write as _;

use crate::results::check::{Comparison, Verdict};
use crate::results::summary::CompareSummary;

/// A table cell: pipes escaped, line breaks flattened, so a value cannot break the table.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A table; columns for which `right(i)` holds (numbers) are right-aligned.
fn table(o: &mut String, header: &[&str], right: impl Fn(usize) -> bool, rows: &[Vec<String>]) {
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let seps: Vec<&str> = (0..header.len())
        .map(|i| if right(i) { "---:" } else { "---" })
        .collect();
    let _ = writeln!(o, "| {} |", seps.join(" | "));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
}

/// The ranking of a `compare`, as `summary.md`.
pub fn compare(s: &CompareSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## stampede compare");
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{}{}",
        cell(&s.workload),
        if s.interrupted {
            " — **interrupted**: figures cover what ran"
        } else {
            ""
        }
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "**Verdict.** {}", cell(&s.conclusion.text));
    let _ = writeln!(o);
    let (header, rows, numeric) = s.ranking_cells(true);
    // The rank is a number but reads best left-aligned beside the strategy.
    table(&mut o, &header, |i| i > 0 && numeric[i], &rows);
    let _ = writeln!(o);
    for n in s.notes() {
        let _ = writeln!(o, "- {}", cell(&n));
    }
    if let Some((header, rows)) = crate::results::conclusion::cause_table(&s.ranking) {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "DB calls by cause (each strategy's median trial; `herd` is what a perfect coordination saves):"
        );
        let _ = writeln!(o);
        table(&mut o, &header, |i| i > 0, &rows);
    }
    let t = s.tradeoffs();
    if let (false, Some(base)) = (t.is_empty(), &s.tradeoff_baseline) {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Trade-offs against `{base}` (medians; Pareto front over {}): **{}**",
            s.objectives_in_words(),
            cell(&s.front_line())
        );
        let _ = writeln!(o);
        let header = s.tradeoff_header();
        table(&mut o, &header, |i| i > 0 && i + 1 < header.len(), &t);
        let _ = writeln!(o);
        for n in s.verdict_notes() {
            let _ = writeln!(o, "- {}", cell(&n));
        }
    }
    if !s.not_run.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "Not run: {}", s.not_run.join(", "));
    }
    o
}

/// The verdicts of a `check`: per strategy a heading and a table with one row per metric.
pub fn check(cs: &[Comparison], notes: &[String]) -> String {
    let mut o = String::new();
    let total: usize = cs.iter().map(Comparison::regressions).sum();
    let _ = writeln!(
        o,
        "## stampede check: {}",
        if total == 0 {
            "no regression".to_string()
        } else {
            format!("{total} regression(s)")
        }
    );
    for c in cs {
        let n = c.regressions();
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "### `{}` {}",
            c.strategy,
            if n == 0 {
                "— no regression".to_string()
            } else {
                format!("— **{n} regression(s)**")
            }
        );
        let _ = writeln!(o);
        for f in &c.forced {
            let _ = writeln!(o, "> compared with `--force` although {}", cell(f));
            let _ = writeln!(o);
        }
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.metric.name().to_string(),
                    r.show(r.baseline),
                    r.show(r.current),
                    r.change_with_interval(),
                    if r.verdict == Verdict::Worse {
                        format!("**{}** (tolerance {})", r.verdict(), r.tolerance())
                    } else {
                        r.verdict().to_string()
                    },
                ]
            })
            .collect();
        table(
            &mut o,
            &["metric", "baseline", "current", "change", "verdict"],
            |i| (1..4).contains(&i),
            &rows,
        );
    }
    if !notes.is_empty() {
        let _ = writeln!(o);
        for n in notes {
            let _ = writeln!(o, "- {}", cell(n));
        }
    }
    o
}
