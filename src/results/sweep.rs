//! A sweep's document (`sweep.json`): its axes, one cell per strategy and point with the
//! figures that decide the knee and the survival map, and the boundary rates found. The
//! figures of a cell are read from its results file; what a cell's verdict is (below the
//! knee, holds) is judged here, once, and renderers only show it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::RunResult;

/// Version of sweep.json's layout.
pub const SWEEP_SCHEMA: u32 = 1;

/// The file name of a sweep's document in its directory.
pub const SWEEP_FILE: &str = "sweep.json";

/// Share of the offered rate goodput must reach for a point to be below the knee.
pub const KNEE_GOODPUT_SHARE: f64 = 0.99;

/// A number as sweep.json writes it: whole numbers without a fraction.
pub fn num(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        Value::from(v as i64)
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

/// The values of a point, by axis name, in the axes' order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params(pub Vec<(String, f64)>);

impl Params {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// `rps=1000,drop_fraction=0.5`: a cell's file name and how a point is written.
    pub fn key(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={}", num(*v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Serialize for Params {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(n, v)| (n, num(*v))))
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, f64>::deserialize(d)?;
        Ok(Params(m.into_iter().collect()))
    }
}

fn ser_nums<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|x| num(*x)))
}

pub use crate::values::BYTES;

/// One axis as sweep.json has it: the name (with `_`) and its values in its unit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AxisDoc {
    pub name: String,
    /// The values' unit: `req/s`, `share` (0..1), `ms`, `bytes`, or empty for a plain number.
    #[serde(default)]
    pub unit: String,
    #[serde(serialize_with = "ser_nums")]
    pub values: Vec<f64>,
}

impl AxisDoc {
    /// One value as a table shows it: a size as it is written (`8mb`), any other number as
    /// sweep.json has it.
    pub fn show(&self, v: f64) -> String {
        if self.unit == BYTES && v >= 0.0 && v.fract() == 0.0 {
            crate::values::Size(v as u64).to_string()
        } else {
            num(v).to_string()
        }
    }

    /// Whether the axis is one of the cache's memory, whose effect is the hit rate.
    pub fn is_size(&self) -> bool {
        self.unit == BYTES
    }

    /// The axis as a table header: `ttl (ms)`.
    pub fn header(&self) -> String {
        if self.unit.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }
}

/// The figures of one cell (medians over its trials with `--repeat`); null when unknown.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Requests scheduled per second of the measured window.
    pub offered_per_s: f64,
    /// Requests answered with a value per second (`requests.goodput`, or, in results that
    /// have none, the requests served a value: hit, stale, waited, miss, fallback, ok).
    pub goodput_per_s: f64,
    /// Statements sent to Postgres per second.
    pub db_calls_per_s: Option<f64>,
    pub p99_ms: Option<f64>,
    pub peak_key_herd: Option<f64>,
    pub hit_rate: Option<f64>,
    /// Failed requests (errors, shed, unsent) per second.
    pub errors_per_s: f64,
    /// Where goodput came from: `requests.goodput` or `outcomes`.
    pub goodput_from: String,
    /// Redis's used memory over the keys it held at the end (`redis.memory`), bytes: what
    /// one entry costs with the server's own share.
    #[serde(default)]
    pub bytes_per_key: Option<f64>,
    /// Along a `maxmemory` axis: the entries the budget holds at `bytes_per_key`, and the
    /// exact LRU hit rate of the same request sequence at that size.
    #[serde(default)]
    pub lru_objects: Option<f64>,
    #[serde(default)]
    pub lru_hit_rate: Option<f64>,
    /// The `maxmemory-policy` the cell's Redis ran with (`redis.memory.policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The DB calls by cause (`db.by_cause`; with --repeat, the trial with the median DB
    /// calls): a real trial's split, so it adds up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_cause: Option<super::causes::ByCause>,
}

/// One strategy at one point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub strategy: String,
    pub params: Params,
    /// The cell's results file, relative to the sweep's directory.
    pub result: String,
    pub trials: u32,
    pub figures: Figures,
    /// The result's `recovery` (its representative trial's with --repeat); null when the run
    /// had no shock.
    pub recovery: Option<Value>,
    /// Whether the run had a shock (a fault).
    pub shock: bool,
    /// Goodput at least 99% of the offered rate and p99 within the knee's limit.
    pub below_knee: bool,
    /// Recovered from its shock (a majority of trials), or with no shock below the knee.
    pub holds: bool,
}

/// One boundary: the highest rate that held at one point of the other axis.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BoundaryEntry {
    /// The other axis's value (empty without one).
    pub at: Params,
    /// The highest rate that held, req/s (with `bound` lower: the maximum tried, which held;
    /// with `bound` upper: the minimum tried, which did not).
    #[serde(serialize_with = "ser_num")]
    pub rps: f64,
    /// The lowest rate tried that did not hold, req/s; null when none failed.
    pub fails_at: Option<f64>,
    pub runs: u32,
    /// null: found between the two ends; `lower`: at least the maximum; `upper`: below the
    /// minimum.
    pub bound: Option<String>,
}

