//! `advise --target`: the search over an app under test's own settings. Each `--app-setting
//! NAME=VALUES` is an environment variable the app is started with; the baseline is the app
//! at its own defaults (none of them set), each setting is moved alone over its values, each
//! `--variant` is a fixed set of them, and once round 0 has measured every setting alone, the
//! best value of each (where it beat the defaults) is crossed into one more candidate. The
//! figures are the servers' (DB calls, herds from the ledger, latencies from the answers): a
//! figure only the built-in app knows is refused before the first run.

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::error::UsageError;
use crate::metric::Metric;
use crate::results::RunResult;
use crate::scenario::Scenario;
use crate::session::{Env, Status};

use super::space::Candidate;

pub use super::space::{APP, VARIANT, is_app};

/// Variables the tool itself gives the app: a setting cannot replace them.
const RESERVED: [&str; 6] = [
    "REDIS_URL",
    "DATABASE_URL",
    "DB_SCHEMA",
    "PORT",
    "CACHE_PREFIX",
    "CACHE_TTL_MS",
];

/// What `--app-setting` and `--variant` ask for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppSearch {
    /// Each setting's name and values, in the order given.
    pub settings: Vec<(String, Vec<String>)>,
    /// Each variant's name and the variables it sets.
    pub variants: Vec<(String, Vec<(String, String)>)>,
}

/// What "doing nothing" is for a baseline labelled `label`.
pub fn doing_nothing(label: &str) -> &'static str {
    if is_app(label) {
        "the app at its defaults"
    } else {
        "cache-aside at your settings"
    }
}

