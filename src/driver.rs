//! The run itself: build the app instances, warm the cache, drive open- or closed-loop traffic
//! through them, keep the timeline, and stop cleanly on the shutdown signal. Returns raw
//! figures; [`crate::app`] turns them into a result.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cache::Cache;
use crate::instance::{self, Instance, Shared};
use crate::live::Live;
use crate::metrics::{Counters, CountersSnapshot, LoadKind, LoadTracker, Recorder, Totals};
use crate::origin::Db;
use crate::pacer::{self, Pacer};
use crate::results::Bucket;
use crate::scenario::{LoadShape, Scenario};
use crate::strategy::{freshness, lock};
use crate::workload::{KeySampler, Schedule, combine_digests};

/// What the traffic produced, before it is shaped into a result.
pub struct Raw {
    pub totals: Totals,
    pub scheduled: u64,
    pub shed: u64,
    /// Measured requests dispatched but never finished (still in flight at the end).
    pub abandoned: u64,
    pub warmup_requests: u64,
    pub counters: CountersSnapshot,
    pub calls_measured: u64,
    pub warm_loads: u64,
    pub warmup_calls: u64,
    pub peak_concurrent: u64,
    pub peak_herd: u64,
    pub redundant: u64,
    pub timeline: Vec<Bucket>,
    pub interrupted: bool,
    pub max_lag: Duration,
    pub started_at_ms: u64,
    /// Fingerprint of the key draws and how many ids it covers (see [`KeySampler::digest`]).
    pub key_digest: (u64, u64),
    /// CPU the whole process used from the start of traffic to the end of the drain.
    pub cpu: Duration,
    /// Wall-clock time of that same window.
    pub wall: Duration,
    /// Peak resident set size of the process, bytes.
    pub peak_rss: u64,
}

pub struct Driver {
    sc: Scenario,
    instances: Vec<Arc<Instance>>,
    shared: Arc<Shared>,
    recorder: Arc<Recorder>,
    /// When the measured window starts, once `run` has fixed it (the fault schedule counts from it).
    window: tokio::sync::watch::Sender<Option<Instant>>,
    /// Set by the loop that drew the keys: (digest, ids covered).
    key_digest: std::sync::Mutex<(u64, u64)>,
}

/// One instance's share of the open loop. Each request is its own task (no worker pool: an
/// idle pool costs memory and a shared channel costs a lock and an allocation per request).
struct Lane {
    inst: Arc<Instance>,
    /// Requests started and not finished: being handled or waiting for a permit.
    inflight: AtomicU64,
    /// `max_inflight` permits when a backlog may queue behind them; None without a backlog
    /// (the in-flight cap alone then bounds the requests handled at once).
    permits: Option<tokio::sync::Semaphore>,
    recorder: Arc<Recorder>,
    /// Measured requests finished.
    finished: AtomicU64,
}

impl Lane {
    /// Serve one request scheduled at `scheduled`; latency counts from then, service time
    /// from when it got a permit.
    async fn serve(self: Arc<Lane>, id: u64, scheduled: Instant, measured: bool) {
        let _permit = match &self.permits {
            Some(p) => p.acquire().await.ok(),
            None => None,
        };
        let began = Instant::now();
        let outcome = self.inst.handle(id).await;
        let done = Instant::now();
        if measured {
            self.recorder.record(
                outcome,
                (done - scheduled).as_micros() as u64,
                (done - began).as_micros() as u64,
            );
            self.finished.fetch_add(1, Relaxed);
        }
        // Last, so that no request is in flight once everything it counts has been counted.
        self.inflight.fetch_sub(1, Relaxed);
    }
}

