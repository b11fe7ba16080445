//! `stampede audit` on real servers against real apps: the test app (examples/audit_app) with
//! every bug on fails each check for its own reason, with every bug off passes every check
//! (and its volatile per-user route passes the users check), and examples/app passes the
//! checks that apply to it. Managed servers and the app are stopped by the tool; the card is
//! read from `--out`'s audit.json.

use crate::common;

use std::path::Path;

use common::{cpu_turn, read_json, stampede};
use serde_json::Value;

const TARGET: &str = "http://127.0.0.1:{port}/items/{key}";

/// `stampede audit ARGS --out DIR -q`: the exit code, audit.json and the printed card.
fn audit(args: &[&str], dir: &Path) -> (i32, Value, String) {
    let _turn = cpu_turn();
    let out = stampede()
        .arg("audit")
        .args(args)
        .arg("--out")
        .arg(dir)
        .arg("-q")
        .output()
        .expect("running stampede audit");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = read_json(&dir.join("audit.json")).unwrap_or_else(|| {
        panic!(
            "no audit.json; stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json, stdout)
}

/// (status, reason) of the check `name`.
fn check<'a>(a: &'a Value, name: &str) -> (&'a str, &'a str) {
    let c = a["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {a}"));
    (
        c["status"].as_str().unwrap_or(""),
        c["reason"].as_str().unwrap_or(""),
    )
}

fn test_app_args(bugs: &str) -> Vec<String> {
    [
        "--target",
        TARGET,
        "--app-cmd",
        &format!("APP_BUGS={bugs} exec {}", common::audit_app()),
        "--users-target",
        "http://127.0.0.1:{port}/me/items/{key}",
        "--user-header",
        "X-User",
        "--update",
        "PUT /items/{key}",
        "--no-cache-variant",
        "APP_NO_CACHE=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn every_bug_on_fails_each_check_for_its_own_reason() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let args = test_app_args("all");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, a, card) = audit(&args, dir.path());
    assert_eq!(code, 1, "{card}");
    let expect = [
        ("ttl", "keys have no expiry: app:seen:{n} (200)"),
        ("users", "bob was served alice's answer"),
        ("read-your-write", "with readers racing the update"),
        ("outage", "with Redis paused"),
        ("herd", "the misses are not coordinated"),
        ("break-even", "the cache makes the mean answer slower"),
        ("commands", "KEYS ×"),
    ];
    for (name, why) in expect {
        let (status, reason) = check(&a, name);
        assert_eq!(status, "fail", "{name}: {reason}\n{card}");
        assert!(reason.contains(why), "{name}: {reason}");
    }
    // A herd of 100 concurrent misses with no coordination: close to one load each (some
    // requests arrive after the first load filled the key).
    let herd = &a["checks"][4]["evidence"];
    assert!(herd["loads"].as_f64().unwrap_or(0.0) > 10.0, "{herd}");
    assert!(card.contains("FAIL  commands"), "{card}");
    assert!(dir.path().join("audit.md").exists());
    for name in ["ttl", "outage", "herd", "break-even", "commands"] {
        assert!(
            dir.path().join(format!("checks/{name}.json")).exists(),
            "{name}"
        );
    }
}

#[test]
fn every_bug_off_passes_every_check_and_a_volatile_route_passes_users() {
    crate::common::light_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let args = test_app_args("");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, a, card) = audit(&args, dir.path());
    for name in [
        "ttl",
        "users",
        "read-your-write",
        "outage",
        "herd",
        "break-even",
        "commands",
    ] {
        let (status, reason) = check(&a, name);
        assert_eq!(status, "pass", "{name}: {reason}\n{card}");
    }
    assert_eq!(code, 0, "{card}");
    assert_eq!(a["checks"].as_array().map(Vec::len), Some(7));
    assert_eq!(a["checks"][4]["evidence"]["loads"], 1.0, "{card}");
    // The answers carry the time and the user: volatile, decided by identity.
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, a, card) = audit(
        &[
            "--target",
            TARGET,
            "--app-cmd",
            &format!("APP_BUGS=all exec {}", common::audit_app()),
            "--users-target",
            "http://127.0.0.1:{port}/stamp/{key}",
            "--user-header",
            "X-User",
            "--only",
            "users",
        ],
        dir.path(),
    );
    let (status, reason) = check(&a, "users");
    assert_eq!((code, status), (0, "pass"), "{card}");
    assert!(reason.contains("volatile"), "{reason}");
    assert_eq!(a["checks"].as_array().map(Vec::len), Some(1));
}

