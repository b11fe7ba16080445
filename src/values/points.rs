//! A list or a range of values of one kind, as a sweep's axis takes them (`1000,2000`,
//! `1k..16k:x2`, `1s..4s:+1s`): each value parsed by its value type, a range stepped
//! geometrically or arithmetically in the kind's unit, and every point kept with the text a
//! flag is given and the number a results file records.

use super::{BYTES, Dur, Percent, Rate, Size};
use crate::error::UsageError;

/// Most points one list or range may have.
const MAX_POINTS: usize = 200;

/// What a flag's values are, which decides how a range steps and how a value is written in
/// sweep.json (rates in req/s, shares as 0..1, durations in ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Rate,
    Percent,
    Dur,
    Int,
    Float,
    /// Bytes (`--maxmemory`): written in sweep.json as bytes.
    Size,
}

/// One value of an axis: the text clap is given, and the number sweep.json records.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub text: String,
    pub number: f64,
}

impl Kind {
    /// The unit of the points' numbers: `req/s`, `share`, `ms`, bytes or empty.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Rate => "req/s",
            Kind::Percent => "share",
            Kind::Dur => "ms",
            Kind::Size => BYTES,
            Kind::Int | Kind::Float => "",
        }
    }
}

/// The points of `values`, a list or a range, for the axis `flag`.
pub fn list(kind: Kind, flag: &str, values: &str) -> Result<Vec<Point>, UsageError> {
    let values = values.trim();
    let points = if values.contains("..") {
        range(kind, flag, values)?
    } else {
        let mut out: Vec<Point> = Vec::new();
        for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            let p = point(kind, value(kind, flag, v)?);
            if out.contains(&p) {
                return Err(UsageError::new(format!(
                    "--axis {flag}: {v} is given twice: each point runs once"
                )));
            }
            out.push(p);
        }
        out
    };
    if points.is_empty() {
        return Err(UsageError::new(format!(
            "--axis {flag}: no values: give a list (1000,2000) or a range (1k..16k:x2)"
        )));
    }
    Ok(points)
}

/// The axis's number of one value as written, and the text clap gets for it.
pub fn value(kind: Kind, flag: &str, s: &str) -> Result<f64, UsageError> {
    let bad = |e: String| UsageError::new(format!("--axis {flag}: {e}"));
    let s = s.trim();
    Ok(match kind {
        Kind::Rate => s.parse::<Rate>().map_err(bad)?.0,
        Kind::Percent => s.parse::<Percent>().map_err(bad)?.0,
        Kind::Dur => s.parse::<Dur>().map_err(bad)?.0.as_secs_f64() * 1000.0,
        Kind::Size => s.parse::<Size>().map_err(bad)?.0 as f64,
        Kind::Int => {
            let v: f64 = s
                .parse()
                .map_err(|_| bad(format!("'{s}' is not a whole number, which --{flag} takes")))?;
            if v.fract() != 0.0 {
                return Err(bad(format!(
                    "'{s}' is not a whole number, which --{flag} takes"
                )));
            }
            v
        }
        Kind::Float => s
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(format!("'{s}' is not a number")))?,
    })
}

/// A number as clap is given it for a flag of this kind.
fn text(kind: Kind, v: f64) -> String {
    match kind {
        Kind::Rate | Kind::Float => trim(v),
        Kind::Int => format!("{}", v.round() as i64),
        // As the user writes it (`8mb`): clap reads it back, and labels and file names show it.
        Kind::Size => Size(v.round().max(0.0) as u64).to_string(),
        Kind::Percent => format!("{}%", trim(v * 100.0)),
        Kind::Dur => {
            let us = (v * 1000.0).round() as u64;
            if us.is_multiple_of(1000) {
                format!("{}ms", us / 1000)
            } else {
                format!("{us}us")
            }
        }
    }
}

/// A number without float noise: 0.1 + 0.2 is written 0.3.
pub fn trim(v: f64) -> String {
    let r = (v * 1e9).round() / 1e9;
    if r.fract() == 0.0 && r.abs() < 9e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

pub fn point(kind: Kind, v: f64) -> Point {
    let v = if matches!(kind, Kind::Int | Kind::Size) {
        v.round()
    } else {
        v
    };
    Point {
        text: text(kind, v),
        number: (v * 1e9).round() / 1e9,
    }
}

/// `START..END:STEP`, STEP `xF` (geometric, F > 1) or `+D` (arithmetic, D in the axis's
/// unit); the end is included when a step reaches it within rounding.
fn range(kind: Kind, flag: &str, spec: &str) -> Result<Vec<Point>, UsageError> {
    let bad = |why: &str| {
        UsageError::new(format!(
            "--axis {flag}={spec}: {why}; a range is START..END:STEP with STEP xF (geometric, e.g. 1k..16k:x2) or +D (arithmetic, e.g. 1s..4s:+1s)"
        ))
    };
    let (bounds, step) = spec
        .split_once(':')
        .ok_or_else(|| bad("no step after the range"))?;
    let (a, b) = bounds
        .split_once("..")
        .ok_or_else(|| bad("no `..` between start and end"))?;
    let (start, end) = (value(kind, flag, a)?, value(kind, flag, b)?);
    if end < start {
        return Err(bad("the end is below the start"));
    }
    let step = step.trim();
    let next: Box<dyn Fn(f64) -> f64> = if let Some(f) = step.strip_prefix(['x', '*']) {
        let f: f64 = f
            .trim()
            .parse()
            .map_err(|_| bad("the factor after x is not a number"))?;
        if !(f.is_finite() && f > 1.0) {
            return Err(bad("a geometric step's factor must be above 1"));
        }
        if start <= 0.0 {
            return Err(bad("a geometric range must start above 0"));
        }
        Box::new(move |v| v * f)
    } else if let Some(d) = step.strip_prefix('+') {
        let d = value(kind, flag, d)?;
        if d <= 0.0 {
            return Err(bad("an arithmetic step must be above 0"));
        }
        Box::new(move |v| v + d)
    } else {
        return Err(bad("the step is neither xF nor +D"));
    };
    let mut out: Vec<Point> = Vec::new();
    let mut v = start;
    let tolerance = 1e-6 * end.abs().max(1e-9);
    while v <= end + tolerance {
        let p = point(kind, v.min(end.max(v - tolerance)));
        if out.last() != Some(&p) {
            out.push(p);
        }
        if out.len() > MAX_POINTS {
            return Err(bad(&format!("more than {MAX_POINTS} points")));
        }
        v = next(v);
    }
    Ok(out)
}
