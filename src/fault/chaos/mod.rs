//! Faults injected into a run (docs/faults.md): a schedule of timestamped events — kill Redis or
//! Postgres and start it again, pause Redis — run beside the driver, which records what each
//! outage did so the report can show the outage window and the recovery.
//!
//! Fault times count from the start of the measured window (after any warm-up), so a fault
//! strikes at the same point of the figures and the timeline whatever the warm-up.
//!
//! Each server has its own lane: the faults of one server run in order (they never overlap,
//! the scenario checks it), while a Redis fault may strike during a Postgres outage.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cache::Admin;
use crate::fault::{FaultKind, FaultSpec, Server};
use crate::metrics::{Gauges, ServerHealth};
use crate::origin::PgProbe;
use crate::servers::{ManagedPostgres, ManagedRedis};
use clock::Clock;

mod clock;
mod holder;
mod network;
pub mod primaries;
mod shock;

pub use holder::HolderSide;
pub use network::NetLink;
pub use shock::DropSide;

/// How long the recovery stampede is counted after a restart.
const STAMPEDE_WINDOW: Duration = Duration::from_secs(1);
/// How long an external command (kill or restart), then the wait for the server to answer,
/// may each take.
const EXTERNAL_LIMIT: Duration = Duration::from_secs(30);
/// How long a paused Redis may take to answer once its pause should have ended.
const PAUSE_END_LIMIT: Duration = Duration::from_secs(5);

/// How Redis is killed, paused and brought back.
pub struct RedisSide {
    /// A redis-server the tool started: SIGKILL (a crash), then a new, empty one on the same
    /// port. None for the user's Redis: `SHUTDOWN NOSAVE` through `admin`, then `restart_cmd`
    /// (`sh -c`), then a wait until it answers PING.
    pub managed: Option<ManagedRedis>,
    /// The tool's own connection: it pauses Redis, shuts an external one down, and tells
    /// when it answers again.
    pub admin: Admin,
    pub restart_cmd: Option<String>,
    /// On a Redis Cluster: the faults strike one of its nodes (or move a slot).
    pub cluster: Option<primaries::ClusterSide>,
}

/// How Postgres is killed and brought back.
pub struct PgSide {
    /// A Postgres the tool started: SIGKILL of its process group, then a restart on the same
    /// port and data dir (crash recovery). None for the user's: `kill_cmd`, then
    /// `restart_cmd` (`sh -c` both), then a wait until it answers.
    pub managed: Option<ManagedPostgres>,
    /// The tool's own connection: reads the server's counts before a kill and tells when the
    /// server is back.
    pub probe: PgProbe,
    pub kill_cmd: Option<String>,
    pub restart_cmd: Option<String>,
}

/// What one fault did, in ms since the measured window started.
#[derive(Debug, Clone, Default, PartialEq)]
/// The report's [`super::report::FaultReport`] documents what each figure means.
pub struct Record {
    pub kind: FaultKind,
    /// False when the fault could not be struck (see `note`); the figures below are then empty.
    pub injected: bool,
    /// When the server was killed or paused (or the fault was due, if it could not be struck).
    pub kill_ms: u64,
    /// When the server answered again; None when it was not brought back (see `note`).
    pub restart_ms: Option<u64>,
    /// When a request first got through to the server after the restart.
    pub first_ok_ms: Option<u64>,
    pub db_calls_during: u64,
    pub redis_errors_during: u64,
    pub db_errors_during: u64,
    pub recovery_stampede: u64,
    pub recovery_redundant: u64,
    pub recovery_window_ms: u64,
    /// drop-cache: the entries removed.
    pub removed: Option<u64>,
    /// Shocks: loads asked for (queued ones included) in the recovery window after it.
    pub loads_after: u64,
    /// slow-db and spike: the factor.
    pub factor: Option<f64>,
    pub note: Option<String>,
    /// A fault on a Redis Cluster: the node struck, the promotion or the migration.
    pub cluster: Option<super::report::ClusterFault>,
    /// holder-crash: the instance, the keys blocked, the waiters.
    pub holder: Option<super::report::HolderCrash>,
    /// partition, reset, latency, bandwidth, slow-close: whose network and what it did.
    pub net: Option<super::report::NetFault>,
}

