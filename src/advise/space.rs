//! What `advise` searches: the strategies, and each one's own settings over their declared
//! search values (or `--vary`'s), one setting moved at a time from its default; and the fixed
//! order of simplicity a tie is settled by.

use crate::cli::RunFlags;
use crate::error::UsageError;
use crate::scenario::sweep::axes;
use crate::strategy::{Coordination, Freshness, NO_CACHE, PRESETS, StrategySpec};

/// The strategies searched when `--strategies` is not given: the presets, no-cache and the
/// compositions the stampede write-ups recommend.
pub fn default_strategies() -> Vec<String> {
    let mut v: Vec<String> = PRESETS.iter().map(|s| s.to_string()).collect();
    v.extend([
        NO_CACHE.to_string(),
        "swr+mutex".to_string(),
        "xfetch+mutex".to_string(),
    ]);
    v
}

/// A strategy's own setting, its declared search values (besides its default), and which
/// strategies use it.
pub struct Knob {
    /// The run flag: `beta`.
    pub flag: &'static str,
    /// Values tried besides the default, in sweep --axis's syntax.
    pub values: &'static str,
    pub uses: fn(&StrategySpec) -> bool,
}

/// The strategies' own settings and their default search values: around each default, one
/// step down and one up on the scale the setting works on.
pub const KNOBS: [Knob; 6] = [
    Knob {
        flag: "beta",
        values: "0.5,2",
        uses: |s| s.freshness == Freshness::Xfetch,
    },
    Knob {
        flag: "stale",
        values: "2s,30s",
        uses: |s| s.freshness == Freshness::Swr,
    },
    Knob {
        flag: "jitter",
        values: "5%,20%",
        uses: |s| s.jitter_preset,
    },
    Knob {
        flag: "lock-wait",
        values: "250ms,1s",
        uses: |s| s.coordination.mutex() || s.coordination.single_flight(),
    },
    Knob {
        flag: "lease-ttl",
        values: "500ms,5s",
        uses: |s| s.coordination.lease(),
    },
    Knob {
        flag: "eager-refresh",
        values: "50%,80%",
        uses: |s| {
            s.freshness == Freshness::Expire
                && s.coordination == Coordination::None
                && !s.jitter_preset
        },
    },
];

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

    /// The run flags of this candidate: `base` with its strategy and settings.
    pub fn flags(&self, base: &RunFlags) -> Result<RunFlags, UsageError> {
        let set: Vec<(&str, &str)> = self
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut f = axes::flags_at(base, &set)?;
        f.cache.strategy = Some(self.strategy.clone());
        Ok(f)
    }

    /// How far from plain cache-aside, for the simplicity order: (choices away from
    /// cache-aside, a distributed coordination, settings moved).
    pub fn simplicity(&self) -> (usize, bool, usize) {
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
/// strategy), one setting moved at a time. In the order given, defaults first.
pub fn candidates(strategies: &[String], vary: &[String]) -> Result<Vec<Candidate>, UsageError> {
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
        for k in KNOBS.iter().filter(|k| !preset && (k.uses)(&spec)) {
            let values: Vec<String> = match varied.iter().find(|(f, _)| f == k.flag) {
                Some((_, vs)) => vs.clone(),
                None => k.values.split(',').map(str::to_string).collect(),
            };
            for v in values {
                push(Candidate {
                    strategy: s.clone(),
                    settings: vec![(k.flag.to_string(), v)],
                });
            }
        }
        // A --vary that is no strategy's own (the TTL, the pool …): every caching strategy.
        for (flag, values) in &varied {
            if KNOBS.iter().any(|k| k.flag == flag) || !spec.caches() {
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
    fn each_strategy_at_its_defaults_then_its_own_settings() {
        let c = candidates(&["xfetch".into(), "mutex".into(), "no-cache".into()], &[]).unwrap();
        let labels: Vec<String> = c.iter().map(Candidate::label).collect();
        assert_eq!(
            labels,
            [
                "xfetch",
                "mutex",
                "no-cache",
                "xfetch beta=0.5",
                "xfetch beta=2",
                "mutex lock-wait=250ms",
                "mutex lock-wait=1s"
            ]
        );
        let v = candidates(
            &["mutex".into()],
            &["lock-wait=100ms".into(), "ttl=1s,5s".into()],
        )
        .unwrap();
        let labels: Vec<String> = v.iter().map(Candidate::label).collect();
        assert_eq!(
            labels,
            [
                "mutex",
                "mutex lock-wait=100ms",
                "mutex ttl=1000ms",
                "mutex ttl=5000ms"
            ]
        );
    }

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
}
