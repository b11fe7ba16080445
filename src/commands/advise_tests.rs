//! The search space built from the settings' declarations, and each candidate resolved
//! through them.

use super::*;
use crate::advise::space::{candidates, default_strategies};
use crate::cli::{Cli, Command};

/// `stampede advise --minimize p99` with `args`.
fn advise(args: &[&str]) -> AdviseCmd {
    use clap::Parser;
    let all = ["stampede", "advise", "--minimize", "p99"]
        .iter()
        .chain(args);
    match Cli::try_parse_from(all).unwrap().command {
        Command::Advise(a) => a,
        _ => unreachable!("parsed as advise"),
    }
}

#[test]
fn each_strategy_at_its_defaults_then_its_own_settings_in_their_declared_order() {
    let c = candidates(
        &["xfetch".into(), "mutex".into(), "no-cache".into()],
        &[],
        &RunFlags::knobs(),
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
            "mutex lock-ttl=500ms",
            "mutex lock-ttl=5s",
            "mutex lock-ttl=auto",
            "mutex lock-extend=true",
            "mutex lock-wait=250ms",
            "mutex lock-wait=1s",
            "mutex lock-waiters=reread",
            "mutex fallback-writeback=off"
        ]
    );
    let v = candidates(
        &["mutex".into()],
        &["lock-wait=100ms".into(), "ttl=1s,5s".into()],
        &RunFlags::knobs(),
        false,
    )
    .unwrap();
    let labels: Vec<String> = v.iter().map(Candidate::label).collect();
    assert_eq!(
        labels,
        [
            "mutex",
            "mutex lock-ttl=500ms",
            "mutex lock-ttl=5s",
            "mutex lock-ttl=auto",
            "mutex lock-extend=true",
            "mutex lock-wait=100ms",
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
        candidates(&["cache-aside".into()], &[], &RunFlags::knobs(), faulted)
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
    let base = advise(&["--fault", "kill-redis@2s+1s"]).flags;
    let knobs = RunFlags::knobs();
    let all = candidates(&default_strategies(), &[], &knobs, true).unwrap();
    assert!(all.len() > 30, "{}", all.len());
    let resolve = resolver(None, base);
    for c in &all {
        resolve(c).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
    }
    // Each knob has values, and each knob another needs is a knob.
    for k in &knobs {
        assert!(!k.values().is_empty(), "{} declares no values", k.key);
        assert!(k.with.is_none_or(|w| knobs.iter().any(|o| o.key == w)));
    }
    assert_eq!(knobs.len(), 13);
}

/// A candidate's settings are set with each setting's own type: a value its flag refuses
/// is refused naming the flag.
#[test]
fn a_candidate_s_settings_are_typed() {
    let resolve = resolver(None, RunFlags::default());
    let c = |k: &str, v: &str| Candidate {
        strategy: "mutex".into(),
        settings: vec![(k.into(), v.into())],
    };
    let sc = resolve(&c("lock-waiters", "reread")).unwrap();
    assert_eq!(format!("{:?}", sc.lock.lock_waiters), "Reread");
    assert!(
        !resolve(&c("fallback-writeback", "off"))
            .unwrap()
            .lock
            .fallback_writeback
    );
    let e = resolve(&c("lock-wait", "soon")).unwrap_err().to_string();
    assert!(e.contains("--lock-wait"), "{e}");
}

#[test]
fn the_ci_scenario_reads_back_as_the_run_it_was_written_from() {
    use crate::advise::adopt::ci_scenario;
    use crate::advise::judge::Pick;
    use crate::results::comparable::{STRATEGY_SETTINGS, WORKLOAD_SETTINGS, differences};
    let AdvicePlan { file, .. } = plan(advise(&[])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for strategy in [
        "cache-aside",
        "jitter",
        "mutex",
        "single-flight",
        "swr",
        "xfetch",
    ] {
        let p = format!(
            "{}/results/baseline-ci/{strategy}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r: crate::results::RunResult =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let pick = Pick {
            label: strategy.into(),
            strategy: strategy.into(),
            settings: Default::default(),
            trials: 1,
            objective: Default::default(),
            thresholds: Vec::new(),
        };
        let text = ci_scenario(
            &pick,
            &r,
            &file,
            crate::advise::objective_of("p99").unwrap(),
            &[],
        );
        let path = dir.path().join(format!("{strategy}.toml"));
        std::fs::write(&path, &text).unwrap();
        let back = crate::scenario::resolve(Some(&path), RunFlags::default())
            .unwrap_or_else(|e| panic!("{strategy}: {e}\n{text}"));
        let keys: Vec<&str> = WORKLOAD_SETTINGS
            .iter()
            .chain(STRATEGY_SETTINGS.iter())
            .copied()
            .filter(|k| *k != "scenario_file")
            .collect();
        let diff = differences(&back, &r.scenario, &keys);
        assert!(diff.is_empty(), "{strategy}: {diff:?}\n{text}");
        assert!(
            text.contains("ttl = ") && text.contains("lock_wait = "),
            "{text}"
        );
    }
}