/// pg_stat_statements across Postgres crashes: a crash empties it, so what it had counted
/// just before each kill is added to the reading at the end of the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCalls {
    /// The counts read before kills that the crash then erased.
    pub lost: u64,
    /// One line per kill-postgres fault: what was read, and whether the crash erased it.
    pub readings: Vec<String>,
    /// A reading could not be taken: a sum would be short, so there is none.
    pub unreadable: bool,
}

/// What the fault task hands back when the run is over.
pub struct Done {
    /// Every fault, in the order they struck.
    pub records: Vec<Record>,
    /// The managed servers, to be stopped with the others (None if lost, or not managed).
    pub redis: Option<ManagedRedis>,
    pub cluster: Option<crate::cluster::ManagedCluster>,
    pub postgres: Option<ManagedPostgres>,
    /// PIDs of the redis-servers started by restarts, in order.
    pub restarted_pids: Vec<u32>,
    /// PIDs of the postmasters started by restarts, in order.
    pub pg_restarted_pids: Vec<u32>,
    pub server_calls: ServerCalls,
}

/// The running fault schedule.
pub struct Chaos {
    handle: JoinHandle<Done>,
    finish: CancellationToken,
}

impl Chaos {
    /// Start the schedule: it waits for the driver to fix the measured window's start, then
    /// strikes each fault at its time. `faults` must be sorted and outages of one server must
    /// not overlap (the scenario checks this). `postgres` is needed only for Postgres faults.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        faults: Vec<FaultSpec>,
        redis: RedisSide,
        postgres: Option<PgSide>,
        drops: Option<DropSide>,
        holders: Option<HolderSide>,
        links: Vec<NetLink>,
        shared: Gauges,
        window: watch::Receiver<Option<Instant>>,
        duration: Duration,
        shutdown: CancellationToken,
    ) -> Chaos {
        let finish = shutdown.child_token();
        let of = |server: Server| -> Vec<FaultSpec> {
            faults
                .iter()
                .filter(|f| f.kind.server() == server)
                .copied()
                .collect()
        };
        let redis_lane = Lane::new(
            Target::Redis(Box::new(redis)),
            shared.clone(),
            finish.clone(),
        );
        let pg_lane = postgres.map(|p| {
            Lane::new(
                Target::Postgres(Box::new(p)),
                shared.clone(),
                finish.clone(),
            )
        });
        let (redis_faults, pg_faults) = (of(Server::Redis), of(Server::Postgres));
        let shock_lanes: Vec<_> = [Server::Entries, Server::LoadCost, Server::Traffic]
            .into_iter()
            .map(|s| {
                tokio::spawn(shock::lane(
                    of(s),
                    drops.clone(),
                    shared.clone(),
                    window.clone(),
                    duration,
                    finish.clone(),
                ))
            })
            .collect();
        let holder_lane = tokio::spawn(holder::lane(
            of(Server::Instance),
            holders,
            shared.clone(),
            window.clone(),
            duration,
            finish.clone(),
        ));
        let net_lane = tokio::spawn(network::lane(
            of(Server::Network),
            links,
            shared.clone(),
            window.clone(),
            duration,
            finish.clone(),
        ));
        let task = async move {
            let pg_window = window.clone();
            let (redis_lane, pg_lane) =
                tokio::join!(redis_lane.run(redis_faults, window, duration), async move {
                    match pg_lane {
                        Some(l) => Some(l.run(pg_faults, pg_window, duration).await),
                        None => None,
                    }
                });
            let mut done = Done {
                records: Vec::new(),
                redis: None,
                cluster: None,
                postgres: None,
                restarted_pids: Vec::new(),
                pg_restarted_pids: Vec::new(),
                server_calls: ServerCalls::default(),
            };
            for lane in std::iter::once(redis_lane).chain(pg_lane) {
                done.records.extend(lane.records);
                match lane.target {
                    Target::Redis(r) => {
                        done.redis = r.managed;
                        done.cluster = r.cluster.and_then(|c| c.managed);
                        done.restarted_pids = lane.restarted_pids;
                    }
                    Target::Postgres(p) => {
                        done.postgres = p.managed;
                        done.pg_restarted_pids = lane.restarted_pids;
                        done.server_calls = lane.server_calls;
                    }
                }
            }
            for lane in shock_lanes.into_iter().chain([holder_lane, net_lane]) {
                if let Ok(records) = lane.await {
                    done.records.extend(records);
                }
            }
            done.records.sort_by_key(|r| r.kill_ms);
            done
        };
        Chaos {
            handle: tokio::spawn(task),
            finish,
        }
    }

    /// Traffic is over: end the schedule (a server still down is started again first, so an
    /// external one is never left down) and hand back what happened.
    pub async fn finish(self) -> anyhow::Result<Done> {
        self.finish.cancel();
        self.handle
            .await
            .map_err(|e| anyhow::anyhow!("the fault schedule failed: {e}"))
    }
}

