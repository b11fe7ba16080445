//! Nothing left behind whatever kills the tool: a real `stampede run` (real redis-server and
//! Postgres) is SIGKILLed mid-run. Its servers must die within seconds (the watchdogs) and,
//! when even the watchdogs were killed with it, the next run must kill them and remove
//! their temp dirs (the reaper), while leaving a live run alone.
//!
//! Each run gets a private `TMPDIR`, so the servers' temp dirs, and every server process
//! running from them, are this test's own and nobody else's: the test identifies its
//! processes by that (and as descendants of the child it spawned), by pid *and* start time,
//! and kills only those, from guards that run even when an assertion fails.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use stampede::servers::reaper::{OWNER_FILE, reap_leftovers_in};

/// How long after the SIGKILL the servers may live: "within a few seconds".
const DEATH_WITHIN: Duration = Duration::from_secs(5);

/// A process, by pid and start time (so a reused pid is never taken for it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Proc {
    pid: u32,
    start: u64,
    comm: String,
}

/// (ppid, start time, state) from /proc/PID/stat; fields counted from the last ')'.
fn stat(pid: u32) -> Option<(u32, u64, char)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        f.get(1)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
        f.first()?.chars().next()?,
    ))
}

fn comm(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl Proc {
    fn of(pid: u32) -> Option<Proc> {
        let (_, start, _) = stat(pid)?;
        Some(Proc {
            pid,
            start,
            comm: comm(pid),
        })
    }

    /// Still this very process, and not a zombie.
    fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|(_, start, state)| start == self.start && state != 'Z')
    }

    fn kill(&self) {
        if self.alive() {
            // SAFETY: kill(2) on a process this test started, checked just above.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

/// Every live descendant of `root` (children, their children, ...).
fn descendants(root: u32) -> Vec<Proc> {
    let parents: BTreeMap<u32, u32> = all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, stat(pid)?.0)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|&(_, &ppid)| ppid == parent)
                .map(|(&pid, _)| pid),
        );
        i += 1;
    }
    found[1..].iter().filter_map(|&pid| Proc::of(pid)).collect()
}

/// Every process whose working dir is inside `dir` (a private TMPDIR: all ours).
fn running_from(dir: &Path) -> Vec<Proc> {
    all_pids()
        .into_iter()
        .filter(|pid| fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir)))
        .filter_map(Proc::of)
        .collect()
}

fn is_server(p: &Proc) -> bool {
    p.comm == "redis-server" || p.comm == "postgres"
}

/// The SysV segment of the cluster among `dirs` (line 7 of postmaster.pid: "key id").
fn postgres_shm(dirs: &[PathBuf]) -> Option<libc::c_int> {
    dirs.iter().find_map(|d| {
        fs::read_to_string(d.join("data").join("postmaster.pid"))
            .ok()?
            .lines()
            .nth(6)?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    })
}

fn shm_exists(id: libc::c_int) -> bool {
    // SAFETY: an all-zero shmid_ds is a valid out-buffer for IPC_STAT.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: ds is a valid shmid_ds to write into.
    unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) == 0 }
}

fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A `stampede run` with a private TMPDIR. On drop, it and every process it started (found
/// as its descendants or as running from its TMPDIR, remembered across snapshots because
/// orphans lose their parent link) are SIGKILLed, and the TMPDIR is removed.
struct RunGuard {
    child: Child,
    tmp: tempfile::TempDir,
    seen: Vec<Proc>,
}

impl RunGuard {
    fn spawn(tmp: tempfile::TempDir, args: &[&str]) -> RunGuard {
        let log = fs::File::create(tmp.path().join("run.stderr")).expect("stderr file");
        let child = common::stampede()
            .arg("run")
            .args(args)
            .arg("--quiet")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning stampede");
        RunGuard {
            child,
            tmp,
            seen: Vec::new(),
        }
    }

    fn tmp(&self) -> &Path {
        self.tmp.path()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.tmp().join("run.stderr")).unwrap_or_default()
    }

    /// The run's processes now, remembered for the clean-up.
    fn snapshot(&mut self) -> Vec<Proc> {
        let mut now = descendants(self.child.id());
        now.extend(running_from(self.tmp.path()));
        now.sort();
        now.dedup();
        for p in &now {
            if !self.seen.contains(p) {
                self.seen.push(p.clone());
            }
        }
        now
    }

    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("stampede exited early ({status}):\n{}", self.stderr());
        }
    }

    /// Wait until the run's Redis and Postgres are up (running from their dirs, the
    /// postmaster ready) and their owner records written. (A `postgres` process alone
    /// proves nothing: the tool runs `postgres --version` first.)
    fn wait_for_servers(&mut self) -> Vec<Proc> {
        let mut procs = Vec::new();
        let up = wait_for(Duration::from_secs(25), || {
            self.assert_running();
            procs = self.snapshot();
            let from_dirs = running_from(self.tmp.path());
            let has = |name: &str| from_dirs.iter().any(|p| p.comm == name);
            let dirs = common::stampede_temp_dirs_in(self.tmp.path());
            let records = dirs.iter().filter(|d| d.join(OWNER_FILE).exists()).count();
            let pg_ready = dirs.iter().any(|d| {
                fs::read_to_string(d.join("data").join("postmaster.pid")).is_ok_and(|pidfile| {
                    pidfile.lines().nth(7).is_some_and(|l| l.trim() == "ready")
                })
            });
            has("redis-server") && has("postgres") && records == 2 && pg_ready
        });
        assert!(up, "servers not up in time:\n{}", self.stderr());
        procs
    }

    fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL stampede");
        self.child.wait().expect("reap stampede");
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.snapshot();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.snapshot();
        for p in &self.seen {
            p.kill();
        }
        wait_for(Duration::from_secs(3), || {
            self.seen.iter().all(|p| !p.alive())
        });
    }
}

