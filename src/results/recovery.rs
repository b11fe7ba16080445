//! The recovery verdict of a run with a shock: does it come back by itself? The baseline is
//! the steady span before the first shock; after the last shock ends, the run is back at the
//! first whole 1 s window from which goodput and hit rate stay near the baseline's for
//! `--settle`. A window too short to tell gives `not-judged`, never a pass (docs/survival.md).

use serde::{Deserialize, Serialize};

use super::{Bucket, FaultReport};
use crate::fault::RecoveryCriteria;
use crate::scenario::Scenario;

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Recovered,
    NotRecovered,
    NotJudged,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Recovered => "recovered",
            Verdict::NotRecovered => "not-recovered",
            Verdict::NotJudged => "not-judged",
        }
    }
}

/// The steady figures before the first shock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    /// The span, ms since the measured window started.
    pub from_ms: u64,
    pub to_ms: u64,
    /// Requests due per second in it that were answered in time (`requests.goodput`'s rate).
    pub goodput_per_s: f64,
    /// (hit + stale) / requests completed in it: every answer served from the cache. Null
    /// for an app under test, whose outcomes the tool cannot see.
    pub hit_rate: Option<f64>,
    pub db_calls_per_s: f64,
    /// The highest p99 of its timeline buckets, ms.
    pub p99_ms: f64,
}

/// One whole second after the last shock, as the verdict read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Second {
    /// Its start, ms from the last shock's end.
    pub from_ms: u64,
    /// Goodput / the baseline's goodput per second.
    pub goodput_ratio: f64,
    pub hit_rate: Option<f64>,
    pub back: bool,
}

/// Whether the run came back after its shocks, and by what criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recovery {
    pub verdict: Verdict,
    pub baseline: Baseline,
    /// When the last shock ended (its server back, its time up), ms since the window started.
    pub shock_end_ms: u64,
    /// From the last shock's end to the start of the second from which the run stayed back,
    /// ms; null unless recovered. Not the faults' `recovered_ms` (restart to the first request
    /// through).
    pub back_ms: Option<u64>,
    /// The rule, with its figures.
    pub criterion: String,
    /// Why this verdict, in words.
    pub reason: String,
    /// Every whole second after the last shock.
    pub seconds: Vec<Second>,
}

const SECOND_MS: u64 = 1000;

/// Sums of some buckets.
#[derive(Default)]
struct Sums {
    requests: u64,
    served: u64,
    goodput: u64,
    db_calls: u64,
    p99: f64,
}

fn sums<'a>(buckets: impl Iterator<Item = &'a Bucket>) -> Sums {
    let mut s = Sums::default();
    for b in buckets {
        s.requests += b.requests;
        s.served += b.hits + b.stale;
        s.goodput += b.goodput;
        s.db_calls += b.db_calls;
        s.p99 = s.p99.max(b.p99_ms);
    }
    s
}

/// The buckets that end in `(from, to]` ms (whole ones only). A bucket is stamped when its
/// tick ran, a ms or two after it was due: it is taken at its tick, `t_ms` rounded to the
/// interval `iv`.
fn span(timeline: &[Bucket], iv: u64, from: u64, to: u64) -> impl Iterator<Item = &Bucket> {
    timeline.iter().filter(move |b| {
        let tick = (b.t_ms + iv / 2) / iv * iv;
        !b.partial && tick > from && tick <= to
    })
}

