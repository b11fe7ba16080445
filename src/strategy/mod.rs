//! A strategy is three orthogonal choices (docs/design.md): freshness (when a value is loaded
//! again), coordination (who loads it) and TTL jitter. The CLI's six names are presets of
//! these, and `+` composes them; `no-cache` (every request loads, nothing is kept) is the
//! freshness that composes with nothing, the baseline a cache is measured against. This module parses and names them (their JSON Schema is in
//! [`schema`]); the request path that applies them lives in [`crate::instance`].

pub mod envelope;
pub mod freshness;
pub mod invalidate;
pub mod lock;
pub mod schema;
pub mod single_flight;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// When a cached value is loaded again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Freshness {
    /// Load on miss; the entry lives for the TTL.
    Expire,
    /// Probabilistic early recompute (Vattani et al., VLDB 2015).
    Xfetch,
    /// Soft expiry: serve stale within a window and refresh in the background.
    Swr,
    /// No cache: every request loads from the database, Redis is neither read nor written.
    /// The baseline of the break-even hit rate (docs/strategies.md).
    NoCache,
}

/// Who performs a load when one is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coordination {
    /// Every request that needs the value loads it.
    None,
    /// One load per key per app instance; others in that instance await it.
    SingleFlight,
    /// One load per key across instances, through a Redis lock.
    Mutex,
    /// Coalesce in-process first, then take the Redis lock across instances.
    MutexSingleFlight,
    /// One lease token per key across instances (memcache's leases, Nishtala et al., NSDI
    /// 2013): the holder loads and its SET must present the token; a write's delete
    /// invalidates the token, so the holder's late, stale SET is refused.
    Lease,
}

impl Coordination {
    pub fn single_flight(self) -> bool {
        matches!(
            self,
            Coordination::SingleFlight | Coordination::MutexSingleFlight
        )
    }
    pub fn mutex(self) -> bool {
        matches!(self, Coordination::Mutex | Coordination::MutexSingleFlight)
    }
    pub fn lease(self) -> bool {
        self == Coordination::Lease
    }
    /// Whether a claim is a token in Redis (the mutex's lock or a lease), waited for across
    /// instances.
    pub fn redis_token(self) -> bool {
        self.mutex() || self.lease()
    }
}

/// A parsed `--strategy`: one freshness, one coordination, and whether the jitter preset was
/// named (its ±10% applies unless `--jitter` says otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategySpec {
    pub freshness: Freshness,
    pub coordination: Coordination,
    pub jitter_preset: bool,
}

/// The presets (docs/design.md), in the order `compare --strategies all` runs them.
pub const PRESETS: [&str; 6] = [
    "cache-aside",
    "mutex",
    "single-flight",
    "xfetch",
    "swr",
    "jitter",
];

/// The name of the strategy without a cache, which composes with nothing.
pub const NO_CACHE: &str = "no-cache";

const VALID_FORMS: &str = "valid: no-cache (alone), cache-aside, mutex, single-flight, xfetch, swr, jitter, lease, or `+` \
    joining at most one freshness (cache-aside, xfetch, swr) with mutex and/or single-flight, or \
    with lease, and/or jitter, e.g. swr+mutex, xfetch+single-flight, mutex+single-flight, swr+lease";

