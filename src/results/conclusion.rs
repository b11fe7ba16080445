//! What a comparison's numbers say, computed from them alone: which objectives separate the
//! strategies from the baseline (cache-aside when it ran) beyond the noise and by how much, at
//! what price, where the load comes from, and a plain tie when nothing separates them. It leads
//! `compare`'s terminal summary, summary.md, summary.json (`conclusion`) and the HTML report.
//!
//! The noise: from [`stats::MIN_TRIALS`] trials on each side, the exact Mann–Whitney U at
//! α = 0.05 on the trials; with fewer, a difference inside the metric's `check` tolerance
//! (metric.rs, sized from the run-to-run spread of the CI scenario) is taken as spread.

use serde::{Deserialize, Serialize};

use super::causes::ByCause;
use super::row::Row;
use crate::metric::{Better, Metric, Unit};
use crate::metrics::Cause;
use crate::stats;

/// The objectives a conclusion weighs, in the order it speaks of them.
const WEIGHED: [Metric; 6] = [
    Metric::DbCalls,
    Metric::P95,
    Metric::P99,
    Metric::StaleRatio,
    Metric::ErrorRate,
    Metric::RejectedRate,
];

/// With writes, the consistency objectives too.
const WEIGHED_WRITES: [Metric; 2] = [Metric::StaleReadRatio, Metric::WritesLeftWrongRatio];

/// The verdict of a comparison: the sentence and its parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conclusion {
    /// What the numbers say, in sentences (the parts below, in words).
    pub text: String,
    /// Whether any objective separates any strategy from the baseline beyond the noise.
    pub separated: bool,
    /// The strategy every other is set against (cache-aside when it ran).
    pub baseline: Option<String>,
    /// Trials per strategy (the fewest any ran).
    pub trials: usize,
    /// How the noise was judged.
    pub noise: String,
    /// Per objective: the baseline's figure and who differs from it beyond the noise.
    pub objectives: Vec<Objective>,
    /// Where the baseline's DB calls came from (its median trial's split); null when unknown.
    pub load: Option<Load>,
}

/// One objective's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    /// The metric's name (docs/results.md).
    pub metric: String,
    /// The baseline's median (null: unknown).
    #[serde(deserialize_with = "super::row::nan::one")]
    pub baseline_value: f64,
    /// The largest difference between any two strategies' medians, relative to the smaller
    /// (counts and ms), or in points (shares).
    #[serde(deserialize_with = "super::row::nan::one")]
    pub spread: f64,
    /// Strategies better than the baseline beyond the noise.
    pub better: Vec<Difference>,
    /// Strategies worse than the baseline beyond the noise.
    pub worse: Vec<Difference>,
}

/// One strategy's difference from the baseline on one objective.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub strategy: String,
    /// Its median.
    #[serde(deserialize_with = "super::row::nan::one")]
    pub value: f64,
    /// Relative to the baseline's (counts and ms; null when the baseline's is 0), or the
    /// difference in points (shares).
    pub change: Option<f64>,
    /// What it costs: the objectives on which the same strategy is worse beyond the noise,
    /// in words.
    pub price: Vec<String>,
}

/// Where the baseline's DB calls came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    pub by_cause: ByCause,
    /// The share of the calls that were herd duplicates: the most a perfect coordination saves.
    pub herd_share: f64,
    /// The share of the baseline's requests that were not hits (they waited for a load, or
    /// were served stale).
    pub miss_share: f64,
}

/// How one strategy stands against the baseline on `m`: Some(true) better, Some(false) worse
/// beyond the noise, None inside it.
fn against(m: Metric, s: &Row, b: &Row) -> Option<bool> {
    let (sv, bv) = (s.figure(m), b.figure(m));
    if sv.is_nan() || bv.is_nan() || sv == bv {
        return None;
    }
    let (ss, bs) = (s.samples_of(m), b.samples_of(m));
    let beyond = if ss.len() >= stats::MIN_TRIALS && bs.len() >= stats::MIN_TRIALS {
        stats::distinguishable(ss, bs, stats::DEFAULT_ALPHA)
    } else {
        match m.def().tolerance {
            Some(t) => (sv - bv).abs() > t.allowed(bv.max(sv)),
            None => false,
        }
    };
    let lower = sv < bv;
    beyond.then_some(match m.def().better {
        Better::Lower => lower,
        Better::Higher => !lower,
    })
}

