//! The run itself: build the app instances, warm the cache, drive open- or closed-loop traffic
//! through them ([`open_loop`], [`closed_loop`]), keep the timeline ([`timeline`]), and stop
//! cleanly: at the end every request is finished or abandoned, and counted exactly once.
//! Returns raw figures; the session turns them into a result.

mod closed_loop;
mod net;
mod open_loop;
mod raw;
mod request;
mod rewarm;
mod timeline;
mod warm;
mod writes;

pub use raw::{DbRaw, Raw, WritesRaw};
pub use writes::Divergence;

use request::{Pending, Tally, with_retries};

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
use crate::metrics::{CauseBook, InstanceTally, LoadTracker, Outcome, Recorder};
use crate::origin::Db;
use crate::protect::Guard;
use crate::results::{BreakerEvent, DispatchLag};
use crate::scenario::{LoadShape, Scenario, policy};
use crate::shard::ShardSpec;
use crate::strategy::policy::{Bench, RunPolicy};

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
            Path::Builtin(i) => {
                if measured {
                    i.note_request(id);
                }
                i.handle(id).await
            }
            // The app's versions are not seen: writes are refused with --target.
            Path::Http(h) => (Box::pin(h.get(id, measured)).await, 0),
        }
    }

    /// Whether the instance is down (crashed by holder-crash): its requests go elsewhere.
    #[inline]
    fn down(&self) -> bool {
        match self {
            Path::Builtin(i) => i.is_down(),
            Path::Http(_) => false,
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
    /// One per app instance (built-in), or one per process of the app under test.
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
    /// The network proxies between the instances and the servers (`--net-rtt`, network
    /// faults): stopped with the driver.
    proxies: Vec<net::Link>,
    /// Each path's own requests and latencies (`instances[]`), by position in `paths`.
    by_instance: Arc<[InstanceTally]>,
}

/// The app's Redis client: the library's behaviour (`--redis-client`) with the run's deadline
/// and connections (an explicit --redis-timeout or --redis-conns wins over the library's).
fn client_model(sc: &Scenario) -> crate::cache::ClientModel {
    let library = sc.redis_client.unwrap_or_default();
    let mut m = library.model();
    m.command_timeout = Some(sc.redis_timeout.0);
    m.conns = sc.redis_conns;
    if library == crate::cache::RedisClient::Stampede {
        // The tool's own connects within its deadline, never under 500 ms.
        m.connect_timeout = sc.redis_timeout.0.max(Duration::from_millis(500));
    }
    m
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
        let mut net = net::Net::for_run(sc, redis_url, db).await?;
        for i in ids {
            let (via_url, pg_via) = net.instance(i as usize).await?;
            let redis_url = via_url.as_deref().unwrap_or(redis_url);
            let cache = Cache::open_with(
                redis_url,
                redis_tls,
                &client_model(sc),
                prefix.clone(),
                counters.clone(),
                sc.cluster.read_from_replicas,
            )
            .await?
            .checking_values(sc.check_values)
            .in_process(policy.store == crate::strategy::EntryStore::Process);
            // Shards load through the ledger: their herds are counted on the server's clock
            // (and so does a run asked to, which `conform` sets beside an app under test).
            let origin = db
                .origin_with(
                    sc.db_pool,
                    sc.load_cost(),
                    sc.db_timeout.map(|d| d.0),
                    (shard.is_some() || sc.load_via_ledger, pg_via),
                )
                .await?;
            let guard = Guard::new(i, sc.db_limit, sc.breaker.as_ref())
                .with_rate(sc.db_rate.as_ref(), sc.instances);
            let mut instance = Instance::new(cache, origin, guard, policy, run.clone());
            if policy.crashable {
                instance = instance.mortal();
            }
            // Its in-process tier and the connection its invalidations come on.
            if let Some(spec) = sc.l1 {
                let l1 = Arc::new(L1::new(&spec, counters.clone()));
                // A cluster carries a PUBLISH to every node over its bus: subscribing on one
                // seed hears every instance's invalidations.
                let listen_url = if crate::cache::is_cluster(redis_url) {
                    crate::cluster::client::seed_urls(redis_url)?.swap_remove(0)
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
        let mut d = Driver::with_paths(sc, instances, (policy, run), shard);
        d.proxies = net.proxies;
        Ok(d)
    }

    /// The proxies the network faults switch, by instance and server.
    pub fn links(&self) -> Vec<crate::fault::chaos::NetLink> {
        self.proxies.iter().map(net::Link::for_faults).collect()
    }

    /// What the holder-crash fault strikes: the built-in instances and the run's board (None
    /// when the run has no such fault).
    pub fn holders(&self) -> Option<(Vec<Arc<Instance>>, Arc<instance::crash::Board>)> {
        let board = self.run.crash.clone()?;
        Some((self.builtin_instances(), board))
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

    /// Drive the app under test over HTTP instead of built-in instances: one path per
    /// process of it (`--app-cmd` with `--instances`), the requests spread over them as over
    /// the built-in instances.
    pub fn for_targets(sc: &Scenario, targets: &[Arc<HttpTarget>]) -> Driver {
        let paths = targets.iter().cloned().map(Path::Http).collect();
        Driver::with_paths(sc, paths, plan(sc), None)
    }

    fn with_paths(
        sc: &Scenario,
        paths: Vec<Path>,
        (policy, run): (RunPolicy, Arc<RunState>),
        shard: Option<ShardSpec>,
    ) -> Driver {
        let ids = match shard {
            Some(s) => s.instances(sc.instances),
            None => (0..paths.len() as u32).collect(),
        };
        Driver {
            sc: sc.clone(),
            by_instance: ids.into_iter().map(InstanceTally::new).collect(),
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
            proxies: Vec::new(),
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

    /// Fix the run's window (at the agreed start, or just ahead of now) and open every
    /// figure on it: the window and its start, unix ms.
    fn open_window(&self) -> (Window, u64) {
        let sc = &self.sc;
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
        (window, started_at_ms)
    }

    /// The breakers' transitions, timed from the measured window's start `measure`.
    fn breaker_events(&self, measure: Instant) -> Vec<BreakerEvent> {
        self.run
            .protect
            .events()
            .into_iter()
            .map(|e| BreakerEvent {
                at_ms: if e.at >= measure {
                    (e.at - measure).as_millis() as i64
                } else {
                    -((measure - e.at).as_millis() as i64)
                },
                instance: e.instance,
                from: e.from,
                to: e.to,
                reason: e.reason,
            })
            .collect()
    }

    /// Drive the traffic and collect the figures.
    pub async fn run(&self, shutdown: CancellationToken, live: Live) -> Result<Raw> {
        let sc = &self.sc;
        let (usage_before, t0) = (crate::metrics::usage(), Instant::now());
        let (window, started_at_ms) = self.open_window();
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
        let (read_feed, write_feed) = replay_feeds(sc)?;
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
        let cost_mark = ticked.as_ref().map(|t| t.cost_mark).unwrap_or_default();
        let mut timeline = ticked.map(|t| t.buckets).unwrap_or_default();
        // Requests in flight at the end of the window finish (or are abandoned) during the
        // drain: their figures go in one last bucket stamped when the drain ended, so the
        // timeline adds up to the totals.
        if let Some(b) = timeline::drain_bucket(&self.run, &self.recorder, window, cost_mark) {
            timeline.push(b);
        }
        self.tally
            .place(&mut timeline, sc.interval.0, sc.duration.0);
        let totals = self.recorder.totals();
        let breaker = self.breaker_events(window.measure);
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
            lease_max_ms: Some(self.run.load_times.lease_max_ms.load(Relaxed)).filter(|&m| m > 0),
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
            instances: self.by_instance.iter().map(InstanceTally::read).collect(),
            interrupted,
            lag: traffic.lag,
            started_at_ms,
            key_digest: traffic.key_digest,
            cpu: usage_after.cpu.saturating_sub(usage_before.cpu),
            wall,
            window: Instant::now().saturating_duration_since(window.measure),
            peak_rss: usage_after.max_rss,
            writes: self.run.writes.as_ref().map(|w| WritesRaw::of(w)),
            goodput: tally.goodput.load(Relaxed),
            retries: tally.retries.load(Relaxed),
            retry_after_waits: tally.retry_after_waits.load(Relaxed),
            retry_after_wait_ms_min: tally.retry_after_min_ms(),
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
    let run = Arc::new(RunState::new(&policy, load_tracker(sc, &policy)));
    (policy, run)
}

/// The run's load tracker: its book of the keys' histories (a steady start's absent keys
/// count as expired, a memory limit's early absences as evictions) and the hottest key it
/// watches for the herd model (rank 1; a trace's most requested id).
fn load_tracker(sc: &Scenario, policy: &RunPolicy) -> LoadTracker {
    let caches = policy.freshness.caches();
    let book = CauseBook::new(
        sc.keys,
        sc.start == crate::workload::Start::Steady,
        sc.memory_limit().is_some(),
        !caches,
    )
    .per_process(policy.store == crate::strategy::EntryStore::Process);
    let hot = match &sc.trace {
        Some(t) => t
            .index(sc.value_size as u32)
            .ok()
            .and_then(|i| {
                (0..i.requests.len())
                    .max_by_key(|&k| i.requests[k])
                    .map(|k| k as u64 + 1)
            })
            .unwrap_or(0),
        None => 1,
    };
    // With no cache every request loads: the model of a herd at a miss does not apply.
    LoadTracker::for_run(book, if caches { hot } else { 0 })
}

/// The instants that cut a run: traffic starts, the measured window opens, it closes.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    start: Instant,
    measure: Instant,
    end: Instant,
}

/// A replay's feeds of reads and writes (none without `--trace`): its reader thread starts
/// now, ahead of the window's start by the lead.
fn replay_feeds(
    sc: &Scenario,
) -> Result<(
    Option<crate::trace::replay::Feed>,
    Option<crate::trace::replay::Feed>,
)> {
    let Some(t) = &sc.trace else {
        return Ok((None, None));
    };
    let f = crate::trace::replay::spawn(
        t,
        sc.value_size as u32,
        crate::stats::derive_seed(sc.seed, crate::stats::Purpose::Arrivals, 1),
    )
    .map_err(anyhow::Error::msg)?;
    Ok((Some(f.reads), f.writes))
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
