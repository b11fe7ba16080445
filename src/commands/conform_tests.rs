//! conform's two sides as the command builds them from its flags: the admission of the
//! library's server given to both in an open loop, said in a closed one.

use super::*;
use crate::cli::{Cli, Command};
use crate::conform::{ADMIT_BACKLOG, MAX_INFLIGHT_DEFAULT};

/// Both sides of `stampede conform ARGS` (run from the repository's root, where the reference
/// apps are).
fn sides_of(args: &[&str]) -> Sides {
    use clap::Parser;
    let all = ["stampede", "conform"].iter().chain(args);
    match Cli::try_parse_from(all).unwrap().command {
        Command::Conform(c) => sides(&c).unwrap(),
        _ => unreachable!("parsed as conform"),
    }
}

#[test]
fn an_open_loop_admits_what_pumas_threads_admit_on_both_sides() {
    let s = sides_of(&["--library", "rails", "--rps", "1000", "--db-pool", "12"]);
    for sc in [&s.preset, &s.library] {
        assert_eq!((sc.max_inflight, sc.backlog), (12, ADMIT_BACKLOG));
    }
    assert!(
        s.caveats
            .iter()
            .any(|c| c.contains("puma's threads serve DB_POOL (12)")),
        "{:?}",
        s.caveats
    );
    // The command's own --max-inflight stands, and is said.
    let s = sides_of(&["--library", "rails", "--rps", "1000", "--max-inflight", "5"]);
    assert_eq!(s.preset.max_inflight, 5);
    assert_eq!(s.library.max_inflight, 5);
}

#[test]
fn an_app_that_serves_every_request_keeps_the_generators_cap() {
    let s = sides_of(&["--library", "dogpile", "--rps", "1000"]);
    assert_eq!(s.preset.max_inflight, MAX_INFLIGHT_DEFAULT);
    assert!(!s.caveats.iter().any(|c| c.contains("at once per instance")));
}

#[test]
fn a_closed_loop_with_more_clients_than_threads_is_said_not_changed() {
    let s = sides_of(&[
        "--library",
        "symfony",
        "--clients",
        "60",
        "--instances",
        "2",
    ]);
    assert_eq!(s.preset.max_inflight, MAX_INFLIGHT_DEFAULT);
    assert!(
        s.caveats
            .iter()
            .any(|c| c.contains("each of its 30 clients per instance at once")),
        "{:?}",
        s.caveats
    );
    let s = sides_of(&["--library", "symfony", "--clients", "8"]);
    assert!(!s.caveats.iter().any(|c| c.contains("clients per instance")));
}

#[test]
fn a_warm_start_is_refused_before_anything_starts() {
    use clap::Parser;
    for (args, why) in [
        (vec!["--start", "steady"], "--start and --warm fill"),
        (vec!["--warmup", "2s"], "--warmup: conform measures"),
    ] {
        let all = ["stampede", "conform", "--library", "rails"]
            .into_iter()
            .chain(args);
        let Command::Conform(c) = Cli::try_parse_from(all).unwrap().command else {
            unreachable!("parsed as conform")
        };
        let e = sides(&c).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn symfony_is_measured_beside_the_preset_of_the_version_installed_here() {
    for name in ["symfony", "symfony-5.4"] {
        let (decl, _) = crate::conform::library(name).unwrap();
        assert_eq!(decl.preset, "symfony-5.4", "{name}");
    }
    let e = crate::conform::library("laravel")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cannot be run here"), "{e}");
}