fn change(m: Metric, v: f64, base: f64) -> Option<f64> {
    match m.def().unit {
        Unit::Share => Some(v - base),
        _ => (base != 0.0).then(|| (v - base) / base),
    }
}

/// A figure for a sentence: whole counts, ms with two significant decimals, shares in %.
fn show(m: Metric, v: f64) -> String {
    match m.def().unit {
        Unit::Count => format!("{v:.0}"),
        Unit::Ms if v < 10.0 => format!("{v:.2} ms"),
        Unit::Ms => format!("{v:.1} ms"),
        Unit::Share => format!("{:.1}%", v * 100.0),
    }
}

fn show_change(m: Metric, c: Option<f64>) -> String {
    match (m.def().unit, c) {
        (Unit::Share, Some(d)) => format!("{:+.1} pp", d * 100.0),
        (_, Some(r)) => format!("{:+.0}%", r * 100.0),
        (_, None) => "from 0".to_string(),
    }
}

/// The price of a strategy in words: "13.7% stale answers".
fn price_word(m: Metric, v: f64) -> String {
    match m {
        Metric::StaleRatio => format!("{} stale answers", show(m, v)),
        Metric::ErrorRate => format!("{} errors", show(m, v)),
        Metric::RejectedRate => format!("{} rejected", show(m, v)),
        Metric::DbCalls => format!("{} DB calls", show(m, v)),
        Metric::StaleReadRatio => format!("{} stale reads", show(m, v)),
        Metric::WritesLeftWrongRatio => format!("{} of writes left wrong", show(m, v)),
        _ => format!("{} {}", m.def().header, show(m, v)),
    }
}

/// The largest difference between two medians: relative to the smaller (counts, ms), in
/// points (shares).
fn spread(m: Metric, rows: &[Row]) -> f64 {
    let vs: Vec<f64> = rows
        .iter()
        .map(|r| r.figure(m))
        .filter(|v| !v.is_nan())
        .collect();
    let (lo, hi) = vs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if vs.is_empty() {
        return 0.0;
    }
    match m.def().unit {
        Unit::Share => hi - lo,
        _ if lo > 0.0 => (hi - lo) / lo,
        _ => 0.0,
    }
}

fn noise_words(trials: usize) -> String {
    if trials >= stats::MIN_TRIALS {
        format!(
            "{trials} trials each: a difference counts when the exact Mann–Whitney U test tells the trials apart at α = {}",
            stats::DEFAULT_ALPHA
        )
    } else {
        format!(
            "{} per strategy: a difference inside the check tolerance of its figure (the run-to-run spread the tolerances were sized from) counts as noise; --repeat {} tests it",
            if trials == 1 {
                "one trial".to_string()
            } else {
                format!("{trials} trials")
            },
            stats::MIN_TRIALS
        )
    }
}

/// The conclusion of a comparison of `rows` against `baseline` (by name).
pub fn conclude(rows: &[Row], baseline: Option<&str>) -> Conclusion {
    let trials = rows.iter().map(|r| r.trials).min().unwrap_or(0);
    let Some(b) = baseline.and_then(|n| rows.iter().find(|r| r.strategy == n)) else {
        return Conclusion {
            text: "nothing to conclude: no strategy finished".to_string(),
            trials,
            noise: noise_words(trials),
            ..Conclusion::default()
        };
    };
    let others: Vec<&Row> = rows.iter().filter(|r| r.strategy != b.strategy).collect();
    let writes = rows.iter().any(|r| r.writes);
    let weighed: Vec<Metric> = WEIGHED
        .iter()
        .chain(if writes { &WEIGHED_WRITES[..] } else { &[] })
        .copied()
        .collect();
    // Each strategy's standing on each objective, once.
    let standing = |s: &Row, m: Metric| against(m, s, b);
    let price = |s: &Row, skip: Metric| -> Vec<String> {
        weighed
            .iter()
            .filter(|&&m| m != skip && !matches!(m, Metric::P95 | Metric::P99))
            .filter(|&&m| standing(s, m) == Some(false))
            .map(|&m| price_word(m, s.figure(m)))
            .collect()
    };
    let objectives: Vec<Objective> = weighed
        .iter()
        .map(|&m| {
            let diff = |s: &&Row| Difference {
                strategy: s.strategy.clone(),
                value: s.figure(m),
                change: change(m, s.figure(m), b.figure(m)),
                price: price(s, m),
            };
            Objective {
                metric: m.name().to_string(),
                baseline_value: b.figure(m),
                spread: spread(m, rows),
                better: others
                    .iter()
                    .filter(|s| standing(s, m) == Some(true))
                    .map(diff)
                    .collect(),
                worse: others
                    .iter()
                    .filter(|s| standing(s, m) == Some(false))
                    .map(diff)
                    .collect(),
            }
        })
        .collect();
    let load = b.by_cause.map(|bc| Load {
        by_cause: bc,
        herd_share: share(bc.herd, bc.total()),
        miss_share: 1.0 - b.figure(Metric::HitRate),
    });
    let separated = objectives
        .iter()
        .any(|o| !o.better.is_empty() || !o.worse.is_empty());
    let mut c = Conclusion {
        text: String::new(),
        separated,
        baseline: Some(b.strategy.clone()),
        trials,
        noise: noise_words(trials),
        objectives,
        load,
    };
    c.text = words_of(&c, rows.len());
    c
}