/// The baseline: the window before the first shock, goodput leaving out the requests due
/// just before it.
fn baseline(sc: &Scenario, timeline: &[Bucket], iv: u64, first_ms: u64, app: bool) -> Baseline {
    let base_ms = sc.recovery.baseline_window.0.as_millis() as u64;
    let from = first_ms.saturating_sub(base_ms);
    let b = sums(span(timeline, iv, from, first_ms));
    let base_span_s = (first_ms - from) as f64 / 1000.0;
    // Requests due just before the shock are answered during it: their goodput is the
    // shock's, not the baseline's. Leave out the last goodput deadline when a second remains.
    let within = sc.goodput_within.0.as_millis() as u64;
    let good_to = if first_ms.saturating_sub(within) >= from + SECOND_MS {
        first_ms - within
    } else {
        first_ms
    };
    let good = sums(span(timeline, iv, from, good_to)).goodput;

    Baseline {
        from_ms: from,
        to_ms: first_ms,
        goodput_per_s: good as f64 * 1000.0 / (good_to - from).max(1) as f64,
        hit_rate: (!app && b.requests > 0).then(|| b.served as f64 / b.requests as f64),
        db_calls_per_s: b.db_calls as f64 / base_span_s.max(1e-9),
        p99_ms: b.p99,
    }
}

/// The criterion in words, with the baseline's figures.
fn criterion(
    c: &RecoveryCriteria,
    baseline: &Baseline,
    hit_floor: Option<f64>,
    first_ms: u64,
) -> String {
    format!(
        "back from the first whole 1 s window after the last shock ends at which goodput is at least {} of the baseline's {:.0}/s{} and both stay so for {} (baseline: the {} before the first shock at {:.1} s)",
        c.goodput,
        baseline.goodput_per_s,
        match (baseline.hit_rate, hit_floor) {
            (Some(h), Some(f)) => format!(
                " and the hit rate at least {:.1}% (the baseline's {:.1}% less {} points)",
                f.max(0.0) * 100.0,
                h * 100.0,
                c.hit_points
            ),
            _ => " (the hit rate is not seen: goodput alone)".to_string(),
        },
        c.settle,
        c.baseline_window,
        first_ms as f64 / 1000.0
    )
}

/// Each whole second after the last shock, judged against the baseline.
#[allow(clippy::too_many_arguments)]
fn seconds_after(
    timeline: &[Bucket],
    iv: u64,
    end_ms: u64,
    window_ms: u64,
    baseline: &Baseline,
    hit_floor: Option<f64>,
    c: &RecoveryCriteria,
    app: bool,
) -> Vec<Second> {
    // Whole seconds from the first bucket tick at or after the end.
    let start = end_ms.div_ceil(iv) * iv;
    let mut seconds = Vec::new();
    let mut t = start;
    while t + SECOND_MS <= window_ms {
        let s = sums(span(timeline, iv, t, t + SECOND_MS));
        let goodput_ratio = s.goodput as f64 / baseline.goodput_per_s;
        let hit_rate = (!app && s.requests > 0).then(|| s.served as f64 / s.requests as f64);
        let hit_ok = match (hit_floor, hit_rate) {
            (Some(f), Some(h)) => h >= f,
            (Some(_), None) => false,
            (None, _) => true,
        };
        seconds.push(Second {
            from_ms: t - end_ms,
            goodput_ratio,
            hit_rate,
            back: goodput_ratio >= c.goodput.0 && hit_ok,
        });
        t += SECOND_MS;
    }
    seconds
}

