//! The answer on the terminal and as advise.md: the verdict first, then each pick's objective
//! and budgets with their intervals, the adoption, and the evidence.

use std::fmt::Write as _;

use super::Advice;
use super::judge::{Pick, show, show_interval};
use crate::metric::Metric;

fn pick_lines(o: &mut String, what: &str, p: &Pick, objective: Metric, md: bool) {
    let b = if md { "- " } else { "  " };
    let _ = writeln!(
        o,
        "{b}{what}: {} — {} {} over {} trial(s)",
        p.label,
        objective.name(),
        show_interval(objective, &p.objective),
        p.trials
    );
    for t in &p.thresholds {
        let m = Metric::by_threshold_name(&t.name).unwrap_or(objective);
        let _ = writeln!(
            o,
            "{}    {} {}: {} (limit {}) {}",
            if md { "  " } else { "" },
            t.name,
            if t.passed { "met" } else { "NOT met" },
            show_interval(m, &t.interval),
            show(m, Some(t.limit)),
            match (&t.unknown, t.passed) {
                (Some(why), _) => format!("<- {why}"),
                (None, true) => String::new(),
                (None, false) => "<-".to_string(),
            }
        );
    }
}

fn body(a: &Advice, md: bool) -> String {
    let objective = Metric::by_name(&a.minimize).unwrap_or(Metric::DbCalls);
    let mut o = String::new();
    let v = &a.verdict;
    if let Some(p) = &v.recommended {
        pick_lines(&mut o, "recommended", p, objective, md);
    }
    for t in &v.tied_with {
        let _ = writeln!(o, "{}tied with: {t}", if md { "- " } else { "  " });
    }
    if let Some(p) = &v.runner_up {
        pick_lines(&mut o, "runner-up", p, objective, md);
    }
    if let Some(c) = &v.closest {
        pick_lines(&mut o, "closest", &c.candidate, objective, md);
    }
    if let Some(p) = &v.baseline {
        let what = if super::app::is_app(&p.strategy) {
            "baseline (the app at its defaults, doing nothing)"
        } else {
            "baseline (cache-aside, doing nothing)"
        };
        pick_lines(&mut o, what, p, objective, md);
    }
    if let Some(a) = &a.adoption {
        let _ = writeln!(o, "{}adopt: {a}", if md { "- " } else { "  " });
    }
    let e = &a.evidence;
    let _ = writeln!(
        o,
        "{}evidence: {} candidates ({} measured), {} runs, {} final trials each, {:.0} s",
        if md { "- " } else { "  " },
        e.candidates,
        e.candidates - e.never_measured.len(),
        e.runs,
        e.final_trials,
        e.seconds
    );
    if !e.never_measured.is_empty() {
        let _ = writeln!(
            o,
            "{}never measured (cut up front, out of time): {}",
            if md { "- " } else { "  " },
            e.never_measured.join(", ")
        );
    }
    for r in &e.rounds {
        let _ = writeln!(
            o,
            "{}  {}: {} ran ({:.1} s window × {}), kept {}{}",
            if md { "  - " } else { "  " },
            r.round,
            r.ran.len(),
            r.window_s,
            r.trials,
            r.kept.join(", "),
            if r.cut.is_empty() {
                String::new()
            } else {
                format!("; cut {}", r.cut.join(", "))
            }
        );
    }
    o
}

/// The answer as the terminal prints it.
pub fn terminal(a: &Advice) -> String {
    format!(
        "verdict   {}\n{}",
        crate::results::conclusion::wrap(&a.text, 100, "          "),
        body(a, false)
    )
}

/// advise.md.
pub fn markdown(a: &Advice) -> String {
    format!(
        "## stampede advise\n\n**{}.** {}\n\n{}",
        a.verdict.verdict,
        a.text,
        body(a, true)
    )
}
