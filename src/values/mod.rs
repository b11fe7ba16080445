//! Value types for flags and scenario files: rates ("10k"), durations ("250ms"), percentages
//! ("10%"), sizes in bytes ("8mb"). Each parses from a command-line string and from a TOML string or number, and
//! serializes back to the same human form so a results file shows what the user wrote. Their
//! JSON Schemas, which accept what these parsers accept, are in [`schema`].

pub(crate) mod schema;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod points;
pub mod start;
pub mod text;
pub mod valid;

/// The unit of an axis of sizes (`maxmemory`), whose values are bytes.
pub const BYTES: &str = "bytes";

/// A TOML value that may be written as a string ("10k", "250ms") or a bare number.
#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrNum {
    Str(String),
    Int(i64),
    Float(f64),
}

impl StrOrNum {
    fn into_string(self) -> String {
        match self {
            StrOrNum::Str(s) => s,
            StrOrNum::Int(i) => i.to_string(),
            StrOrNum::Float(f) => f.to_string(),
        }
    }
}

macro_rules! serde_via_str {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = StrOrNum::deserialize(d)?.into_string();
                s.parse().map_err(serde::de::Error::custom)
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}

/// Requests per second; accepts a plain number or a `k`/`m` suffix ("10k" = 10000).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(pub f64);

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (num, mult) = match t.char_indices().last() {
            Some((i, 'k' | 'K')) => (&t[..i], 1e3),
            Some((i, 'm' | 'M')) => (&t[..i], 1e6),
            _ => (t, 1.0),
        };
        let v: f64 = num.trim().parse().map_err(|_| {
            format!(
                "'{s}' is not a rate: write a number of requests per second such as 2000 or 10k"
            )
        })?;
        let v = v * mult;
        if !v.is_finite() {
            return Err(format!("'{s}' is not a finite rate"));
        }
        Ok(Rate(v))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
serde_via_str!(Rate);

/// A duration written with a unit: "250ms", "10s", "2m", "1m30s". A bare number is refused
/// because "10" could mean seconds or milliseconds and a wrong guess silently changes a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// Whole seconds, for declared defaults.
    pub const fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }

    /// Whole milliseconds, for declared defaults.
    pub const fn millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "0" {
            return Ok(Dur(Duration::ZERO));
        }
        humantime::parse_duration(t).map(Dur).map_err(|e| {
            format!("'{s}' is not a duration ({e}): write it with a unit, such as 250ms, 10s or 2m")
        })
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_zero() {
            return write!(f, "0s");
        }
        write!(f, "{}", humantime::format_duration(self.0))
    }
}
serde_via_str!(Dur);

/// The mutex's lease: a duration, or `auto` — the lease follows the run's loads (k × the p99
/// of the load times measured so far, `--lock-ttl-factor`), from [`LockTtl::AUTO_START`] until
/// the first load completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockTtl {
    Fixed(Dur),
    Auto,
}

impl LockTtl {
    /// The lease of an auto lock until a load has been measured: the fixed default's.
    pub const AUTO_START: Dur = Dur::secs(2);

    /// The lease taken when nothing has been measured (the fixed one, or the auto's start).
    pub fn initial(&self) -> Dur {
        match self {
            LockTtl::Fixed(d) => *d,
            LockTtl::Auto => Self::AUTO_START,
        }
    }

    pub fn is_auto(&self) -> bool {
        matches!(self, LockTtl::Auto)
    }
}

impl FromStr for LockTtl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(LockTtl::Auto);
        }
        s.parse::<Dur>()
            .map(LockTtl::Fixed)
            .map_err(|e| format!("{e}, or auto"))
    }
}

impl fmt::Display for LockTtl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockTtl::Fixed(d) => d.fmt(f),
            LockTtl::Auto => write!(f, "auto"),
        }
    }
}
serde_via_str!(LockTtl);

/// A range of durations, "1ms..5ms" (a value drawn uniformly in it each time), or one duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurRange {
    pub min: Dur,
    pub max: Dur,
}

impl FromStr for DurRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s.split_once("..").unwrap_or((s, s));
        let (min, max) = (a.parse::<Dur>()?, b.parse::<Dur>()?);
        if min > max {
            return Err(format!(
                "'{s}': the range ends ({max}) before it starts ({min})"
            ));
        }
        Ok(DurRange { min, max })
    }
}

impl fmt::Display for DurRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            return self.min.fmt(f);
        }
        write!(f, "{}..{}", self.min, self.max)
    }
}
serde_via_str!(DurRange);

impl DurRange {
    /// The duration at `u` (uniform in [0, 1)) of the range.
    pub fn at(&self, u: f64) -> Duration {
        self.min.0 + (self.max.0 - self.min.0).mul_f64(u)
    }
}

/// A network round trip added between the app and a server: "0.5ms", or with jitter
/// "0.5ms±0.1ms" ("0.5ms+-0.1ms"): each direction carries half, each chunk of bytes delayed by
/// half the base plus a draw uniform in ±half the jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    pub base: Dur,
    pub jitter: Dur,
}

