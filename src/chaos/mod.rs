//! Faults injected into a run (DESIGN §4): a schedule of timestamped events — kill Redis, start
//! it again — run by a task beside the driver, which records what each outage did so the report
//! can show the outage window and the recovery stampede.
//!
//! Fault times count from the start of the measured window (after any warm-up), so a fault
//! strikes at the same point of the figures and the timeline whatever the warm-up.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cache::Admin;
use crate::fault::{FaultKind, FaultSpec};
use crate::instance::Shared;
use crate::servers::ManagedRedis;

mod report;

pub use report::reports;

/// How long the recovery stampede is counted after a restart.
const STAMPEDE_WINDOW: Duration = Duration::from_secs(1);
/// How long an external restart command, then the wait for Redis to answer, may each take.
const EXTERNAL_RESTART_LIMIT: Duration = Duration::from_secs(30);

/// How Redis is killed and brought back.
pub enum RedisControl {
    /// A redis-server the tool started: SIGKILL (a crash), then a new, empty one on the same port.
    Managed(ManagedRedis),
    /// A Redis the user runs: `SHUTDOWN NOSAVE` through the tool's admin connection, then the
    /// user's restart command (`sh -c`), then a wait until it answers PING.
    External { admin: Admin, restart_cmd: String },
}

/// What one fault did, in ms since the measured window started.
#[derive(Debug, Clone, Default, PartialEq)]
/// The report's [`crate::report::FaultReport`] documents what each figure means.
pub struct Record {
    pub kind: FaultKind,
    /// False when the fault could not be struck (see `note`); the figures below are then empty.
    pub injected: bool,
    /// When Redis was killed (or the fault was due, if it could not be struck).
    pub kill_ms: u64,
    /// When the new Redis answered; None when it was not brought back (see `note`).
    pub restart_ms: Option<u64>,
    /// When a request's Redis command first succeeded after the restart.
    pub first_ok_ms: Option<u64>,
    pub db_calls_during: u64,
    pub redis_errors_during: u64,
    pub recovery_stampede: u64,
    pub recovery_redundant: u64,
    pub recovery_window_ms: u64,
    pub note: Option<String>,
}

/// What the fault task hands back when the run is over.
pub struct Done {
    pub records: Vec<Record>,
    /// The managed Redis, to be stopped with the other servers (None if it was lost).
    pub managed: Option<ManagedRedis>,
    /// PIDs of the redis-servers started by restarts, in order.
    pub restarted_pids: Vec<u32>,
}

/// The running fault schedule.
pub struct Chaos {
    handle: JoinHandle<Done>,
    finish: CancellationToken,
}

impl Chaos {
    /// Start the schedule: it waits for the driver to fix the measured window's start, then
    /// strikes each fault at its time. `faults` must be sorted and not overlap (the scenario
    /// checks this).
    pub fn spawn(
        faults: Vec<FaultSpec>,
        control: RedisControl,
        shared: Arc<Shared>,
        window: watch::Receiver<Option<Instant>>,
        duration: Duration,
        shutdown: CancellationToken,
    ) -> Chaos {
        let finish = shutdown.child_token();
        let (managed, external) = match control {
            RedisControl::Managed(r) => (Some(r), None),
            RedisControl::External { admin, restart_cmd } => (None, Some((admin, restart_cmd))),
        };
        let task = Task {
            shared,
            managed,
            external,
            restarted_pids: Vec::new(),
            records: Vec::new(),
            stop: finish.clone(),
        };
        Chaos {
            handle: tokio::spawn(task.run(faults, window, duration)),
            finish,
        }
    }

    /// Traffic is over: end the schedule (a Redis still down is started again first, so an
    /// external one is never left down) and hand back what happened.
    pub async fn finish(self) -> anyhow::Result<Done> {
        self.finish.cancel();
        self.handle
            .await
            .map_err(|e| anyhow::anyhow!("the fault schedule failed: {e}"))
    }
}