impl Driver {
    /// Connect every app instance to Redis and Postgres.
    pub async fn build(
        sc: &Scenario,
        redis_url: &str,
        prefix: Arc<str>,
        db: &Db,
    ) -> Result<Driver> {
        let counters = Arc::new(Counters::default());
        let ms = |d: Duration| d.as_millis() as u64;
        let shared = Arc::new(Shared {
            freshness: freshness::Policy {
                kind: sc.strategy.freshness,
                ttl_ms: ms(sc.ttl.0),
                stale_ms: ms(sc.stale.0),
                beta: sc.beta,
                jitter: sc.jitter.0,
                negative_ttl_ms: sc.negative_ttl.map(|d| ms(d.0).max(1)),
            },
            coordination: sc.strategy.coordination,
            lock: lock::Settings {
                ttl_ms: ms(sc.lock_ttl.0).max(1),
                poll: sc.lock_poll.0,
                wait: sc.lock_wait.0,
                on_timeout: sc.lock_timeout_policy,
            },
            counters: counters.clone(),
            loads: LoadTracker::default(),
            refreshes_in_flight: AtomicU64::new(0),
        });
        let mut instances = Vec::with_capacity(sc.instances as usize);
        for _ in 0..sc.instances {
            let cache = Cache::open(
                redis_url,
                sc.redis_conns,
                sc.redis_timeout.0,
                prefix.clone(),
                counters.clone(),
            )
            .await?;
            let origin = db
                .origin(sc.db_pool, sc.load_cost(), sc.db_timeout.map(|d| d.0))
                .await?;
            instances.push(Arc::new(Instance::new(cache, origin, shared.clone())));
        }
        Ok(Driver {
            sc: sc.clone(),
            instances,
            shared,
            recorder: Arc::new(Recorder::default()),
            window: tokio::sync::watch::Sender::new(None),
            key_digest: std::sync::Mutex::new((0, 0)),
        })
    }

    /// What every instance shares: counters, the load tracker, Redis's health.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Tells when the measured window of the next `run` starts, as soon as it is fixed.
    pub fn window_start(&self) -> tokio::sync::watch::Receiver<Option<Instant>> {
        self.window.subscribe()
    }

