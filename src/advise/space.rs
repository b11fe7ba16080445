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
        "xfetch+swr+mutex".to_string(),
    ]);
    v
}

/// A strategy's own setting, searched over the values declared with it (`search` in
/// `src/cli/settings/`): which strategies use it, and when it can matter at all.
pub struct Knob {
    /// The setting's key: `lock_wait` (its flag is `--lock-wait`).
    pub key: &'static str,
    pub uses: fn(&StrategySpec) -> bool,
    /// Searched only when the scenario has a fault: a setting that acts when loads or Redis
    /// fail (fail-safe) cannot differ from its default otherwise.
    pub needs_fault: bool,
    /// Another setting this one needs, set with it at its first search value (the L1's TTL
    /// needs an L1).
    pub with: Option<&'static str>,
}

/// Plain cache-aside or in-process coordination: where an in-process tier is tried (the
/// two-level cache; with a distributed coordination its lock or lease already guards Redis).
fn plain_or_in_process(s: &StrategySpec) -> bool {
    s.freshness == Freshness::Expire
        && matches!(
            s.coordination,
            Coordination::None | Coordination::SingleFlight
        )
        && !s.jitter_preset
}

/// The strategies' own settings. Their search values are declared with each setting: around
/// its default, one step down and one up on the scale the setting works on, or the setting
/// turned on.
pub const KNOBS: [Knob; 13] = [
    Knob {
        key: "beta",
        uses: |s| s.freshness.early(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "stale",
        uses: |s| s.freshness.windowed(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "jitter",
        uses: |s| s.jitter_preset,
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "lock_wait",
        uses: |s| s.coordination.mutex() || s.coordination.single_flight(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "lock_ttl",
        uses: |s| s.coordination.mutex(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "lock_extend",
        uses: |s| s.coordination.mutex(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "lock_waiters",
        uses: |s| s.coordination.mutex(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "fallback_writeback",
        uses: |s| s.coordination.mutex(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "lease_ttl",
        uses: |s| s.coordination.lease(),
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "eager_refresh",
        uses: |s| {
            s.freshness == Freshness::Expire
                && s.coordination == Coordination::None
                && !s.jitter_preset
        },
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "fail_safe",
        uses: |s| s.caches(),
        needs_fault: true,
        with: None,
    },
    Knob {
        key: "l1",
        uses: plain_or_in_process,
        needs_fault: false,
        with: None,
    },
    Knob {
        key: "l1_ttl",
        uses: plain_or_in_process,
        needs_fault: false,
        with: Some("l1"),
    },
];

impl Knob {
    /// `--lock-wait`'s name without dashes: how `--vary` and the labels name it.
    pub fn flag(&self) -> String {
        self.key.replace('_', "-")
    }
}

/// The values `advise` tries for `key` besides its default, as declared with the setting.
fn declared(key: &str) -> Vec<String> {
    RunFlags::search_values()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.split(',').map(str::to_string).collect())
        .unwrap_or_default()
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
/// strategy), one setting moved at a time (with the one it needs, if any). In the order given,
/// defaults first. `faulted`: the scenario has a fault, so fail-safe can matter.
pub fn candidates(
    strategies: &[String],
    vary: &[String],
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
        for k in KNOBS
            .iter()
            .filter(|k| !preset && (k.uses)(&spec) && (faulted || !k.needs_fault))
        {
            let flag = k.flag();
            let values: Vec<String> = match varied.iter().find(|(f, _)| *f == flag) {
                Some((_, vs)) => vs.clone(),
                None => declared(k.key),
            };
            let with: Vec<(String, String)> = k
                .with
                .and_then(|w| Some((w.replace('_', "-"), declared(w).into_iter().next()?)))
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
            if KNOBS.iter().any(|k| k.flag() == *flag) || !spec.caches() {
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
        let c = candidates(
            &["xfetch".into(), "mutex".into(), "no-cache".into()],
            &[],
            false,
        )
        .unwrap();
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
                "mutex lock-wait=1s",
                "mutex lock-ttl=500ms",
                "mutex lock-ttl=5s",
                "mutex lock-ttl=auto",
                "mutex lock-extend=true",
                "mutex lock-waiters=reread",
                "mutex fallback-writeback=off"
            ]
        );
        let v = candidates(
            &["mutex".into()],
            &["lock-wait=100ms".into(), "ttl=1s,5s".into()],
            false,
        )
        .unwrap();
        let labels: Vec<String> = v.iter().map(Candidate::label).collect();
        assert_eq!(
            labels,
            [
                "mutex",
                "mutex lock-wait=100ms",
                "mutex lock-ttl=500ms",
                "mutex lock-ttl=5s",
                "mutex lock-ttl=auto",
                "mutex lock-extend=true",
                "mutex lock-waiters=reread",
                "mutex fallback-writeback=off",
                "mutex ttl=1000ms",
                "mutex ttl=5000ms"
            ]
        );
    }

    #[test]
    fn fail_safe_only_under_a_fault_and_the_l1_ttl_with_an_l1() {
        let labels = |faulted| -> Vec<String> {
            candidates(&["cache-aside".into()], &[], faulted)
                .unwrap()
                .iter()
                .map(Candidate::label)
                .collect()
        };
        let calm = labels(false);
        assert!(!calm.iter().any(|l| l.contains("fail-safe")), "{calm:?}");
        assert!(
            calm.contains(&"cache-aside l1=1000".to_string()),
            "{calm:?}"
        );
        assert!(
            calm.contains(&"cache-aside l1=1000 l1-ttl=250ms".to_string()),
            "{calm:?}"
        );
        let shocked = labels(true);
        assert!(
            shocked.contains(&"cache-aside fail-safe=30s".to_string()),
            "{shocked:?}"
        );
    }

    /// Every value declared for the search resolves with every strategy that uses it: a
    /// declared value the checks refuse would drop a candidate silently.
    #[test]
    fn every_declared_search_value_resolves() {
        let mut base = RunFlags::default();
        base.faults.fault = vec![crate::fault::parse("kill-redis@2s+1s").unwrap()];
        let all = candidates(&default_strategies(), &[], true).unwrap();
        assert!(all.len() > 30, "{}", all.len());
        for c in &all {
            crate::scenario::resolve_one(None, c.flags(&base).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
        }
        // Each searchable setting is some strategy's knob, and each knob has values.
        for (key, _) in RunFlags::search_values() {
            assert!(KNOBS.iter().any(|k| k.key == key), "{key} has no knob");
        }
        for k in &KNOBS {
            assert!(!declared(k.key).is_empty(), "{} declares no values", k.key);
        }
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
