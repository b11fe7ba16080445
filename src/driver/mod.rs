//! The run itself: build the app instances, warm the cache, drive open- or closed-loop traffic
//! through them ([`open_loop`], [`closed_loop`]), keep the timeline ([`timeline`]), and stop
//! cleanly: at the end every request is finished or abandoned, and counted exactly once.
//! Returns raw figures; the session turns them into a result.

mod closed_loop;
mod open_loop;
mod rewarm;
mod timeline;
mod warm;
mod writes;

pub use writes::Divergence;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::app::http::HttpTarget;
use crate::cache::Cache;
use crate::exporter::Export;
use crate::instance::{self, Instance, RunState, Served};
use crate::l1::L1;
use crate::live::Live;
use crate::metrics::{CostSums, CountersSnapshot, LoadTracker, Outcome, Recorder, Totals};
use crate::origin::Db;
use crate::protect::Guard;
use crate::results::{BreakerEvent, Bucket, DispatchLag};
use crate::scenario::{LoadShape, Scenario, policy};
use crate::shard::ShardSpec;
use crate::strategy::policy::{Bench, RunPolicy};

/// What the traffic produced, before it is shaped into a result.
pub struct Raw {
    pub totals: Totals,
    pub scheduled: u64,
    pub shed: u64,
    /// Measured requests the generator could not dispatch before the window closed.
    pub unsent: u64,
    /// Measured requests still in flight when the drain ran out, dropped and counted as errors
    /// (their latency recorded at the moment they were given up).
    pub abandoned: u64,
    pub warmup_requests: u64,
    pub counters: CountersSnapshot,
    /// The measured window's database figures.
    pub db: DbRaw,
    /// The measured window's Redis reads and write-backs, timed (for the break-even).
    pub cost: CostSums,
    pub timeline: Vec<Bucket>,
    /// Every state change of the instances' breakers, in order.
    pub breaker: Vec<BreakerEvent>,
    pub interrupted: bool,
    /// How late the open loop dispatched its requests (None in closed loop: no schedule).
    pub lag: Option<DispatchLag>,
    pub started_at_ms: u64,
    /// Fingerprint of the key draws and how many ids it covers (see [`KeySampler::digest`]).
    pub key_digest: (u64, u64),
    /// CPU the whole process used from the start of traffic to the end of the drain.
    pub cpu: Duration,
    /// Wall-clock time of that same window.
    pub wall: Duration,
    /// Wall-clock length of the measured window, including the drain.
    pub window: Duration,
    /// Peak resident set size of the process, bytes.
    pub peak_rss: u64,
    /// The writes' figures; None without writes.
    pub writes: Option<WritesRaw>,
    /// Measured requests answered with a value within the goodput deadline.
    pub goodput: u64,
    /// Retries sent by the client (each attempt after the first).
    pub retries: u64,
    /// Runs of the re-warm job that started in the measured window.
    pub rewarm_runs: u64,
    /// How long, within the measured window and its drain, at least one instance limited its
    /// own loads because the global rate limit's Redis did not answer.
    pub rate_fallback: Duration,
}

/// What the writes did.
pub struct WritesRaw {
    pub committed: u64,
    pub errors: u64,
    /// Writes read back once their key settled, those found left wrong, those never
    /// probed, and the key-ms the probes saw wrong (see `metrics::Probes`).
    pub probed: u64,
    pub left_wrong: u64,
    pub unprobed: u64,
    pub divergent_ms: u64,
    /// From each write's scheduled start to the end of its invalidation, µs.
    pub latency: hdrhistogram::Histogram<u64>,
}

/// The load tracker's figures at the end of a run (see [`LoadTracker`]).
pub struct DbRaw {
    pub calls: u64,
    pub warmup_calls: u64,
    pub rewarm_calls: u64,
    pub statement_errors: u64,
    pub statement_timeouts: u64,
    pub pool_timeouts: u64,
    pub connect_errors: u64,
    pub statement_us: u64,
    pub pool_wait_us: u64,
    pub peak_concurrent: u64,
    pub peak_in_flight: u64,
    pub peak_herd: u64,
    pub redundant: u64,
}