enum Target {
    /// Boxed like the Postgres side: its TLS settings are large.
    Redis(Box<RedisSide>),
    /// Boxed: a probe's connection config is large, and there is one lane per server.
    Postgres(Box<PgSide>),
}

/// The faults of one server, struck in order.
struct Lane {
    target: Target,
    shared: Gauges,
    restarted_pids: Vec<u32>,
    records: Vec<Record>,
    server_calls: ServerCalls,
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

fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

impl Lane {
    fn new(target: Target, shared: Gauges, stop: CancellationToken) -> Lane {
        Lane {
            target,
            shared,
            restarted_pids: Vec::new(),
            records: Vec::new(),
            server_calls: ServerCalls::default(),
            stop,
        }
    }

    /// Sleep until `at`; false when stopped first.
    async fn sleep_until(&self, at: Instant) -> bool {
        clock::sleep_until(at, &self.stop).await
    }

    fn health(&self) -> &ServerHealth {
        match self.target {
            Target::Redis(_) => &self.shared.counters.redis_health,
            Target::Postgres(_) => &self.shared.counters.pg_health,
        }
    }

    fn calls(&self) -> u64 {
        self.shared.loads.calls.load(Relaxed)
    }

    fn redis_errors(&self) -> u64 {
        let c = &self.shared.counters;
        c.redis_errors.load(Relaxed) + c.redis_timeouts.load(Relaxed)
    }

    /// Loads that failed in the database: statements that ended in an error, connections
    /// that could not be opened, waits for a connection that ran out.
    fn db_errors(&self) -> u64 {
        let l = &self.shared.loads;
        l.statement_errors.load(Relaxed)
            + l.connect_errors.load(Relaxed)
            + l.pool_timeouts.load(Relaxed)
    }

