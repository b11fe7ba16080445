//! The code's structure, declared and held: every module of src/ sits in one layer of
//! [`LAYERS`], and an import from one top-level module into another goes to the same layer or
//! a lower one, with no circle. A feature's room may hold modules of several layers (the app
//! under test: its HTTP path next to the clients, its run next to the orchestration), so the
//! table names such submodules apart. Imports are read from the `crate::` paths in the source;
//! `cargo test --test layers -- --nocapture` prints the table with what each module imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: (name, the modules in it). A submodule listed here is placed on
/// its own; any other file belongs where its nearest listed parent is.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves: values, redaction, counters, statistics, the workload",
        &[
            "values", "redact", "error", "metric", "metrics", "ledger", "stats", "steady",
            "workload", "pacer", "shard", "sizes", "trace", "memory",
        ],
    ),
    (
        "servers and clients: the managed servers, Redis, Postgres, TLS, the policies, the app's HTTP path",
        &[
            "cluster",
            "net",
            "fault",
            "protect",
            "thresholds",
            "tls",
            "exporter",
            "origin",
            "servers",
            "strategy",
            "cache",
            "l1",
            "instance",
            "app",
        ],
    ),
    (
        "the description of a run: flags, scenario files, the app under test's settings",
        &["cli", "scenario"],
    ),
    (
        "results and what renders them",
        &[
            "results",
            "results::sweep",
            "report",
            "report::sweep",
            "report::html::map",
            "live",
        ],
    ),
    ("the run's traffic", &["driver"]),
    (
        "orchestration: sessions, runs, trials, shards, an app under test's run",
        &[
            "session",
            "session::env",
            "session::build",
            "session::faults",
            "session::heartbeat",
            "session::lifecycle",
            "session::setup",
            "session::memory",
            "session::shards",
            "session::trials",
            "session::cleanup",
            "session::sweep",
            "session::app_run",
            "audit",
            "advise",
            "advise::space",
            "advise::judge",
            "advise::plan",
            "advise::adopt",
            "advise::render",
            "advise::app",
            "conform",
        ],
    ),
    ("commands", &["commands"]),
];

/// What `commands/` may import: the CLI, resolution (which alone reads the parsed flags into
/// scenarios), the orchestration (the audit's included), results and report (and the exit codes
/// of `error`).
const COMMANDS_MAY_IMPORT: &[&str] = &[
    "cli", "scenario", "session", "audit", "advise", "conform", "results", "report", "error",
];

/// No file of `commands/` past this many lines: a command reads, calls and ends.
const COMMAND_FILE_MAX_LINES: usize = 300;

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file of src/ (`app::run` for src/app/run.rs, `app` for src/app/mod.rs).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The module paths a file names with `crate::` (code only: comments are skipped), as long as
/// they are written (`session::build` for `crate::session::build::{Measured, build}`).
fn imports(text: &str) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let path_at = |s: &str| -> String {
        let mut out = String::new();
        let mut rest = s;
        loop {
            let seg: String = rest.chars().take_while(|c| ident(*c)).collect();
            if seg.is_empty() {
                break;
            }
            if !out.is_empty() {
                out.push_str("::");
            }
            out.push_str(&seg);
            rest = &rest[seg.len()..];
            match rest.strip_prefix("::") {
                Some(r) if r.starts_with(ident) => rest = r,
                _ => break,
            }
        }
        out
    };
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let p = path_at(rest);
            if !p.is_empty() {
                out.insert(p);
            }
        }
        // `use crate::{a, b::c}` names several.
        if let Some(i) = code.find("crate::{") {
            for part in code[i + "crate::{".len()..].split([',', '}']) {
                let p = path_at(part.trim());
                if !p.is_empty() {
                    out.insert(p);
                }
            }
        }
    }
    out
}

struct Table {
    layer: BTreeMap<String, usize>,
}

impl Table {
    fn new() -> Table {
        let mut layer = BTreeMap::new();
        for (i, (_, mods)) in LAYERS.iter().enumerate() {
            for m in *mods {
                assert!(
                    layer.insert(m.to_string(), i).is_none(),
                    "{m} is in the layer table twice"
                );
            }
        }
        Table { layer }
    }

    /// The nearest listed module of `path` (itself, or its nearest listed parent).
    fn entry(&self, path: &str) -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|c| self.layer.contains_key(c))
    }
}

fn top(m: &str) -> &str {
    m.split("::").next().unwrap()
}

/// Every module of src/ (but main and lib) with its text.
fn sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.iter()
        .map(|f| (module_of(&src, f), std::fs::read_to_string(f).unwrap()))
        .filter(|(m, _)| m != "main" && m != "lib")
        .collect()
}