impl DbRaw {
    fn of(t: &LoadTracker) -> DbRaw {
        DbRaw {
            calls: t.calls.load(Relaxed),
            warmup_calls: t.warmup_calls.load(Relaxed),
            rewarm_calls: t.rewarm_calls.load(Relaxed),
            statement_errors: t.statement_errors.load(Relaxed),
            statement_timeouts: t.statement_timeouts.load(Relaxed),
            pool_timeouts: t.pool_timeouts.load(Relaxed),
            connect_errors: t.connect_errors.load(Relaxed),
            statement_us: t.statement_us.load(Relaxed),
            pool_wait_us: t.pool_wait_us.load(Relaxed),
            peak_concurrent: t.peak_concurrent.load(Relaxed),
            peak_in_flight: t.peak_in_flight.load(Relaxed),
            peak_herd: t.peak_herd.load(Relaxed),
            redundant: t.redundant.load(Relaxed),
        }
    }
}

/// What a traffic loop did, by name.
struct Traffic {
    /// Measured requests due (open loop) or started (closed loop).
    scheduled: u64,
    shed: u64,
    /// Measured requests due in the window that the generator could not even dispatch.
    unsent: u64,
    /// Requests sent during the warm-up.
    warmup: u64,
    /// Measured requests handed to an instance.
    dispatched: u64,
    lag: Option<DispatchLag>,
    key_digest: (u64, u64),
}

/// The measured requests' end: each is finished or abandoned, exactly once; and what the
/// client got of them: goodput and retries, in total and by the timeline bucket of their
/// scheduled start.
#[derive(Default)]
struct Tally {
    finished: AtomicU64,
    abandoned: AtomicU64,
    goodput: AtomicU64,
    retries: AtomicU64,
    board: std::sync::OnceLock<Board>,
}

/// Goodput and retries per timeline bucket, by scheduled time (a request counts in the
/// bucket it was due in, so a late answer shows where the demand was).
struct Board {
    measure: Instant,
    interval_ns: u64,
    within_us: u64,
    goodput: Box<[AtomicU64]>,
    retries: Box<[AtomicU64]>,
}

impl Board {
    fn slot(&self, at: Instant) -> Option<usize> {
        let ns = at.checked_duration_since(self.measure)?.as_nanos() as u64;
        let i = (ns / self.interval_ns.max(1)) as usize;
        (i < self.goodput.len()).then_some(i)
    }
}

impl Tally {
    /// Fix the window the board counts in (once, before traffic).
    fn open(&self, measure: Instant, window: Duration, interval: Duration, within: Duration) {
        let n = (window.as_nanos() / interval.as_nanos().max(1)) as usize + 1;
        let zeros = || (0..n).map(|_| AtomicU64::new(0)).collect();
        let _ = self.board.set(Board {
            measure,
            interval_ns: interval.as_nanos() as u64,
            within_us: within.as_micros() as u64,
            goodput: zeros(),
            retries: zeros(),
        });
    }

    #[inline]
    fn answered(&self, outcome: Outcome, scheduled: Instant, latency_us: u64) {
        let Some(b) = self.board.get() else { return };
        if outcome.answered() && latency_us <= b.within_us {
            self.goodput.fetch_add(1, Relaxed);
            if let Some(i) = b.slot(scheduled) {
                b.goodput[i].fetch_add(1, Relaxed);
            }
        }
    }

    fn retried(&self, at: Instant) {
        self.retries.fetch_add(1, Relaxed);
        if let Some(b) = self.board.get()
            && let Some(i) = b.slot(at)
        {
            b.retries[i].fetch_add(1, Relaxed);
        }
    }

    /// Goodput and retries of bucket `i`.
    fn bucket(&self, i: usize) -> (u64, u64) {
        self.board.get().map_or((0, 0), |b| {
            (
                b.goodput.get(i).map_or(0, |v| v.load(Relaxed)),
                b.retries.get(i).map_or(0, |v| v.load(Relaxed)),
            )
        })
    }
}

/// One measured request in flight. Finishing records its outcome; dropping it unfinished
/// (aborted at the end of the drain, or a panic in the request path) records it as an error
/// abandoned at that moment, so the worst requests stay in the percentiles.
struct Pending<'a> {
    recorder: &'a Recorder,
    tally: &'a Tally,
    scheduled: Instant,
    began: Instant,
    done: bool,
}

impl<'a> Pending<'a> {
    fn new(recorder: &'a Recorder, tally: &'a Tally, scheduled: Instant, began: Instant) -> Self {
        Pending {
            recorder,
            tally,
            scheduled,
            began,
            done: false,
        }
    }

    fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
        self.tally.finished.fetch_add(1, Relaxed);
    }

    fn record(&mut self, outcome: Outcome) {
        self.done = true;
        let now = Instant::now();
        let latency_us = (now - self.scheduled).as_micros() as u64;
        self.recorder
            .record(outcome, latency_us, (now - self.began).as_micros() as u64);
        self.tally.answered(outcome, self.scheduled, latency_us);
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record(Outcome::Error);
            self.tally.abandoned.fetch_add(1, Relaxed);
        }
    }
}

/// One attempt of a request under the client's deadline: the work runs until `deadline`,
/// when the client gives up (outcome `timed-out`); the work itself goes on in a task of its
/// own (the app does not know the client left) until it ends or the run aborts.
async fn within<F>(work: F, deadline: Option<Instant>, abort: &CancellationToken) -> Served
where
    F: std::future::Future<Output = Served> + Send + 'static,
{
    let Some(deadline) = deadline else {
        return work.await;
    };
    // Boxed so the work can outlive this attempt: only with --request-timeout.
    let mut work = Box::pin(work);
    tokio::select! {
        served = &mut work => served,
        _ = tokio::time::sleep_until(deadline.into()) => {
            let abort = abort.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = work => {}
                    _ = abort.cancelled() => {}
                }
            });
            (Outcome::TimedOut, 0)
        }
    }
}

/// A request as the client sends it with `--request-timeout` and `--retries`: each attempt
/// (made by `attempt(n)`, n from 0) under its deadline, a failed or timed-out one sent again
/// after the backoff, every retry counted.
async fn with_retries<W, F>(
    mut attempt: W,
    client: &crate::scenario::Client,
    scheduled: Instant,
    seed: u64,
    tally: &Tally,
    measured: bool,
    abort: &CancellationToken,
) -> Served
where
    W: FnMut(u32) -> F,
    F: std::future::Future<Output = Served> + Send + 'static,
{
    let mut sent = scheduled;
    let mut n = 0u32;
    loop {
        let deadline = client.timeout.map(|d| sent + d.0);
        let served = within(attempt(n), deadline, abort).await;
        if !matches!(served.0, Outcome::Error | Outcome::TimedOut)
            || n >= client.retries
            || abort.is_cancelled()
        {
            return served;
        }
        n += 1;
        // A cheap per-request draw for the jitter: the same request retries alike.
        let unit = (crate::stats::mix64(seed ^ u64::from(n)) >> 11) as f64 / (1u64 << 53) as f64;
        tokio::select! {
            _ = tokio::time::sleep(client.backoff_for(n, unit)) => {}
            _ = abort.cancelled() => return served,
        }
        sent = Instant::now();
        if measured {
            tally.retried(sent);
        }
    }
}

/// Where a request goes: through a built-in app instance, or over HTTP to the app under test
/// (`--target`). The schedule, the recording and the drain are the same for both.
#[derive(Clone)]
enum Path {
    Builtin(Arc<Instance>),
    Http(Arc<HttpTarget>),
}

impl Path {
    /// Serve request `id`. The HTTP path is boxed: its future is large, and unboxed it would
    /// size every built-in request's future for it.
    async fn handle(&self, id: u64, measured: bool) -> Served {
        match self {
            Path::Builtin(i) => i.handle(id).await,
            // The app's versions are not seen: writes are refused with --target.
            Path::Http(h) => (Box::pin(h.get(id, measured)).await, 0),
        }
    }

    /// How long a newer version than the one served had been committed (see
    /// [`Instance::staleness`]); None over HTTP.
    #[inline]
    fn staleness(&self, id: u64, outcome: Outcome, served: u64, began: Instant) -> Option<u64> {
        match self {
            Path::Builtin(i) => i.staleness(id, outcome, served, began),
            Path::Http(_) => None,
        }
    }
}

pub struct Driver {
    sc: Scenario,
    /// One per app instance (built-in), or the one HTTP target.
    paths: Vec<Path>,
    /// What the built-in instances apply, fixed for the run (each holds a copy).
    policy: RunPolicy,
    /// The run's counters, abort token, writes and tiers, shared by every path.
    run: Arc<RunState>,
    recorder: Arc<Recorder>,
    /// When the measured window starts, once `run` has fixed it (the fault schedule counts from it).
    window: tokio::sync::watch::Sender<Option<Instant>>,
    tally: Arc<Tally>,
    /// This process's part of a sharded run (None: the whole run).
    shard: Option<ShardSpec>,
    /// The Unix ms at which traffic starts, agreed by every shard (None: as soon as ready).
    start_at_ms: Option<u64>,
    /// Open-loop requests of the measured window shed so far (for the live metrics).
    shed_live: Arc<AtomicU64>,
    /// The live metrics, with `--metrics-listen`.
    export: Option<Export>,
}