    async fn run(
        mut self,
        faults: Vec<FaultSpec>,
        window: watch::Receiver<Option<Instant>>,
        duration: Duration,
    ) -> Lane {
        if let Some(clock) = Clock::open(&faults, window, duration, self.stop.clone()).await {
            self.strike_all(&faults, clock.start, clock.end).await;
        }
        self
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
                    note: Some(format!(
                        "not injected: {} did not come back from an earlier fault",
                        spec.kind.server().name()
                    )),
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

    /// The first success since the last restart belongs to the last fault.
    fn note_first_ok(&mut self, start: Instant) {
        let first_ok = self.health().first_ok();
        if let Some(last) = self.records.last_mut()
            && last.injected
            && last.restart_ms.is_some()
        {
            last.first_ok_ms = first_ok.map(|t| ms_since(t, start));
        }
    }

    /// One fault: kill (or pause), stay down for `down_for`, bring back. Returns the stampede
    /// count to take.
    async fn strike(&mut self, spec: &FaultSpec, start: Instant) -> Option<Pending> {
        let shared = self.shared.clone();
        let health = match self.target {
            Target::Redis(_) => &shared.counters.redis_health,
            Target::Postgres(_) => &shared.counters.pg_health,
        };
        // What pg_stat_statements has counted, read as late as possible before the crash
        // empties it.
        let counted = match &mut self.target {
            Target::Postgres(p) if spec.kind == FaultKind::KillPostgres => {
                Some(p.probe.server_calls().await)
            }
            _ => None,
        };
        let (calls0, errors0, db_errors0) = (self.calls(), self.redis_errors(), self.db_errors());
        let killed = Instant::now();
        let mut record = Record {
            kind: spec.kind,
            kill_ms: ms_since(killed, start),
            ..Record::default()
        };
        if let Err(e) = self.down(spec).await {
            // The server never went down: nothing to bring back.
            record.note = Some(format!("not injected: {e:#}"));
            self.records.push(record);
            return None;
        }
        record.injected = true;
        health.set_down();
        if spec.kind == FaultKind::KillRedis {
            // Entries gone before their expiry from now on were lost to the fault.
            self.shared.loads.book.cache_lost();
        }
        if let Target::Redis(r) = &mut self.target
            && let Some(c) = r.cluster.as_mut()
        {
            record.cluster = c.last.take();
        }
        let back_at = killed + spec.down_for.0;
        if spec.kind == FaultKind::KillRedis {
            self.await_promotion(&mut record, killed, back_at, errors0)
                .await;
        }
        let mut notes = Vec::new();
        let server = spec.kind.server().name();
        let not_back = |e: anyhow::Error| format!("{server} was not brought back: {e:#}");
        let restarted = if self.sleep_until(back_at).await {
            self.up(spec, back_at).await.map_err(not_back)
        } else if spec.kind == FaultKind::PauseRedis {
            // Nothing can end a pause early (CLIENT UNPAUSE would wait behind it too).
            Err(format!(
                "the run was interrupted during the pause; Redis resumes by itself at {}",
                secs(ms_since(back_at, start))
            ))
        } else {
            // Stopped early (Ctrl-C): restart now rather than leave the server down.
            notes.push(format!(
                "outage cut short: the run was interrupted before down_for ({}) had passed",
                spec.down_for
            ));
            self.up(spec, back_at).await.map_err(not_back)
        };
        record.db_calls_during = self.calls() - calls0;
        record.redis_errors_during = self.redis_errors() - errors0;
        record.db_errors_during = self.db_errors() - db_errors0;
        let pending = match restarted {
            Ok(recovery_logged) => {
                let now = Instant::now();
                health.set_up();
                if recovery_logged == Some(false) {
                    notes.push("Postgres came back without logging a crash recovery".to_string());
                }
                record.restart_ms = Some(ms_since(now, start));
                Some(Pending {
                    record: self.records.len(),
                    restarted: now,
                    calls: self.calls(),
                    redundant: self.shared.loads.redundant.load(Relaxed),
                })
            }
            Err(e) => {
                notes.push(e);
                None
            }
        };
        if let Some(counted) = counted {
            self.note_server_calls(counted, record.kill_ms).await;
        }
        if let Some(n) = record.note.take() {
            notes.insert(0, n);
        }
        record.note = (!notes.is_empty()).then(|| notes.join("; "));
        self.records.push(record);
        pending
    }

    /// Compare the count read before a kill with the one now: a crash empties
    /// pg_stat_statements (the count starts again from zero), a clean stop keeps it.
    async fn note_server_calls(&mut self, before: Option<u64>, kill_ms: u64) {
        let Target::Postgres(p) = &mut self.target else {
            return;
        };
        let after = p.probe.server_calls().await;
        let calls = &mut self.server_calls;
        match (before, after) {
            (Some(b), Some(a)) if a < b => {
                calls.lost += b;
                calls.readings.push(format!(
                    "{b} read just before the kill at {}, erased by the crash",
                    secs(kill_ms)
                ));
            }
            (Some(b), Some(_)) => calls.readings.push(format!(
                "{b} read just before the kill at {}, kept by the server",
                secs(kill_ms)
            )),
            _ => {
                calls.unreadable = true;
                calls.readings.push(format!(
                    "pg_stat_statements could not be read around the kill at {}",
                    secs(kill_ms)
                ));
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

    /// On a cluster, after a kill: wait for the replica's promotion, then count the stampede
    /// onto it for a second (or until the node is due back).
    async fn await_promotion(
        &mut self,
        record: &mut Record,
        killed: Instant,
        back_at: Instant,
        errors0: u64,
    ) {
        let Target::Redis(r) = &self.target else {
            return;
        };
        let Some(c) = r.cluster.as_ref() else {
            return;
        };
        // The node comes back at `back_at` whether or not a replica took over by then.
        let promoted = tokio::select! {
            p = c.await_promotion() => Some(p),
            _ = tokio::time::sleep_until(back_at.into()) => Some(Err(anyhow::anyhow!(
                "none within down_for ({} ms after the kill); the killed node starts again (a promotion takes cluster-node-timeout plus an election: give --redis-down-for a few seconds)",
                back_at.saturating_duration_since(killed).as_millis()
            ))),
            _ = self.stop.cancelled() => None,
        };
        let errors = self.redis_errors() - errors0;
        let Some(f) = record.cluster.as_mut() else {
            return;
        };
        match promoted {
            Some(Ok((at, by))) => {
                f.promotion_ms = Some(at.saturating_duration_since(killed).as_millis() as u64);
                f.errors_until_promotion = Some(errors);
                f.now_served_by = Some(by);
                let calls = self.calls();
                self.sleep_until((at + STAMPEDE_WINDOW).min(back_at).max(at))
                    .await;
                if let Some(f) = record.cluster.as_mut() {
                    f.promotion_stampede = Some(self.calls() - calls);
                }
            }
            Some(Err(e)) => {
                record.note = Some(format!("no replica took over: {e:#}"));
            }
            None => {}
        }
    }

    /// Strike: kill or pause the server.
    async fn down(&mut self, spec: &FaultSpec) -> anyhow::Result<()> {
        if let Target::Redis(r) = &mut self.target
            && let Some(c) = r.cluster.as_mut()
            && spec.kind != FaultKind::PauseRedis
        {
            return c.down(spec.kind).await;
        }
        match (&mut self.target, spec.kind) {
            (Target::Redis(r), FaultKind::PauseRedis) => r.admin.pause(spec.down_for.0).await,
            (Target::Redis(r), _) => match r.managed.take() {
                Some(mut m) => {
                    // SIGKILL and reap: a short blocking wait, kept off the async workers.
                    let m = tokio::task::spawn_blocking(move || {
                        m.kill();
                        m
                    })
                    .await
                    .map_err(|e| anyhow::anyhow!("killing redis-server failed: {e}"))?;
                    r.managed = Some(m);
                    Ok(())
                }
                None => r.admin.shutdown_nosave().await,
            },
            (Target::Postgres(p), _) => match p.managed.take() {
                Some(mut m) => {
                    let m = tokio::task::spawn_blocking(move || {
                        m.kill();
                        m
                    })
                    .await
                    .map_err(|e| anyhow::anyhow!("killing postgres failed: {e}"))?;
                    p.managed = Some(m);
                    Ok(())
                }
                None => match &p.kill_cmd {
                    Some(cmd) => run_cmd(cmd, "--pg-kill-cmd").await,
                    None => Err(anyhow::anyhow!(
                        "no --pg-kill-cmd to crash the external Postgres with"
                    )),
                },
            },
        }
    }

    /// Bring the server back (or, for a pause, wait until it answers again). For a managed
    /// Postgres, says whether it logged a crash recovery.
    async fn up(&mut self, spec: &FaultSpec, due: Instant) -> anyhow::Result<Option<bool>> {
        match (&mut self.target, spec.kind) {
            (Target::Redis(r), FaultKind::PauseRedis) => {
                // Redis resumes by itself; a PING sent now waits until it does.
                let deadline = due.max(Instant::now()) + PAUSE_END_LIMIT;
                while !r.admin.ping().await {
                    if Instant::now() >= deadline {
                        anyhow::bail!(
                            "Redis did not answer PING within {PAUSE_END_LIMIT:?} after its pause should have ended"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(None)
            }
            (Target::Redis(r), _) if r.cluster.is_some() => {
                // A failover and a migration are over once done; a killed node starts again.
                let Some(c) = r.cluster.as_mut() else {
                    return Ok(None);
                };
                if let Some(pid) = c.up().await? {
                    self.restarted_pids.push(pid);
                }
                Ok(None)
            }
            (Target::Redis(r), _) => {
                if let Some(m) = r.managed.as_mut() {
                    m.restart().await?;
                    if let Some(pid) = m.pid() {
                        self.restarted_pids.push(pid);
                    }
                    return Ok(None);
                }
                let Some(cmd) = &r.restart_cmd else {
                    anyhow::bail!("no --redis-restart-cmd to start the external Redis with");
                };
                run_cmd(cmd, "--redis-restart-cmd").await?;
                let deadline = Instant::now() + EXTERNAL_LIMIT;
                while !r.admin.ping().await {
                    if Instant::now() >= deadline {
                        anyhow::bail!(
                            "--redis-restart-cmd succeeded but Redis did not answer PING within {EXTERNAL_LIMIT:?}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None)
            }
            (Target::Postgres(p), _) => {
                if let Some(m) = p.managed.as_mut() {
                    let recovered = m.restart().await?;
                    if let Some(pid) = m.pid() {
                        self.restarted_pids.push(pid);
                    }
                    return Ok(Some(recovered));
                }
                let Some(cmd) = &p.restart_cmd else {
                    anyhow::bail!("no --pg-restart-cmd to start the external Postgres with");
                };
                run_cmd(cmd, "--pg-restart-cmd").await?;
                let deadline = Instant::now() + EXTERNAL_LIMIT;
                while !p.probe.ready().await {
                    if Instant::now() >= deadline {
                        anyhow::bail!(
                            "--pg-restart-cmd succeeded but Postgres did not answer within {EXTERNAL_LIMIT:?}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None)
            }
        }
    }
}

/// Run one of the user's commands (`flag` names it in errors) with `sh -c`, bounded. Its
/// output goes to a temp file, not a pipe: a daemon it starts inherits the descriptors, and
/// a pipe would keep us waiting on it.
async fn run_cmd(cmd: &str, flag: &str) -> anyhow::Result<()> {
    use std::io::{Read, Seek};
    let mut log = tempfile::tempfile()
        .map_err(|e| anyhow::anyhow!("creating a temp file for {flag}: {e}"))?;
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
        .map_err(|e| {
            anyhow::anyhow!(
                "starting {flag} `sh -c {}`: {e}",
                crate::redact::command(cmd)
            )
        })?;
    let status = match tokio::time::timeout(EXTERNAL_LIMIT, child.wait()).await {
        Ok(s) => s.map_err(|e| anyhow::anyhow!("waiting for {flag}: {e}"))?,
        Err(_) => {
            let _ = child.kill().await;
            anyhow::bail!("{flag} did not finish within {EXTERNAL_LIMIT:?}");
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
    // A server refusing its configuration quotes it (redis-server prints the offending
    // line, `requirepass "…"` included): the command's secrets are hidden there too.
    anyhow::bail!(
        "{flag} exited with {status}; its output ended with: {}",
        crate::redact::scrub(&tail.join(" | "), &crate::redact::command_secrets(cmd))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn command_failure_names_the_flag_the_exit_and_output() {
        let e = run_cmd(
            "echo starting; echo 'no such server' >&2; exit 3",
            "--pg-restart-cmd",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--pg-restart-cmd exited"), "{e}");
        assert!(e.contains("exit status: 3"), "{e}");
        assert!(e.contains("no such server"), "{e}");
        run_cmd("true", "--redis-restart-cmd")
            .await
            .expect("exit 0 is success");
    }

    #[tokio::test]
    async fn a_failing_commands_output_does_not_show_its_secrets() {
        let e = run_cmd(
            "PGPASSWORD=s3cr3t-pg sh -c 'echo \"password $PGPASSWORD refused\" >&2; exit 1'",
            "--pg-kill-cmd",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("password *** refused"), "{e}");
        assert!(!e.contains("s3cr3t-pg"), "{e}");
    }
}
