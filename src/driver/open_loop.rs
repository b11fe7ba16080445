//! The open loop: requests start on a fixed (or Poisson) schedule whether or not earlier ones
//! finished, so a stalled system shows as latency counted from the scheduled time (no
//! coordinated omission), and requests beyond an instance's cap are shed and counted.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use super::{Driver, Path, Pending, Tally, Traffic, Window, drain_limit};

/// How long after the window closes the generator may still dispatch requests due in it.
const UNSENT_AFTER: Duration = Duration::from_millis(50);
use crate::fault::FaultKind;
use crate::metrics::Recorder;
use crate::pacer::{self, Pacer};
use crate::results::DispatchLag;
use crate::stats::{Purpose, derive_seed};
use crate::trace::replay::Feed;
use crate::workload::{Arrival, KeySampler, Schedule, Warp};

/// One instance's share of the open loop. Each request is its own task (no worker pool: an
/// idle pool costs memory and a shared channel costs a lock and an allocation per request).
struct Lane {
    path: Path,
    /// Its instance's own figures.
    by_instance: Arc<[crate::metrics::InstanceTally]>,
    index: usize,
    /// Requests started and not finished: being handled or waiting for a permit.
    inflight: AtomicU64,
    /// `max_inflight` permits when a backlog may queue behind them; None without a backlog
    /// (the in-flight cap alone then bounds the requests handled at once).
    permits: Option<tokio::sync::Semaphore>,
    recorder: Arc<Recorder>,
    tally: Arc<Tally>,
    /// The client's timeout and retries (None: it waits, once).
    client: Option<crate::workload::Client>,
    abort: CancellationToken,
}

/// An in-flight slot held by an attempt that may outlive the client's wait for it.
struct Slot(Arc<Lane>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Relaxed);
    }
}

/// Takes a request off its lane's in-flight count however it ends: finished, abandoned, or
/// a panic in the request path (which would otherwise leave the lane shedding for the rest of
/// the run).
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Lane {
    /// Serve one request scheduled at `scheduled` (its in-flight count already taken);
    /// latency counts from then, service time from when it got a permit.
    async fn serve(self: Arc<Lane>, id: u64, scheduled: Instant, measured: bool) {
        if let Some(client) = self.client {
            return self.serve_as_client(client, id, scheduled, measured).await;
        }
        // Declared first, dropped last: no request is in flight once it has been counted.
        let _in_flight = InFlight(&self.inflight);
        let _permit = match &self.permits {
            Some(p) => p.acquire().await.ok(),
            None => None,
        };
        let began = Instant::now();
        let pending = measured.then(|| {
            Pending::new(&self.recorder, &self.tally, scheduled, began)
                .on(&self.by_instance[self.index])
        });
        let (outcome, version) = self.path.handle(id, measured).await;
        if let Some(p) = pending {
            // Latency first: the staleness lookup (a commit-log shard lock, with writes) is
            // bookkeeping, not part of the request.
            p.finish(outcome);
            if let Some(st) = self.path.staleness(id, outcome, version, began) {
                self.recorder.record_stale_read(st);
            }
        }
    }
}

impl Lane {
    /// One request under the client's timeout and retries. Each attempt holds an in-flight
    /// slot (the first the one taken at dispatch; a retry takes one, whatever the cap, since
    /// it is the same request) until its work ends, which may be after the client gave up.
    async fn serve_as_client(
        self: Arc<Lane>,
        client: crate::workload::Client,
        id: u64,
        scheduled: Instant,
        measured: bool,
    ) {
        let began = Instant::now();
        let pending = measured.then(|| {
            Pending::new(&self.recorder, &self.tally, scheduled, began)
                .on(&self.by_instance[self.index])
        });
        let seed = id ^ (scheduled.elapsed().as_nanos() as u64).rotate_left(17);
        let attempt = |n: u32| {
            if n > 0 {
                self.inflight.fetch_add(1, Relaxed);
            }
            let slot = Slot(self.clone());
            async move {
                let lane = &slot.0;
                let _permit = match &lane.permits {
                    Some(p) => p.acquire().await.ok(),
                    None => None,
                };
                lane.path.handle(id, measured).await
            }
        };
        let (outcome, _) = super::with_retries(
            attempt,
            &client,
            scheduled,
            seed,
            &self.tally,
            measured,
            &self.abort,
        )
        .await;
        if let Some(p) = pending {
            p.finish(outcome);
        }
    }
}

