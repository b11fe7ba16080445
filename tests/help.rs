//! The help is read, not searched: every flag of every subcommand sits under a heading, `-h`
//! gives each flag one line (its summary) and `--help` the whole text, as ripgrep does.

use std::process::Command as Process;

use clap::CommandFactory;

/// The width the help is laid out for (the CLI caps it there, and a pipe has no width).
const WIDTH: usize = 100;

/// Most lines `stampede run -h` may take: about one per flag a newcomer needs, plus the
/// headings. Flags for experts are hidden from `-h` (`hide_short_help`) and shown by
/// `--help`; the ceiling is 150 after every issue of this round, so this one leaves room.
const RUN_SHORT_HELP_MAX_LINES: usize = 125;

/// The whole command tree, as clap builds it (built-in help flags and subcommand included).
fn cli() -> clap::Command {
    let mut cmd = stampede::cli::Cli::command();
    cmd.build();
    cmd
}

/// Every subcommand at any depth but clap's own `help`, with the path that names it.
fn subcommands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let name = format!("{path} {}", sub.get_name());
        out.push((name.clone(), sub.clone()));
        subcommands(sub, &name, out);
    }
}

fn all_subcommands() -> Vec<(String, clap::Command)> {
    let mut out = Vec::new();
    subcommands(&cli(), "stampede", &mut out);
    assert!(
        out.len() >= 7,
        "the tree has run, compare, check, …: {out:?}"
    );
    out
}

/// The arguments a subcommand declares: everything but clap's built-in help and version.
fn own_args(cmd: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
}

fn help(args: &[&str]) -> String {
    let out = Process::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .env("COLUMNS", WIDTH.to_string())
        .env_remove("RUST_LOG")
        .output()
        .expect("run stampede");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

#[test]
fn every_argument_of_every_subcommand_has_a_heading() {
    let mut missing = Vec::new();
    for (name, cmd) in all_subcommands() {
        for arg in own_args(&cmd) {
            if arg.get_help_heading().is_none() {
                missing.push(format!("{name} {}", arg.get_id()));
            }
        }
    }
    assert!(missing.is_empty(), "no help heading: {missing:?}");
}

#[test]
fn every_argument_has_a_one_line_summary() {
    let mut bad = Vec::new();
    for (name, cmd) in all_subcommands() {
        for arg in own_args(&cmd) {
            match arg.get_help() {
                None => bad.push(format!("{name} {}: no help", arg.get_id())),
                Some(h) if h.to_string().contains('\n') => {
                    bad.push(format!("{name} {}: {h:?}", arg.get_id()))
                }
                Some(_) => {}
            }
        }
    }
    assert!(bad.is_empty(), "summaries that are not one line: {bad:#?}");
}

/// One line per flag as printed: no summary wraps onto a second line at the width the help is
/// laid out for, in any subcommand's `-h`.
#[test]
fn short_help_gives_each_flag_one_line() {
    let root = ("stampede".to_string(), cli());
    for (name, _) in std::iter::once(root).chain(all_subcommands()) {
        let args: Vec<&str> = name.split(' ').skip(1).chain(["-h"]).collect();
        let text = help(&args);
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{name} -h: wider than {WIDTH}: {line:?}"
            );
            // A wrapped summary goes on in a line indented past the flags.
            assert!(
                !line.starts_with("          "),
                "{name} -h: a summary wraps: {line:?}\n{text}"
            );
        }
    }
}

#[test]
fn run_short_help_is_a_page_and_long_help_has_the_rest() {
    let short = help(&["run", "-h"]);
    let long = help(&["run", "--help"]);
    let (s, l) = (short.lines().count(), long.lines().count());
    assert!(
        s <= RUN_SHORT_HELP_MAX_LINES,
        "run -h is {s} lines (at most {RUN_SHORT_HELP_MAX_LINES}):\n{short}"
    );
    assert!(l > s, "run --help ({l} lines) is not longer than -h ({s})");
    // The headings are in the short help, and the long text only in --help.
    for heading in ["Strategy:", "Load:", "Faults:", "Output:"] {
        assert!(short.contains(heading), "run -h lacks {heading}\n{short}");
    }
    assert!(short.contains("[default: cache-aside]"), "{short}");
    assert!(!short.contains("Defaults:"), "{short}");
    assert!(long.contains("Defaults:") && long.contains("expire is another name"));
}

/// The headings of `run --help` (and of `compare` and `sweep`, which share its flags), in the
/// order they are shown. clap shows a heading once, where its first flag is declared, so this
/// is the order of the headings' first flags; the test below holds the help to it.
const RUN_HEADINGS: &[&str] = &[
    "Strategy",
    "Scenario file",
    "Load",
    "Trace",
    "Keys and values",
    "Redis memory",
    "Database",
    "Servers and TLS",
    "Protection",
    "Faults",
    "Client",
    "Recovery verdict",
    "Writes",
    "Cluster",
    "Output",
    "Thresholds",
    "App under test",
    "Trials",
    "Shards and live metrics",
];

/// The headings of `run --help`, each once, in the order `RUN_HEADINGS` fixes
/// (a heading's place is where its first flag is declared, so a flag declared in the wrong
/// struct or with a misspelt heading shows here).
#[test]
fn run_help_shows_each_heading_once_in_the_fixed_order() {
    for args in [&["run", "--help"][..], &["run", "-h"][..]] {
        let text = help(args);
        let headings: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with(':') && *l != "Options:")
            .map(|l| l.trim_end_matches(':'))
            .collect();
        let mut seen = std::collections::HashSet::new();
        for h in &headings {
            assert!(seen.insert(*h), "{args:?}: heading {h:?} twice:\n{text}");
        }
        let fixed: Vec<&str> = RUN_HEADINGS
            .iter()
            .copied()
            .filter(|h| headings.contains(h))
            .collect();
        assert_eq!(headings, fixed, "{args:?}: headings out of the fixed order");
    }
    let long = help(&["run", "--help"]);
    for h in RUN_HEADINGS {
        assert!(long.contains(&format!("\n{h}:\n")), "run --help lacks {h}");
    }
}

/// The fault shorthands still parse but are shown nowhere: `--fault` is the one spelling the
/// help teaches, and docs/faults.md lists the shorthands once.
#[test]
fn fault_shorthands_are_left_out_of_the_help() {
    let (short, long) = (help(&["run", "-h"]), help(&["run", "--help"]));
    assert!(short.contains("--fault <"), "{short}");
    for flag in [
        "--kill-redis-at",
        "--drop-fraction",
        "--spike-factor",
        "--migrate-slot-at",
    ] {
        assert!(!short.contains(&format!("{flag} <")), "run -h shows {flag}");
        assert!(
            !long.contains(&format!("{flag} <")),
            "run --help shows {flag}"
        );
    }
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/faults.md"))
        .expect("docs/faults.md");
    let shorthands = docs
        .split("### Shorthands")
        .nth(1)
        .expect("docs/faults.md has a Shorthands section");
    let cmd = cli();
    let run = cmd.find_subcommand("run").expect("run");
    for arg in own_args(run).filter(|a| a.is_hide_set()) {
        let flag = format!("--{} ", arg.get_long().unwrap_or_default());
        assert!(
            shorthands.contains(&flag),
            "docs/faults.md's shorthands do not list {flag}"
        );
    }
}
