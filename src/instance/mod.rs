//! One simulated app instance and the request path through it: read the cache, let the
//! freshness policy judge what was found, and when a load is needed let the coordination
//! decide who performs it. Each instance has its own Redis connections, DB pool and in-process
//! state (single-flight table, SWR refresh set); all instances share one Redis and one Postgres.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngExt;
use tokio_util::sync::CancellationToken;

use crate::cache::{Cache, CacheError, SetCheck};
use crate::metrics::{CostTimes, Counters, LoadTracker, Outcome, Writes, bump};
use crate::origin::{LoadFailure, Origin};
use crate::protect::{self, Guard, Refused};
use crate::strategy::Coordination;
use crate::strategy::envelope::Meta;
use crate::strategy::failsafe;
use crate::strategy::freshness::{self, Verdict};
use crate::strategy::invalidate::Invalidate;
use crate::strategy::lock::{self, LockTimeoutPolicy};
use crate::strategy::single_flight;

mod coordinate;
mod failsafe_path;
mod tier;

use coordinate::{Claim, Coordinator, Miss};

/// Longest a write's probe waits for its key to settle (the fills in flight at its commit
/// written back, no other write of the key in flight) before the write is counted unprobed.
const PROBE_SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// What every instance shares: the policy and the run-wide counters.
pub struct Shared {
    pub freshness: freshness::Policy,
    pub coordination: Coordination,
    /// Who performs a background refresh (the coordination, but for `laravel-flexible`).
    pub refresh_coordination: Coordination,
    /// `--fail-safe`, `--fail-safe-throttle`, `--soft-timeout`.
    pub fail_safe: failsafe::Settings,
    pub lock: lock::Settings,
    pub counters: Arc<Counters>,
    pub loads: Arc<LoadTracker>,
    /// The requests' Redis reads and the loads' write-backs, timed for the break-even.
    pub cost: CostTimes,
    /// Background refreshes still running (the driver waits for them at the end).
    pub refreshes_in_flight: AtomicU64,
    /// When the measured window closes, unix ms (0 until the driver fixes it): a write that
    /// will expire before then is counted, to tell whether the run saw expiries at all.
    pub window_end_ms: AtomicU64,
    /// Cancelled when the run is over: background refreshes still running then are dropped,
    /// so none outlives its run (in `compare`, none loads the next strategy's database).
    pub abort: CancellationToken,
    /// The breakers' clock and their log of transitions.
    pub protect: protect::Board,
    /// How long a lease token lives unless a SET consumes it (`--lease-ttl`), ms.
    pub lease_ttl_ms: u64,
    /// The writes and their commit log; None without writes (`--write-rps 0`), and then
    /// nothing on the request path looks at versions.
    pub writes: Option<Arc<Writes>>,
    /// What a write does to the cache after its commit.
    pub invalidate: Invalidate,
    /// How long a writer's version marker lives, ms (longer than any entry it guards).
    pub marker_px_ms: u64,
    /// Benchmarks only (`STAMPEDE_BENCH_NO_STALENESS`, read once per run): skip the stale-read
    /// lookup, so `scripts/bench` can measure what the bookkeeping costs a run with writes.
    /// The consistency figures are then wrong; never set it for a measurement.
    pub staleness_off: bool,
    /// Every instance's in-process tier (`--l1`), for the write probes; empty without one.
    pub tiers: Mutex<Vec<Arc<crate::l1::L1>>>,
}

impl Shared {
    /// Whether a reader's SET goes through the versioned check.
    fn versioned(&self) -> bool {
        self.writes.is_some() && self.invalidate == Invalidate::Versioned
    }
}

