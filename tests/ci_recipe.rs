//! The CI recipe works as shipped: the `stampede` commands of examples/github-actions.yml, run
//! verbatim from the repository root (only the output paths moved to a temp dir), pass
//! against the committed baseline in results/baseline-ci.

mod common;

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

    // A judged run must pass. A run the tool refuses to judge because the machine starved it
    // (generator behind schedule, Redis missing deadlines: see check::unreliable) is tried
    // again, up to 3 times; refusing is itself the recipe working, so 3 refusals pass with a note.
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
        assert_eq!(codes, [Some(0), Some(0)], "{attempts:#?}\n{log}");
        assert!(md.contains("## stampede check: no regression"), "{md}");
        for s in stampede::strategy::PRESETS {
            assert!(md.contains(&format!("### `{s}`")), "{s} missing:\n{md}");
        }
        return;
    }
    eprintln!(
        "note: the machine was too busy to judge a run 3 times in a row; check refused each (exit 3) as it should:\n{}",
        attempts.join("\n")
    );
}