fn ser_num<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    num(*v).serialize(s)
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepDoc {
    pub schema: u32,
    /// The workload in words (the first cell's scenario).
    pub workload: String,
    pub strategies: Vec<String>,
    pub axes: Vec<AxisDoc>,
    /// The knee's p99 limit, ms.
    pub knee_p99_ms: f64,
    pub cells: Vec<Cell>,
    /// By strategy, one entry per value of the other axis; null without --boundary.
    pub boundary: Option<BTreeMap<String, Vec<BoundaryEntry>>>,
    /// Ctrl-C cut it short: the cells are those that finished.
    pub interrupted: bool,
    /// Along a `maxmemory` axis: the exact LRU curve of the requests the sweep sends, over the
    /// measured window, for the report to draw the measured hit rates on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lru_curve: Option<Vec<LruPoint>>,
}

/// A point of the exact LRU curve of a sweep's requests: the hit rate over the measured window
/// of an LRU of `objects` entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LruPoint {
    pub objects: f64,
    pub hit_rate: f64,
}

impl SweepDoc {
    /// The cell of `strategy` at `params` (by every axis's value).
    pub fn cell(&self, strategy: &str, at: &[(String, f64)]) -> Option<&Cell> {
        self.cells.iter().find(|c| {
            c.strategy == strategy
                && at.iter().all(|(n, v)| {
                    c.params
                        .get(n)
                        .is_some_and(|x| (x - v).abs() <= 1e-9 * v.abs().max(1.0))
                })
        })
    }
}

/// The figures of one result, read through its JSON so that fields newer than this code
/// (`requests.goodput`, `recovery`) are used when they are there.
pub fn figures(r: &RunResult) -> (Figures, Option<Value>) {
    let v = serde_json::to_value(r).unwrap_or(Value::Null);
    let secs = r.scenario.duration.0.as_secs_f64().max(1e-9);
    let count = |p: &str| v.pointer(p).and_then(Value::as_f64);
    let o = &r.outcomes;
    let (goodput, from) = match count("/requests/goodput") {
        Some(g) => (g, "requests.goodput"),
        None => (
            (o.hit + o.stale + o.waited + o.miss + o.fallback + o.ok) as f64,
            "outcomes",
        ),
    };
    let measured = |m| r.measured(m).ok();
    let f = Figures {
        offered_per_s: r.requests.scheduled as f64 / secs,
        goodput_per_s: goodput / secs,
        db_calls_per_s: r.db.calls.value().map(|c| c as f64 / secs),
        p99_ms: measured(crate::metric::Metric::P99),
        peak_key_herd: r.db.peak_key_herd.value().map(|h| h as f64),
        hit_rate: r.hit_rate.value(),
        errors_per_s: (r.requests.errors + r.requests.shed + r.requests.unsent) as f64 / secs,
        goodput_from: from.to_string(),
        bytes_per_key: count("/redis/memory/used_memory_per_key"),
        lru_objects: None,
        lru_hit_rate: None,
        policy: r.redis.memory.as_ref().and_then(|m| m.policy.clone()),
        by_cause: r.db.by_cause.value(),
    };
    let recovery = v.get("recovery").filter(|x| !x.is_null()).cloned();
    (f, recovery)
}

/// Goodput at least 99% of the offered rate, and p99 within `knee_p99_ms` (a p99 nobody
/// measured is past it).
pub fn below_knee(f: &Figures, knee_p99_ms: f64) -> bool {
    f.goodput_per_s >= KNEE_GOODPUT_SHARE * f.offered_per_s
        && f.p99_ms.is_some_and(|p| p <= knee_p99_ms)
}

/// A recovery's verdict (`recovered`, `not-recovered`, `not-judged`).
pub fn verdict(recovery: Option<&Value>) -> Option<&str> {
    recovery?.get("verdict")?.as_str()
}

/// Whether one run holds: with a shock, recovered; without, below the knee.
pub fn holds(shock: bool, recovery: Option<&Value>, f: &Figures, knee_p99_ms: f64) -> bool {
    if shock {
        verdict(recovery) == Some("recovered")
    } else {
        below_knee(f, knee_p99_ms)
    }
}