/// One lane per path, each with its own in-flight count and permits.
fn lanes(d: &Driver) -> Vec<Arc<Lane>> {
    let sc = &d.sc;
    d.paths
        .iter()
        .enumerate()
        .map(|(index, path)| {
            Arc::new(Lane {
                path: path.clone(),
                by_instance: d.by_instance.clone(),
                index,
                inflight: AtomicU64::new(0),
                permits: (sc.backlog > 0)
                    .then(|| tokio::sync::Semaphore::new(sc.max_inflight as usize)),
                recorder: d.recorder.clone(),
                tally: d.tally.clone(),
                client: sc.client,
                abort: d.run.abort.clone(),
            })
        })
        .collect()
}

/// Where the requests' times and keys come from: a replayed trace, or the schedule at `rps`
/// (warped by the spikes; `warmup_ns` ahead of the window they count from) and the key
/// sampler.
fn source(
    d: &Driver,
    rps: f64,
    arrival: Arrival,
    warmup_ns: u64,
    trace: Option<Feed>,
) -> Result<Source> {
    let sc = &d.sc;
    if let Some(feed) = trace {
        return Ok(Source::Trace(feed));
    }
    // Spikes count from the measured window's start, like every fault.
    let spikes = sc
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::Spike)
        .map(|f| {
            (
                warmup_ns + f.at.0.as_nanos() as u64,
                f.down_for.0.as_nanos() as u64,
                f.shock_factor(),
            )
        })
        .collect();
    Ok(Source::Synthetic {
        schedule: Schedule::new(rps, arrival, derive_seed(sc.seed, Purpose::Arrivals, 0))
            .warped(Warp::new(spikes)),
        keys: KeySampler::new(
            sc.keys,
            sc.zipf,
            derive_seed(sc.seed, Purpose::Keys, 0),
            sc.missing_ratio.0,
        )
        .map(|k| k.with_missing(sc.missing_ids))
        .map_err(crate::error::UsageError)?,
    })
}

/// After a stall of the servers or the machine, up to the cap of requests per instance pile
/// up (a few KB each); give that memory back once they are done, so a long run's RSS shows
/// what it holds rather than its worst moment.
fn spawn_trimmer() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            let _ = tokio::task::spawn_blocking(crate::metrics::release_free_memory).await;
        }
    })
}

/// The open loop's pacing: when the next request is due it sleeps until then (requests due
/// within MIN_GAP of the last wake-up go out together), and behind schedule it yields now and
/// then; the lag of each request from its due time is recorded.
struct Pace {
    pacer: Pacer,
    /// The last wake-up target.
    woke_for: Instant,
    /// Requests sent since the last await.
    unyielded: u32,
    lag: Lag,
}

impl Pace {
    /// Wait for the request due `at` (`now` is when it was drawn); false when the run was
    /// cancelled meanwhile.
    async fn keep<F: Future<Output = ()> + Send + 'static>(
        &mut self,
        at: Instant,
        now: Instant,
        batch: &mut Batch<F>,
        shutdown: &CancellationToken,
    ) -> bool {
        if at > now {
            batch.send();
            // Requests due within MIN_GAP of the last wake-up go out together (late, and
            // measured so): bounds the wake-ups per second at high rates.
            self.woke_for = at.max(self.woke_for + pacer::MIN_GAP);
            self.unyielded = 0;
            tokio::select! {
                _ = self.pacer.wait_until(self.woke_for) => {}
                _ = shutdown.cancelled() => return false,
            }
            self.lag.note(Instant::now().saturating_duration_since(at));
        } else {
            self.lag.note(now - at);
            if shutdown.is_cancelled() {
                return false;
            }
            // Behind schedule the loop never awaits: let this worker's other tasks (the
            // requests just dispatched, the Redis connections) run now and then.
            self.unyielded += 1;
            if self.unyielded.is_multiple_of(64) {
                batch.send();
                tokio::task::yield_now().await;
            }
        }
        true
    }
}

