//! The figures of a conformance run: per count both sides have, each side's values over the
//! trials, their medians' ratio, each side's interval (its range over the trials) and a
//! verdict: `agrees` when the intervals meet or the medians are within the figure's stated
//! tolerance, else `differs` by how much and which way; `unknown` when one side cannot have
//! the figure. Latencies are carried beside without a verdict.

use serde::{Deserialize, Serialize};

use crate::results::RunResult;

/// One side's values of a figure over its trials.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SideValues {
    /// One per trial, in trial order; null where that trial could not have it.
    pub values: Vec<Option<f64>>,
    pub median: Option<f64>,
    /// The interval: the lowest and highest value over the trials.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Why the side has no value (a library that does not say, a ledger not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

impl SideValues {
    fn of(values: Vec<Option<f64>>, unknown: Option<String>) -> SideValues {
        let known: Vec<f64> = values.iter().flatten().copied().collect();
        let unknown = match (known.is_empty(), unknown) {
            (true, None) => Some("no trial had it".to_string()),
            (_, u) => u,
        };
        SideValues {
            median: crate::stats::median(&known),
            min: known.iter().copied().reduce(f64::min),
            max: known.iter().copied().reduce(f64::max),
            values,
            unknown,
        }
    }

    fn known(&self) -> bool {
        self.unknown.is_none() && self.median.is_some()
    }
}

/// How a figure is judged.
#[derive(Debug, Clone, Copy)]
struct Rule {
    key: &'static str,
    title: &'static str,
    unit: &'static str,
    /// Within this much of each other (absolute), the medians agree...
    abs: f64,
    /// ...or within this share of the larger.
    rel: f64,
}

const DB_CALLS: Rule = Rule {
    key: "db_calls",
    title: "DB calls (server)",
    unit: "",
    abs: 2.0,
    rel: 0.25,
};
const PEAK_HERD: Rule = Rule {
    key: "peak_herd",
    title: "peak herd (ledger)",
    unit: "",
    abs: 1.0,
    rel: 0.25,
};
const REDUNDANT: Rule = Rule {
    key: "redundant_loads",
    title: "redundant loads (ledger)",
    unit: "",
    abs: 2.0,
    rel: 0.25,
};
const RECOVERY: Rule = Rule {
    key: "recovery_ms",
    title: "recovery after the shock (goodput)",
    unit: "ms",
    // The recovery verdict reads whole seconds.
    abs: 1000.0,
    rel: 0.25,
};
const AFTER_SHOCK: Rule = Rule {
    key: "db_calls_after_shock",
    title: "DB calls in the 1 s after the shock",
    unit: "",
    abs: 2.0,
    rel: 0.25,
};
const STALE: Rule = Rule {
    key: "stale_answers",
    title: "stale answers",
    unit: "",
    abs: 2.0,
    rel: 0.25,
};

/// One figure of both sides, judged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    pub key: String,
    pub title: String,
    pub unit: String,
    pub preset: SideValues,
    pub library: SideValues,
    /// The library's median over the preset's; null when the preset's is 0 and the
    /// library's is not, or a side is unknown.
    pub ratio: Option<f64>,
    /// `agrees`, `differs` or `unknown`.
    pub verdict: String,
    /// The tolerance the medians were held to, in words.
    pub tolerance: String,
    /// What the verdict rests on, in words.
    pub detail: String,
}

fn judge(rule: Rule, preset: SideValues, library: SideValues) -> Figure {
    let tolerance = format!(
        "the intervals meet, or the medians within {}{} or {:.0}% of the larger",
        rule.abs,
        rule.unit,
        rule.rel * 100.0
    );
    let mut f = Figure {
        key: rule.key.to_string(),
        title: rule.title.to_string(),
        unit: rule.unit.to_string(),
        ratio: None,
        verdict: "unknown".to_string(),
        tolerance,
        detail: String::new(),
        preset,
        library,
    };
    if !(f.preset.known() && f.library.known()) {
        let why = f
            .library
            .unknown
            .clone()
            .or_else(|| f.preset.unknown.clone());
        f.detail = why.unwrap_or_default();
        return f;
    }
    let (p, l) = (
        f.preset.median.unwrap_or(0.0),
        f.library.median.unwrap_or(0.0),
    );
    // Both none: the same; the preset none and the library some: no finite ratio.
    f.ratio = if p > 0.0 {
        Some(l / p)
    } else if l <= 0.0 {
        Some(1.0)
    } else {
        None
    };
    let meet = f.preset.min <= f.library.max && f.library.min <= f.preset.max;
    let gap = (l - p).abs();
    let within = gap <= rule.abs.max(rule.rel * p.max(l));
    if meet || within {
        f.verdict = "agrees".to_string();
        f.detail = if meet {
            "the two sides' intervals over the trials meet".to_string()
        } else {
            format!(
                "the medians are {gap}{} apart, within the tolerance",
                rule.unit
            )
        };
    } else {
        f.verdict = "differs".to_string();
        let way = if l > p { "more" } else { "fewer" };
        let by = match f.ratio {
            Some(r) => format!(" ({r:.2}×)"),
            None => String::new(),
        };
        f.detail = format!(
            "the library {l}{} against the preset's {p}{}: {gap}{} {way}{by}, beyond the trials' intervals and the tolerance",
            rule.unit, rule.unit, rule.unit
        );
    }
    f
}