pub struct Instance {
    cache: Cache,
    origin: Origin,
    coord: Coordinator,
    /// `--db-limit` and `--breaker` in front of this instance's loads.
    guard: Guard,
    refreshing: Mutex<HashSet<u64>>,
    /// Keys whose load failed under `--fail-safe`, not tried again for the throttle.
    throttle: failsafe::Throttle,
    shared: Arc<Shared>,
    /// The in-process tier in front of Redis (`--l1`).
    l1: Option<Arc<crate::l1::L1>>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn now_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// What a cache read found.
enum Found {
    Entry(Meta),
    Absent,
}

/// How a request was served and the version of the row it served (0: none, or not known).
pub type Served = (Outcome, u64);

/// The outcome of a request whose load (its own or the one it waited for) ended in `r`: `ok`
/// when it succeeded; when a protection refused it, the stale value if the request holds one,
/// else `rejected`; an error otherwise.
fn outcome_of(r: Result<u64, LoadFailure>, ok: Outcome, stale: bool) -> Outcome {
    match r {
        Ok(_) => ok,
        Err(f) if f.refused() && stale => Outcome::Stale,
        Err(f) if f.refused() => Outcome::Rejected,
        Err(_) => Outcome::Error,
    }
}

/// The version a request whose load ended in `r` served: the loaded one, or the stale value's
/// when a protection refused the load and the request held one; 0 when it served nothing.
fn served_of(r: Result<u64, LoadFailure>, stale: Option<&Meta>) -> u64 {
    match (r, stale) {
        (Ok(v), _) => v,
        (Err(f), Some(m)) if f.refused() => m.version,
        _ => 0,
    }
}

/// [`outcome_of`] and [`served_of`] together; [`Instance::served`] adds the fail-safe.
fn served(r: Result<u64, LoadFailure>, ok: Outcome, stale: Option<&Meta>) -> Served {
    (outcome_of(r, ok, stale.is_some()), served_of(r, stale))
}

impl Instance {
    pub fn new(cache: Cache, origin: Origin, guard: Guard, shared: Arc<Shared>) -> Instance {
        Instance {
            cache,
            origin,
            coord: Coordinator::new(shared.coordination, shared.lock, shared.lease_ttl_ms)
                .with_refresh(shared.refresh_coordination),
            guard,
            refreshing: Mutex::new(HashSet::new()),
            throttle: failsafe::Throttle::default(),
            shared,
            l1: None,
        }
    }

    /// Read `id` from the cache; a Redis failure reads as absent (fail open).
    async fn read(&self, id: u64) -> Found {
        match self.cache.get(id).await {
            Ok(Some(bytes)) => Meta::decode(&bytes).map_or(Found::Absent, Found::Entry),
            Ok(None) | Err(_) => Found::Absent,
        }
    }

    /// Serve one request for item `id` ("GET /item/{id}"): how it was served and the version
    /// it served.
    ///
    /// The paths that load (miss, early recompute) are boxed: their futures (pool checkout,
    /// query) are ~2 KB, and an unboxed one would size every open-loop worker for them, hit
    /// path or idle alike, so memory would grow with the peak number of workers.
    pub async fn handle(self: &Arc<Self>, id: u64) -> Served {
        let sh = &self.shared;
        // No cache: the same load as a miss's, with nothing read before it or kept after.
        if !sh.freshness.caches() {
            return Box::pin(self.fill(id, None)).await;
        }
        let l1 = match self.l1_first(id) {
            Ok(served) => return served,
            Err(ticket) => ticket,
        };
        let began = Instant::now();
        let found = self.read(id).await;
        sh.cost.read(began);
        let meta = match found {
            Found::Entry(m) => m,
            Found::Absent => {
                drop(l1);
                bump(&sh.counters.cold_misses);
                return Box::pin(self.fill(id, None)).await;
            }
        };
        let u: f64 = 1.0 - rand::rng().random::<f64>(); // (0, 1]
        match sh.freshness.judge(&meta, now_ms_f64(), u) {
            Verdict::Fresh => {
                if meta.negative {
                    bump(&sh.counters.negative_hits);
                }
                if let Some(t) = l1 {
                    t.store(&meta);
                }
                (Outcome::Hit, meta.version)
            }
            Verdict::Stale => {
                self.refresh_behind(id, meta.computed_at_ms);
                (Outcome::Stale, meta.version)
            }
            Verdict::RefreshAhead => {
                if self.refresh_behind(id, meta.computed_at_ms) {
                    bump(&sh.counters.eager_refreshes);
                }
                (Outcome::Hit, meta.version)
            }
            Verdict::Recompute { lead_ms } => {
                Box::pin(self.recompute_early(id, meta, lead_ms)).await
            }
            Verdict::Race => Box::pin(self.race(id, meta)).await,
            // Kept past its expiry only to be served if the load fails (--fail-safe) or a wait
            // for the lock runs out.
            Verdict::Expired => Box::pin(self.expired(id, meta)).await,
        }
    }