fn share(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 / total as f64
    }
}

/// The conclusion in sentences.
fn words_of(c: &Conclusion, strategies: usize) -> String {
    let base = c.baseline.as_deref().unwrap_or("the baseline");
    let find = |m: Metric| c.objectives.iter().find(|o| o.metric == m.name());
    let mut out = Vec::new();
    if strategies < 2 {
        return "one strategy: nothing to compare it with".to_string();
    }
    if !c.separated {
        out.push(format!(
            "Tie: no objective separates the strategies beyond the noise ({}).",
            c.noise
        ));
    }
    if let Some(o) = find(Metric::DbCalls) {
        out.push(db_sentence(o, base, c));
    }
    out.push(latency_sentence(
        &[find(Metric::P95), find(Metric::P99)],
        base,
        c,
    ));
    // A price already named beside what it bought is not said twice.
    let named: Vec<(String, String)> = [Metric::DbCalls, Metric::P95, Metric::P99]
        .iter()
        .filter_map(|&m| find(m))
        .flat_map(|o| {
            o.better
                .iter()
                .flat_map(|d| d.price.iter().map(|p| (d.strategy.clone(), p.clone())))
        })
        .collect();
    for m in [
        Metric::StaleRatio,
        Metric::ErrorRate,
        Metric::RejectedRate,
        Metric::StaleReadRatio,
        Metric::WritesLeftWrongRatio,
    ] {
        let Some(o) = find(m) else { continue };
        let mut o = o.clone();
        o.worse.retain(|d| {
            !named
                .iter()
                .any(|(s, p)| s == &d.strategy && p == &price_word(m, d.value))
        });
        if !o.worse.is_empty() || !o.better.is_empty() {
            out.push(other_sentence(m, &o, base));
        }
    }
    if c.separated {
        out.push(format!("Noise: {}.", c.noise));
    }
    out.join(" ")
}

