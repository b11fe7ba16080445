//! What `advise` searches: the strategies, and each one's own settings over their declared
//! search values (or `--vary`'s), one setting moved at a time from its default; and the fixed
//! order of simplicity a tie is settled by.

use crate::error::UsageError;
use crate::scenario::sweep::axes;
use crate::strategy::{Knob, NO_CACHE, PRESETS, StrategySpec};

/// The strategy name of an app under test's candidates (`advise --target`): `app CACHE_LOCK=on`.
pub const APP: &str = "app";
/// A `--variant`'s candidates are `app:NAME`.
pub const VARIANT: &str = "app:";

/// Whether `strategy` names one of the app's candidates (not a built-in strategy).
pub fn is_app(strategy: &str) -> bool {
    strategy == APP || strategy.starts_with(VARIANT)
}

/// The strategies searched when `--strategies` is not given: the presets, no-cache and the
/// compositions the stampede write-ups recommend.
pub fn default_strategies() -> Vec<String> {
    let mut v: Vec<String> = PRESETS.iter().map(|s| s.to_string()).collect();
    v.extend([
        NO_CACHE.to_string(),
        "swr+mutex".to_string(),
        "xfetch+mutex".to_string(),
        "xfetch+swr+mutex".to_string(),
    ]);
    v
}

/// One configuration to try: a strategy and the settings moved from their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub strategy: String,
    /// (flag, value) pairs, as given to `run`.
    pub settings: Vec<(String, String)>,
}

impl Candidate {
    /// `swr stale=30s`.
    pub fn label(&self) -> String {
        let mut s = self.strategy.clone();
        for (k, v) in &self.settings {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }

    /// A name for files: `swr_stale=30s`.
    pub fn slug(&self) -> String {
        self.label()
            .replace(' ', "_")
            .replace(['/', '%'], "pct")
            .replace('+', "-")
    }

    /// How far from plain cache-aside, for the simplicity order: (choices away from
    /// cache-aside, a distributed coordination, settings moved). An app under test's
    /// candidates differ only by the settings moved from the app's defaults.
    pub fn simplicity(&self) -> (usize, bool, usize) {
        if is_app(&self.strategy) {
            return (0, false, self.settings.len());
        }
        let spec = StrategySpec::parse(&self.strategy).ok();
        let choices = match spec {
            _ if self.strategy == "cache-aside" => 0,
            Some(s) if s.library_defaults().is_some() => 3,
            _ => self.strategy.split('+').count(),
        };
        let distributed = spec.is_some_and(|s| s.coordination.redis_token());
        (choices, distributed, self.settings.len())
    }
}

/// The candidates: each strategy at its defaults, then each of its settings at each search
/// value (`--vary`'s replace a knob's values, or add a setting of the workload for every
/// strategy), one setting moved at a time (with the one it needs, if any). In the order given,
/// defaults first. `knobs`: the searched settings, as declared with them; `faulted`: the
/// scenario has a fault, so fail-safe can matter.
pub fn candidates(
    strategies: &[String],
    vary: &[String],
    knobs: &[Knob],
    faulted: bool,
) -> Result<Vec<Candidate>, UsageError> {
    let mut varied: Vec<(String, Vec<String>)> = Vec::new();
    for v in vary {
        let axis = axes::parse(v).map_err(|e| {
            UsageError::new(
                e.to_string()
                    .replace("--axis", "--vary")
                    .replace("an axis is", "--vary takes"),
            )
        })?;
        varied.push((
            axis.flag.clone(),
            axis.points.iter().map(|p| p.text.clone()).collect(),
        ));
    }
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |c: Candidate| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    for s in strategies {
        push(Candidate {
            strategy: s.clone(),
            settings: Vec::new(),
        });
    }
    for s in strategies {
        let Ok(spec) = StrategySpec::parse(s) else {
            continue;
        };
        // A library preset is its library's semantics at its own settings.
        let preset = spec.library_defaults().is_some();
        for k in knobs
            .iter()
            .filter(|k| !preset && (k.uses)(&spec) && (faulted || !k.needs_fault))
        {
            let flag = k.flag();
            let values: Vec<String> = match varied.iter().find(|(f, _)| *f == flag) {
                Some((_, vs)) => vs.clone(),
                None => k.values(),
            };
            let with: Vec<(String, String)> = k
                .with
                .and_then(|w| knobs.iter().find(|o| o.key == w))
                .and_then(|w| Some((w.flag(), w.values().into_iter().next()?)))
                .into_iter()
                .collect();
            for v in values {
                let mut settings = with.clone();
                settings.push((flag.clone(), v));
                push(Candidate {
                    strategy: s.clone(),
                    settings,
                });
            }
        }
        // A --vary that is no strategy's own (the TTL, the pool …): every caching strategy.
        for (flag, values) in &varied {
            if knobs.iter().any(|k| k.flag() == *flag) || !spec.caches() {
                continue;
            }
            for v in values {
                push(Candidate {
                    strategy: s.clone(),
                    settings: vec![(flag.clone(), v.clone())],
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simpler_is_fewer_choices_then_in_process_then_fewer_settings() {
        let c = |s: &str, n: usize| Candidate {
            strategy: s.into(),
            settings: vec![("x".into(), "1".into()); n],
        };
        let mut v = [
            c("swr+mutex", 0),
            c("mutex", 0),
            c("single-flight", 1),
            c("single-flight", 0),
            c("cache-aside", 0),
        ];
        v.sort_by_key(Candidate::simplicity);
        let names: Vec<String> = v.iter().map(Candidate::label).collect();
        assert_eq!(
            names,
            [
                "cache-aside",
                "single-flight",
                "single-flight x=1",
                "mutex",
                "swr+mutex"
            ]
        );
    }

    /// A library preset enters the search when named, at its library's own settings: no
    /// knob of the composed strategies is moved on it.
    #[test]
    fn a_named_library_preset_is_searched_at_its_own_settings() {
        let knobs = [Knob {
            key: "stale",
            values: "1s,30s",
            uses: |s| s.serves_stale(),
            needs_fault: false,
            with: None,
        }];
        let names: Vec<String> = ["swr", "bentocache", "dogpile"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = candidates(&names, &[], &knobs, false).unwrap();
        let labels: Vec<String> = c.iter().map(Candidate::label).collect();
        assert_eq!(
            labels,
            [
                "swr",
                "bentocache",
                "dogpile",
                "swr stale=1s",
                "swr stale=30s"
            ]
        );
        assert_eq!(
            c[2].simplicity(),
            (3, true, 0),
            "dogpile's lock is in Redis"
        );
        assert_eq!(c[1].simplicity(), (3, false, 0));
    }
}