fn private_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("reaper-test-")
        .tempdir()
        .expect("private TMPDIR")
}

#[test]
fn sigkill_mid_run_leaves_no_server_and_no_temp_dir() {
    crate::common::light_turns();
    let _turn = common::cpu_turn();
    let started = Instant::now();
    // Redis is killed and restarted early on: the restarted process must be covered too.
    let mut run = RunGuard::spawn(
        private_tmp(),
        &[
            "--rps",
            "200",
            "--duration",
            "30s",
            "--keys",
            "1000",
            "--kill-redis-at",
            "500ms",
            "--redis-down-for",
            "300ms",
        ],
    );
    let first = run.wait_for_servers();
    let first_redis: Vec<u32> = first
        .iter()
        .filter(|p| p.comm == "redis-server")
        .map(|p| p.pid)
        .collect();
    // Wait for the restart: a redis-server that is not the first one.
    let mut procs = Vec::new();
    let restarted = wait_for(Duration::from_secs(15), || {
        run.assert_running();
        procs = run.snapshot();
        procs
            .iter()
            .any(|p| p.comm == "redis-server" && !first_redis.contains(&p.pid))
    });
    assert!(restarted, "Redis was not restarted:\n{}", run.stderr());
    // Let the load run for a while, ~4 s in all.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
    run.assert_running();
    let procs = run.snapshot();
    let servers: Vec<Proc> = procs.iter().filter(|p| is_server(p)).cloned().collect();
    let watchdogs: Vec<Proc> = procs.iter().filter(|p| p.comm == "sh").cloned().collect();
    let dirs = common::stampede_temp_dirs_in(run.tmp());
    assert_eq!(dirs.len(), 2, "one dir per server: {dirs:?}");
    assert_eq!(
        servers.iter().filter(|p| p.comm == "redis-server").count(),
        1,
        "{servers:?}"
    );
    assert!(
        servers.iter().filter(|p| p.comm == "postgres").count() >= 2,
        "postmaster and backends: {servers:?}"
    );
    assert_eq!(watchdogs.len(), 2, "one watchdog per server: {procs:?}");
    let shm = postgres_shm(&dirs).expect("postmaster.pid names its segment");
    assert!(shm_exists(shm));

    run.sigkill();
    let killed = Instant::now();
    let servers_gone = wait_for(DEATH_WITHIN, || servers.iter().all(|p| !p.alive()));
    let servers_took = killed.elapsed();
    assert!(
        servers_gone,
        "servers alive {DEATH_WITHIN:?} after the SIGKILL: {:?}",
        servers.iter().filter(|p| p.alive()).collect::<Vec<_>>()
    );
    assert!(
        wait_for(DEATH_WITHIN, || common::stampede_temp_dirs_in(run.tmp())
            .is_empty()),
        "temp dirs left behind: {:?}",
        common::stampede_temp_dirs_in(run.tmp())
    );
    assert!(
        wait_for(DEATH_WITHIN, || watchdogs.iter().all(|p| !p.alive())),
        "watchdogs still running after their work"
    );
    assert_eq!(running_from(run.tmp()), vec![], "anything left in the dirs");
    assert!(
        wait_for(DEATH_WITHIN, || !shm_exists(shm)),
        "Postgres' shared memory segment {shm} left behind"
    );
    eprintln!(
        "{} server processes gone {servers_took:?} after the SIGKILL; test took {:?}",
        servers.len(),
        started.elapsed()
    );
}