fn list(m: Metric, ds: &[Difference]) -> String {
    ds.iter()
        .map(|d| {
            let price = if d.price.is_empty() || m != Metric::DbCalls {
                String::new()
            } else {
                format!(", at {}", d.price.join(" and "))
            };
            format!(
                "{} {} ({}{price})",
                d.strategy,
                show(m, d.value),
                show_change(m, d.change)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn db_sentence(o: &Objective, base: &str, c: &Conclusion) -> String {
    let m = Metric::DbCalls;
    let mut s = if o.better.is_empty() && o.worse.is_empty() {
        format!(
            "DB calls: no strategy differs from another by more than {:.1}% ({} {} for {base})",
            o.spread * 100.0,
            show(m, o.baseline_value),
            "calls"
        )
    } else {
        let mut parts = Vec::new();
        if !o.better.is_empty() {
            parts.push(format!("fewer with {}", list(m, &o.better)));
        }
        if !o.worse.is_empty() {
            parts.push(format!("more with {}", list(m, &o.worse)));
        }
        format!(
            "DB calls: {} against {} for {base}",
            parts.join("; "),
            show(m, o.baseline_value)
        )
    };
    if let Some(l) = &c.load {
        let herd = l.by_cause.get(Cause::Herd);
        s.push_str(&format!(
            "; {base}'s load is {}; herd duplicates are {herd} ({:.1}%): the most any coordination could save.",
            l.by_cause.main_causes(),
            l.herd_share * 100.0
        ));
    } else {
        s.push('.');
    }
    s
}

fn latency_sentence(os: &[Option<&Objective>], base: &str, c: &Conclusion) -> String {
    let mut parts = Vec::new();
    for (m, o) in [Metric::P95, Metric::P99].iter().zip(os) {
        let Some(o) = o else { continue };
        let name = m.name();
        for d in &o.better {
            let price = if d.price.is_empty() {
                String::new()
            } else {
                format!(", at {}", d.price.join(" and "))
            };
            parts.push(format!(
                "{} {name} {} vs {} for {base}{price}",
                d.strategy,
                show(*m, d.value),
                show(*m, o.baseline_value)
            ));
        }
        for d in &o.worse {
            parts.push(format!(
                "{} {name} {} vs {} for {base} (worse)",
                d.strategy,
                show(*m, d.value),
                show(*m, o.baseline_value)
            ));
        }
    }
    if !parts.is_empty() {
        return format!("Latency: {}.", parts.join("; "));
    }
    let p95 = os[0].map_or(f64::NAN, |o| o.baseline_value);
    let miss = c.load.as_ref().map(|l| l.miss_share);
    let path = match miss {
        Some(share) if share > 0.05 => format!(
            ": {:.1}% of {base}'s requests are not hits, so its p95 falls on the miss path (a load)",
            share * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "Latency: p95 and p99 inside the noise for every strategy (p95 {} for {base}){path}.",
        show(Metric::P95, p95)
    )
}

fn other_sentence(m: Metric, o: &Objective, base: &str) -> String {
    let head = match m {
        Metric::StaleRatio => "Stale answers",
        Metric::ErrorRate => "Errors",
        Metric::RejectedRate => "Rejections",
        Metric::StaleReadRatio => "Stale reads",
        _ => "Writes left wrong",
    };
    let mut parts = Vec::new();
    if !o.worse.is_empty() {
        parts.push(format!("more with {}", list(m, &o.worse)));
    }
    if !o.better.is_empty() {
        parts.push(format!("fewer with {}", list(m, &o.better)));
    }
    format!(
        "{head}: {} against {} for {base}.",
        parts.join("; "),
        show(m, o.baseline_value)
    )
}

/// The split of the trial whose DB calls are the median (a real trial's, so its causes add up
/// to its calls): the lower middle one of an even count. None when any trial's is unknown.
pub fn median_split(trials: &[super::RunResult]) -> Option<ByCause> {
    let mut v: Vec<(u64, ByCause)> = trials
        .iter()
        .map(|r| Some((r.db.calls.value()?, r.db.by_cause.value()?)))
        .collect::<Option<_>>()?;
    v.sort_by_key(|(c, _)| *c);
    v.get((v.len().max(1) - 1) / 2).map(|(_, b)| *b)
}

/// The DB calls by cause of each row, as a header and rows of cells: only the causes some
/// row has, with the total; None when no row's split is known.
pub fn cause_table(rows: &[Row]) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    if rows.iter().all(|r| r.by_cause.is_none()) {
        return None;
    }
    let causes: Vec<Cause> = crate::metrics::CAUSES
        .iter()
        .copied()
        .filter(|&c| {
            rows.iter()
                .any(|r| r.by_cause.is_some_and(|b| b.get(c) > 0))
        })
        .collect();
    let mut header = vec!["strategy", "db calls"];
    header.extend(causes.iter().map(|c| c.name()));
    let cells = rows
        .iter()
        .map(|r| {
            let mut v = vec![r.strategy.clone()];
            match r.by_cause {
                Some(b) => {
                    v.push(b.total().to_string());
                    v.extend(causes.iter().map(|&c| b.get(c).to_string()));
                }
                None => v.extend(std::iter::repeat_n("—".to_string(), causes.len() + 1)),
            }
            v
        })
        .collect();
    Some((header, cells))
}

/// Text wrapped at `width` columns, each line after the first indented by `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out
}

#[cfg(test)]
#[path = "conclusion_tests.rs"]
mod tests;
