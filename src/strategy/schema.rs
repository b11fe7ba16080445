//! The JSON Schemas of a strategy and of an invalidation as a scenario file names them, which
//! accept what [`StrategySpec::parse`] and [`invalidate::invalidation`](crate::strategy::invalidate::invalidation) accept, and of a
//! strategy as results write it (its canonical name).

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::{Coordination, Freshness, LIBRARIES, PRESETS, StrategySpec};

/// The names a `+`-joined part may be.
const FRESHNESS: &str = "cache-aside|expire|xfetch|swr";
const PARTS: &str = "cache-aside|expire|xfetch|swr|mutex|single-flight|jitter|lease";

/// The names that stand alone: no-cache and the library presets.
fn alone() -> String {
    std::iter::once(super::NO_CACHE)
        .chain(LIBRARIES.iter().map(|d| d.preset))
        .collect::<Vec<_>>()
        .join("|")
}

/// The grammar: `no-cache` or a library preset alone, or parts joined by `+`, each trimmed of
/// whitespace.
fn grammar() -> String {
    format!(
        r"^(?:\s*(?:{})\s*|\s*(?:{PARTS})\s*(?:\+\s*(?:{PARTS})\s*)*)$",
        alone()
    )
}

/// Matches a strategy the grammar allows but the parser refuses: two freshness policies, one
/// part named twice, or lease with mutex or single-flight. `[\s\S]` is any character, line
/// breaks included, in every regex dialect.
fn refused() -> String {
    let part = |p: &str| format!(r"\s*(?:{p})\s*");
    let both =
        |a: &str, b: &str| format!(r"(?:^|\+){}\+(?:[\s\S]*\+)?{}(?:\+|$)", part(a), part(b));
    [
        // Two freshness policies, except xfetch with swr (in either order).
        both("cache-aside|expire", FRESHNESS),
        both(FRESHNESS, "cache-aside|expire"),
        both("xfetch", "xfetch"),
        both("swr", "swr"),
        both("mutex", "mutex"),
        both("single-flight", "single-flight"),
        both("jitter", "jitter"),
        both("lease", "lease"),
        both("lease", "mutex|single-flight"),
        both("mutex|single-flight", "lease"),
    ]
    .join("|")
}

/// Every strategy by its canonical name, as `Display` writes it.
fn canonical_names() -> Vec<String> {
    let mut names = vec![super::NO_CACHE.to_string()];
    for freshness in [
        Freshness::Expire,
        Freshness::Xfetch,
        Freshness::Swr,
        Freshness::XfetchSwr,
    ] {
        for coordination in [
            Coordination::None,
            Coordination::SingleFlight,
            Coordination::Mutex,
            Coordination::MutexSingleFlight,
            Coordination::Lease,
        ] {
            for jitter_preset in [false, true] {
                names.push(StrategySpec::of(freshness, coordination, jitter_preset).to_string());
            }
        }
    }
    names.extend(LIBRARIES.iter().map(|d| d.preset.to_string()));
    names
}

impl JsonSchema for StrategySpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Strategy".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        if generator.contract().is_serialize() {
            return json_schema!({
                "description": "The strategy's canonical name: no-cache, a library preset, or its freshness, then mutex, single-flight, lease and jitter, joined by +.",
                "type": "string",
                "enum": canonical_names(),
            });
        }
        json_schema!({
            "description": "no-cache (alone: every request loads, nothing is cached), a library preset (alone: laravel-flexible, rails-race-ttl, symfony, caffeine-refresh, spring-sync, fusion, bentocache, dogpile), a preset (cache-aside, mutex, single-flight, xfetch, swr, jitter), lease, or a combination with + of at most one of cache-aside|xfetch|swr (expire is another name for cache-aside) with mutex, single-flight and/or jitter, or with lease (and jitter), such as swr+mutex or swr+lease.",
            "type": "string",
            "allOf": [
                { "pattern": grammar() },
                { "not": { "pattern": refused() } },
            ],
            "examples": PRESETS.iter().chain(["lease", "swr+mutex", "swr+lease", "no-cache"].iter()).collect::<Vec<_>>(),
        })
    }
}

/// A scenario file's `invalidate`: one invalidation by name.
pub fn invalidation_name() -> Schema {
    json_schema!({
        "type": "string",
        "pattern": r"^\s*(?:delete|set|versioned|none)\s*$",
        "examples": ["delete", "set", "versioned", "none"],
    })
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;

    /// What the schema says of `s`: the grammar matches and no refused combination does.
    fn accepted(s: &str) -> bool {
        Regex::new(&grammar()).unwrap().is_match(s) && !Regex::new(&refused()).unwrap().is_match(s)
    }

    #[test]
    fn the_schema_accepts_every_strategy_the_parser_accepts_and_no_other() {
        let parts = [
            "cache-aside",
            "expire",
            "xfetch",
            "swr",
            "mutex",
            "single-flight",
            "jitter",
            "lease",
            "no-cache",
            "fusion",
            "",
            " mutex ",
            "magic",
        ];
        // Every sequence of up to 4 parts, joined by `+`.
        let mut seqs: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
        let mut last = seqs.clone();
        for _ in 1..4 {
            last = last
                .iter()
                .flat_map(|s| parts.iter().map(move |p| format!("{s}+{p}")))
                .collect();
            seqs.extend(last.iter().cloned());
        }
        for s in seqs
            .iter()
            .chain(&["\tswr +\nmutex".to_string(), "+".to_string()])
        {
            assert_eq!(
                accepted(s),
                StrategySpec::parse(s).is_ok(),
                "strategy {s:?}: the schema and the parser disagree"
            );
        }
        for name in canonical_names() {
            assert_eq!(StrategySpec::parse(&name).unwrap().to_string(), name);
        }
        assert_eq!(canonical_names().len(), 50);
    }
}