    /// Load the `warm` most popular keys into the cache, `db_pool` at a time, before traffic.
    pub async fn warm(&self, shutdown: &CancellationToken) -> Result<()> {
        let k = self.sc.warm;
        if k == 0 {
            return Ok(());
        }
        let next = Arc::new(AtomicU64::new(1));
        let mut set = JoinSet::new();
        for w in 0..self.sc.db_pool.max(1) {
            let inst = self.instances[(w as usize) % self.instances.len()].clone();
            let next = next.clone();
            let stop = shutdown.clone();
            set.spawn(async move {
                loop {
                    let id = next.fetch_add(1, Relaxed);
                    if id > k || stop.is_cancelled() {
                        return Ok::<(), anyhow::Error>(());
                    }
                    inst.load_and_store(id, LoadKind::Warm)
                        .await
                        .map_err(|f| anyhow::anyhow!("warming key {id} failed: {f:?}"))?;
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        // Warming is not traffic: its parallel loads must not stand as the run's peak herd.
        self.shared.loads.reset_peaks();
        Ok(())
    }

    /// Drive the traffic and collect the figures.
    pub async fn run(&self, shutdown: CancellationToken, live: Live) -> Result<Raw> {
        let sc = &self.sc;
        let (usage_before, t0) = (crate::metrics::usage(), Instant::now());
        let lead = Duration::from_millis(20);
        let start = Instant::now() + lead;
        let started_at_ms = instance::now_ms() + lead.as_millis() as u64;
        let measure_start = start + sc.warmup.0;
        let end = measure_start + sc.duration.0;
        self.window.send_replace(Some(measure_start));
        let loads = &self.shared.loads;
        let warm_loads = loads.warm_loads.load(Relaxed);
        let calls_before = loads.calls.load(Relaxed);

        // The timeline ticker: marks the start of the measured window, then one bucket per interval.
        let ticker = {
            let shared = self.shared.clone();
            let recorder = self.recorder.clone();
            let interval = sc.interval.0;
            let stop = shutdown.clone();
            let no_warmup = sc.warmup.0.is_zero();
            let mut live = live;
            tokio::spawn(async move {
                // Without a warm-up the window opens with the traffic: take the baseline now,
                // before any request can start a load, rather than race the first requests.
                let at_measure = if no_warmup {
                    (shared.counters.snapshot(), shared.loads.calls.load(Relaxed))
                } else {
                    tokio::time::sleep_until(measure_start.into()).await;
                    let at = (shared.counters.snapshot(), shared.loads.calls.load(Relaxed));
                    shared.loads.reset_peaks();
                    shared.loads.interval_calls.store(0, Relaxed);
                    recorder.take_interval(&mut Recorder::new_interval());
                    at
                };
                tokio::time::sleep_until(measure_start.into()).await;
                shared.counters.redis_health.take_bucket_up();
                let mut timeline =
                    Vec::with_capacity((sc_len(end - measure_start, interval)) as usize);
                let mut iv = Recorder::new_interval();
                let mut tick = measure_start;
                loop {
                    tick += interval;
                    let last = tick >= end;
                    let due = if last { end } else { tick };
                    tokio::select! {
                        _ = tokio::time::sleep_until(due.into()) => {}
                        _ = stop.cancelled() => {}
                    }
                    let now = Instant::now();
                    recorder.take_interval(&mut iv);
                    let db_calls = shared.loads.interval_calls.swap(0, Relaxed);
                    let b = bucket(
                        now.min(end) - measure_start,
                        &iv,
                        db_calls,
                        shared.counters.redis_health.take_bucket_up(),
                    );
                    live.tick(&b);
                    timeline.push(b);
                    if last || stop.is_cancelled() {
                        return (timeline, at_measure);
                    }
                }
            })
        };

        let (scheduled, shed, warmup_requests, dispatched, finished, max_lag) = match sc.load {
            LoadShape::Open { rps, arrival } => {
                self.open_loop(rps, arrival, start, measure_start, end, &shutdown)
                    .await?
            }
            LoadShape::Closed { clients } => {
                self.closed_loop(clients, start, measure_start, end, &shutdown)
                    .await?
            }
        };
        instance::drain_refreshes(&self.shared, Duration::from_secs(5)).await;
        let (usage_after, wall) = (crate::metrics::usage(), t0.elapsed());
        let interrupted = shutdown.is_cancelled();
        let (mut timeline, (counters_at_measure, calls_at_measure)) = match ticker.await {
            Ok(v) => v,
            // The window never opened (interrupted during warm-up): nothing was measured.
            Err(_) => (
                Vec::new(),
                (self.shared.counters.snapshot(), loads.calls.load(Relaxed)),
            ),
        };
        // Requests in flight at the end of the window finish during the drain: their figures
        // go in one last bucket stamped when the drain ended, so the timeline adds up to the totals.
        if !timeline.is_empty() {
            let mut iv = Recorder::new_interval();
            self.recorder.take_interval(&mut iv);
            let db_calls = self.shared.loads.interval_calls.swap(0, Relaxed);
            if iv.requests > 0 || db_calls > 0 {
                timeline.push(bucket(
                    Instant::now().saturating_duration_since(measure_start),
                    &iv,
                    db_calls,
                    self.shared.counters.redis_health.take_bucket_up(),
                ));
            }
        }
        let totals = self.recorder.totals();
        let abandoned = dispatched.saturating_sub(finished);
        Ok(Raw {
            totals,
            scheduled,
            shed,
            abandoned,
            warmup_requests,
            counters: self.shared.counters.snapshot() - counters_at_measure,
            calls_measured: loads.calls.load(Relaxed) - calls_at_measure,
            warm_loads,
            warmup_calls: calls_at_measure.saturating_sub(calls_before),
            peak_concurrent: loads.peak_concurrent.load(Relaxed),
            peak_herd: loads.peak_herd.load(Relaxed),
            redundant: loads.redundant.load(Relaxed),
            timeline,
            interrupted,
            max_lag,
            started_at_ms,
            key_digest: self.key_digest.lock().map_or((0, 0), |d| *d),
            cpu: usage_after.cpu.saturating_sub(usage_before.cpu),
            wall,
            peak_rss: usage_after.max_rss,
        })
    }

    /// Requests start on schedule whether or not earlier ones finished; latency counts from
    /// the scheduled time. Each instance has a pool of workers fed through a bounded channel;
    /// workers are spawned as demand grows, up to `max_inflight`; up to `backlog` more requests
    /// queue for a worker (their wait shows in latency, not in service time); beyond that
    /// requests are shed and counted.
    async fn open_loop(
        &self,
        rps: f64,
        arrival: crate::workload::Arrival,
        start: Instant,
        measure_start: Instant,
        end: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(u64, u64, u64, u64, u64, Duration)> {
        let sc = &self.sc;
        let n = self.instances.len();
        // Requests an instance holds at once: those being handled plus those queued for a permit.
        let cap = u64::from(sc.max_inflight) + u64::from(sc.backlog);
        let lanes: Vec<Arc<Lane>> = self
            .instances
            .iter()
            .map(|inst| {
                Arc::new(Lane {
                    inst: inst.clone(),
                    inflight: AtomicU64::new(0),
                    permits: (sc.backlog > 0)
                        .then(|| tokio::sync::Semaphore::new(sc.max_inflight as usize)),
                    recorder: self.recorder.clone(),
                    finished: AtomicU64::new(0),
                })
            })
            .collect();
        let mut keys = KeySampler::new(sc.keys, sc.zipf, sc.seed, sc.missing_ratio.0)
            .map_err(crate::error::UsageError)?;
        let mut schedule = Schedule::new(rps, arrival, sc.seed);
        let warmup_ns = (measure_start - start).as_nanos() as u64;
        let total_ns = (end - start).as_nanos() as u64;
        let (mut scheduled, mut shed, mut warmup, mut dispatched) = (0u64, 0u64, 0u64, 0u64);
        let mut max_lag = Duration::ZERO;
        let mut i = 0usize;
        // After a stall of the servers or the machine, up to `cap` requests per instance pile
        // up (a few KB each); give that memory back once they are done, so a long run's RSS
        // shows what it holds rather than its worst moment.
        let trimmer = tokio::spawn(async {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                let _ = tokio::task::spawn_blocking(crate::metrics::release_free_memory).await;
            }
        });
        let mut pacer = Pacer::new();
        // The last wake-up target and how many requests went out since the last await.
        let (mut woke_for, mut unyielded) = (start, 0u32);
        let mut batch = Batch(Vec::with_capacity(64));
        loop {
            let off = schedule.next_offset();
            if off >= total_ns {
                break;
            }
            let at = start + Duration::from_nanos(off);
            let now = Instant::now();
            if at > now {
                batch.send();
                // Requests due within MIN_GAP of the last wake-up go out together (late, and
                // measured so): bounds the wake-ups per second at high rates.
                woke_for = at.max(woke_for + pacer::MIN_GAP);
                unyielded = 0;
                tokio::select! {
                    _ = pacer.wait_until(woke_for) => {}
                    _ = shutdown.cancelled() => break,
                }
                max_lag = max_lag.max(Instant::now().saturating_duration_since(at));
            } else {
                max_lag = max_lag.max(now - at);
                if shutdown.is_cancelled() {
                    break;
                }
                // Behind schedule the loop never awaits: let this worker's other tasks (the
                // requests just dispatched, the Redis connections) run now and then.
                unyielded += 1;
                if unyielded % 64 == 0 {
                    batch.send();
                    tokio::task::yield_now().await;
                }
            }
            let id = keys.next_id();
            let measured = off >= warmup_ns;
            if measured {
                scheduled += 1;
            } else {
                warmup += 1;
            }
            let lane = &lanes[i % n];
            i += 1;
            if lane.inflight.load(Relaxed) >= cap {
                if measured {
                    shed += 1;
                }
                continue;
            }
            lane.inflight.fetch_add(1, Relaxed);
            if measured {
                dispatched += 1;
            }
            batch.push(lane.clone().serve(id, at, measured));
        }
        if let Ok(mut d) = self.key_digest.lock() {
            *d = keys.digest();
        }
        batch.send();
        let limit = if shutdown.is_cancelled() {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(30)
        };
        drain_lanes(&lanes, limit, shutdown).await;
        trimmer.abort();
        let finished = lanes.iter().map(|l| l.finished.load(Relaxed)).sum();
        Ok((scheduled, shed, warmup, dispatched, finished, max_lag))
    }

    /// Each client sends its next request when the last one returns; clients are spread over
    /// the instances and each draws keys from its own seeded stream.
    async fn closed_loop(
        &self,
        clients: u32,
        start: Instant,
        measure_start: Instant,
        end: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(u64, u64, u64, u64, u64, Duration)> {
        let sc = &self.sc;
        let started = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(AtomicU64::new(0));
        let warmup = Arc::new(AtomicU64::new(0));
        // Each client's key digest, written while it is still growing (the first draws only).
        let digests: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
            (0..clients)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        );
        let mut workers = JoinSet::new();
        for c in 0..clients {
            let inst = self.instances[(c as usize) % self.instances.len()].clone();
            let mut keys = KeySampler::new(
                sc.keys,
                sc.zipf,
                sc.seed.wrapping_add(u64::from(c)),
                sc.missing_ratio.0,
            )
            .map_err(crate::error::UsageError)?;
            let (recorder, started, finished, warmup, stop, digests) = (
                self.recorder.clone(),
                started.clone(),
                finished.clone(),
                warmup.clone(),
                shutdown.clone(),
                digests.clone(),
            );
            workers.spawn(async move {
                tokio::time::sleep_until(start.into()).await;
                loop {
                    let began = Instant::now();
                    if began >= end || stop.is_cancelled() {
                        return;
                    }
                    let measured = began >= measure_start;
                    let id = keys.next_id();
                    let (digest, drawn) = keys.digest();
                    let slot = &digests[c as usize];
                    if drawn > slot.1.load(Relaxed) {
                        slot.0.store(digest, Relaxed);
                        slot.1.store(drawn, Relaxed);
                    }
                    if measured {
                        started.fetch_add(1, Relaxed);
                    } else {
                        warmup.fetch_add(1, Relaxed);
                    }
                    let outcome = inst.handle(id).await;
                    if measured {
                        let us = began.elapsed().as_micros() as u64;
                        recorder.record(outcome, us, us);
                        finished.fetch_add(1, Relaxed);
                    }
                }
            });
        }
        let limit = end.saturating_duration_since(Instant::now()) + Duration::from_secs(30);
        drain(&mut workers, limit, shutdown).await;
        if let Ok(mut d) = self.key_digest.lock() {
            *d = combine_digests(
                digests
                    .iter()
                    .map(|(d, n)| (d.load(Relaxed), n.load(Relaxed))),
            );
        }
        let s = started.load(Relaxed);
        Ok((
            s,
            0,
            warmup.load(Relaxed),
            s,
            finished.load(Relaxed),
            Duration::ZERO,
        ))
    }
}

/// One timeline entry: what the interval `iv` recorded, ending `at` into the measured window.
fn bucket(at: Duration, iv: &crate::metrics::Interval, db_calls: u64, redis_up: bool) -> Bucket {
    Bucket {
        t_ms: at.as_millis() as u64,
        requests: iv.requests,
        db_calls,
        hits: iv.hits,
        stale: iv.stale,
        errors: iv.errors,
        p99_ms: crate::metrics::pct_ms(&iv.latency, 0.99),
        redis_up,
    }
}

fn sc_len(window: Duration, interval: Duration) -> u64 {
    (window.as_nanos() / interval.as_nanos().max(1)) as u64 + 2
}

/// The requests due at one wake-up of the open-loop clock, started together in one task.
///
/// Each request sends its GET into its Redis connection's queue; the connection writes what
/// is queued when it next runs. Requests that are tasks of their own each run (and so each
/// write) one at a time, since tokio runs the task a request just woke next. Polled by one
/// task, they all queue their commands first and the connection writes them in one go.
struct Batch<F>(Vec<F>);

impl<F: Future<Output = ()> + Send + 'static> Batch<F> {
    fn push(&mut self, request: F) {
        self.0.push(request);
    }

    fn send(&mut self) {
        match self.0.len() {
            0 => {}
            1 => {
                if let Some(r) = self.0.pop() {
                    tokio::spawn(r);
                }
            }
            _ => {
                let mut set: FuturesUnordered<_> = self.0.drain(..).collect();
                tokio::spawn(async move { while set.next().await.is_some() {} });
            }
        }
    }
}

/// Wait until no open-loop request is in flight, at most `limit` (5 s once shutdown is
/// signalled). Requests still running then are abandoned (counted by the caller): their Redis
/// commands have deadlines, and the runtime drops them at exit.
async fn drain_lanes(lanes: &[Arc<Lane>], limit: Duration, shutdown: &CancellationToken) {
    let mut deadline = Instant::now() + limit;
    let mut graced = false;
    while lanes.iter().any(|l| l.inflight.load(Relaxed) > 0) {
        if shutdown.is_cancelled() && !graced {
            graced = true;
            deadline = deadline.min(Instant::now() + Duration::from_secs(5));
        }
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Wait for the workers, at most `limit` (5 s once shutdown is signalled), then abort the rest:
/// a run must end even when a server stopped answering.
async fn drain(workers: &mut JoinSet<()>, limit: Duration, shutdown: &CancellationToken) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            r = workers.join_next() => if r.is_none() { return },
            _ = tokio::time::sleep_until(deadline) => break,
            _ = shutdown.cancelled(), if deadline - tokio::time::Instant::now() > Duration::from_secs(5) => {
                // Interrupted: give in-flight requests a short grace period, not the full limit.
                let grace = tokio::time::Instant::now() + Duration::from_secs(5);
                while tokio::time::Instant::now() < grace {
                    tokio::select! {
                        r = workers.join_next() => if r.is_none() { return },
                        _ = tokio::time::sleep_until(grace) => break,
                    }
                }
                break;
            }
        }
    }
    workers.abort_all();
    while workers.join_next().await.is_some() {}
}
