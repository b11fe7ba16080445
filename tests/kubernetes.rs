//! The Kubernetes manifests in deploy/kubernetes/ against the Kubernetes schemas (the PyPI
//! package `kubernetes-validate`, which ships them: no cluster needed), installed here into a
//! virtual environment under target/ so that a fresh machine needs only Rust and Python. And
//! what the Job must say for shards: Indexed, completions = parallelism, no retries, scrape
//! annotations, and a scenario that stampede accepts.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

const VALIDATOR: &str = "kubernetes-validate==1.37.0";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv with the validator, made once (a later run reuses it).
fn venv() -> PathBuf {
    let dir = root().join("target").join("kubernetes-validate");
    let bin = dir.join("bin");
    if !bin.join("kubernetes-validate").exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&dir)
            .status()
            .expect("python3 is needed: scripts/install-deps --for-tests installs it");
        assert!(
            ok.success(),
            "python3 -m venv failed (python3-venv missing?)"
        );
        let o = Command::new(bin.join("pip"))
            .args(["install", "--quiet", VALIDATOR])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "pip install {VALIDATOR} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    bin
}

/// The documents of a YAML file as JSON, through the venv's PyYAML.
fn documents(bin: &Path, file: &Path) -> Vec<Value> {
    let o = Command::new(bin.join("python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn manifests_validate_and_say_what_shards_need() {
    let bin = venv();
    let dir = root().join("deploy").join("kubernetes");
    let manifests: Vec<PathBuf> = ["configmap.yaml", "secret.example.yaml", "job.yaml"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let o = Command::new(bin.join("kubernetes-validate"))
        .args(["--strict", "--kubernetes-version", "1.30.0"])
        .args(&manifests)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "the manifests do not validate:\n{said}");
    assert!(!said.contains("ERROR"), "{said}");

    let job = &documents(&bin, &dir.join("job.yaml"))[0];
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], spec["parallelism"]);
    assert_eq!(
        spec["backoffLimit"], 0,
        "a retried pod would run a shard twice"
    );
    let template = &spec["template"];
    assert_eq!(
        template["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
    let port = template["metadata"]["annotations"]["prometheus.io/port"]
        .as_str()
        .unwrap();
    let script = template["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();
    let shards = spec["completions"].as_u64().unwrap();
    assert!(script.contains(&format!("--shards {shards}")), "{script}");
    assert!(
        script.contains(&format!("--metrics-listen 0.0.0.0:{port}")),
        "{script}"
    );

    // The ConfigMap's scenario is one stampede accepts: with servers that are not there the
    // shard gets past the scenario (exit 2 would be a bad scenario) and fails to connect (3).
    let cm = &documents(&bin, &dir.join("configmap.yaml"))[0];
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("scenario.toml");
    std::fs::write(&scenario, cm["data"]["scenario.toml"].as_str().unwrap()).unwrap();
    let o = stampede()
        .args(["run", "--scenario"])
        .arg(&scenario)
        .args(["--shard", &format!("1/{shards}"), "--quiet"])
        .args([
            "--redis-url",
            "redis://127.0.0.1:1/",
            "--pg-url",
            "postgres://u@127.0.0.1:1/db",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The Dockerfile is multi-stage, on a slim base (it is not built here: no daemon).
    let docker = std::fs::read_to_string(dir.join("Dockerfile")).unwrap();
    assert_eq!(
        docker.matches("\nFROM ").count() + usize::from(docker.starts_with("FROM ")),
        2
    );
    assert!(docker.contains("-slim"));
}