    /// How long a newer version than `served` had been committed when a read of `id` that
    /// began at `began` served it; None when the read was not stale (always without writes).
    /// Counted apart too when the in-process tier served it (`outcome` l1-hit).
    #[inline]
    pub fn staleness(&self, id: u64, outcome: Outcome, served: u64, began: Instant) -> Option<u64> {
        if self.shared.staleness_off {
            return None;
        }
        let st = self
            .shared
            .writes
            .as_ref()?
            .versions
            .staleness(id, served, began);
        if st.is_some() && outcome == Outcome::L1Hit {
            bump(&self.shared.counters.l1_stale_reads);
        }
        st
    }

    /// XFetch drew this reader to recompute ahead of expiry. The current value is still valid,
    /// so when the coordination finds someone else already recomputing, serve it.
    async fn recompute_early(&self, id: u64, seen: Meta, lead_ms: f64) -> Served {
        let sh = &self.shared;
        let Some(claim) = self
            .coord
            .early(&self.cache, &sh.counters, id, seen.version)
            .await
        else {
            return (Outcome::Hit, seen.version);
        };
        // Holding the lock, look again: another instance may have recomputed it just now
        // (its value is newer than the one that drew us), and a second load would be wasted.
        if claim.locked()
            && let Found::Entry(m) = self.read(id).await
            && m.computed_at_ms > seen.computed_at_ms
        {
            claim
                .release(&self.cache, &sh.counters, id, Ok(m.version))
                .await;
            return (Outcome::Hit, m.version);
        }
        bump(&sh.counters.early_recomputes);
        sh.counters
            .early_lead_us
            .fetch_add((lead_ms * 1000.0) as u64, Relaxed);
        let r = self.load_and_store(id, claim.lease_token()).await;
        claim.release(&self.cache, &sh.counters, id, r).await;
        // Refused by a protection: the value that drew us is still valid, serve it.
        if r.is_err_and(LoadFailure::refused) {
            return (Outcome::Hit, seen.version);
        }
        served(r, Outcome::Miss, Some(&seen))
    }

    /// The value is absent (or expired): get it loaded under the coordination. `stale` is a
    /// value kept past its expiry, served if a wait runs out under `--lock-timeout-policy stale`.
    async fn fill(&self, id: u64, stale: Option<Meta>) -> Served {
        let sh = &self.shared;
        match self.coord.miss(&self.cache, &sh.counters, id).await {
            Miss::Load(claim) | Miss::Unavailable(claim) => {
                let r = self.load_and_store(id, claim.lease_token()).await;
                claim.release(&self.cache, &sh.counters, id, r).await;
                self.served(id, r, Outcome::Miss, stale.as_ref())
            }
            Miss::LoadLocked(claim) => self.load_locked(id, claim, stale.as_ref()).await,
            Miss::Follow(rx) => self.follow(id, rx, stale).await,
            Miss::WaitForLock { claim, token } => self.wait_for_lock(id, claim, token, stale).await,
        }
    }

    /// Holding the lock (or the lease): load unless another instance filled the key between
    /// our miss and our token. `stale`: the value the request holds, served if the load is
    /// refused.
    async fn load_locked(&self, id: u64, claim: Claim<'_>, stale: Option<&Meta>) -> Served {
        let sh = &self.shared;
        if let Found::Entry(m) = self.read(id).await
            && m.soft_expiry_ms as f64 > now_ms_f64()
        {
            claim
                .release(&self.cache, &sh.counters, id, Ok(m.version))
                .await;
            return (Outcome::Hit, m.version);
        }
        let r = self.load_and_store(id, claim.lease_token()).await;
        claim.release(&self.cache, &sh.counters, id, r).await;
        self.served(id, r, Outcome::Miss, stale)
    }

    /// Another request of this instance is loading `id`: wait for it, at most `--lock-wait`
    /// (the leader's load has no bound without `--db-timeout`, its followers do).
    async fn follow(
        &self,
        id: u64,
        rx: tokio::sync::watch::Receiver<single_flight::Slot>,
        stale: Option<Meta>,
    ) -> Served {
        match tokio::time::timeout(self.shared.lock.wait, single_flight::follow(rx)).await {
            Ok(r) => self.served(id, r, Outcome::Waited, stale.as_ref()),
            Err(_) => {
                let (s, _) = self.wait_ran_out(id, stale).await;
                s
            }
        }
    }