fn env_name_ok(n: &str) -> bool {
    n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One `--app-setting NAME=VALUES`: the variable and its values (comma-separated).
pub fn parse_setting(s: &str) -> Result<(String, Vec<String>), UsageError> {
    let bad = |why: String| {
        UsageError::new(format!(
            "--app-setting {s}: {why}; write NAME=VALUE,VALUE…, e.g. CACHE_LOCK=off,on"
        ))
    };
    let Some((name, values)) = s.split_once('=') else {
        return Err(bad("no =".to_string()));
    };
    if !env_name_ok(name) {
        return Err(bad(format!(
            "{name} is not an environment variable's name (letters, digits, _)"
        )));
    }
    if RESERVED.contains(&name) {
        return Err(bad(format!(
            "{name} is given to the app by stampede itself (its servers, port, prefix, --ttl)"
        )));
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(bad("an empty value".to_string()));
    }
    if (1..values.len()).any(|i| values[..i].contains(&values[i])) {
        return Err(bad("a value given twice".to_string()));
    }
    Ok((name.to_string(), values))
}

impl AppSearch {
    /// From the flags, each checked.
    pub fn parse(settings: &[String], variants: &[String]) -> Result<AppSearch, UsageError> {
        let mut a = AppSearch::default();
        for s in settings {
            let (name, values) = parse_setting(s)?;
            if a.settings.iter().any(|(n, _)| *n == name) {
                return Err(UsageError::new(format!(
                    "--app-setting names {name} twice: give its values once, comma-separated"
                )));
            }
            a.settings.push((name, values));
        }
        for v in variants {
            let (name, env) = crate::app::parse_variant(v)?;
            if a.variants.iter().any(|(n, _)| *n == name) {
                return Err(UsageError::new(format!(
                    "--variant names {name} twice: each variant runs once"
                )));
            }
            if let Some((k, _)) = env.iter().find(|(k, _)| RESERVED.contains(&k.as_str())) {
                return Err(UsageError::new(format!(
                    "--variant {name}: {k} is given to the app by stampede itself"
                )));
            }
            a.variants.push((name, env));
        }
        if a.settings.is_empty() && a.variants.is_empty() {
            return Err(UsageError::new(
                "advise --target searches the app's own settings: give them with --app-setting NAME=VALUES (repeatable, e.g. --app-setting CACHE_LOCK=off,on) or --variant NAME=ENV=VALUE,…",
            ));
        }
        Ok(a)
    }

    /// The app at its own defaults: no setting given.
    pub fn baseline() -> Candidate {
        Candidate {
            strategy: APP.to_string(),
            settings: Vec::new(),
        }
    }

    /// The baseline, each setting alone at each of its values, then the variants.
    pub fn candidates(&self) -> Vec<Candidate> {
        let mut out = vec![Self::baseline()];
        for (name, values) in &self.settings {
            for v in values {
                out.push(Candidate {
                    strategy: APP.to_string(),
                    settings: vec![(name.clone(), v.clone())],
                });
            }
        }
        for (name, env) in &self.variants {
            out.push(Candidate {
                strategy: format!("{VARIANT}{name}"),
                settings: env.clone(),
            });
        }
        out
    }

    /// Whether round 0 keeps a place for the cross of the settings' best values.
    pub fn crosses(&self) -> bool {
        self.settings.len() >= 2
    }
}

/// The cross of round 0: every setting at its best value there, when that value ranked
/// better than the defaults; None when fewer than two settings did (one is already a
/// candidate of its own).
pub fn crossed(
    ran: &[(Candidate, RunResult)],
    objective: Metric,
    budgets: &[(Metric, f64)],
) -> Option<Candidate> {
    let rank = |r: &RunResult| super::plan::rank(r, objective, budgets);
    let base = ran
        .iter()
        .find(|(c, _)| c.strategy == APP && c.settings.is_empty())
        .map(|(_, r)| rank(r))?;
    let mut best: Vec<(String, String, f64)> = Vec::new();
    for (c, r) in ran
        .iter()
        .filter(|(c, _)| c.strategy == APP && c.settings.len() == 1)
    {
        let (name, value) = &c.settings[0];
        let x = rank(r);
        match best.iter_mut().find(|b| b.0 == *name) {
            Some(b) if x < b.2 => {
                b.1 = value.clone();
                b.2 = x;
            }
            Some(_) => {}
            None => best.push((name.clone(), value.clone(), x)),
        }
    }
    best.retain(|b| b.2 < base);
    (best.len() >= 2).then(|| Candidate {
        strategy: APP.to_string(),
        settings: best.into_iter().map(|(n, v, _)| (n, v)).collect(),
    })
}

/// The search's servers started, and the app's start on them measured once (its schema
/// seeded, the app ready, both removed): every run starts the app again, so the plan counts
/// that cost in each run's. The scenario returned is the one to plan on: the measured start
/// joins its warm-up, which the plan counts with a run's cost besides its window (the runs
/// keep the team's warm-up).
pub async fn measure_start(
    base: &Scenario,
    status: &Status,
    shutdown: &CancellationToken,
) -> Result<(Env, Scenario)> {
    let mut env = Env::start(base, status).await?;
    let cost = match crate::session::app_run::start_cost(base, &mut env, shutdown).await {
        Ok(c) => c,
        Err(e) => {
            env.stop();
            return Err(e.context("starting the app at its defaults to measure its start"));
        }
    };
    status.line(&format!(
        "the app's start and its schema's seeding took {:.1} s: counted in every run's cost",
        cost.as_secs_f64()
    ));
    let mut sc = base.clone();
    sc.warmup = crate::values::Dur(sc.warmup.0 + cost);
    Ok((env, sc))
}

/// An objective or a budget an app under test cannot give, refused before the first run.
pub fn refuse_unmeasured(objective: Metric, budgets: &[(Metric, f64)]) -> Result<(), UsageError> {
    let why = |m: Metric| -> Option<&'static str> {
        match m {
            Metric::HitRate | Metric::Stale | Metric::StaleRatio | Metric::Waited => Some(
                "an app under test's HTTP answers do not say whether they came from its cache, were stale or waited",
            ),
            m if m.consistency() => Some(
                "stampede cannot see an app under test's writes commit (--write-rps is refused with --target)",
            ),
            _ => None,
        }
    };
    if let Some(w) = why(objective) {
        return Err(UsageError::new(format!(
            "--minimize {}: with --target it is never measured ({w}); minimise a figure the servers give: db_calls, redundant_loads, peak_key_herd, peak_concurrent, p50, p95, p99, error_rate, recovery_back",
            objective.name()
        )));
    }
    for &(m, _) in budgets {
        if let Some(w) = why(m) {
            return Err(UsageError::new(format!(
                "{}: with --target it is never measured ({w}): drop the budget",
                m.threshold_name().unwrap_or_else(|| m.name().to_string())
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_variants_parse_into_candidates_baseline_first() {
        let a = AppSearch::parse(
            &["CACHE_BETA=0,1,2".into(), "CACHE_LOCK=off,on".into()],
            &["fast=CACHE_LOCK=on,CACHE_BETA=2".into()],
        )
        .unwrap();
        let labels: Vec<String> = a.candidates().iter().map(Candidate::label).collect();
        assert_eq!(
            labels,
            [
                "app",
                "app CACHE_BETA=0",
                "app CACHE_BETA=1",
                "app CACHE_BETA=2",
                "app CACHE_LOCK=off",
                "app CACHE_LOCK=on",
                "app:fast CACHE_LOCK=on CACHE_BETA=2"
            ]
        );
        assert!(a.crosses());
        // Simplest: fewest settings moved from the app's defaults.
        let mut c = a.candidates();
        c.reverse();
        c.sort_by_key(Candidate::simplicity);
        assert_eq!(c[0].label(), "app");
        assert_eq!(
            c.last().map(Candidate::label).as_deref(),
            Some("app:fast CACHE_LOCK=on CACHE_BETA=2")
        );
    }

    #[test]
    fn bad_settings_say_why() {
        for (s, why) in [
            ("CACHE_LOCK", "no ="),
            ("1X=a", "not an environment variable"),
            ("PORT=1,2", "given to the app by stampede"),
            ("X=a,,b", "an empty value"),
            ("X=a,a", "twice"),
        ] {
            let e = parse_setting(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
        let e = AppSearch::parse(&["X=1".into(), "X=2".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("names X twice"), "{e}");
        assert!(AppSearch::parse(&[], &[]).is_err());
    }

    /// A result with `calls` DB calls (a committed CI result, its other figures kept).
    fn with_calls(calls: u64) -> RunResult {
        let p = format!(
            "{}/results/baseline-ci/cache-aside.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut r: RunResult = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        r.db.calls = crate::results::Known::Value(calls);
        r
    }

    fn app(settings: &[(&str, &str)]) -> Candidate {
        Candidate {
            strategy: APP.into(),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Each setting at its best value of round 0, when it beat the defaults; a setting none of
    /// whose values did stays out, and one setting alone is no cross.
    #[test]
    fn the_cross_takes_each_settings_best_value_that_beat_the_defaults() {
        let ran = |x: u64| {
            vec![
                (app(&[]), with_calls(100)),
                (app(&[("BETA", "0")]), with_calls(90)),
                (app(&[("BETA", "2")]), with_calls(80)),
                (app(&[("LOCK", "off")]), with_calls(101)),
                (app(&[("LOCK", "on")]), with_calls(x)),
                (app(&[("POOL", "4")]), with_calls(120)),
            ]
        };
        let c = crossed(&ran(50), Metric::DbCalls, &[]).unwrap();
        assert_eq!(c.label(), "app BETA=2 LOCK=on");
        assert_eq!(crossed(&ran(100), Metric::DbCalls, &[]), None);
    }

    #[test]
    fn what_a_target_cannot_measure_is_refused() {
        assert!(refuse_unmeasured(Metric::DbCalls, &[(Metric::P99, 50.0)]).is_ok());
        let e = refuse_unmeasured(Metric::StaleRatio, &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--minimize stale_ratio"), "{e}");
        let e = refuse_unmeasured(Metric::DbCalls, &[(Metric::HitRate, 0.9)])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("hit_rate_min"), "{e}");
        let e = refuse_unmeasured(Metric::Waited, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("never measured"), "{e}");
    }
}