/// An app whose update takes a number (`{"price": N}`, a shop's) refuses `{value}`'s token and
/// accepts `{num}`: read-your-write is skipped with the refusals counted, then passes.
#[test]
fn a_numeric_update_body_takes_num() {
    let mut args = test_app_args("");
    args.extend(["--only".to_string(), "read-your-write".to_string()]);
    for (body, expect, want) in [
        (r#"{"price": "{value}"}"#, "{value}", "skip"),
        (r#"{"price": {num}}"#, "price={num}", "pass"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["--update-body", body, "--expect", expect, "--rounds", "5"]);
        let (_, v, card) = audit(&a, dir.path());
        let (status, reason) = check(&v, "read-your-write");
        assert_eq!(status, want, "{body}: {reason}\n{card}");
        let refused = &v["checks"][0]["evidence"]["updates_refused"];
        if want == "skip" {
            assert_eq!(refused, 10, "{v}");
        } else {
            assert_eq!(refused, 0, "{v}");
        }
    }
}

#[test]
fn the_example_app_passes_the_checks_that_apply_to_it() {
    crate::common::waiting_turns();
    let dir = tempfile::tempdir().expect("temp dir");
    let cmd = format!("APP_STRATEGY=single-flight exec {}", common::example_app());
    let (code, a, card) = audit(
        &[
            "--target",
            TARGET,
            "--app-cmd",
            &cmd,
            "--user-header",
            "X-User",
            "--require",
            "ttl,outage,herd,commands",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{card}");
    for name in ["ttl", "users", "outage", "herd", "commands"] {
        assert_eq!(check(&a, name).0, "pass", "{name}\n{card}");
    }
    // Its answers are the same for everyone; it has no update route and no cache switch.
    assert!(
        check(&a, "users").1.starts_with("not personalised"),
        "{card}"
    );
    assert_eq!(check(&a, "read-your-write").0, "skip");
    assert_eq!(check(&a, "break-even").0, "skip");
}

#[test]
fn usage_errors_name_the_flag() {
    for (args, flag) in [
        (vec!["--target", TARGET, "--only", "speed"], "--only speed"),
        (
            vec!["--target", TARGET, "--app-cmd", "true", "--update", "PUT"],
            "--update PUT",
        ),
        (
            vec!["--target", TARGET, "--redis-url", "redis://127.0.0.1:1"],
            "--pg-url",
        ),
    ] {
        let out = stampede()
            .arg("audit")
            .args(&args)
            .output()
            .expect("running stampede audit");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(flag), "{flag}: {err}");
    }
}

/// A redis-server started daemonized with a pidfile, as an operator's restart command would
/// start one; killed by that pid when dropped (the audit shuts it down and starts it again, so
/// the process the test ends is the one the pidfile names last).
struct DaemonRedis {
    dir: tempfile::TempDir,
    port: u16,
}

impl DaemonRedis {
    fn command(dir: &Path, port: u16) -> String {
        format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile {0}/redis.pid --dir {0} --logfile {0}/redis.log",
            dir.display()
        )
    }

    fn start() -> DaemonRedis {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = common::free_port();
        let r = DaemonRedis { dir, port };
        let ok = std::process::Command::new("sh")
            .arg("-c")
            .arg(r.restart_cmd())
            .status()
            .expect("starting redis-server");
        assert!(ok.success());
        common::wait_for("redis", std::time::Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        r
    }

    fn restart_cmd(&self) -> String {
        Self::command(self.dir.path(), self.port)
    }
}

impl Drop for DaemonRedis {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("redis.pid"))
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            // SAFETY: a plain kill(2) of the pid our own redis-server wrote.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// On servers the user runs, the outage check kills Redis only when allowed to and given a
/// restart command: then it shuts it down (SHUTDOWN NOSAVE), starts it with that command and
/// the app reconnects; without them it is SKIP, naming both flags.
#[tokio::test]
async fn the_outage_check_kills_an_external_redis_only_when_allowed() {
    crate::common::waiting_turns();
    let pg = common::postgres(false).await;
    let redis = DaemonRedis::start();
    let redis_url = format!("redis://127.0.0.1:{}", redis.port);
    let cmd = format!("exec {}", common::audit_app());
    let base = [
        "--target",
        TARGET,
        "--app-cmd",
        &cmd,
        "--redis-url",
        &redis_url,
        "--pg-url",
        &pg.url(),
        "--only",
        "outage",
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, a, card) = audit(&base, dir.path());
    assert_eq!(code, 0, "{card}");
    let (status, reason) = check(&a, "outage");
    assert_eq!(status, "skip", "{card}");
    assert!(
        reason.contains("--allow-kill-external") && reason.contains("--redis-restart-cmd"),
        "{reason}"
    );

    let restart = redis.restart_cmd();
    let mut args = base.to_vec();
    args.extend(["--allow-kill-external", "--redis-restart-cmd", &restart]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, a, card) = audit(&args, dir.path());
    assert_eq!(code, 0, "{card}");
    assert_eq!(check(&a, "outage").0, "pass", "{card}");
    let outage = a["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "outage"))
        .expect("outage check");
    assert!(
        outage["evidence"]["hits_resumed_after_ms"]
            .as_u64()
            .is_some(),
        "{outage}"
    );
    // The server the restart command started is up and answers.
    assert!(std::net::TcpStream::connect(("127.0.0.1", redis.port)).is_ok());
}

/// The Python app's virtual environment (redis-py and psycopg), made once under target/ (a
/// later run reuses it): the interpreter to start tests/apps/ryw_app.py with.
fn python_app_venv() -> String {
    static PY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = root.join("target").join("ryw-app-venv");
        let python = dir.join("bin").join("python");
        let ready = dir.join("installed");
        if !ready.exists() {
            let ok = std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .status()
                .expect("python3 is needed: scripts/install-deps --for-tests installs it");
            assert!(
                ok.success(),
                "python3 -m venv failed (python3-venv missing?)"
            );
            let o = std::process::Command::new(dir.join("bin").join("pip"))
                .args([
                    "install",
                    "--quiet",
                    "redis==5.0.8",
                    "psycopg[binary]==3.2.3",
                ])
                .output()
                .expect("running pip");
            assert!(
                o.status.success(),
                "pip install redis psycopg failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            std::fs::write(&ready, "").expect("marking the venv ready");
        }
        python.display().to_string()
    })
    .clone()
}

/// read-your-write on an app in another language (Python's threaded standard-library server)
/// whose update deletes the entry, works 5 ms, then updates the row: the check fails it. The
/// same app updating the row first passes, and the pass rests on reads the app answered while
/// the update was in flight (`raced_reads_during_update`), which is what shows it could fail.
#[test]
fn read_your_write_catches_a_python_apps_delete_then_update() {
    let python = python_app_venv();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/ryw_app.py");
    for (order, want) in [
        ("delete-then-update", "fail"),
        ("update-then-delete", "pass"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let cmd = format!(
            "RYW_ORDER={order} RYW_WORK_MS=5 exec {python} {}",
            script.display()
        );
        let (code, a, card) = audit(
            &[
                "--target",
                TARGET,
                "--app-cmd",
                &cmd,
                "--update",
                "PUT /items/{key}",
                "--only",
                "read-your-write",
            ],
            dir.path(),
        );
        let (status, reason) = check(&a, "read-your-write");
        assert_eq!(status, want, "{order}: {reason}\n{card}");
        assert_eq!(code, i32::from(want == "fail"), "{card}");
        let e = &a["checks"][0]["evidence"];
        let during = e["raced_reads_during_update"].as_u64().unwrap_or(0);
        assert!(during > 0, "{order}: no read raced the update\n{card}");
        if want == "fail" {
            assert!(e["raced_stale"].as_u64().unwrap_or(0) > 0, "{card}");
        } else {
            assert_eq!(e["raced_stale"], 0, "{card}");
        }
    }
}