#[test]
fn the_next_run_reaps_what_a_run_killed_with_its_watchdogs_left() {
    let _turn = common::cpu_turn();
    let started = Instant::now();
    let mut run = RunGuard::spawn(
        private_tmp(),
        &["--rps", "200", "--duration", "30s", "--keys", "1000"],
    );
    run.wait_for_servers();
    let procs = run.snapshot();
    let servers: Vec<Proc> = procs.iter().filter(|p| is_server(p)).cloned().collect();
    let dirs = common::stampede_temp_dirs_in(run.tmp());
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let shm = postgres_shm(&dirs).expect("postmaster.pid names its segment");

    // A live run's dirs and servers are never touched.
    assert_eq!(reap_leftovers_in(run.tmp()), vec![]);
    assert_eq!(common::stampede_temp_dirs_in(run.tmp()), dirs);
    // Judged on the long-lived processes: a Postgres backend ends by itself when the tool
    // closes a connection (the seeding one, a pool's spare), and that is not the reaper's doing.
    let postmaster: u32 = dirs
        .iter()
        .find_map(|d| {
            fs::read_to_string(d.join("data").join("postmaster.pid"))
                .ok()?
                .lines()
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .expect("postmaster.pid names the postmaster");
    let long_lived: Vec<&Proc> = servers
        .iter()
        .filter(|p| p.comm == "redis-server" || p.pid == postmaster)
        .collect();
    assert_eq!(long_lived.len(), 2, "redis and the postmaster: {servers:?}");
    assert!(
        long_lived.iter().all(|p| p.alive()),
        "the reaper hit a live run: {long_lived:?}"
    );

    // The worst case: the tool and its watchdogs all killed at once, nothing left to clean
    // up. (Watchdogs first, or they would do their job.)
    let watchdogs: Vec<Proc> = procs
        .iter()
        .filter(|p| {
            p.comm == "sh"
                && fs::read(format!("/proc/{}/cmdline", p.pid))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("stampede-watchdog"))
        })
        .cloned()
        .collect();
    assert_eq!(watchdogs.len(), 2, "{procs:?}");
    for w in &watchdogs {
        w.kill();
    }
    assert!(wait_for(Duration::from_secs(2), || watchdogs
        .iter()
        .all(|w| !w.alive())));
    run.sigkill();
    std::thread::sleep(Duration::from_millis(500));
    // (Backends may go by themselves once the tool's connections close; Redis and the
    // postmaster stay.)
    let survivor = |name: &str| servers.iter().any(|p| p.comm == name && p.alive());
    assert!(
        survivor("redis-server")
            && survivor("postgres")
            && common::stampede_temp_dirs_in(run.tmp()) == dirs,
        "the servers and dirs outlive the tool here, or this test tests nothing: alive {:?}, dirs {:?}\n{}",
        servers.iter().filter(|p| p.alive()).collect::<Vec<_>>(),
        common::stampede_temp_dirs_in(run.tmp()),
        run.stderr()
    );

    // The next run, in the same TMPDIR, cleans up before it starts its own servers.
    let next_tmp = run.tmp().to_owned();
    let mut next = common::stampede()
        .arg("run")
        .args([
            "--rps",
            "50",
            "--duration",
            "1s",
            "--keys",
            "1000",
            "--quiet",
        ])
        .env("TMPDIR", &next_tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the next run");
    // The next run is this test's too: the guard kills it (and what it started) on failure.
    let next_pid = next.id();
    let finished = wait_for(Duration::from_secs(20), || {
        run.seen.extend(descendants(next_pid));
        matches!(next.try_wait(), Ok(Some(_)))
    });
    if !finished {
        let _ = next.kill();
    }
    let out = next.wait_with_output().expect("next run's output");
    assert!(finished, "the next run did not finish");
    assert!(
        out.status.success(),
        "the next run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        servers.iter().all(|p| !p.alive()),
        "leftover servers still alive: {:?}",
        servers.iter().filter(|p| p.alive()).collect::<Vec<_>>()
    );
    assert!(
        common::stampede_temp_dirs_in(run.tmp()).is_empty(),
        "leftover dirs not removed: {:?}",
        common::stampede_temp_dirs_in(run.tmp())
    );
    assert_eq!(running_from(run.tmp()), vec![]);
    assert!(!shm_exists(shm), "leftover shared memory segment {shm}");
    eprintln!("test took {:?}", started.elapsed());
}
