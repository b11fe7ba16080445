//! How many bytes of payload each item has: one size for every item (`--value-size`), or one
//! per item, drawn from a distribution (`--value-size-dist`) or given by the caller (a
//! trace's value sizes). The database is seeded with these sizes and a write keeps each
//! item's size, so the cache holds what the distribution says it should.
//!
//! Pure: a distribution's draw is seeded by the caller (see [`crate::stats::derive_seed`]
//! with [`crate::stats::Purpose::Sizes`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, LogNormal, Uniform};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::values::Size;

/// The largest payload one item may have: a Redis string may hold 512 MB, but a run's
/// items are seeded in one statement per chunk and held by the warm-up in memory.
pub const MAX_ITEM_BYTES: u64 = 64 << 20;

/// The payload size of every item, by id (ids are 1-based, rank 1 the most popular).
#[derive(Debug, Clone, PartialEq)]
pub enum Sizes {
    /// Every item has this many bytes.
    Fixed(usize),
    /// Item `id` has `sizes[id - 1]` bytes.
    PerItem(Arc<[u32]>),
}

impl Sizes {
    /// One size per item, item 1 first (a trace's value sizes, a drawn distribution).
    pub fn per_item(sizes: impl Into<Arc<[u32]>>) -> Sizes {
        Sizes::PerItem(sizes.into())
    }

    /// The payload bytes of item `id` (1-based); 0 for an id with no item under
    /// [`Sizes::PerItem`] (0 or past the end: an id the database does not hold).
    pub fn of(&self, id: u64) -> usize {
        match self {
            Sizes::Fixed(n) => *n,
            Sizes::PerItem(v) => id
                .checked_sub(1)
                .and_then(|i| v.get(usize::try_from(i).ok()?))
                .map_or(0, |&n| n as usize),
        }
    }

    /// The payload bytes of items 1..=keys together.
    pub fn total(&self, keys: u64) -> u64 {
        match self {
            Sizes::Fixed(n) => keys.saturating_mul(*n as u64),
            Sizes::PerItem(v) => v
                .iter()
                .take(usize::try_from(keys).unwrap_or(usize::MAX))
                .map(|&n| u64::from(n))
                .sum(),
        }
    }
}

/// A distribution of payload sizes, as `--value-size-dist` writes it: `100..10k` (uniform,
/// both ends included) or `lognormal:mean=1k,sd=2k` (the mean and standard deviation of the
/// sizes themselves, not of their logarithm). Sizes read as [`Size`] does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeDist {
    Uniform { min: Size, max: Size },
    LogNormal { mean: Size, sd: Size },
}

impl SizeDist {
    /// The expected size of one item, bytes.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Uniform { min, max } => (min.0 as f64 + max.0 as f64) / 2.0,
            SizeDist::LogNormal { mean, .. } => mean.0 as f64,
        }
    }

    /// The sizes of items 1..=keys, drawn from `seed`: the same seed gives the same sizes.
    /// A log-normal draw is rounded and kept within 1..=[`MAX_ITEM_BYTES`].
    pub fn draw(&self, keys: u64, seed: u64) -> Sizes {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = usize::try_from(keys).unwrap_or(usize::MAX);
        let v: Vec<u32> = match *self {
            SizeDist::Uniform { min, max } => {
                let (lo, hi) = (min.0.min(max.0), min.0.max(max.0));
                match Uniform::new_inclusive(lo, hi) {
                    Ok(u) => (0..n).map(|_| u.sample(&mut rng) as u32).collect(),
                    Err(_) => vec![lo as u32; n],
                }
            }
            SizeDist::LogNormal { mean, sd } => {
                // For sizes of mean m and deviation s: σ² = ln(1 + s²/m²), μ = ln m − σ²/2.
                let (m, s) = (mean.0 as f64, sd.0 as f64);
                let sigma2 = (1.0 + (s * s) / (m * m)).ln();
                let mu = m.ln() - sigma2 / 2.0;
                match LogNormal::new(mu, sigma2.sqrt()) {
                    Ok(d) => (0..n)
                        .map(|_| {
                            d.sample(&mut rng).round().clamp(1.0, MAX_ITEM_BYTES as f64) as u32
                        })
                        .collect(),
                    Err(_) => vec![mean.0 as u32; n],
                }
            }
        };
        Sizes::per_item(v)
    }
}