    /// The wait for another loader ran out: apply `--lock-timeout-policy`. How the request
    /// was served, and what this request's own followers are told.
    async fn wait_ran_out(
        &self,
        id: u64,
        stale: Option<Meta>,
    ) -> (Served, Result<u64, LoadFailure>) {
        let sh = &self.shared;
        bump(&sh.counters.lock_timeouts);
        match (sh.lock.on_timeout, stale) {
            (LockTimeoutPolicy::Error, _) => ((Outcome::Error, 0), Err(LoadFailure::LockTimeout)),
            (LockTimeoutPolicy::Stale, Some(m)) => ((Outcome::Stale, m.version), Ok(m.version)),
            (_, stale) => {
                // No token of our own: under a lease the fallback serves its load unstored.
                let r = self.load_and_store(id, None).await;
                (self.served(id, r, Outcome::Fallback, stale.as_ref()), r)
            }
        }
    }

    /// Mutex or lease coordination, token held elsewhere: poll the cache until the value
    /// appears, take the token over if it frees, or give up at `--lock-wait`.
    async fn wait_for_lock(
        &self,
        id: u64,
        claim: Claim<'_>,
        token: u64,
        stale: Option<Meta>,
    ) -> Served {
        let sh = &self.shared;
        let deadline = Instant::now() + sh.lock.wait;
        let mut claim = claim;
        loop {
            let now = Instant::now();
            if now >= deadline {
                let (served, shared) = self.wait_ran_out(id, stale).await;
                claim.release(&self.cache, &sh.counters, id, shared).await;
                return served;
            }
            let pause = sh
                .lock
                .poll_pause(rand::rng().random::<f64>())
                .min(deadline - now);
            tokio::time::sleep(pause).await;
            if let Found::Entry(m) = self.read(id).await
                && m.soft_expiry_ms as f64 > now_ms_f64()
            {
                claim
                    .release(&self.cache, &sh.counters, id, Ok(m.version))
                    .await;
                return (Outcome::Waited, m.version);
            }
            // Still nothing: the holder may have died or its lease run out; try to take over.
            claim = match self
                .coord
                .take_over(&self.cache, &sh.counters, id, token, claim)
                .await
            {
                Ok(c) => return self.load_locked(id, c, stale.as_ref()).await,
                Err(c) => c,
            };
        }
    }

