//! The CI recipe works as shipped: the `stampede` commands of examples/github-actions.yml, run
//! verbatim from the repository root (only the output paths moved to a temp dir), pass
//! against the committed baseline in results/baseline-ci.

use crate::common;

use std::path::Path;
use std::process::Command;

/// The `run:` lines of the workflow that call stampede, in order.
fn workflow_commands(root: &Path) -> Vec<String> {
    let yml = std::fs::read_to_string(root.join("examples/github-actions.yml")).unwrap();
    yml.lines()
        .filter_map(|l| l.trim().strip_prefix("run: "))
        .filter(|c| c.starts_with("target/release/stampede "))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_github_actions_recipe_passes_against_the_committed_baseline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commands = workflow_commands(root);
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert!(commands[0].contains("compare") && commands[1].contains("check"));

    // The recipe runs alone (the CPU-heavy runs of every test take turns), so the machine is
    // as quiet as this test can make it. A judged run must pass. A run the tool refuses to
    // judge because the machine starved it (generator behind schedule, Redis missing
    // deadlines: see check::unreliable) is tried again, up to 3 times; a test that never got
    // a run judged has shown nothing, so it fails. A regression is tried again too (see
    // below), and fails when it repeats.
    let _turn = common::cpu_turn();
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let summary = dir.path().join("step-summary.md");
        let out = dir.path().join("ci").display().to_string();
        let mut log = String::new();
        let mut codes = Vec::new();
        for c in &commands {
            let c: Vec<&str> = c
                .split(' ')
                .map(|w| match w {
                    "target/release/stampede" => common::BIN,
                    "results/ci" => out.as_str(),
                    w => w,
                })
                .collect();
            let c = c.join(" ");
            let o = Command::new("bash")
                .args(["-eo", "pipefail", "-c", &c])
                .current_dir(root)
                .env("GITHUB_STEP_SUMMARY", &summary)
                .output()
                .unwrap();
            log.push_str(&format!(
                "$ {c}\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
            codes.push(o.status.code());
        }
        let md = std::fs::read_to_string(&summary).unwrap_or_default();
        let starved = log.contains("the machine was too busy for this scenario");
        if starved && codes[1] == Some(3) {
            attempts.push(log);
            continue;
        }
        // A 3 s run on a shared 2-core VM sometimes meets a stall of a few tens of ms, which
        // lifts one strategy's p99 (seen: +57%, +71%) and, at the cold start, its peak
        // concurrency past their tolerances while the next run of the same code is back in
        // line (mutex: p99 69–76 ms, peak concurrent 55, over 4 runs). What this test guards is
        // the recipe and its baseline; the tolerances' power is tested in tests/check.rs. So a
        // regression is tried again, and only one that repeats 3 times fails.
        if codes[1] == Some(1) && attempts.len() < 2 {
            attempts.push(log);
            continue;
        }
        assert_eq!(codes, [Some(0), Some(0)], "{attempts:#?}\n{log}");
        assert!(md.contains("## stampede check: no regression"), "{md}");
        for s in stampede::strategy::PRESETS {
            assert!(md.contains(&format!("### `{s}`")), "{s} missing:\n{md}");
        }
        if !attempts.is_empty() {
            eprintln!(
                "note: passed on attempt {}; the earlier ones:\n{}",
                attempts.len() + 1,
                attempts.join("\n")
            );
        }
        return;
    }
    panic!(
        "no run was judged: the machine was too busy 3 times in a row even with the CPU-heavy tests taking turns (check refused each with exit 3):\n{}",
        attempts.join("\n")
    );
}