/// A latency of both sides, for information only.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Beside {
    pub title: String,
    pub preset_median_ms: Option<f64>,
    pub library_median_ms: Option<f64>,
}

/// A conformance run's figures, as `--out` writes them (conform.json).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conformity {
    /// The library (`advise --for` name) and its preset.
    pub library: String,
    pub preset: String,
    /// What was measured: the library's version, its reference app.
    pub measured: String,
    pub app: String,
    /// The preset's settings as the app's environment.
    pub app_env: Vec<String>,
    /// The workload, in words.
    pub workload: String,
    pub trials: u32,
    /// The seed of each trial (both sides ran on it).
    pub seeds: Vec<u64>,
    pub figures: Vec<Figure>,
    /// Latencies, for information: an app over HTTP is slower than the in-process one by
    /// construction, so they have no verdict.
    pub latencies: Vec<Beside>,
    /// Where the app cannot take a setting as the preset has it, and what else to know.
    pub notes: Vec<String>,
    /// Cut short by Ctrl-C or a failure: the figures cover the trials that ran.
    pub interrupted: bool,
}

/// Each trial's value of `f`, side by side in trial order.
fn values(runs: &[RunResult], f: impl Fn(&RunResult) -> Option<f64>) -> Vec<Option<f64>> {
    runs.iter().map(f).collect()
}

fn u(x: Option<u64>) -> Option<f64> {
    x.map(|v| v as f64)
}

/// The figures of a run with a shock: the DB calls in the second after it, and the recovery
/// by one rule on both sides.
fn shock_figures(preset: &[RunResult], library: &[RunResult]) -> Vec<Figure> {
    // One rule on both sides: the app's answers do not show its hit rate, so its
    // recovery is judged by goodput alone; the preset's run judges the hit rate too (its
    // own verdict, in its results), which after a drop comes back seconds after the
    // goodput. The preset's is read again here by the app's rule.
    let as_app = |r: &RunResult| {
        crate::results::recovery::judge(
            &r.scenario,
            &r.faults,
            crate::results::whole(&r.timeline),
            true,
        )
    };
    let preset_recovery: Vec<_> = preset.iter().map(as_app).collect();
    let library_recovery: Vec<_> = library.iter().map(|r| r.recovery.clone()).collect();
    let back =
        |v: &Option<crate::results::recovery::Recovery>| u(v.as_ref().and_then(|v| v.back_ms));
    // Unknown on a side when no trial of it came back: its verdict's reason says why.
    let why = |runs: &[Option<crate::results::recovery::Recovery>]| {
        runs.iter().all(|r| back(r).is_none()).then(|| {
            runs.iter()
                .find_map(|r| r.as_ref())
                .map_or("no trial judged the recovery".to_string(), |v| {
                    format!("{}: {}", v.verdict.name(), v.reason)
                })
        })
    };
    // The herd the shock set off: the DB calls in the second after its first fault.
    let after = |r: &RunResult| u(r.faults.first().map(|f| f.recovery_stampede));
    vec![
        judge(
            AFTER_SHOCK,
            SideValues::of(values(preset, after), None),
            SideValues::of(values(library, after), None),
        ),
        judge(
            RECOVERY,
            SideValues::of(
                preset_recovery.iter().map(back).collect(),
                why(&preset_recovery),
            ),
            SideValues::of(
                library_recovery.iter().map(back).collect(),
                why(&library_recovery),
            ),
        ),
    ]
}

