//! Thresholds: limits on a run's figures, set in a scenario's `[thresholds]` table or with
//! `--threshold name=value`, that make `run` and `compare` exit 1 when one breaks. The names
//! are checked when the scenario is read, so a misspelled threshold is an error, never a
//! check that silently passes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::report::{RunResult, ThresholdResult};

/// Which side of the limit is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The measured value must not exceed the limit.
    Max,
    /// The measured value must not fall below the limit.
    Min,
}

/// The unit of a metric, which decides how it is written and what a limit may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A number of events (calls, loads).
    Count,
    /// Milliseconds.
    Ms,
    /// A share between 0 and 1 (written as a percentage).
    Share,
}

impl Unit {
    /// A value in this unit, for people.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Count => format!("{v:.0}"),
            Unit::Ms => format!("{v:.2} ms"),
            Unit::Share => format!("{:.2}%", v * 100.0),
        }
    }
}

/// One threshold a scenario may set.
pub struct Def {
    pub name: &'static str,
    pub bound: Bound,
    pub unit: Unit,
    /// What is measured, for `--help` and error messages.
    pub what: &'static str,
    pub measure: fn(&RunResult) -> f64,
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

/// Share of scheduled requests that got no answer: errors (abandoned included) plus shed.
pub fn error_rate(r: &RunResult) -> f64 {
    share(r.requests.errors + r.requests.shed, r.requests.scheduled)
}

/// Share of completed requests served stale.
pub fn stale_ratio(r: &RunResult) -> f64 {
    share(r.outcomes.stale, r.requests.completed)
}

/// Every threshold there is, in the order they are reported.
pub const DEFS: [Def; 9] = [
    Def {
        name: "db_calls_max",
        bound: Bound::Max,
        unit: Unit::Count,
        what: "DB calls in the measured window (db.calls)",
        measure: |r| r.db.calls as f64,
    },
    Def {
        name: "redundant_loads_max",
        bound: Bound::Max,
        unit: Unit::Count,
        what: "loads started while another load of the same key was in flight",
        measure: |r| r.db.redundant_loads as f64,
    },
    Def {
        name: "peak_key_herd_max",
        bound: Bound::Max,
        unit: Unit::Count,
        what: "most loads of one key in flight at once",
        measure: |r| r.db.peak_key_herd as f64,
    },
    Def {
        name: "hit_rate_min",
        bound: Bound::Min,
        unit: Unit::Share,
        what: "(hit + stale) / completed",
        measure: |r| r.hit_rate,
    },
    Def {
        name: "p50_ms_max",
        bound: Bound::Max,
        unit: Unit::Ms,
        what: "median latency, ms",
        measure: |r| r.latency_ms.p50,
    },
    Def {
        name: "p95_ms_max",
        bound: Bound::Max,
        unit: Unit::Ms,
        what: "95th percentile latency, ms",
        measure: |r| r.latency_ms.p95,
    },
    Def {
        name: "p99_ms_max",
        bound: Bound::Max,
        unit: Unit::Ms,
        what: "99th percentile latency, ms",
        measure: |r| r.latency_ms.p99,
    },
    Def {
        name: "error_rate_max",
        bound: Bound::Max,
        unit: Unit::Share,
        what: "(errors + shed) / scheduled",
        measure: error_rate,
    },
    Def {
        name: "stale_ratio_max",
        bound: Bound::Max,
        unit: Unit::Share,
        what: "stale / completed",
        measure: stale_ratio,
    },
];

/// The valid names, for error messages.
pub fn names() -> String {
    DEFS.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}

fn def_index(name: &str) -> Result<usize, String> {
    DEFS.iter()
        .position(|d| d.name == name)
        .ok_or_else(|| format!("unknown threshold `{name}` (valid: {})", names()))
}

/// Parse a limit for threshold `i`: a number, or for shares also a percentage ("95%").
fn parse_limit(i: usize, text: &str) -> Result<f64, String> {
    let d = &DEFS[i];
    let t = text.trim();
    let v = match (t.strip_suffix('%'), d.unit) {
        (Some(p), Unit::Share) => p.trim().parse::<f64>().map(|v| v / 100.0),
        (Some(_), _) => {
            return Err(format!(
                "threshold {} takes a plain number ({}), not a percentage (got {t})",
                d.name, d.what
            ));
        }
        (None, _) => t.parse::<f64>(),
    }
    .map_err(|_| format!("threshold {} must be a number (got `{t}`)", d.name))?;
    check_limit(i, v)
}

fn check_limit(i: usize, v: f64) -> Result<f64, String> {
    let d = &DEFS[i];
    if !v.is_finite() || v < 0.0 {
        return Err(format!("threshold {} must be 0 or more (got {v})", d.name));
    }
    if d.unit == Unit::Share && v > 1.0 {
        return Err(format!(
            "threshold {} is a share: between 0 and 1, or a percentage such as 95% (got {v})",
            d.name
        ));
    }
    Ok(v)
}

/// The thresholds of a run, by position in [`DEFS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds(BTreeMap<usize, f64>);

impl Thresholds {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These thresholds with `other`'s set on top (the command line over the file).
    pub fn overridden_by(mut self, other: &[ThresholdArg]) -> Thresholds {
        for a in other {
            self.0.insert(a.0, a.1);
        }
        self
    }