impl Driver {
    /// Connect every app instance to Redis and Postgres.
    pub async fn build(
        sc: &Scenario,
        redis_url: &str,
        redis_tls: &crate::tls::RedisTls,
        prefix: Arc<str>,
        db: &Db,
    ) -> Result<Driver> {
        Self::build_part(sc, redis_url, redis_tls, prefix, db, None).await
    }

    /// Connect the app instances of `shard` (all of them without one) to Redis and Postgres.
    pub async fn build_part(
        sc: &Scenario,
        redis_url: &str,
        redis_tls: &crate::tls::RedisTls,
        prefix: Arc<str>,
        db: &Db,
        shard: Option<ShardSpec>,
    ) -> Result<Driver> {
        let (policy, run) = plan(sc);
        let counters = run.counters.clone();
        let ids = match shard {
            Some(s) => s.instances(sc.instances),
            None => (0..sc.instances).collect(),
        };
        let mut instances = Vec::with_capacity(ids.len());
        for i in ids {
            let cache = Cache::open_with(
                redis_url,
                redis_tls,
                sc.redis_conns,
                sc.redis_timeout.0,
                prefix.clone(),
                counters.clone(),
                sc.cluster.read_from_replicas,
            )
            .await?;
            // Shards load through the ledger: their herds are counted on the server's clock.
            let origin = db
                .origin_with(
                    sc.db_pool,
                    sc.load_cost(),
                    sc.db_timeout.map(|d| d.0),
                    shard.is_some(),
                )
                .await?;
            let guard = Guard::new(i, sc.db_limit, sc.breaker.as_ref())
                .with_rate(sc.db_rate.as_ref(), sc.instances);
            let mut instance = Instance::new(cache, origin, guard, policy, run.clone());
            // Its in-process tier and the connection its invalidations come on.
            if let Some(spec) = sc.l1 {
                let l1 = Arc::new(L1::new(&spec, counters.clone()));
                // A cluster carries a PUBLISH to every node over its bus: subscribing on one
                // seed hears every instance's invalidations.
                let listen_url = if crate::cache::is_cluster(redis_url) {
                    crate::cache::cluster::seed_urls(redis_url)?.swap_remove(0)
                } else {
                    redis_url.to_string()
                };
                crate::l1::connect(
                    l1.clone(),
                    spec.invalidate,
                    &listen_url,
                    redis_tls,
                    prefix.clone(),
                    run.abort.clone(),
                )
                .await?;
                instance = instance.with_l1(l1);
            }
            instances.push(Path::Builtin(Arc::new(instance)));
        }
        Ok(Driver::with_paths(sc, instances, (policy, run), shard))
    }

    /// The built-in app instances (none when the run drives an app under test).
    fn builtin_instances(&self) -> Vec<Arc<Instance>> {
        self.paths
            .iter()
            .filter_map(|p| match p {
                Path::Builtin(i) => Some(i.clone()),
                Path::Http(_) => None,
            })
            .collect()
    }

    /// Drive the app under test over HTTP instead of built-in instances.
    pub fn for_target(sc: &Scenario, target: Arc<HttpTarget>) -> Driver {
        Driver::with_paths(sc, vec![Path::Http(target)], plan(sc), None)
    }

    fn with_paths(
        sc: &Scenario,
        paths: Vec<Path>,
        (policy, run): (RunPolicy, Arc<RunState>),
        shard: Option<ShardSpec>,
    ) -> Driver {
        Driver {
            sc: sc.clone(),
            paths,
            policy,
            run,
            recorder: Arc::new(Recorder::default()),
            window: tokio::sync::watch::Sender::new(None),
            tally: Arc::new(Tally::default()),
            shard,
            start_at_ms: None,
            shed_live: Arc::new(AtomicU64::new(0)),
            export: None,
        }
    }

    /// Start the traffic at this Unix ms (every shard of a run gives the same).
    pub fn start_at(&mut self, unix_ms: u64) {
        self.start_at_ms = Some(unix_ms);
    }

    /// Feed these live metrics while the run goes, and its final totals at the end.
    pub fn export(&mut self, export: Export) {
        self.export = Some(export);
    }

