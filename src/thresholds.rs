//! Thresholds: limits on a run's figures (the metrics of [`crate::metric`]), set in a
//! scenario's `[thresholds]` table or with `--threshold name=value`, that make `run` and
//! `compare` exit 1 when one breaks; results judge them ([`crate::results`]). The names
//! are checked when the scenario is read, so a misspelled threshold is an error, never a
//! check that silently passes.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::metric::{Better, Metric, Unit, threshold_names};

/// The one threshold that is not on a run's figure: the rate a sweep's boundary bisection
/// finds (`stampede sweep --boundary rps`), in req/s; a sweep judges it, a run cannot.
pub const BOUNDARY_RPS_MIN: &str = "boundary_rps_min";

fn unknown(name: &str) -> String {
    format!(
        "unknown threshold `{name}` (valid: {}, and for `sweep --boundary rps` {BOUNDARY_RPS_MIN})",
        threshold_names()
    )
}

/// A limit on the boundary rate: a number of req/s, as a rate is written (5000 or 5k).
fn parse_boundary(text: &str) -> Result<f64, String> {
    let v = text
        .parse::<crate::values::Rate>()
        .map_err(|e| format!("threshold {BOUNDARY_RPS_MIN}: {e}"))?
        .0;
    check_boundary(v)
}

fn check_boundary(v: f64) -> Result<f64, String> {
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "threshold {BOUNDARY_RPS_MIN} must be 0 or more req/s (got {v})"
        ));
    }
    Ok(v)
}

fn metric_of(name: &str) -> Result<Metric, String> {
    Metric::by_threshold_name(name).ok_or_else(|| unknown(name))
}

/// Parse a limit on `m`: a number, or for shares also a percentage ("95%").
fn parse_limit(m: Metric, text: &str) -> Result<f64, String> {
    let d = m.def();
    let name = m.threshold_name().unwrap_or_default();
    let t = text.trim();
    let v = match (t.strip_suffix('%'), d.unit) {
        (Some(p), Unit::Share) => p.trim().parse::<f64>().map(|v| v / 100.0),
        (Some(_), _) => {
            return Err(format!(
                "threshold {name} takes a plain number ({}), not a percentage (got {t})",
                d.what
            ));
        }
        (None, _) => t.parse::<f64>(),
    }
    .map_err(|_| format!("threshold {name} must be a number (got `{t}`)"))?;
    check_limit(m, v)
}

fn check_limit(m: Metric, v: f64) -> Result<f64, String> {
    let name = m.threshold_name().unwrap_or_default();
    if !v.is_finite() || v < 0.0 {
        return Err(format!("threshold {name} must be 0 or more (got {v})"));
    }
    if m.def().unit == Unit::Share && v > 1.0 {
        return Err(format!(
            "threshold {name} is a share: between 0 and 1, or a percentage such as 95% (got {v})"
        ));
    }
    Ok(v)
}

/// The limits of a run, by metric, and a sweep's limit on its boundary rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds {
    limits: BTreeMap<Metric, f64>,
    boundary_rps_min: Option<f64>,
}

impl Thresholds {
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.boundary_rps_min.is_none()
    }

    /// These thresholds with `other`'s set on top (the command line over the file).
    pub fn overridden_by(mut self, other: &[ThresholdArg]) -> Thresholds {
        for a in other {
            match *a {
                ThresholdArg::Metric(m, v) => {
                    self.limits.insert(m, v);
                }
                ThresholdArg::BoundaryRpsMin(v) => self.boundary_rps_min = Some(v),
            }
        }
        self
    }

    /// Each limit on a run's figure: the metric and the limit.
    pub fn iter(&self) -> impl Iterator<Item = (Metric, f64)> + '_ {
        self.limits.iter().map(|(&m, &v)| (m, v))
    }

    /// The sweep's limit on its boundary rate (req/s), if set.
    pub fn boundary_rps_min(&self) -> Option<f64> {
        self.boundary_rps_min
    }

    /// These thresholds without the boundary's: what each run of a sweep judges.
    pub fn without_boundary(mut self) -> Thresholds {
        self.boundary_rps_min = None;
        self
    }
}

/// Whether `measured` is within a threshold of `limit` on `m`.
pub fn passes(m: Metric, limit: f64, measured: f64) -> bool {
    match m.def().better {
        Better::Lower => measured <= limit,
        Better::Higher => measured >= limit,
    }
}

/// A threshold given on the command line (`--threshold p99_ms_max=250`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdArg {
    /// A limit on one of a run's figures.
    Metric(Metric, f64),
    /// `boundary_rps_min`: a limit on a sweep's boundary rate, req/s.
    BoundaryRpsMin(f64),
}

/// Clap value parser of `--threshold NAME=VALUE`.
pub fn parse_arg(s: &str) -> Result<ThresholdArg, String> {
    let (name, value) = s.split_once('=').ok_or_else(|| {
        format!(
            "expected NAME=VALUE such as p99_ms_max=250 (got `{s}`; names: {})",
            threshold_names()
        )
    })?;
    if name.trim() == BOUNDARY_RPS_MIN {
        return Ok(ThresholdArg::BoundaryRpsMin(parse_boundary(value.trim())?));
    }
    let m = metric_of(name.trim())?;
    Ok(ThresholdArg::Metric(m, parse_limit(m, value)?))
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
        let mut boundary_rps_min = None;
        for (name, v) in raw {
            if name == BOUNDARY_RPS_MIN {
                let limit = match v {
                    RawLimit::Num(n) => check_boundary(n),
                    RawLimit::Text(s) => parse_boundary(&s),
                }
                .map_err(serde::de::Error::custom)?;
                boundary_rps_min = Some(limit);
                continue;
            }
            let m = metric_of(&name).map_err(serde::de::Error::custom)?;
            let limit = match v {
                RawLimit::Num(n) => check_limit(m, n),
                RawLimit::Text(s) => parse_limit(m, &s),
            }
            .map_err(serde::de::Error::custom)?;
            t.insert(m, limit);
        }
        Ok(Thresholds {
            limits: t,
            boundary_rps_min,
        })
    }
}