    /// SWR, eager refresh: start one background refresh of `id` in this instance unless one
    /// is running (false then); `seen_at` is when the value that called for it was computed.
    fn refresh_behind(self: &Arc<Self>, id: u64, seen_at: u64) -> bool {
        {
            let mut r = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
            if !r.insert(id) {
                return false;
            }
        }
        let me = Arc::clone(self);
        self.shared.refreshes_in_flight.fetch_add(1, Relaxed);
        let abort = self.shared.abort.clone();
        tokio::spawn(async move {
            // Clears the refresh mark even if the refresh panics or the task is cancelled.
            struct Done<'a>(&'a Instance, u64);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0
                        .refreshing
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&self.1);
                    self.0.shared.refreshes_in_flight.fetch_sub(1, Relaxed);
                }
            }
            let _done = Done(&me, id);
            tokio::select! {
                _ = me.refresh(id, seen_at) => {}
                _ = abort.cancelled() => {}
            }
        });
        true
    }

    async fn refresh(&self, id: u64, seen_at: u64) {
        let sh = &self.shared;
        let Some(claim) = self.coord.refresh(&self.cache, &sh.counters, id).await else {
            bump(&sh.counters.refreshes_skipped);
            return;
        };
        // Holding the lock: the instance that refreshed before us may have released just now
        // (a value computed after the one that called for this refresh).
        if claim.locked()
            && let Found::Entry(m) = self.read(id).await
            && m.computed_at_ms > seen_at
        {
            bump(&sh.counters.refreshes_skipped);
            claim
                .release(&self.cache, &sh.counters, id, Ok(m.version))
                .await;
            return;
        }
        bump(&sh.counters.background_refreshes);
        let r = self.load_and_store(id, claim.lease_token()).await;
        claim.release(&self.cache, &sh.counters, id, r).await;
    }

    /// One load of `id` (a wait for a connection, then one DB call), and the result written
    /// back with the freshness policy's TTLs: the version loaded (0 for a missing item).
    /// Refused without reaching the database when `--db-limit` loads are in flight, the
    /// breaker is open or `--db-rate` has no token left. Under a lease the SET presents `lease`; with versioned invalidation
    /// it is refused when a newer version is cached or announced (counted in
    /// `stale_sets_refused`; the request still serves what it loaded).
    pub async fn load_and_store(&self, id: u64, lease: Option<u64>) -> Result<u64, LoadFailure> {
        self.load_and_store_as(id, lease, false).await
    }

    /// Re-warm `id` (`--rewarm-every`): load it and write it back with a full TTL whether or
    /// not its entry is still fresh, under the coordination as a background refresh is (a key
    /// whose lock or lease another loader holds is left to it). Through the same protections
    /// as any load: a refused one keeps the entry there is.
    pub async fn rewarm(&self, id: u64) {
        let sh = &self.shared;
        let Some(claim) = self.coord.refresh(&self.cache, &sh.counters, id).await else {
            return;
        };
        let r = self.load_and_store_as(id, claim.lease_token(), true).await;
        claim.release(&self.cache, &sh.counters, id, r).await;
    }

    /// [`Instance::load_and_store`]; `rewarm`: a load of the re-warm job.
    async fn load_and_store_as(
        &self,
        id: u64,
        lease: Option<u64>,
        rewarm: bool,
    ) -> Result<u64, LoadFailure> {
        let sh = &self.shared;
        let global = |ask| async move { self.cache.rate_take(ask).await.ok() };
        let permit = self
            .guard
            .admit(&sh.protect, global)
            .await
            .map_err(|r| match r {
                Refused::Limit => {
                    bump(&sh.counters.limit_refusals);
                    LoadFailure::Limited
                }
                Refused::Breaker => {
                    bump(&sh.counters.breaker_refusals);
                    LoadFailure::BreakerOpen
                }
                Refused::Rate => {
                    bump(&sh.counters.rate_refusals);
                    LoadFailure::RateLimited
                }
            })?;
        // Taken before the load: an invalidation that arrives while it runs keeps what it
        // read out of the tier.
        let l1 = self.l1_load(id).filter(|_| sh.freshness.caches());
        let started = Instant::now();
        // With writes, the fill (this load and its write-back) is in flight for the write
        // probes: one that read the row before a commit may write it back after the
        // invalidation, and a probe waits for it.
        let _fill = sh.writes.as_ref().map(|w| w.probes.in_flight.fill(id));
        let loaded = {
            let load = sh.loads.begin_as(id, rewarm);
            self.origin.load(id, &load).await
        };
        if loaded.is_ok() {
            sh.counters.pg_health.note_ok();
        }
        let took = started.elapsed();
        // The place in the bulkhead is freed before the write-back: it bounds loads, not Redis.
        permit.finish(loaded.is_err(), took);
        // XFetch's delta is the whole load as the app waits for it, pool wait included: that
        // is how long a recompute keeps the value from being refreshed (docs/design.md).
        let delta_us = took.as_micros().min(u128::from(u32::MAX)) as u32;
        if !sh.freshness.caches() {
            return loaded.map(|row| row.map_or(0, |r| r.version()));
        }
        let now = now_ms();
        let write_back = Instant::now();
        let (written, version, cached) = match loaded {
            Ok(Some(row)) => {
                let version = row.version();
                let (meta, px) =
                    sh.freshness
                        .stamp(now, delta_us, version, rand::rng().random::<f64>());
                if meta.soft_expiry_ms < sh.window_end_ms.load(Relaxed) {
                    bump(&sh.counters.expiring_writes);
                }
                let value = meta.encode(row.payload());
                let check = SetCheck {
                    lease: if sh.coordination.lease() { lease } else { None },
                    versioned: sh.versioned(),
                };
                // Whether the value was stored in Redis: only then does the tier keep it.
                let (written, stored) = if check.lease.is_some() || check.versioned {
                    match self.cache.set_checked(id, &value, px, version, check).await {
                        Ok(false) => {
                            bump(&sh.counters.stale_sets_refused);
                            (Ok(()), false)
                        }
                        r => (r.map(|_| ()), true),
                    }
                } else if sh.coordination.lease() {
                    // Under a lease, no token, no SET (a waiter's fallback, a load while Redis
                    // was unreachable): the request serves what it loaded without storing
                    // it, so a write's delete is never undone by a load that held no lease.
                    (Ok(()), false)
                } else {
                    (self.cache.set(id, &value, px).await, true)
                };
                let cached = (stored && written.is_ok()).then_some(meta);
                (written, version, cached)
            }
            Ok(None) => match sh.freshness.stamp_negative(now, delta_us) {
                Some((meta, px)) => {
                    let written = self.cache.set(id, &meta.encode(&[]), px).await;
                    let cached = written.is_ok().then_some(meta);
                    (written, 0, cached)
                }
                None => (Ok(()), 0, None),
            },
            Err(f) => return Err(f),
        };
        sh.cost.write_back(write_back);
        // A load writes both tiers (what it stored in Redis).
        if let (Some(t), Some(m)) = (l1, cached) {
            t.store(&m);
        }
        // A failed write-back still served the request (fail open); it was counted in `cache`.
        let _: Result<(), CacheError> = written;
        Ok(version)
    }

    /// One write of `id`, due at `due`: the UPDATE (its own transaction), the commit recorded
    /// in the run's commit log as soon as it is acknowledged, then the invalidation. A failed
    /// UPDATE is a write error; a failed or late invalidation is counted apart (the cache may
    /// keep the old version until its TTL). Under `--invalidate set|versioned` the entry it
    /// writes lives `ttl_ms` when given (a replayed trace's SET carries its own), else the
    /// run's TTL.
    pub async fn write(self: &Arc<Self>, id: u64, due: Instant, ttl_ms: Option<u64>) {
        let sh = &self.shared;
        let Some(w) = sh.writes.as_ref() else {
            return;
        };
        let started = Instant::now();
        let probes = &w.probes;
        probes.in_flight.write(id, true);
        // Taken off however the write ends (its task may be cancelled at the end of a run).
        struct Writing<'a>(&'a crate::metrics::Probes, u64);
        impl Drop for Writing<'_> {
            fn drop(&mut self) {
                self.0.in_flight.write(self.1, false);
            }
        }
        let writing = Writing(probes, id);
        let deleted_first = if sh.invalidate == Invalidate::DeleteFirst && sh.freshness.caches() {
            Some(self.cache.delete(id).await)
        } else {
            None
        };
        let Some(row) = self.origin.write(id).await else {
            w.errors.fetch_add(1, Relaxed);
            w.record_latency(due.elapsed().as_micros() as u64);
            return;
        };
        let version = row.version();
        w.versions.commit(id, version, Instant::now());
        // The fills that may have read the row before this commit: the probe waits for them.
        let fills_at_commit = probes.in_flight.fills_of(id);
        w.note_committed();
        // No cache, nothing to invalidate or read back: the database is the only copy.
        if !sh.freshness.caches() {
            w.record_latency(due.elapsed().as_micros() as u64);
            return;
        }
        let invalidated = match sh.invalidate {
            Invalidate::Delete => self.cache.delete(id).await,
            Invalidate::DeleteFirst => deleted_first.unwrap_or(Ok(())),
            Invalidate::Set | Invalidate::Versioned => {
                let delta_us = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                let (meta, px) = match ttl_ms {
                    Some(t) => sh.freshness.stamp_at(now_ms(), t, t, delta_us, version),
                    None => {
                        sh.freshness
                            .stamp(now_ms(), delta_us, version, rand::rng().random::<f64>())
                    }
                };
                let versioned = sh.invalidate == Invalidate::Versioned;
                match self
                    .cache
                    .writer_set(
                        id,
                        &meta.encode(row.payload()),
                        px,
                        version,
                        versioned,
                        sh.marker_px_ms,
                    )
                    .await
                {
                    Ok(false) => {
                        bump(&sh.counters.stale_sets_refused);
                        Ok(())
                    }
                    r => r.map(|_| ()),
                }
            }
            Invalidate::None => Ok(()),
        };
        if invalidated.is_err() {
            bump(&sh.counters.invalidation_failures);
        }
        self.l1_after_write(id).await;
        w.record_latency(due.elapsed().as_micros() as u64);
        drop(writing);
        self.probe(id, fills_at_commit);
    }

    /// Read `id` back once it has settled after a write: every fill in flight at the
    /// commit has written back and no other write of the key is in flight. One GET, apart
    /// from the traffic (in no outcome or hit figure of the tool; Redis's INFO counts it). A
    /// fixed delay would miss the UPDATE-then-DEL race, whose stale write-back lands up to a
    /// load time after the DEL. Its own task, so the write's latency does not include it.
    fn probe(self: &Arc<Self>, id: u64, fills: Vec<u64>) {
        let Some(w) = self.shared.writes.clone() else {
            return;
        };
        let me = Arc::clone(self);
        let abort = self.shared.abort.clone();
        w.probes.pending.fetch_add(1, Relaxed);
        tokio::spawn(async move {
            struct Pending<'a>(&'a AtomicU64);
            impl Drop for Pending<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Relaxed);
                }
            }
            let _pending = Pending(&w.probes.pending);
            let p = &w.probes;
            // A key never settles under continuous overlapping writes: bounded, and such a
            // write is counted unprobed rather than guessed.
            let deadline = Instant::now() + PROBE_SETTLE_LIMIT;
            while !p.in_flight.settled(id, &fills, 0) {
                if Instant::now() >= deadline || abort.is_cancelled() {
                    p.unprobed.fetch_add(1, Relaxed);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let at = Instant::now();
            let committed = w.versions.last_committed(id);
            match me.cache.get(id).await {
                Ok(bytes) => {
                    let meta = bytes.as_deref().and_then(Meta::decode);
                    let mut cached = meta.filter(|m| !m.negative).map(|m| m.version);
                    let mut left_ms = meta.map_or(0, |m| m.hard_expiry_ms.saturating_sub(now_ms()));
                    // An instance's in-process tier holding an older version leaves the write
                    // wrong too (the oldest copy anywhere is what a reader may get).
                    if let Some((v, until)) = me.l1_probe(id).await
                        && cached.is_none_or(|c| v < c)
                    {
                        cached = Some(v);
                        left_ms = until.saturating_sub(now_ms());
                    }
                    p.record(&w.versions, id, committed, cached, left_ms, at);
                }
                Err(_) => {
                    p.unprobed.fetch_add(1, Relaxed);
                }
            }
        });
    }
}

