//! The integration tests, as one test binary: each file of tests/ is a module of it (tests/layers.rs
//! stays a binary of its own: it reads the sources and starts nothing). One binary links the
//! crate once instead of once per file, which was most of the suite's build, and its tests
//! share the servers of [`common::shared_servers`] across files. `every_test_file_is_a_module`
//! holds the list below against the files, so a new file cannot be left out of the suite.

mod common;

mod advise;
mod app;
mod audit;
mod check;
mod ci_recipe;
mod cli_errors;
mod cluster;
mod compare;
mod conventions;
mod experiments;
mod external;
mod failsafe;
mod faults;
mod figures;
mod generator;
mod help;
mod kubernetes;
mod l1;
mod ledger;
mod memory;
mod more_faults;
mod network;
mod no_cache;
mod presets;
mod prometheus;
mod protect;
mod rate;
mod reaper;
mod report;
mod run;
mod schema;
mod secrets;
mod shards;
mod steady_start;
mod strategies;
mod survival;
mod sweep;
mod tls;
mod trace;
mod trace_stats;
mod writes;

#[test]
fn every_test_file_is_a_module() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
    let this = include_str!("suite.rs");
    let mut missing = Vec::new();
    for e in std::fs::read_dir(dir).expect("reading tests/").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(m) = name.strip_suffix(".rs") else {
            continue;
        };
        if m != "suite" && m != "layers" && !this.contains(&format!("\nmod {m};\n")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/ files that are not a module of tests/suite.rs, so never built or run: {missing:?}"
    );
}
