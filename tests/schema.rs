//! The JSON Schemas that `stampede schema` prints hold the files that exist: every shipped
//! scenario and every run result of the CI baseline validates against them, judged by an
//! independent validator (Python's jsonschema, the reference implementation, installed by
//! `scripts/install-deps --for-tests`); and a scenario the run refuses (a misspelled key, a
//! duration without a unit or with an unknown one) fails the schema as it fails
//! `stampede run`, with exit 2.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::stampede;
use serde_json::Value;

/// Validates documents against one schema with Python's jsonschema (Draft 7): the schema is
/// first checked against the draft's meta-schema, then each document's errors are listed,
/// one line each with where they are.
const VALIDATE_PY: &str = r#"
import json, sys
import jsonschema
schema, docs = json.load(sys.stdin)
try:
    jsonschema.Draft7Validator.check_schema(schema)
except jsonschema.exceptions.SchemaError as e:
    print(json.dumps({"not_a_schema": str(e)}))
    sys.exit(0)
v = jsonschema.Draft7Validator(schema)
out = []
for d in docs:
    out.append(["/" + "/".join(str(p) for p in e.absolute_path) + ": " + e.message
                for e in v.iter_errors(d)])
print(json.dumps({"errors": out}))
"#;

/// A Python with jsonschema: the one on PATH, else the system's (where the Debian package
/// goes when PATH leads to another Python).
fn python() -> &'static str {
    static PY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        ["python3", "/usr/bin/python3"]
            .into_iter()
            .find(|py| {
                Command::new(py)
                    .args(["-c", "import jsonschema"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .expect("no python3 with jsonschema: run scripts/install-deps --for-tests")
    })
}

/// What `stampede schema WHICH` prints, parsed and checked to be a draft-07 schema.
fn validator(which: &str) -> Value {
    let out = stampede().args(["schema", which]).output().unwrap();
    assert!(
        out.status.success(),
        "stampede schema {which}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    // The schema is itself valid under its draft's meta-schema.
    validate(&schema, &[]);
    schema
}

/// The errors of each of `docs` against `schema`.
fn validate(schema: &Value, docs: &[Value]) -> Vec<Vec<String>> {
    use std::io::Write;
    let mut child = Command::new(python())
        .args(["-c", VALIDATE_PY])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(&(schema, docs)).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the validator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    if let Some(e) = said.get("not_a_schema") {
        panic!("not a schema: {e}");
    }
    serde_json::from_value(said["errors"].clone()).unwrap()
}

/// The errors of one document.
fn errors(schema: &Value, doc: &Value) -> Vec<String> {
    validate(schema, std::slice::from_ref(doc)).remove(0)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scenario file as the JSON an editor validates: TOML converted value for value.
fn scenario_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

#[test]
fn every_shipped_scenario_validates() {
    let v = validator("scenario");
    let mut n = 0;
    for e in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let errs = errors(&v, &scenario_json(&p));
        assert!(errs.is_empty(), "{}:\n  {}", p.display(), errs.join("\n  "));
        n += 1;
    }
    assert!(n >= 8, "only {n} scenarios found");
}

#[test]
fn every_run_result_of_the_ci_baseline_validates() {
    let v = validator("results");
    let mut files = Vec::new();
    json_files(&root().join("results/baseline-ci"), &mut files);
    let mut n = 0;
    for p in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        // compare's summary.json ranks the results; it is not one.
        if doc.get("ranking").is_some() {
            continue;
        }
        let errs = errors(&v, &doc);
        assert!(errs.is_empty(), "{}:\n  {}", p.display(), errs.join("\n  "));
        n += 1;
    }
    assert_eq!(n, 6, "the baseline holds one result per preset");
}

/// A scenario the schema accepts only if the run does: `body` fails validation at `key`, and
/// `stampede run --scenario` on it exits 2 naming the key, before any server starts.
fn refused_like_the_run(v: &Value, body: &str, key: &str, said: &str) {
    let doc: Value = toml::from_str(body).unwrap();
    let errs = errors(v, &doc);
    assert!(!errs.is_empty(), "the schema accepts {body:?}");
    assert!(
        errs.iter().any(|e| e.contains(key)),
        "{body:?}: no error names {key}: {errs:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, body).unwrap();
    let out = stampede()
        .args(["run", "--quiet", "--scenario"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{body:?}: {stderr}");
    assert!(
        stderr.contains(key) && stderr.contains(said),
        "{body:?}: {stderr}"
    );
}

#[test]
fn a_misspelled_key_or_a_bad_duration_fails_the_schema_as_it_fails_the_run() {
    let v = validator("scenario");
    let quickstart = std::fs::read_to_string(root().join("scenarios/quickstart.toml")).unwrap();
    // A key one letter off, the rest of the file as shipped.
    let misspelled = format!("{quickstart}\ndb_cots = \"10ms\"\n");
    refused_like_the_run(&v, &misspelled, "db_cots", "unknown field");
    refused_like_the_run(&v, "ttl = \"3 parsecs\"\n", "ttl", "unknown time unit");
    // Seconds or milliseconds? The parser refuses to guess, and so does the schema.
    refused_like_the_run(&v, "ttl = \"10\"\n", "ttl", "unit");
    refused_like_the_run(&v, "ttl = 10\n", "ttl", "unit");
    refused_like_the_run(
        &v,
        "[[fault]]\nkind = \"kill-redis\"\nat = \"4s\"\ndown_for = \"3 s ec\"\n",
        "down_for",
        "duration",
    );
    refused_like_the_run(&v, "[thresholds]\np99_max = 250\n", "p99_max", "p99_ms_max");
    refused_like_the_run(&v, "jitter = \"30\"\n", "jitter", "ambiguous");
    refused_like_the_run(
        &v,
        "strategy = \"xfetch+swr+xfetch\"\n",
        "strategy",
        "freshness",
    );
}

#[test]
fn the_forms_the_parsers_accept_pass() {
    let v = validator("scenario");
    let doc: Value = toml::from_str(
        r#"
        strategy = " swr + mutex "
        rps = "10k"
        duration = "1m30s"
        warmup = 0
        ttl = "1.5 s"
        db_timeout = "250ms"
        jitter = 0.1
        missing_ratio = "5%"
        invalidate = "versioned"
        write_rps = 20
        breaker = true
        breaker_error_rate = "50%"
        [[fault]]
        kind = "pause-redis"
        at = "2s"
        down_for = "500ms"
        [thresholds]
        hit_rate_min = "95%"
        stale_ratio_max = 0.2
        p99_ms_max = 250
        db_calls_max = "1800"
        "#,
    )
    .unwrap();
    let errs = errors(&v, &doc);
    assert!(errs.is_empty(), "{errs:?}");
}