/// Build the figures of `preset` and `library` (each side's results in trial order).
pub fn build(
    sides: &super::Sides,
    preset: &[RunResult],
    library: &[RunResult],
    interrupted: bool,
) -> Conformity {
    let mut figures = vec![
        judge(
            DB_CALLS,
            SideValues::of(values(preset, |r| u(r.db.calls_server)), None),
            SideValues::of(values(library, |r| u(r.db.calls_server)), None),
        ),
        judge(
            PEAK_HERD,
            SideValues::of(values(preset, |r| u(r.db.ledger_peak_key_herd)), None),
            SideValues::of(values(library, |r| u(r.db.peak_key_herd.value())), None),
        ),
        judge(
            REDUNDANT,
            SideValues::of(values(preset, |r| u(r.db.ledger_redundant_loads)), None),
            SideValues::of(values(library, |r| u(r.db.redundant_loads.value())), None),
        ),
    ];
    if !sides.preset.faults.is_empty() {
        figures.extend(shock_figures(preset, library));
    }
    let stale_unknown = (!sides.app.tells_stale).then(|| {
        format!(
            "{}'s answers do not say whether they were stale",
            sides.decl.title
        )
    });
    figures.push(judge(
        STALE,
        SideValues::of(values(preset, |r| Some(r.outcomes.stale as f64)), None),
        SideValues::of(vec![None; library.len()], stale_unknown),
    ));
    let lat = |title: &str, f: fn(&RunResult) -> f64| Beside {
        title: title.to_string(),
        preset_median_ms: crate::stats::median(&preset.iter().map(f).collect::<Vec<_>>()),
        library_median_ms: crate::stats::median(&library.iter().map(f).collect::<Vec<_>>()),
    };
    let latencies = vec![
        lat("p50 latency", |r| r.latency_ms.p50),
        lat("p99 latency", |r| r.latency_ms.p99),
    ];
    let mut notes = sides.caveats.clone();
    for r in library.iter().filter_map(|r| r.app.as_ref()) {
        for n in &r.notes {
            if n.contains("exited") && !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    notes.extend(read_rates(&sides.preset, preset, library));
    if !sides.preset.faults.is_empty() {
        notes.push(
            "recovery is read by goodput alone on both sides, as the app's answers allow (its hit rate is not seen); the preset's own verdict in its trials waits for its hit rate too, which after a drop comes back later".to_string(),
        );
    }
    let seeds = preset.iter().map(|r| r.scenario.seed).collect();
    Conformity {
        library: sides.decl.for_name.to_string(),
        preset: sides.decl.preset.to_string(),
        measured: sides.app.measured.to_string(),
        app: format!("examples/libraries/{}", sides.app.dir),
        app_env: (sides.app.env)(&super::ref_settings(&sides.preset))
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        workload: crate::report::describe(&sides.preset).join(", "),
        trials: preset.len().min(library.len()) as u32,
        seeds,
        figures,
        latencies,
        notes,
        interrupted,
    }
}

/// In a closed loop each side asks as fast as it answers, so the two sides read at their own
/// rates: said when they differ by more than 2×, since a herd that grows with the read rate
/// (the readers inside a race window, before a push or a lock lands) then differs by the rate
/// and not by the mechanism.
fn read_rates(
    sc: &crate::scenario::Scenario,
    preset: &[RunResult],
    library: &[RunResult],
) -> Option<String> {
    if !matches!(sc.load, crate::workload::LoadShape::Closed { .. }) {
        return None;
    }
    let rate = |runs: &[RunResult]| {
        let per_s: Vec<f64> = runs
            .iter()
            .filter(|r| !r.scenario.duration.0.is_zero())
            .map(|r| r.requests.completed as f64 / r.scenario.duration.0.as_secs_f64())
            .collect();
        crate::stats::median(&per_s)
    };
    let (p, l) = (rate(preset)?, rate(library)?);
    if p <= 0.0 || l <= 0.0 || (p / l).max(l / p) <= 2.0 {
        return None;
    }
    Some(format!(
        "closed loop: each side asks as fast as it answers, the preset {:.0} req/s and the library {:.0} req/s ({:.1}×): a herd that grows with the read rate (readers inside a race window, before a push or a lock lands) differs by that, not by the mechanism; --rps R gives both sides the same rate",
        p,
        l,
        (p / l).max(l / p)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(v: &[f64]) -> SideValues {
        SideValues::of(v.iter().map(|x| Some(*x)).collect(), None)
    }

    #[test]
    fn meeting_intervals_or_close_medians_agree_and_the_rest_differs_with_its_way() {
        let f = judge(DB_CALLS, side(&[5.0, 6.0, 9.0]), side(&[8.0, 9.0, 12.0]));
        assert_eq!(f.verdict, "agrees");
        let f = judge(PEAK_HERD, side(&[1.0, 1.0, 1.0]), side(&[2.0, 2.0, 2.0]));
        assert_eq!(f.verdict, "agrees", "within 1: {f:?}");
        let f = judge(PEAK_HERD, side(&[2.0, 2.0, 2.0]), side(&[32.0, 30.0, 32.0]));
        assert_eq!(f.verdict, "differs");
        assert!(f.detail.contains("more"), "{}", f.detail);
        assert_eq!(f.ratio, Some(16.0));
        let f = judge(DB_CALLS, side(&[0.0]), side(&[0.0]));
        assert_eq!((f.verdict.as_str(), f.ratio), ("agrees", Some(1.0)));
        let f = judge(DB_CALLS, side(&[0.0]), side(&[9.0]));
        assert_eq!((f.verdict.as_str(), f.ratio), ("differs", None));
    }

    #[test]
    fn an_unknown_side_has_no_verdict() {
        let f = judge(
            STALE,
            side(&[3.0]),
            SideValues::of(vec![None], Some("not said".into())),
        );
        assert_eq!(f.verdict, "unknown");
        assert_eq!(f.detail, "not said");
        assert!(f.ratio.is_none());
    }
}
