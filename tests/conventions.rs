//! What stampede ships for the shell and `man`: a completion script for each shell the README
//! names, and one man page that holds every subcommand and its flags, all printed to stdout.

use crate::common;

use std::io::Read;
use std::process::Stdio;

use common::stampede;

fn stdout_of(args: &[&str]) -> String {
    let out = stampede().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "stampede {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_shell_gets_a_script_that_completes_subcommands_and_flags() {
    for (shell, first) in [
        ("bash", "_stampede()"),
        ("zsh", "#compdef stampede"),
        ("fish", "function __fish_stampede"),
        ("powershell", "using namespace System.Management.Automation"),
    ] {
        let script = stdout_of(&["completions", shell]);
        assert!(script.contains(first), "{shell}: {}", &script[..200]);
        // The fault shorthands (--kill-redis-at …) are hidden: `--fault` is the one spelling.
        for word in ["schema", "compare", "scenario", "strategy", "fault"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    let out = stampede().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn one_man_page_holds_every_subcommand_and_flag() {
    let page = stdout_of(&["man"]);
    assert!(page.starts_with(".ie") && page.contains("\n.TH stampede 1"));
    // Defined once, not once per rendered section.
    assert_eq!(page.matches(".ds Aq").count(), 2, "{page}");
    for sub in [
        "RUN",
        "REPORT",
        "COMPARE",
        "CHECK",
        "CLEANUP",
        "MERGE",
        "PREPARE",
        "COMPLETIONS",
        "MAN",
        "SCHEMA",
    ] {
        assert!(page.contains(&format!(".SH \"STAMPEDE {sub}\"")), "{sub}");
    }
    // No pointer to pages that are not installed.
    assert!(!page.contains("stampede\\-run(1)"));
    for flag in ["\\-\\-scenario", "\\-\\-fault", "\\-\\-allow\\-missing"] {
        assert!(page.contains(flag), "{flag}");
    }
    assert!(page.contains(".SH \"EXIT STATUS\""));
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    // The results schema is larger than a pipe's buffer, so the writer is still writing.
    let mut child = stampede()
        .args(["schema", "results"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe is closed here, with the rest unwritten.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One module-file convention: a module with submodules is a folder with its `mod.rs`, never a
/// `foo.rs` beside a `foo/` (a reader would have to know which of the two holds the module).
#[test]
fn a_module_with_submodules_is_a_folder_with_its_mod_rs() {
    fn walk(dir: &std::path::Path, twins: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.with_extension("rs").exists() {
                    twins.push(p.display().to_string());
                }
                walk(&p, twins);
            }
        }
    }
    let mut twins = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut twins,
    );
    assert!(
        twins.is_empty(),
        "a folder with a .rs file of the same name beside it (move the file to the folder's mod.rs): {twins:?}"
    );
}