impl FromStr for Rtt {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (a, b) = match t.split_once('±').or_else(|| t.split_once("+-")) {
            Some((a, b)) => (a, Some(b)),
            None => (t, None),
        };
        let base: Dur = a.parse()?;
        let jitter: Dur = b.map_or(Ok(Dur(Duration::ZERO)), str::parse)?;
        if jitter > base {
            return Err(format!(
                "'{s}': the jitter ({jitter}) is larger than the round trip ({base}), which would make some negative"
            ));
        }
        Ok(Rtt { base, jitter })
    }
}

impl fmt::Display for Rtt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.jitter.0.is_zero() {
            return self.base.fmt(f);
        }
        write!(f, "{}±{}", self.base, self.jitter)
    }
}
serde_via_str!(Rtt);

/// A fraction written as a percentage ("10%") or as a number in [0, 1] ("0.1").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percent(pub f64);

impl FromStr for Percent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let v = if let Some(p) = t.strip_suffix('%') {
            p.trim()
                .parse::<f64>()
                .map(|v| v / 100.0)
                .map_err(|_| format!("'{s}' is not a percentage such as 10%"))?
        } else {
            let v: f64 = t.parse().map_err(|_| {
                format!("'{s}' is not a percentage: write 10% or a fraction such as 0.1")
            })?;
            if v > 1.0 {
                return Err(format!(
                    "'{s}' is ambiguous: write {v}% for a percentage, or a fraction in [0, 1]"
                ));
            }
            v
        };
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("'{s}' must be between 0% and 100%"));
        }
        Ok(Percent(v))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", (self.0 * 1e6).round() / 1e4)
    }
}
serde_via_str!(Percent);

/// A number of bytes as Redis writes one in its configuration: a whole number with an
/// optional unit, `k`/`m`/`g` for powers of 1000 and `kb`/`mb`/`gb` for powers of 1024 (any
/// case), so `--maxmemory 8mb` is what `maxmemory 8mb` is in redis.conf. Written back in the
/// largest unit that divides it exactly (`8mb`, `10k`, `1500`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// The units of [`Size`], largest first, so that [`Size`]'s `Display` picks the largest.
const SIZE_UNITS: [(&str, u64); 7] = [
    ("gb", 1 << 30),
    ("g", 1_000_000_000),
    ("mb", 1 << 20),
    ("m", 1_000_000),
    ("kb", 1 << 10),
    ("k", 1000),
    ("b", 1),
];

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(digits);
        let unit = unit.trim().to_ascii_lowercase();
        let bad = || {
            format!(
                "'{s}' is not a size: write a whole number of bytes with an optional unit, such as 1048576, 8mb or 10k (k, m, g: powers of 1000; kb, mb, gb: of 1024)"
            )
        };
        let n: u64 = num.parse().map_err(|_| bad())?;
        let mult = if unit.is_empty() {
            1
        } else {
            SIZE_UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, m)| *m)
                .ok_or_else(bad)?
        };
        n.checked_mul(mult)
            .map(Size)
            .ok_or_else(|| format!("'{s}' is too large a size"))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match SIZE_UNITS[..6]
            .iter()
            .find(|(_, m)| n > 0 && n.is_multiple_of(*m))
        {
            Some((u, m)) => write!(f, "{}{u}", n / m),
            None => write!(f, "{n}"),
        }
    }
}
serde_via_str!(Size);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!("2000".parse::<Rate>().unwrap().0, 2000.0);
        assert_eq!("10k".parse::<Rate>().unwrap().0, 10_000.0);
        assert_eq!("1.5K".parse::<Rate>().unwrap().0, 1500.0);
        assert_eq!("2m".parse::<Rate>().unwrap().0, 2_000_000.0);
        assert!("fast".parse::<Rate>().is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            "250ms".parse::<Dur>().unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!("10s".parse::<Dur>().unwrap().0, Duration::from_secs(10));
        assert_eq!("0".parse::<Dur>().unwrap().0, Duration::ZERO);
        assert!("10".parse::<Dur>().is_err());
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1s 500ms");
    }

    #[test]
    fn percents() {
        assert_eq!("10%".parse::<Percent>().unwrap().0, 0.1);
        assert_eq!("0.3".parse::<Percent>().unwrap().0, 0.3);
        assert!("30".parse::<Percent>().is_err());
        assert!("130%".parse::<Percent>().is_err());
        assert_eq!(Percent(0.1).to_string(), "10%");
    }

    #[test]
    fn sizes_read_as_redis_reads_them_and_write_back() {
        assert_eq!("8mb".parse::<Size>().unwrap().0, 8 << 20);
        assert_eq!(" 1GB ".parse::<Size>().unwrap().0, 1 << 30);
        assert_eq!("10k".parse::<Size>().unwrap().0, 10_000);
        assert_eq!("2 kb".parse::<Size>().unwrap().0, 2048);
        assert_eq!("1500".parse::<Size>().unwrap().0, 1500);
        assert_eq!("7b".parse::<Size>().unwrap().0, 7);
        for bad in ["", "mb", "1.5mb", "-1", "8 megs", "99999999999999999999"] {
            assert!(bad.parse::<Size>().is_err(), "{bad}");
        }
        for (n, w) in [(8 << 20, "8mb"), (10_000, "10k"), (1500, "1500"), (0, "0")] {
            assert_eq!(Size(n).to_string(), w);
            assert_eq!(w.parse::<Size>().unwrap(), Size(n));
        }
        let toml_num: Size = toml::Value::Integer(4096).try_into().unwrap();
        assert_eq!(toml_num, Size(4096));
    }
}