impl Serialize for Thresholds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(
            self.limits
                .iter()
                .map(|(&m, v)| (m.threshold_name().unwrap_or_default(), *v))
                .chain(
                    self.boundary_rps_min
                        .map(|v| (BOUNDARY_RPS_MIN.to_string(), v)),
                ),
        )
    }
}

/// The `[thresholds]` table: one key per threshold name, each a limit in its metric's unit
/// as [`parse_limit`] and [`check_limit`] accept it (a share also as a percentage string);
/// results write each limit back as a number.
impl schemars::JsonSchema for Thresholds {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Thresholds".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let written = generator.contract().is_serialize();
        let mut properties = serde_json::Map::new();
        for d in crate::metric::DEFS.iter() {
            let Some(name) = d.metric.threshold_name() else {
                continue;
            };
            let (unit, limit) = match d.unit {
                Unit::Share => (
                    "a share: a fraction in [0, 1], or a percentage such as \"95%\"",
                    serde_json::json!({ "anyOf": [
                        { "type": "number", "minimum": 0, "maximum": 1 },
                        { "type": "string", "pattern": crate::values::schema::share_pattern() },
                    ]}),
                ),
                Unit::Ms | Unit::Count => (
                    if d.unit == Unit::Ms { "ms" } else { "a count" },
                    serde_json::json!({ "anyOf": [
                        { "type": "number", "minimum": 0 },
                        { "type": "string", "pattern": crate::values::schema::non_negative_pattern() },
                    ]}),
                ),
            };
            let mut limit = if written {
                serde_json::json!({ "type": "number" })
            } else {
                limit
            };
            limit["description"] = format!(
                "Exit 1 when {} ({unit}) is {} this.",
                d.what,
                match d.better {
                    Better::Lower => "above",
                    Better::Higher => "below",
                }
            )
            .into();
            properties.insert(name, limit);
        }
        let mut boundary = if written {
            serde_json::json!({ "type": "number" })
        } else {
            serde_json::json!({ "anyOf": [
                { "type": "number", "minimum": 0 },
                { "type": "string" },
            ]})
        };
        boundary["description"] = "stampede sweep --boundary rps only: exit 1 when a strategy's boundary rate (req/s) is below this; a run or a comparison refuses it.".into();
        properties.insert(BOUNDARY_RPS_MIN.to_string(), boundary);
        schemars::json_schema!({
            "description": "Limits on the run's figures; a broken one makes the run exit 1.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_of_a_limit_accepts_what_parse_limit_accepts() {
        use crate::values::schema::tests::{Rng, agree, may_overflow};
        let share = regex::Regex::new(&crate::values::schema::share_pattern()).unwrap();
        let plain = regex::Regex::new(&crate::values::schema::non_negative_pattern()).unwrap();
        let pieces = [
            "0", "1", "5", "95", "100", ".", "e", "+", "-", "%", " ", "x", "inf", "250", "1e2",
        ];
        let mut rng = Rng::new(17);
        for m in [Metric::HitRate, Metric::P99, Metric::DbCalls] {
            let pattern = if m.def().unit == Unit::Share {
                &share
            } else {
                &plain
            };
            for _ in 0..50_000 {
                let s = rng.string(&pieces, 5);
                if may_overflow(&s) {
                    continue;
                }
                let parses = parse_limit(m, &s).is_ok();
                if m.def().unit == Unit::Share && s.contains('e') && parses {
                    // A share in exponent notation: the one form the pattern refuses.
                    continue;
                }
                agree(pattern, &s, parses, "limit");
            }
        }
        assert!(share.is_match("90%") && share.is_match("0.9") && !share.is_match("90"));
        assert!(plain.is_match("250") && !plain.is_match("10%") && !plain.is_match("-1"));
    }

    #[test]
    fn parses_flags_and_rejects_unknown_names() {
        assert_eq!(
            parse_arg("p99_ms_max=250").unwrap(),
            ThresholdArg::Metric(Metric::P99, 250.0)
        );
        assert_eq!(
            parse_arg("hit_rate_min=95%").unwrap(),
            ThresholdArg::Metric(Metric::HitRate, 0.95)
        );
        assert_eq!(
            parse_arg("boundary_rps_min=5k").unwrap(),
            ThresholdArg::BoundaryRpsMin(5000.0)
        );
        assert!(parse_arg("boundary_rps_min=-1").is_err());
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
        let f: F = toml::from_str(
            "[thresholds]\ndb_calls_max = 300\nhit_rate_min = \"90%\"\nboundary_rps_min = 5000\n",
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&f.thresholds).unwrap(),
            r#"{"db_calls_max":300.0,"hit_rate_min":0.9,"boundary_rps_min":5000.0}"#
        );
        assert_eq!(f.thresholds.boundary_rps_min(), Some(5000.0));
        assert!(
            f.thresholds
                .clone()
                .without_boundary()
                .boundary_rps_min()
                .is_none()
        );
        let e = toml::from_str::<F>("[thresholds]\ndb_calls = 3\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("db_calls") && e.contains("db_calls_max"), "{e}");
    }
}