    /// The run's counters and load tracker, for the fault schedule.
    pub fn gauges(&self) -> crate::metrics::Gauges {
        crate::metrics::Gauges {
            counters: self.run.counters.clone(),
            loads: self.run.loads.clone(),
        }
    }

    /// Tells when the measured window of the next `run` starts, as soon as it is fixed.
    pub fn window_start(&self) -> tokio::sync::watch::Receiver<Option<Instant>> {
        self.window.subscribe()
    }

    /// Drive the traffic and collect the figures.
    pub async fn run(&self, shutdown: CancellationToken, live: Live) -> Result<Raw> {
        let sc = &self.sc;
        let (usage_before, t0) = (crate::metrics::usage(), Instant::now());
        let lead = Duration::from_millis(20);
        let (start, started_at_ms) = match self.start_at_ms {
            // The agreed wall-clock instant, on this process's monotonic clock.
            Some(at) => {
                let (now, now_ms) = (Instant::now(), instance::now_ms());
                (now + Duration::from_millis(at.saturating_sub(now_ms)), at)
            }
            None => (
                Instant::now() + lead,
                instance::now_ms() + lead.as_millis() as u64,
            ),
        };
        let window = Window {
            start,
            measure: start + sc.warmup.0,
            end: start + sc.warmup.0 + sc.duration.0,
        };
        self.run.loads.open_window(window.measure);
        self.run.cost.open_window(window.measure);
        self.tally.open(
            window.measure,
            sc.duration.0,
            sc.interval.0,
            sc.goodput_within.0,
        );
        self.run.window_end_ms.store(
            started_at_ms + (sc.warmup.0 + sc.duration.0).as_millis() as u64,
            Relaxed,
        );
        self.window.send_replace(Some(window.measure));
        let ticker = timeline::spawn(
            self.run.clone(),
            self.recorder.clone(),
            sc.interval.0,
            window,
            shutdown.clone(),
            live,
            self.export
                .clone()
                .map(|e| timeline::Feed::new(e, self.shed_live.clone())),
        );
        // A replay's reader thread starts now, ahead of the window's start by the lead.
        let (read_feed, write_feed) = match &sc.trace {
            Some(t) => {
                let f = crate::replay::spawn(
                    t,
                    sc.value_size as u32,
                    crate::stats::derive_seed(sc.seed, crate::stats::Purpose::Arrivals, 1),
                )
                .map_err(anyhow::Error::msg)?;
                (Some(f.reads), f.writes)
            }
            None => (None, None),
        };
        let writer = writes::spawn(self, window, &shutdown, write_feed)?;
        let rewarm = rewarm::spawn(self, window, &shutdown);
        let traffic = match sc.load {
            LoadShape::Open { rps, arrival } => {
                open_loop::run(self, rps, arrival, window, &shutdown, read_feed).await?
            }
            LoadShape::Closed { clients } => {
                closed_loop::run(self, clients, window, &shutdown).await?
            }
        };
        if let Some(w) = writer {
            let _ = w.await;
        }
        let rewarm_runs = match rewarm {
            Some(r) => r.await.unwrap_or(0),
            None => 0,
        };
        if let Some(w) = &self.run.writes {
            writes::drain(w, drain_limit(&shutdown)).await;
        }
        instance::drain_refreshes(&self.run, Duration::from_secs(5)).await;
        // Whatever is still running now (a refresh stuck on a dead server) ends with the run.
        self.run.abort.cancel();
        let (usage_after, wall) = (crate::metrics::usage(), t0.elapsed());
        let interrupted = shutdown.is_cancelled();
        let ticked = ticker.await.ok();
        let counters_at_measure = ticked
            .as_ref()
            .map_or_else(|| self.run.counters.snapshot(), |t| t.counters_at_measure);
        let mut timeline = ticked.map(|t| t.buckets).unwrap_or_default();
        // Requests in flight at the end of the window finish (or are abandoned) during the
        // drain: their figures go in one last bucket stamped when the drain ended, so the
        // timeline adds up to the totals.
        if let Some(b) = timeline::drain_bucket(&self.run, &self.recorder, window) {
            timeline.push(b);
        }
        // The bucket ending at t (a tick, a ms or two late) holds the requests due in the
        // interval before it: board slot round(t / interval) - 1. The drain's bucket, past
        // the window, holds none.
        let (iv_ms, window_ms) = (
            (sc.interval.0.as_millis() as u64).max(1),
            sc.duration.0.as_millis() as u64,
        );
        let mut last = None;
        for b in timeline
            .iter_mut()
            .filter(|b| b.t_ms <= window_ms + iv_ms / 2)
        {
            let slot = ((b.t_ms + iv_ms / 2) / iv_ms).checked_sub(1);
            if slot.is_none() || slot == last {
                continue;
            }
            last = slot;
            (b.goodput, b.retries) = self.tally.bucket(slot.unwrap_or_default() as usize);
        }
        // Retries sent after the window (during the drain) go in the last bucket, so the
        // timeline still adds up to the total.
        let placed: u64 = timeline.iter().map(|b| b.retries).sum();
        if let Some(b) = timeline.last_mut() {
            b.retries += self.tally.retries.load(Relaxed).saturating_sub(placed);
        }
        let totals = self.recorder.totals();
        let breaker = self
            .run
            .protect
            .events()
            .into_iter()
            .map(|e| BreakerEvent {
                at_ms: if e.at >= window.measure {
                    (e.at - window.measure).as_millis() as i64
                } else {
                    -((window.measure - e.at).as_millis() as i64)
                },
                instance: e.instance,
                from: e.from,
                to: e.to,
                reason: e.reason,
            })
            .collect();
        let counters = self.run.counters.snapshot() - counters_at_measure;
        let db = DbRaw::of(&self.run.loads);
        if let Some(e) = &self.export {
            e.finish(crate::exporter::Final {
                outcomes: totals.outcomes,
                db_calls: db.calls,
                shed: traffic.shed,
                redis_errors: counters.redis_errors,
                latency: &totals.latency,
            });
        }
        let tally = &self.tally;
        debug_assert_eq!(
            traffic.dispatched,
            tally.finished.load(Relaxed) + tally.abandoned.load(Relaxed),
            "every dispatched request is finished or abandoned"
        );
        Ok(Raw {
            totals,
            scheduled: traffic.scheduled,
            shed: traffic.shed,
            unsent: traffic.unsent,
            abandoned: tally.abandoned.load(Relaxed),
            warmup_requests: traffic.warmup,
            counters,
            db,
            cost: self.run.cost.sums(),
            timeline,
            breaker,
            interrupted,
            lag: traffic.lag,
            started_at_ms,
            key_digest: traffic.key_digest,
            cpu: usage_after.cpu.saturating_sub(usage_before.cpu),
            wall,
            window: Instant::now().saturating_duration_since(window.measure),
            peak_rss: usage_after.max_rss,
            writes: self.run.writes.as_ref().map(|w| WritesRaw {
                committed: w.committed.load(Relaxed),
                errors: w.errors.load(Relaxed),
                probed: w.probes.probed.load(Relaxed),
                left_wrong: w.probes.left_wrong.load(Relaxed),
                unprobed: w.probes.unprobed.load(Relaxed) + w.probes.pending.load(Relaxed),
                divergent_ms: w.probes.divergent_ms(&w.versions, Instant::now()),
                latency: w.latency(),
            }),
            goodput: tally.goodput.load(Relaxed),
            retries: tally.retries.load(Relaxed),
            rewarm_runs,
            rate_fallback: self
                .run
                .protect
                .rate_fallbacks
                .time_within(window.measure, Instant::now()),
        })
    }

    /// After a run with writes: the written keys whose cached version differs from the
    /// database's (None without writes).
    pub async fn divergence(
        &self,
        db: &Db,
        admin: &crate::cache::Admin,
    ) -> Result<Option<Divergence>> {
        match &self.run.writes {
            Some(w) => Ok(Some(writes::divergence(w, db, admin).await?)),
            None => Ok(None),
        }
    }
}

/// The run's policy, from the scenario (the benchmark switches from the environment), and
/// its state before traffic: the driver allocates and wires, it derives nothing.
fn plan(sc: &Scenario) -> (RunPolicy, Arc<RunState>) {
    let policy = policy::of(sc, Bench::from_env());
    let run = Arc::new(RunState::new(&policy));
    (policy, run)
}

/// The instants that cut a run: traffic starts, the measured window opens, it closes.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    start: Instant,
    measure: Instant,
    end: Instant,
}

/// How long the drain may take once traffic stops: requests still in flight then are
/// abandoned. Shorter once the user asked to stop.
fn drain_limit(shutdown: &CancellationToken) -> Duration {
    if shutdown.is_cancelled() {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(30)
    }
}