/// Wait until background refreshes have finished, at most `limit`.
pub async fn drain_refreshes(shared: &Shared, limit: Duration) {
    let deadline = Instant::now() + limit;
    while shared.refreshes_in_flight.load(Relaxed) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Size of the future `f` returns, without running it.
    fn future_size<F, Fut>(_f: F) -> usize
    where
        F: FnOnce(Arc<Instance>) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_refused_load_serves_the_stale_value_held_else_rejects() {
        for f in [
            LoadFailure::Limited,
            LoadFailure::BreakerOpen,
            LoadFailure::RateLimited,
        ] {
            assert_eq!(outcome_of(Err(f), Outcome::Miss, true), Outcome::Stale);
            assert_eq!(
                outcome_of(Err(f), Outcome::Waited, false),
                Outcome::Rejected
            );
        }
        assert_eq!(
            outcome_of(Err(LoadFailure::Timeout), Outcome::Miss, true),
            Outcome::Error,
            "a failed load is an error, stale value or not"
        );
        assert_eq!(outcome_of(Ok(3), Outcome::Waited, false), Outcome::Waited);
    }

    /// Every open-loop worker holds a request future sized for its largest path, even idle:
    /// the loading paths are boxed so that size stays that of the hit path.
    #[test]
    fn request_future_is_sized_for_the_hit_path() {
        let handle = future_size(|i| async move { i.handle(1).await });
        let read = future_size(|i| async move { i.read(1).await });
        let fill = future_size(|i| async move { i.fill(1, None).await });
        assert!(handle < read + 256, "handle {handle} B, read {read} B");
        assert!(handle < fill, "handle {handle} B, fill {fill} B");
    }
}