/// Requests start on schedule whether or not earlier ones finished; latency counts from the
/// scheduled time. Each instance handles up to `max_inflight` requests at once; up to
/// `backlog` more queue for a permit (their wait shows in latency, not in service time);
/// beyond that requests are shed and counted.
pub(super) async fn run(
    d: &Driver,
    rps: f64,
    arrival: Arrival,
    w: Window,
    shutdown: &CancellationToken,
    trace: Option<Feed>,
) -> Result<Traffic> {
    let sc = &d.sc;
    let n = d.paths.len();
    // Requests an instance holds at once: those being handled plus those queued for a permit.
    let cap = u64::from(sc.max_inflight) + u64::from(sc.backlog);
    let lanes = lanes(d);
    let (start, measure_start, end) = (w.start, w.measure, w.end);
    let warmup_ns = (measure_start - start).as_nanos() as u64;
    let mut source = source(d, rps, arrival, warmup_ns, trace)?;
    let total_ns = (end - start).as_nanos() as u64;
    let (mut scheduled, mut shed, mut warmup, mut dispatched) = (0u64, 0u64, 0u64, 0u64);
    let mut i = 0usize;
    let trimmer = spawn_trimmer();
    let mut pace = Pace {
        pacer: Pacer::new(),
        woke_for: start,
        unyielded: 0,
        lag: Lag::new(),
    };
    let mut batch = Batch {
        requests: Vec::with_capacity(64),
        abort: d.run.abort.clone(),
    };
    // Past this the generator has fallen so far behind that what it has not dispatched yet
    // is never sent: counted, and the run ends on time whatever the rate.
    let give_up = end + UNSENT_AFTER;
    let mut unsent = 0u64;
    // Request j of the one unsharded schedule; a shard keeps those that are its own, and
    // draws every key so that its requests get the keys the unsharded run gives them.
    let mut j = 0u64;
    loop {
        let Some(off) = source.next_offset(total_ns).await else {
            break;
        };
        let this = j;
        j += 1;
        if d.shard.is_some_and(|s| !s.owns(this)) {
            let _ = source.next_id();
            continue;
        }
        let at = start + Duration::from_nanos(off);
        let now = Instant::now();
        if now >= give_up {
            // This request and every one after it in the window: counted, not drawn.
            let mut rest = 1 + source.count_until(total_ns).await;
            if let Some(s) = d.shard {
                rest = s.owned_in(this, rest);
            }
            unsent = rest;
            if off >= warmup_ns {
                scheduled += rest;
            }
            break;
        }
        if !pace.keep(at, now, &mut batch, shutdown).await {
            break;
        }
        let id = source.next_id();
        let measured = off >= warmup_ns;
        if measured {
            scheduled += 1;
        } else {
            warmup += 1;
        }
        let mut lane = &lanes[i % n];
        i += 1;
        if lane.path.down() {
            // As a load balancer would: the next instance that is up (or this one, if none).
            lane = (1..n)
                .map(|k| &lanes[(i - 1 + k) % n])
                .find(|l| !l.path.down())
                .unwrap_or(lane);
        }
        if lane.inflight.load(Relaxed) >= cap {
            if measured {
                shed += 1;
                d.shed_live.fetch_add(1, Relaxed);
            }
            continue;
        }
        lane.inflight.fetch_add(1, Relaxed);
        if measured {
            dispatched += 1;
        }
        batch.push(lane.clone().serve(id, at, measured));
    }
    let key_digest = source.digest();
    if let Source::Trace(feed) = &source
        && let Some(why) = feed.failure()
    {
        anyhow::bail!("the trace replay stopped short: {why}");
    }
    batch.send();
    drain(&lanes, &d.run.abort, drain_limit(shutdown), shutdown).await;
    trimmer.abort();
    Ok(Traffic {
        scheduled,
        shed,
        unsent,
        warmup,
        dispatched,
        lag: Some(pace.lag.figures()),
        key_digest,
    })
}

/// Where the schedule and the keys come from: the seeded workload, or a trace's replay.
enum Source {
    Synthetic {
        schedule: Schedule,
        keys: KeySampler,
    },
    /// The replay's next request, once its offset has been read (its id goes with it).
    Trace(Feed),
}

impl Source {
    /// The next request's offset from the start, or None past the end of the window (or of
    /// the trace).
    #[inline]
    async fn next_offset(&mut self, total_ns: u64) -> Option<u64> {
        match self {
            Source::Synthetic { schedule, .. } => {
                Some(schedule.next_offset()).filter(|o| *o < total_ns)
            }
            Source::Trace(feed) => feed
                .peek()
                .await
                .map(|d| d.off_ns)
                .filter(|o| *o < total_ns),
        }
    }

    /// The id of the request whose offset [`Source::next_offset`] just gave.
    #[inline]
    fn next_id(&mut self) -> u64 {
        match self {
            Source::Synthetic { keys, .. } => keys.next_id(),
            Source::Trace(feed) => feed.take().map_or(0, |d| d.id),
        }
    }