struct Task {
    shared: Arc<Shared>,
    managed: Option<ManagedRedis>,
    external: Option<(Admin, String)>,
    restarted_pids: Vec<u32>,
    records: Vec<Record>,
    /// Traffic over or shutdown: stop waiting.
    stop: CancellationToken,
}

/// A pending count of the recovery stampede: which record, from when, with the calls then.
struct Pending {
    record: usize,
    restarted: Instant,
    calls: u64,
    redundant: u64,
}

fn ms_since(t: Instant, start: Instant) -> u64 {
    t.saturating_duration_since(start).as_millis() as u64
}

impl Task {
    /// Sleep until `at`; false when stopped first.
    async fn sleep_until(&self, at: Instant) -> bool {
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => true,
            _ = self.stop.cancelled() => false,
        }
    }

    fn calls(&self) -> u64 {
        self.shared.loads.calls.load(Relaxed)
    }

    fn redis_errors(&self) -> u64 {
        let c = &self.shared.counters;
        c.redis_errors.load(Relaxed) + c.redis_timeouts.load(Relaxed)
    }

    async fn run(
        mut self,
        faults: Vec<FaultSpec>,
        mut window: watch::Receiver<Option<Instant>>,
        duration: Duration,
    ) -> Done {
        let start = tokio::select! {
            r = window.wait_for(Option::is_some) => r.ok().and_then(|v| *v),
            _ = self.stop.cancelled() => None,
        };
        if let Some(start) = start {
            self.strike_all(&faults, start, start + duration).await;
        }
        Done {
            records: self.records,
            managed: self.managed,
            restarted_pids: self.restarted_pids,
        }
    }

    async fn strike_all(&mut self, faults: &[FaultSpec], start: Instant, end: Instant) {
        let mut pending: Option<Pending> = None;
        for spec in faults {
            let kill_at = start + spec.at.0;
            if let Some(p) = pending.take() {
                self.count_stampede(p, kill_at.min(end)).await;
            }
            if !self.sleep_until(kill_at).await {
                break;
            }
            // Read before the next restart re-arms the probe.
            self.note_first_ok(start);
            let broken = self
                .records
                .iter()
                .any(|r| r.injected && r.restart_ms.is_none());
            if broken {
                self.records.push(Record {
                    kind: spec.kind,
                    kill_ms: ms_since(Instant::now(), start),
                    note: Some(
                        "not injected: Redis did not come back from an earlier fault".into(),
                    ),
                    ..Record::default()
                });
                continue;
            }
            pending = self.strike(spec, start).await;
        }
        if let Some(p) = pending {
            self.count_stampede(p, end).await;
        }
        self.note_first_ok(start);
    }

    /// The first successful command since the last restart belongs to the last fault.
    fn note_first_ok(&mut self, start: Instant) {
        let first_ok = self.shared.counters.redis_health.first_ok();
        if let Some(last) = self.records.last_mut()
            && last.injected
            && last.restart_ms.is_some()
        {
            last.first_ok_ms = first_ok.map(|t| ms_since(t, start));
        }
    }

    /// One fault: kill, stay down for `down_for`, restart. Returns the stampede count to take.
    async fn strike(&mut self, spec: &FaultSpec, start: Instant) -> Option<Pending> {
        let shared = self.shared.clone();
        let health = &shared.counters.redis_health;
        let (calls0, errors0) = (self.calls(), self.redis_errors());
        let killed = Instant::now();
        let mut record = Record {
            kind: spec.kind,
            kill_ms: ms_since(killed, start),
            ..Record::default()
        };
        if let Err(e) = self.kill().await {
            // Redis never went down: nothing to restart.
            record.note = Some(format!("not injected: {e:#}"));
            self.records.push(record);
            return None;
        }
        record.injected = true;
        health.set_down();
        // Stopped early (Ctrl-C): restart now rather than leave Redis down.
        if !self.sleep_until(killed + spec.down_for.0).await {
            record.note = Some(format!(
                "outage cut short: the run was interrupted before down_for ({}) had passed",
                spec.down_for
            ));
        }
        let restarted = self.restart().await;
        record.db_calls_during = self.calls() - calls0;
        record.redis_errors_during = self.redis_errors() - errors0;
        match restarted {
            Ok(()) => {
                let now = Instant::now();
                health.set_up();
                record.restart_ms = Some(ms_since(now, start));
                self.records.push(record);
                Some(Pending {
                    record: self.records.len() - 1,
                    restarted: now,
                    calls: self.calls(),
                    redundant: self.shared.loads.redundant.load(Relaxed),
                })
            }
            Err(e) => {
                record.note = Some(format!("Redis was not brought back: {e:#}"));
                self.records.push(record);
                None
            }
        }
    }

    /// Count DB calls from the restart for one second, or until `limit` (the next fault or the
    /// end of the measured window), whichever comes first.
    async fn count_stampede(&mut self, p: Pending, limit: Instant) {
        let until = (p.restarted + STAMPEDE_WINDOW).min(limit).max(p.restarted);
        self.sleep_until(until).await;
        let now = Instant::now().min(until);
        let calls = self.calls() - p.calls;
        let redundant = self.shared.loads.redundant.load(Relaxed) - p.redundant;
        let r = &mut self.records[p.record];
        r.recovery_stampede = calls;
        r.recovery_redundant = redundant;
        r.recovery_window_ms = ms_since(now, p.restarted);
    }

    async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut r) = self.managed.take() {
            // SIGKILL and reap: a short blocking wait, kept off the async workers.
            let r = tokio::task::spawn_blocking(move || {
                r.kill();
                r
            })
            .await
            .map_err(|e| anyhow::anyhow!("killing redis-server failed: {e}"))?;
            self.managed = Some(r);
            return Ok(());
        }
        match &self.external {
            Some((admin, _)) => admin.shutdown_nosave().await,
            None => Err(anyhow::anyhow!("the managed Redis is gone")),
        }
    }

    async fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(r) = self.managed.as_mut() {
            r.restart().await?;
            if let Some(pid) = r.pid() {
                self.restarted_pids.push(pid);
            }
            return Ok(());
        }
        let Some((admin, cmd)) = &self.external else {
            anyhow::bail!("the managed Redis is gone");
        };
        run_restart_cmd(cmd).await?;
        let deadline = Instant::now() + EXTERNAL_RESTART_LIMIT;
        while !admin.ping().await {
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "--redis-restart-cmd succeeded but Redis did not answer PING within {EXTERNAL_RESTART_LIMIT:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// Run the user's restart command with `sh -c`, bounded. Its output goes to a temp file, not a
/// pipe: a daemon it starts inherits the descriptors, and a pipe would keep us waiting on it.
async fn run_restart_cmd(cmd: &str) -> anyhow::Result<()> {
    use std::io::{Read, Seek};
    let mut log = tempfile::tempfile()
        .map_err(|e| anyhow::anyhow!("creating a temp file for the restart command: {e}"))?;
    let out = log
        .try_clone()
        .map_err(|e| anyhow::anyhow!("duplicating a temp file handle: {e}"))?;
    let err = log
        .try_clone()
        .map_err(|e| anyhow::anyhow!("duplicating a temp file handle: {e}"))?;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting `sh -c {cmd}`: {e}"))?;
    let status = match tokio::time::timeout(EXTERNAL_RESTART_LIMIT, child.wait()).await {
        Ok(s) => s.map_err(|e| anyhow::anyhow!("waiting for --redis-restart-cmd: {e}"))?,
        Err(_) => {
            let _ = child.kill().await;
            anyhow::bail!("--redis-restart-cmd did not finish within {EXTERNAL_RESTART_LIMIT:?}");
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut text = String::new();
    let _ = log.rewind();
    let _ = log.read_to_string(&mut text);
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    anyhow::bail!(
        "--redis-restart-cmd exited with {status}; its output ended with: {}",
        tail.join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn restart_command_failure_names_the_exit_and_output() {
        let e = run_restart_cmd("echo starting; echo 'no such server' >&2; exit 3")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("no such server"), "{e}");
        run_restart_cmd("true").await.expect("exit 0 is success");
    }
}