/// The median of each figure over trials (unknown ones left out; null when all are).
pub fn median_figures(all: &[Figures]) -> Figures {
    let med = |xs: Vec<f64>| crate::stats::median(&xs);
    let opt = |get: &dyn Fn(&Figures) -> Option<f64>| med(all.iter().filter_map(get).collect());
    Figures {
        offered_per_s: opt(&|f| Some(f.offered_per_s)).unwrap_or(0.0),
        goodput_per_s: opt(&|f| Some(f.goodput_per_s)).unwrap_or(0.0),
        db_calls_per_s: opt(&|f| f.db_calls_per_s),
        p99_ms: opt(&|f| f.p99_ms),
        peak_key_herd: opt(&|f| f.peak_key_herd),
        hit_rate: opt(&|f| f.hit_rate),
        errors_per_s: opt(&|f| Some(f.errors_per_s)).unwrap_or(0.0),
        goodput_from: all
            .first()
            .map(|f| f.goodput_from.clone())
            .unwrap_or_default(),
        bytes_per_key: opt(&|f| f.bytes_per_key),
        lru_objects: None,
        lru_hit_rate: None,
        policy: all.iter().find_map(|f| f.policy.clone()),
        by_cause: {
            let mut v: Vec<super::causes::ByCause> =
                all.iter().filter_map(|f| f.by_cause).collect();
            v.sort_by_key(super::causes::ByCause::total);
            v.get(v.len().saturating_sub(1) / 2).copied()
        },
    }
}

/// How a cell reads on a survival map: `recovered in 1.2 s`, `NOT`, `n/j` (not judged), or
/// with no shock `ok` / `past knee`.
pub fn map_label(c: &Cell) -> String {
    if !c.shock {
        return if c.below_knee { "ok" } else { "past knee" }.to_string();
    }
    match verdict(c.recovery.as_ref()) {
        Some("recovered") => {
            let back = c
                .recovery
                .as_ref()
                .and_then(|r| r.get("back_ms"))
                .and_then(Value::as_f64);
            match back {
                Some(ms) => format!("recovered in {:.1} s", ms / 1000.0),
                None => "recovered".to_string(),
            }
        }
        Some("not-recovered") => "NOT".to_string(),
        _ => "n/j".to_string(),
    }
}

/// The recovery time of a cell, s, when it recovered.
pub fn recovery_s(c: &Cell) -> Option<f64> {
    let r = c.recovery.as_ref()?;
    (verdict(Some(r)) == Some("recovered"))
        .then(|| {
            r.get("back_ms")
                .and_then(Value::as_f64)
                .map(|ms| ms / 1000.0)
        })
        .flatten()
}

/// A rate for a sentence: 3.1k, 940.
pub fn rate_words(v: f64) -> String {
    if v >= 1000.0 {
        let k = (v / 100.0).round() / 10.0;
        format!("{}k", crate::values::Rate(k))
    } else {
        format!("{}", v.round())
    }
}

/// "cache-aside holds up to 3.1k req/s, mutex up to 9.4k": one clause per strategy and
/// point of the other axis.
pub fn boundary_sentence(b: &BTreeMap<String, Vec<BoundaryEntry>>, order: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for s in order {
        let Some(entries) = b.get(s) else { continue };
        for e in entries {
            let at = if e.at.0.is_empty() {
                String::new()
            } else {
                format!(" at {}", e.at.key())
            };
            let first = parts.is_empty();
            let unit = if first { " req/s" } else { "" };
            parts.push(match e.bound.as_deref() {
                Some("lower") => format!(
                    "{s}{at} holds at least {}{unit} (the maximum tried)",
                    rate_words(e.rps)
                ),
                Some("upper") => format!(
                    "{s}{at} holds below {}{unit} (the minimum tried)",
                    rate_words(e.rps)
                ),
                _ if first => format!("{s}{at} holds up to {}{unit}", rate_words(e.rps)),
                _ => format!("{s}{at} up to {}", rate_words(e.rps)),
            });
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knee_and_labels() {
        let f = Figures {
            offered_per_s: 100.0,
            goodput_per_s: 99.5,
            p99_ms: Some(50.0),
            ..Figures::default()
        };
        assert!(below_knee(&f, 100.0));
        assert!(!below_knee(
            &Figures {
                goodput_per_s: 98.0,
                ..f.clone()
            },
            100.0
        ));
        assert!(!below_knee(
            &Figures {
                p99_ms: Some(101.0),
                ..f.clone()
            },
            100.0
        ));
        assert!(!below_knee(
            &Figures {
                p99_ms: None,
                ..f.clone()
            },
            100.0
        ));
        let rec = serde_json::json!({"verdict": "recovered", "back_ms": 1200});
        assert!(holds(true, Some(&rec), &f, 1.0));
        assert!(!holds(true, None, &f, 100.0));
    }

    #[test]
    fn params_and_sentence() {
        let p = Params(vec![("rps".into(), 1000.0), ("drop_fraction".into(), 0.5)]);
        assert_eq!(p.key(), "rps=1000,drop_fraction=0.5");
        let mut b = BTreeMap::new();
        let e = |rps| BoundaryEntry {
            at: Params::default(),
            rps,
            fails_at: None,
            runs: 6,
            bound: None,
        };
        b.insert("cache-aside".to_string(), vec![e(3100.0)]);
        b.insert("mutex".to_string(), vec![e(9400.0)]);
        assert_eq!(
            boundary_sentence(&b, &["cache-aside".into(), "mutex".into()]),
            "cache-aside holds up to 3.1k req/s, mutex up to 9.4k"
        );
    }
}