impl FromStr for SizeDist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let forms = "write 100..10k (uniform, both ends included) or lognormal:mean=1k,sd=2k";
        let size = |v: &str| -> Result<Size, String> {
            let z: Size = v.parse().map_err(|e| format!("'{s}': {e}"))?;
            if z.0 == 0 || z.0 > MAX_ITEM_BYTES {
                return Err(format!(
                    "'{s}': every size must be 1 byte to {} (got {z})",
                    Size(MAX_ITEM_BYTES)
                ));
            }
            Ok(z)
        };
        if let Some(params) = t.strip_prefix("lognormal:") {
            let (mut mean, mut sd) = (None, None);
            for p in params.split(',') {
                match p.split_once('=').map(|(k, v)| (k.trim(), v)) {
                    Some(("mean", v)) => mean = Some(size(v)?),
                    Some(("sd", v)) => sd = Some(size(v)?),
                    _ => return Err(format!("'{s}' is not a size distribution: {forms}")),
                }
            }
            return match (mean, sd) {
                (Some(mean), Some(sd)) => Ok(SizeDist::LogNormal { mean, sd }),
                _ => Err(format!(
                    "'{s}': a log-normal needs both mean= and sd=, e.g. lognormal:mean=1k,sd=2k"
                )),
            };
        }
        let Some((a, b)) = t.split_once("..") else {
            return Err(format!("'{s}' is not a size distribution: {forms}"));
        };
        let (min, max) = (size(a)?, size(b)?);
        if min > max {
            return Err(format!(
                "'{s}': the smallest size comes first ({max}..{min})"
            ));
        }
        Ok(SizeDist::Uniform { min, max })
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Uniform { min, max } => write!(f, "{min}..{max}"),
            SizeDist::LogNormal { mean, sd } => write!(f, "lognormal:mean={mean},sd={sd}"),
        }
    }
}

impl<'de> Deserialize<'de> for SizeDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for SizeDist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for SizeDist {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SizeDist".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // A size as `Size` reads one (without the whitespace a regex would have to allow
        // everywhere; the parser trims it).
        let size = r"\s*[0-9]+(?:\s*(?:[bB]|[kKmMgG][bB]?))?\s*";
        schemars::json_schema!({
            "description": "Payload sizes per item: \"100..10k\" (uniform, both ends included) or \"lognormal:mean=1k,sd=2k\" (the sizes' own mean and standard deviation); sizes read as Redis reads them (k: 1000, kb: 1024).",
            "type": "string",
            "pattern": format!(r"^\s*(?:{size}\.\.{size}|lognormal:\s*(?:mean={size},\s*sd={size}|sd={size},\s*mean={size}))$"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_by_id_are_one_based() {
        let s = Sizes::per_item(vec![10u32, 20, 30]);
        assert_eq!((s.of(0), s.of(1), s.of(3), s.of(4)), (0, 10, 30, 0));
        assert_eq!(s.total(3), 60);
        assert_eq!(s.total(2), 30);
        assert_eq!(Sizes::Fixed(7).of(99), 7);
        assert_eq!(Sizes::Fixed(7).total(3), 21);
    }

    #[test]
    fn distributions_parse_and_write_back() {
        for w in ["100..10k", "lognormal:mean=1k,sd=2k", "1..1"] {
            let d: SizeDist = w.parse().unwrap();
            assert_eq!(d.to_string(), w);
        }
        assert_eq!(
            "lognormal:sd=2kb,mean=1kb".parse::<SizeDist>().unwrap(),
            SizeDist::LogNormal {
                mean: Size(1024),
                sd: Size(2048)
            }
        );
        for bad in [
            "100",
            "10k..100",
            "0..5",
            "lognormal:mean=1k",
            "normal:mean=1,sd=2",
        ] {
            assert!(bad.parse::<SizeDist>().is_err(), "{bad}");
        }
    }

    #[test]
    fn draws_are_seeded_and_in_range() {
        let d: SizeDist = "100..10k".parse().unwrap();
        let a = d.draw(10_000, 7);
        assert_eq!(a, d.draw(10_000, 7));
        assert_ne!(a, d.draw(10_000, 8));
        let Sizes::PerItem(v) = &a else { panic!() };
        assert!(v.iter().all(|&n| (100..=10_000).contains(&n)));
        let mean = v.iter().map(|&n| f64::from(n)).sum::<f64>() / v.len() as f64;
        assert!((mean - 5050.0).abs() < 150.0, "{mean}");
        let d: SizeDist = "lognormal:mean=1k,sd=2k".parse().unwrap();
        let Sizes::PerItem(v) = d.draw(200_000, 1) else {
            panic!()
        };
        let mean = v.iter().map(|&n| f64::from(n)).sum::<f64>() / v.len() as f64;
        assert!((mean - 1000.0).abs() < 60.0, "{mean}");
        assert!(v.iter().all(|&n| n >= 1));
    }
}