impl StrategySpec {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut freshness: Option<(Freshness, &str)> = None;
        let (mut mutex, mut sf, mut jitter, mut lease) = (false, false, false, false);
        if s.trim().is_empty() {
            return Err(format!("empty strategy ({VALID_FORMS})"));
        }
        if s.trim() == NO_CACHE {
            return Ok(StrategySpec {
                freshness: Freshness::NoCache,
                coordination: Coordination::None,
                jitter_preset: false,
            });
        }
        if s.split('+').any(|p| p.trim() == NO_CACHE) {
            let with = match s.split('+').map(str::trim).find(|p| *p != NO_CACHE) {
                Some(other) => format!("combines no-cache with {other}"),
                None => "names no-cache twice".to_string(),
            };
            return Err(format!(
                "'{s}' {with}: no-cache composes with nothing (without a cache there is nothing to coordinate, refresh or jitter); use --strategy no-cache alone ({VALID_FORMS})"
            ));
        }
        for part in s.split('+').map(str::trim) {
            let f = match part {
                "cache-aside" | "expire" => Some(Freshness::Expire),
                "xfetch" => Some(Freshness::Xfetch),
                "swr" => Some(Freshness::Swr),
                "mutex" | "single-flight" | "jitter" | "lease" => None,
                other => return Err(format!("unknown strategy '{other}' ({VALID_FORMS})")),
            };
            let dup = match (part, f) {
                (_, Some(f)) => {
                    if let Some((_, prev)) = freshness {
                        return Err(format!(
                            "'{s}' combines two freshness policies ({prev} and {part}); a value has one way of going stale, choose one ({VALID_FORMS})"
                        ));
                    }
                    freshness = Some((f, part));
                    false
                }
                ("mutex", _) => std::mem::replace(&mut mutex, true),
                ("single-flight", _) => std::mem::replace(&mut sf, true),
                ("lease", _) => std::mem::replace(&mut lease, true),
                _ => std::mem::replace(&mut jitter, true),
            };
            if dup {
                return Err(format!("'{s}' names {part} twice ({VALID_FORMS})"));
            }
        }
        if lease && (mutex || sf) {
            return Err(format!(
                "'{s}' combines lease with {}: a lease already makes one load per key across instances, choose one coordination ({VALID_FORMS})",
                if mutex { "mutex" } else { "single-flight" }
            ));
        }
        let coordination = match (mutex, sf) {
            _ if lease => Coordination::Lease,
            (false, false) => Coordination::None,
            (false, true) => Coordination::SingleFlight,
            (true, false) => Coordination::Mutex,
            (true, true) => Coordination::MutexSingleFlight,
        };
        Ok(StrategySpec {
            freshness: freshness.map_or(Freshness::Expire, |(f, _)| f),
            coordination,
            jitter_preset: jitter,
        })
    }

    /// Whether the strategy keeps values in Redis at all (false for `no-cache` only).
    pub fn caches(&self) -> bool {
        self.freshness != Freshness::NoCache
    }

    /// Whether a stale value can exist to be served (the lock timeout policy `stale` needs one).
    pub fn serves_stale(&self) -> bool {
        self.freshness == Freshness::Swr
    }

    /// The TTL jitter when `--jitter` is not given: ±10% for the jitter preset, else none.
    pub fn default_jitter(&self) -> f64 {
        if self.jitter_preset { 0.10 } else { 0.0 }
    }
}

impl fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<&str> = Vec::with_capacity(4);
        match self.freshness {
            Freshness::NoCache => return f.write_str(NO_CACHE),
            Freshness::Expire => {}
            Freshness::Xfetch => parts.push("xfetch"),
            Freshness::Swr => parts.push("swr"),
        }
        if self.coordination.mutex() {
            parts.push("mutex");
        }
        if self.coordination.single_flight() {
            parts.push("single-flight");
        }
        if self.coordination.lease() {
            parts.push("lease");
        }
        if self.jitter_preset {
            parts.push("jitter");
        }
        if parts.is_empty() {
            return f.write_str("cache-aside");
        }
        f.write_str(&parts.join("+"))
    }
}

impl Serialize for StrategySpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StrategySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StrategySpec::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip() {
        for p in PRESETS {
            assert_eq!(StrategySpec::parse(p).unwrap().to_string(), p);
        }
        for c in [
            "swr+mutex",
            "xfetch+mutex",
            "xfetch+single-flight",
            "mutex+single-flight",
            "lease",
            "swr+lease",
            "xfetch+lease",
            "lease+jitter",
        ] {
            assert_eq!(StrategySpec::parse(c).unwrap().to_string(), c);
        }
        assert_eq!(
            StrategySpec::parse("single-flight+mutex")
                .unwrap()
                .to_string(),
            "mutex+single-flight"
        );
        let n = StrategySpec::parse(" no-cache ").unwrap();
        assert_eq!(n.to_string(), "no-cache");
        assert!(!n.caches() && n.coordination == Coordination::None);
        assert_eq!(
            StrategySpec::parse("cache-aside+mutex")
                .unwrap()
                .to_string(),
            "mutex"
        );
    }

    #[test]
    fn nonsense_is_refused_with_the_valid_forms() {
        for bad in [
            "xfetch+swr",
            "magic",
            "mutex+mutex",
            "",
            "swr+",
            "lease+mutex",
            "lease+single-flight",
            "lease+lease",
            "no-cache+mutex",
            "cache-aside+no-cache",
            "no-cache+no-cache",
            "no-cache+jitter",
        ] {
            let e = StrategySpec::parse(bad).unwrap_err();
            assert!(e.contains("valid:"), "{bad}: {e}");
        }
    }
}