    /// How many more requests are due before `end_ns` (the generator gave up on them).
    async fn count_until(&mut self, end_ns: u64) -> u64 {
        match self {
            Source::Synthetic { schedule, .. } => schedule.count_until(end_ns),
            Source::Trace(feed) => {
                let _ = feed.take();
                let mut n = 0;
                while let Some(d) = feed.peek().await {
                    if d.off_ns >= end_ns {
                        break;
                    }
                    let _ = feed.take();
                    n += 1;
                }
                n
            }
        }
    }

    fn digest(&self) -> (u64, u64) {
        match self {
            Source::Synthetic { keys, .. } => keys.digest(),
            Source::Trace(feed) => feed.digest(),
        }
    }
}

/// How late the loop reached each request it dispatched or shed: a histogram of µs (two
/// significant digits, a few KB, no allocation per request) and the exact maximum.
struct Lag {
    us: hdrhistogram::Histogram<u64>,
    max: Duration,
}

impl Lag {
    fn new() -> Lag {
        Lag {
            // An hour at most: past that the run has long been given up (UNSENT_AFTER).
            us: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 2)
                .expect("valid histogram bounds"),
            max: Duration::ZERO,
        }
    }

    #[inline]
    fn note(&mut self, lag: Duration) {
        self.us.saturating_record(lag.as_micros() as u64);
        self.max = self.max.max(lag);
    }

    fn figures(&self) -> DispatchLag {
        let ms = |q: f64| {
            if self.us.is_empty() {
                0.0
            } else {
                self.us.value_at_quantile(q) as f64 / 1000.0
            }
        };
        DispatchLag {
            p50: ms(0.5),
            p99: ms(0.99),
            max: self.max.as_secs_f64() * 1000.0,
        }
    }
}

/// The requests due at one wake-up of the open-loop clock, started together in one task.
///
/// Each request sends its GET into its Redis connection's queue; the connection writes what
/// is queued when it next runs. Requests that are tasks of their own each run (and so each
/// write) one at a time, since tokio runs the task a request just woke next. Polled by one
/// task, they all queue their commands first and the connection writes them in one go.
/// Every task ends when the run's abort token is cancelled, dropping what it still holds.
struct Batch<F> {
    requests: Vec<F>,
    abort: CancellationToken,
}

impl<F: Future<Output = ()> + Send + 'static> Batch<F> {
    fn push(&mut self, request: F) {
        self.requests.push(request);
    }

    fn send(&mut self) {
        let abort = self.abort.clone();
        match self.requests.len() {
            0 => {}
            1 => {
                if let Some(r) = self.requests.pop() {
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = r => {}
                            _ = abort.cancelled() => {}
                        }
                    });
                }
            }
            _ => {
                let mut set: FuturesUnordered<_> = self.requests.drain(..).collect();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = async { while set.next().await.is_some() {} } => {}
                        _ = abort.cancelled() => {}
                    }
                });
            }
        }
    }
}

/// Wait until no request is in flight, at most `limit` (5 s once shutdown is signalled); then
/// abort what is left and wait for it to be dropped, so every request is counted once and
/// none keeps loading the database after its run.
async fn drain(
    lanes: &[Arc<Lane>],
    abort: &CancellationToken,
    limit: Duration,
    shutdown: &CancellationToken,
) {
    let busy = || lanes.iter().any(|l| l.inflight.load(Relaxed) > 0);
    let mut deadline = Instant::now() + limit;
    let mut graced = false;
    while busy() && Instant::now() < deadline {
        if shutdown.is_cancelled() && !graced {
            graced = true;
            deadline = deadline.min(Instant::now() + Duration::from_secs(5));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if busy() {
        abort.cancel();
        // A cancelled task drops its requests the next time it runs: at once, unless a worker
        // is stuck in a blocking call.
        let give_up = Instant::now() + Duration::from_secs(5);
        while busy() && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request that panics still leaves its lane's in-flight count (the count was taken off
    /// at the end of `serve` before, so one panic left the lane shedding for the rest of the
    /// run).
    #[tokio::test]
    async fn a_panicking_request_leaves_its_lane() {
        let inflight = Arc::new(AtomicU64::new(1));
        let count = inflight.clone();
        let task = tokio::spawn(async move {
            let _in_flight = InFlight(&count);
            tokio::task::yield_now().await;
            panic!("a bug in the request path");
        });
        assert!(task.await.is_err());
        assert_eq!(inflight.load(Relaxed), 0);
    }
}
