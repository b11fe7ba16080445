//! The code's structure: the top-level modules of src/ import one another one way, leaves
//! first, with no circle. Read from the `crate::` paths in the source, so a new import that
//! closes a circle fails here with the circle named. `cargo test --test layers -- --nocapture`
//! prints the order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of src/ belongs to (`driver` for src/driver/open_loop.rs).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a file names with `crate::` (code only: comments are skipped).
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
        // `use crate::{a, b}` names several.
        if let Some(i) = code.find("crate::{") {
            for part in code[i + "crate::{".len()..].split([',', '}']) {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

#[test]
fn modules_import_one_way_with_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &all {
        let m = module_of(&src, f);
        if m == "main" || m == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let deps = graph.entry(m.clone()).or_default();
        deps.extend(imports(&text).into_iter().filter(|d| *d != m));
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    // Peel off leaves until none is left; what cannot be peeled is in a circle.
    let mut order: Vec<Vec<String>> = Vec::new();
    let mut left = graph.clone();
    while !left.is_empty() {
        let layer: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        if layer.is_empty() {
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
        for m in &layer {
            left.remove(m);
        }
        order.push(layer);
    }
    for (i, layer) in order.iter().enumerate() {
        println!("layer {i}: {}", layer.join(", "));
    }
    // The commands sit on top; the value types at the bottom.
    let layer_of = |m: &str| order.iter().position(|l| l.iter().any(|x| x == m)).unwrap();
    assert_eq!(layer_of("commands"), order.len() - 1);
    assert_eq!(layer_of("values"), 0);
    assert!(layer_of("report") > layer_of("results"));
    assert!(layer_of("driver") > layer_of("instance"));
    assert!(layer_of("results") > layer_of("scenario"));
}