/// The import graph between the table's entries, across top-level modules only (the files
/// of one room talk freely).
fn graph(table: &Table, src: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in src {
        let from = table.entry(m).unwrap();
        let deps = g.entry(from.clone()).or_default();
        for imp in imports(text) {
            if let Some(to) = table.entry(&imp)
                && top(&to) != top(&from)
            {
                deps.insert(to);
            }
        }
    }
    g
}

#[test]
fn every_module_is_in_the_table_and_the_table_names_real_modules() {
    let table = Table::new();
    let src = sources();
    let tops: BTreeSet<&str> = src.keys().map(|m| top(m)).collect();
    let missing: Vec<&&str> = tops
        .iter()
        .filter(|t| !table.layer.contains_key(**t))
        .collect();
    assert!(
        missing.is_empty(),
        "modules of src/ missing from the layer table in tests/layers.rs: {missing:?}"
    );
    let stale: Vec<&String> = table
        .layer
        .keys()
        .filter(|m| !src.contains_key(*m))
        .collect();
    assert!(
        stale.is_empty(),
        "the layer table names modules that src/ does not have: {stale:?}"
    );
}

#[test]
fn imports_go_down_the_layers_with_no_circle() {
    let table = Table::new();
    let src = sources();
    let g = graph(&table, &src);
    let mut upward = Vec::new();
    for (from, deps) in &g {
        for to in deps {
            if table.layer[to] > table.layer[from] {
                upward.push(format!(
                    "{from} (layer {}) imports {to} (layer {})",
                    table.layer[from], table.layer[to]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that go up the layers:\n  {}",
        upward.join("\n  ")
    );
    // Peel off modules that import nothing left; what cannot be peeled is in a circle.
    let mut left = g.clone();
    while !left.is_empty() {
        let free: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        if free.is_empty() {
            let stuck: Vec<String> = left
                .iter()
                .map(|(m, d)| {
                    let inside: Vec<&String> = d.iter().filter(|x| left.contains_key(*x)).collect();
                    format!("{m} -> {inside:?}")
                })
                .collect();
            panic!(
                "import circle among these modules:\n  {}",
                stuck.join("\n  ")
            );
        }
        for m in &free {
            left.remove(m);
        }
    }
    for (i, (name, _)) in LAYERS.iter().enumerate() {
        println!("layer {i}: {name}");
        for (m, deps) in g.iter().filter(|(m, _)| table.layer[*m] == i) {
            let d: Vec<&str> = deps.iter().map(String::as_str).collect();
            println!("  {m} -> {}", d.join(", "));
        }
    }
}

/// The same between whole top-level modules: a room may not hold parts of two layers that
/// import each other through another module (`app` importing `session` while `session`
/// imports `app` is a circle even when each file sits in a layer of its own).
#[test]
fn top_level_modules_import_each_other_with_no_circle() {
    let table = Table::new();
    let src = sources();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, deps) in graph(&table, &src) {
        let e = g.entry(top(&from).to_string()).or_default();
        e.extend(deps.iter().map(|d| top(d).to_string()));
    }
    let mut left = g.clone();
    while !left.is_empty() {
        let free: Vec<String> = left
            .iter()
            .filter(|(m, deps)| deps.iter().all(|d| d == *m || !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        if free.is_empty() {
            let stuck: Vec<String> = left
                .iter()
                .map(|(m, d)| {
                    let inside: Vec<&String> = d
                        .iter()
                        .filter(|x| *x != m && left.contains_key(*x))
                        .collect();
                    format!("{m} -> {inside:?}")
                })
                .collect();
            panic!(
                "import circle among these top-level modules:\n  {}",
                stuck.join("\n  ")
            );
        }
        for m in &free {
            left.remove(m);
        }
    }
}

#[test]
fn commands_only_read_arguments_call_the_orchestration_and_end() {
    let table = Table::new();
    let src = sources();
    let g = graph(&table, &src);
    let wrong: Vec<&String> = g["commands"]
        .iter()
        .filter(|d| !COMMANDS_MAY_IMPORT.contains(&top(d)))
        .collect();
    assert!(
        wrong.is_empty(),
        "commands/ imports {wrong:?}: a command reads its arguments ({}), has it resolved, calls the orchestration and says how the process ends; move the work into scenario/ or session/",
        COMMANDS_MAY_IMPORT.join(", ")
    );
    for (m, text) in src.iter().filter(|(m, _)| top(m) == "commands") {
        let n = text.lines().count();
        assert!(
            n <= COMMAND_FILE_MAX_LINES,
            "{m} has {n} lines (at most {COMMAND_FILE_MAX_LINES} for a command): the work belongs in session/ or results/"
        );
    }
}

/// A file's code without its test module (`#[cfg(test)] mod tests`, inline or in a file of its
/// own): tests may import what they like.
fn without_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut end = lines.len();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() != "#[cfg(test)]" {
            continue;
        }
        let next = lines[i + 1..].iter().find(|n| !n.trim().starts_with("#["));
        if next.is_some_and(|n| n.trim_start().starts_with("mod ")) {
            end = i;
            break;
        }
    }
    lines[..end]
        .iter()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file's code writes from `crate::`, `super::` or `self::`, as its segments
/// (`use super::{a::X, b::{self, Y}}` gives `super::a::X`, `super::b`, `super::b::Y`).
fn relative_paths(code: &str) -> Vec<Vec<String>> {
    fn ident(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_'
    }
    /// The path that starts at `s` under `prefix`, with a brace group's items each expanded.
    fn expand(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        let mut rest = s.trim_start();
        loop {
            let seg: String = rest.chars().take_while(|c| ident(*c)).collect();
            if !seg.is_empty() {
                if seg != "self" || path.is_empty() {
                    path.push(seg.clone());
                }
                rest = &rest[seg.len()..];
            }
            match rest.strip_prefix("::") {
                Some(r) if r.starts_with('{') => {
                    // The group up to its matching brace, split at its own commas.
                    let (mut depth, mut start) = (0, 1);
                    for (i, c) in r.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' | ',' if depth == 1 => {
                                expand(&path, &r[start..i], out);
                                start = i + 1;
                                if c == '}' {
                                    break;
                                }
                            }
                            '}' => depth -= 1,
                            _ => {}
                        }
                    }
                    break;
                }
                Some(r) if r.starts_with(ident) => rest = r,
                _ => break,
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(root) {
            let start = at + i;
            at = start + root.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| ident(c) || c == ':') {
                continue;
            }
            expand(&[], &code[start..], &mut out);
        }
    }
    out
}

/// The module a path names, read from `from`: the longest prefix of it that is a module of
/// src/, or, when that module re-exports the next name from a child (`pub use child::Name`),
/// that child, where the name really lives.
fn module_named(code: &BTreeMap<String, String>, from: &str, path: &[String]) -> Option<String> {
    let mut full: Vec<String> = if path[0] == "crate" {
        Vec::new()
    } else {
        from.split("::").map(str::to_string).collect()
    };
    for seg in path {
        match seg.as_str() {
            "crate" | "self" => {}
            "super" => {
                full.pop();
            }
            _ => full.push(seg.clone()),
        }
    }
    let n = (1..=full.len())
        .rev()
        .find(|n| code.contains_key(&full[..*n].join("::")))?;
    let m = full[..n].join("::");
    let Some(name) = full.get(n) else {
        return Some(m);
    };
    let word = |text: &str| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == name)
    };
    for stmt in code[&m].split(';') {
        let s = stmt.trim();
        let Some(used) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| s.strip_prefix(p))
        else {
            continue;
        };
        let used = used.trim_start_matches("self::");
        let child: String = used
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let child = format!("{m}::{child}");
        if code.contains_key(&child) && word(used) {
            return Some(child);
        }
    }
    Some(m)
}