/// The verdict of a run with shocks (None without any). `timeline` is the whole buckets;
/// `app`: an app under test, whose hit rate the tool cannot see (goodput alone decides).
pub fn judge(
    sc: &Scenario,
    faults: &[FaultReport],
    timeline: &[Bucket],
    app: bool,
) -> Option<Recovery> {
    let first = sc.faults.iter().map(|f| f.at.0).min()?;
    let first_ms = first.as_millis() as u64;
    let planned_end = sc.faults.iter().map(|f| f.ends_at()).max()?.as_millis() as u64;
    // As struck: a restart takes longer than down_for.
    let end_ms = faults
        .iter()
        .map(|f| f.at_ms + f.down_ms)
        .max()
        .unwrap_or(0)
        .max(planned_end);
    let window_ms = sc.duration.0.as_millis() as u64;
    let c = &sc.recovery;
    let base_ms = c.baseline_window.0.as_millis() as u64;
    let iv = (sc.interval.0.as_millis() as u64).max(1);
    let settle_s = c.settle.0.as_millis().div_ceil(u128::from(SECOND_MS)) as usize;
    let baseline = baseline(sc, timeline, iv, first_ms, app);
    let hit_floor = baseline.hit_rate.map(|h| h - c.hit_points / 100.0);
    let criterion = criterion(c, &baseline, hit_floor, first_ms);
    let not_judged = |reason: String| Recovery {
        verdict: Verdict::NotJudged,
        baseline: baseline.clone(),
        shock_end_ms: end_ms,
        back_ms: None,
        criterion: criterion.clone(),
        reason,
        seconds: Vec::new(),
    };
    if first_ms < base_ms {
        return Some(not_judged(format!(
            "the first shock strikes at {:.1} s, before a baseline of {} could be measured: strike at {} or later, or shorten --baseline-window",
            first_ms as f64 / 1000.0,
            c.baseline_window,
            c.baseline_window
        )));
    }
    if baseline.goodput_per_s <= 0.0 {
        return Some(not_judged(
            "no goodput in the baseline: the run was not healthy before the first shock, so there is nothing to come back to".to_string(),
        ));
    }
    let observed = window_ms.saturating_sub(end_ms);
    if observed < c.observe.0.as_millis() as u64 {
        return Some(not_judged(format!(
            "the window leaves {:.1} s after the last shock ends at {:.1} s; a verdict needs --observe {} (lengthen --duration or strike earlier)",
            observed as f64 / 1000.0,
            end_ms as f64 / 1000.0,
            c.observe
        )));
    }
    let seconds = seconds_after(
        timeline, iv, end_ms, window_ms, &baseline, hit_floor, c, app,
    );
    let back = (0..seconds.len()).find(|&i| {
        i + settle_s <= seconds.len() && seconds[i..i + settle_s].iter().all(|s| s.back)
    });
    let what = shock_words(faults);
    Some(match back {
        Some(i) => Recovery {
            verdict: Verdict::Recovered,
            back_ms: Some(seconds[i].from_ms),
            reason: {
                let mut r = format!(
                    "recovered {:.1} s after {what}",
                    seconds[i].from_ms as f64 / 1000.0
                );
                // Fell back for as long as it had to hold: the other stable state again.
                let fell = (i + settle_s..seconds.len()).find(|&j| {
                    j + settle_s <= seconds.len()
                        && seconds[j..j + settle_s].iter().all(|s| !s.back)
                });
                if let Some(j) = fell {
                    r.push_str(&format!(
                        ", then fell back {:.1} s after it (goodput {:.0}% of baseline at the end)",
                        seconds[j].from_ms as f64 / 1000.0,
                        seconds.last().map_or(0.0, |s| s.goodput_ratio * 100.0)
                    ));
                }
                r
            },
            baseline,
            shock_end_ms: end_ms,
            criterion,
            seconds,
        },
        None => {
            let last = seconds.last().cloned().unwrap_or_default();
            let hit = match (last.hit_rate, baseline.hit_rate) {
                (Some(h), Some(b)) => {
                    format!(", hit rate {:.0}% (baseline {:.0}%)", h * 100.0, b * 100.0)
                }
                _ => String::new(),
            };
            Recovery {
                verdict: Verdict::NotRecovered,
                back_ms: None,
                reason: format!(
                    "NOT recovered: {:.0} s after {what} goodput {:.0}% of baseline{hit}",
                    (last.from_ms + SECOND_MS) as f64 / 1000.0,
                    last.goodput_ratio * 100.0
                ),
                baseline,
                shock_end_ms: end_ms,
                criterion,
                seconds,
            }
        }
    })
}

/// The last shock, in words: "the drop-cache", "the kill-redis".
fn shock_words(faults: &[FaultReport]) -> String {
    faults
        .iter()
        .max_by_key(|f| f.at_ms + f.down_ms)
        .map_or_else(|| "the shock".to_string(), |f| format!("the {}", f.kind))
}