    /// Judge a run against every threshold.
    pub fn judge(&self, r: &RunResult) -> Vec<ThresholdResult> {
        self.0
            .iter()
            .map(|(&i, &limit)| {
                let d = &DEFS[i];
                let measured = (d.measure)(r);
                let passed = match d.bound {
                    Bound::Max => measured <= limit,
                    Bound::Min => measured >= limit,
                };
                ThresholdResult {
                    name: d.name.to_string(),
                    limit,
                    measured,
                    passed,
                }
            })
            .collect()
    }
}

/// A threshold given on the command line (`--threshold p99_ms_max=250`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdArg(pub usize, pub f64);

/// Clap value parser of `--threshold NAME=VALUE`.
pub fn parse_arg(s: &str) -> Result<ThresholdArg, String> {
    let (name, value) = s.split_once('=').ok_or_else(|| {
        format!(
            "expected NAME=VALUE such as p99_ms_max=250 (got `{s}`; names: {})",
            names()
        )
    })?;
    let i = def_index(name.trim())?;
    Ok(ThresholdArg(i, parse_limit(i, value)?))
}

/// A limit as written in TOML: a number, or a string such as "95%".
#[derive(Deserialize)]
#[serde(untagged)]
enum RawLimit {
    Num(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Thresholds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = BTreeMap::<String, RawLimit>::deserialize(d)?;
        let mut t = BTreeMap::new();
        for (name, v) in raw {
            let i = def_index(&name).map_err(serde::de::Error::custom)?;
            let limit = match v {
                RawLimit::Num(n) => check_limit(i, n),
                RawLimit::Text(s) => parse_limit(i, &s),
            }
            .map_err(serde::de::Error::custom)?;
            t.insert(i, limit);
        }
        Ok(Thresholds(t))
    }
}

impl Serialize for Thresholds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(&i, v)| (DEFS[i].name, v)))
    }
}

/// One line per broken threshold, naming it, its limit and what was measured.
pub fn broken(strategy: &str, results: &[ThresholdResult]) -> String {
    let mut o = String::new();
    for t in results.iter().filter(|t| !t.passed) {
        let Ok(i) = def_index(&t.name) else { continue };
        let d = &DEFS[i];
        let _ = writeln!(
            o,
            "threshold broken ({strategy}): {} = {} but measured {} ({})",
            t.name,
            d.unit.show(t.limit),
            d.unit.show(t.measured),
            d.what
        );
    }
    o
}

/// The unit of a threshold by name (Count when unknown), for renderers.
pub fn unit_of(name: &str) -> Unit {
    def_index(name).map_or(Unit::Count, |i| DEFS[i].unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags_and_rejects_unknown_names() {
        assert_eq!(parse_arg("p99_ms_max=250").unwrap(), ThresholdArg(6, 250.0));
        assert_eq!(parse_arg("hit_rate_min=95%").unwrap().1, 0.95);
        assert_eq!(parse_arg("hit_rate_min=0.9").unwrap().1, 0.9);
        let e = parse_arg("p99_max=3").unwrap_err();
        assert!(e.contains("p99_max") && e.contains("p99_ms_max"), "{e}");
        assert!(parse_arg("hit_rate_min=2").is_err());
        assert!(parse_arg("db_calls_max=-1").is_err());
        assert!(parse_arg("db_calls_max=10%").is_err());
        assert!(parse_arg("db_calls_max").is_err());
    }

    #[test]
    fn toml_table_round_trips_and_rejects_unknown_keys() {
        #[derive(Deserialize)]
        struct F {
            thresholds: Thresholds,
        }
        let f: F =
            toml::from_str("[thresholds]\ndb_calls_max = 300\nhit_rate_min = \"90%\"\n").unwrap();
        assert_eq!(
            serde_json::to_string(&f.thresholds).unwrap(),
            r#"{"db_calls_max":300.0,"hit_rate_min":0.9}"#
        );
        let e = toml::from_str::<F>("[thresholds]\ndb_calls = 3\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("db_calls") && e.contains("db_calls_max"), "{e}");
    }
}