/// No circle between the files of one room (a top-level module's folder): a file that imports
/// another of its room, directly or through others, is not imported back by it, so each file can
/// be read (and changed) after the ones it uses. A folder's `mod.rs` and the files in it name
/// each other by nature (it declares them, they use what it holds): edges between a module and
/// its own parents or children are not counted, but what a `mod.rs` only re-exports counts as
/// the file it comes from.
#[test]
fn the_files_of_a_room_import_each_other_with_no_circle() {
    let code: BTreeMap<String, String> = sources()
        .into_iter()
        .filter(|(m, _)| {
            let last = m.rsplit("::").next().unwrap_or(m);
            last != "tests" && !last.ends_with("_tests")
        })
        .map(|(m, t)| (m, without_tests(&t)))
        .collect();
    let kin = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &code {
        let deps = g.entry(m.clone()).or_default();
        for path in relative_paths(text) {
            if let Some(to) = module_named(&code, m, &path)
                && top(&to) == top(m)
                && !kin(m, &to)
            {
                deps.insert(to);
            }
        }
    }
    let mut left = g.clone();
    loop {
        let free: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        if free.is_empty() {
            break;
        }
        for m in &free {
            left.remove(m);
        }
    }
    // What is left imports a circle; of that, what nothing left imports is not in one.
    loop {
        let unused: Vec<String> = left
            .keys()
            .filter(|m| !left.values().any(|d| d.contains(*m)))
            .cloned()
            .collect();
        if unused.is_empty() {
            break;
        }
        for m in &unused {
            left.remove(m);
        }
    }
    let stuck: Vec<String> = left
        .iter()
        .map(|(m, d)| {
            let inside: Vec<&String> = d.iter().filter(|x| left.contains_key(*x)).collect();
            format!("{m} -> {inside:?}")
        })
        .collect();
    assert!(
        stuck.is_empty(),
        "files of one room import each other in a circle (what both use belongs in a file of its own, or with the lower one):\n  {}",
        stuck.join("\n  ")
    );
}
