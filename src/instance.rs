//! One simulated app instance and the request path through it: read the cache, let the
//! freshness policy judge what was found, and when a load is needed let the coordination
//! decide who performs it. Each instance has its own Redis connections, DB pool and in-process
//! state (single-flight table, SWR refresh set); all instances share one Redis and one Postgres.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngExt;

use crate::cache::{Cache, CacheError};
use crate::metrics::{Counters, LoadKind, LoadTracker, Outcome, bump};
use crate::origin::{LoadFailure, Origin};
use crate::strategy::Coordination;
use crate::strategy::envelope::Meta;
use crate::strategy::freshness::{self, Verdict};
use crate::strategy::lock::{self, LockTimeoutPolicy};
use crate::strategy::single_flight::{self, Role, SingleFlight};

/// What every instance shares: the policy and the run-wide counters.
pub struct Shared {
    pub freshness: freshness::Policy,
    pub coordination: Coordination,
    pub lock: lock::Settings,
    pub counters: Arc<Counters>,
    pub loads: LoadTracker,
    /// Background refreshes still running (the driver waits for them at the end).
    pub refreshes_in_flight: AtomicU64,
}

pub struct Instance {
    cache: Cache,
    origin: Origin,
    flights: SingleFlight,
    refreshing: Mutex<HashSet<u64>>,
    shared: Arc<Shared>,
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

fn outcome_of(r: Result<(), LoadFailure>, ok: Outcome) -> Outcome {
    if r.is_ok() { ok } else { Outcome::Error }
}

impl Instance {
    pub fn new(cache: Cache, origin: Origin, shared: Arc<Shared>) -> Instance {
        Instance {
            cache,
            origin,
            flights: SingleFlight::default(),
            refreshing: Mutex::new(HashSet::new()),
            shared,
        }
    }

    /// Read `id` from the cache; a Redis failure reads as absent (fail open).
    async fn read(&self, id: u64) -> Found {
        match self.cache.get(id).await {
            Ok(Some(bytes)) => Meta::decode(&bytes).map_or(Found::Absent, Found::Entry),
            Ok(None) | Err(_) => Found::Absent,
        }
    }

    /// Serve one request for item `id` ("GET /item/{id}").
    ///
    /// The paths that load (miss, early recompute) are boxed: their futures (pool checkout,
    /// query) are ~2 KB, and an unboxed one would size every open-loop worker for them, hit
    /// path or idle alike, so memory would grow with the peak number of workers.
    pub async fn handle(self: &Arc<Self>, id: u64) -> Outcome {
        let sh = &self.shared;
        let meta = match self.read(id).await {
            Found::Entry(m) => m,
            Found::Absent => {
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
                Outcome::Hit
            }
            Verdict::Stale => {
                self.refresh_behind(id);
                Outcome::Stale
            }
            Verdict::Recompute { lead_ms } => Box::pin(self.recompute_early(id, lead_ms)).await,
        }
    }

    /// XFetch drew this reader to recompute ahead of expiry. The current value is still valid,
    /// so under a coordination that finds someone else already recomputing, serve it.
    async fn recompute_early(&self, id: u64, lead_ms: f64) -> Outcome {
        let sh = &self.shared;
        let mut leader = None;
        if sh.coordination.single_flight() {
            match self.flights.join(id) {
                Role::Leader(l) => leader = Some(l),
                Role::Follower(_) => return Outcome::Hit,
            }
        }
        let mut token = None;
        if sh.coordination.mutex() {
            let t = rand::rng().random::<u64>();
            match self.cache.try_lock(id, t, sh.lock.ttl_ms).await {
                Ok(true) => {
                    bump(&sh.counters.lock_acquired);
                    token = Some(t);
                }
                Ok(false) => {
                    bump(&sh.counters.lock_contended);
                    if let Some(l) = leader {
                        l.finish(Ok(()));
                    }
                    return Outcome::Hit;
                }
                Err(_) => {
                    bump(&sh.counters.lock_unavailable);
                    if let Some(l) = leader {
                        l.finish(Ok(()));
                    }
                    return Outcome::Hit;
                }
            }
        }
        bump(&sh.counters.early_recomputes);
        sh.counters
            .early_lead_us
            .fetch_add((lead_ms * 1000.0) as u64, Relaxed);
        let r = self.load_and_store(id, LoadKind::Traffic).await;
        if let Some(t) = token {
            self.unlock(id, t).await;
        }
        if let Some(l) = leader {
            l.finish(r);
        }
        outcome_of(r, Outcome::Miss)
    }

    /// The value is absent (or unusable): get it loaded under the coordination policy.
    /// `stale` is a value that may be served if the lock wait runs out under the stale policy.
    async fn fill(&self, id: u64, stale: Option<Meta>) -> Outcome {
        let c = self.shared.coordination;
        if !c.single_flight() {
            return if c.mutex() {
                self.fill_locked(id, stale).await
            } else {
                outcome_of(
                    self.load_and_store(id, LoadKind::Traffic).await,
                    Outcome::Miss,
                )
            };
        }
        match self.flights.join(id) {
            Role::Leader(l) => {
                let outcome = if c.mutex() {
                    self.fill_locked(id, stale).await
                } else {
                    outcome_of(
                        self.load_and_store(id, LoadKind::Traffic).await,
                        Outcome::Miss,
                    )
                };
                let shared = if outcome == Outcome::Error {
                    Err(LoadFailure::Db)
                } else {
                    Ok(())
                };
                l.finish(shared);
                outcome
            }
            Role::Follower(rx) => outcome_of(single_flight::follow(rx).await, Outcome::Waited),
        }
    }

    /// Mutex coordination: take the Redis lock and load, or wait for whoever holds it.
    async fn fill_locked(&self, id: u64, stale: Option<Meta>) -> Outcome {
        let sh = &self.shared;
        let token = rand::rng().random::<u64>();
        match self.cache.try_lock(id, token, sh.lock.ttl_ms).await {
            Ok(true) => return self.load_holding_lock(id, token).await,
            Ok(false) => bump(&sh.counters.lock_contended),
            Err(_) => {
                // Redis is down: no lock can be had. Documented policy: fail open and load.
                bump(&sh.counters.lock_unavailable);
                return outcome_of(
                    self.load_and_store(id, LoadKind::Traffic).await,
                    Outcome::Miss,
                );
            }
        }
        let deadline = Instant::now() + sh.lock.wait;
        loop {
            let now = Instant::now();
            if now >= deadline {
                bump(&sh.counters.lock_timeouts);
                return match sh.lock.on_timeout {
                    LockTimeoutPolicy::Error => Outcome::Error,
                    LockTimeoutPolicy::Stale if stale.is_some() => Outcome::Stale,
                    _ => outcome_of(
                        self.load_and_store(id, LoadKind::Traffic).await,
                        Outcome::Fallback,
                    ),
                };
            }
            let pause = sh
                .lock
                .poll_pause(rand::rng().random::<f64>())
                .min(deadline - now);
            tokio::time::sleep(pause).await;
            if let Found::Entry(m) = self.read(id).await
                && m.soft_expiry_ms as f64 > now_ms_f64()
            {
                return Outcome::Waited;
            }
            // Still nothing: the holder may have died or its lease run out; try to take over.
            if let Ok(true) = self.cache.try_lock(id, token, sh.lock.ttl_ms).await {
                return self.load_holding_lock(id, token).await;
            }
        }
    }

    async fn load_holding_lock(&self, id: u64, token: u64) -> Outcome {
        bump(&self.shared.counters.lock_acquired);
        // Another instance may have filled the key between our miss and our lock.
        if let Found::Entry(m) = self.read(id).await
            && m.soft_expiry_ms as f64 > now_ms_f64()
        {
            self.unlock(id, token).await;
            return Outcome::Hit;
        }
        let r = self.load_and_store(id, LoadKind::Traffic).await;
        self.unlock(id, token).await;
        outcome_of(r, Outcome::Miss)
    }

    async fn unlock(&self, id: u64, token: u64) {
        // Ok(false): our lease ran out before we released, so someone else may have loaded too.
        if let Ok(false) = self.cache.unlock(id, token).await {
            bump(&self.shared.counters.lock_lost);
        }
    }

    /// SWR: start one background refresh of `id` in this instance unless one is running.
    fn refresh_behind(self: &Arc<Self>, id: u64) {
        {
            let mut r = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
            if !r.insert(id) {
                return;
            }
        }
        let me = Arc::clone(self);
        self.shared.refreshes_in_flight.fetch_add(1, Relaxed);
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
            me.refresh(id).await;
        });
    }

    async fn refresh(&self, id: u64) {
        let sh = &self.shared;
        if sh.coordination.mutex() {
            let token = rand::rng().random::<u64>();
            match self.cache.try_lock(id, token, sh.lock.ttl_ms).await {
                Ok(true) => {
                    bump(&sh.counters.lock_acquired);
                    // The instance that refreshed before us may have released just now.
                    if let Found::Entry(m) = self.read(id).await
                        && m.soft_expiry_ms as f64 > now_ms_f64()
                    {
                        bump(&sh.counters.refreshes_skipped);
                    } else {
                        bump(&sh.counters.background_refreshes);
                        let _ = self.load_and_store(id, LoadKind::Traffic).await;
                    }
                    self.unlock(id, token).await;
                }
                // Another instance is refreshing it (or Redis is down and nothing can be written).
                Ok(false) | Err(_) => bump(&sh.counters.refreshes_skipped),
            }
        } else {
            bump(&sh.counters.background_refreshes);
            let _ = self.load_and_store(id, LoadKind::Traffic).await;
        }
    }

    /// One DB call for `id`, and the result written back with the freshness policy's TTLs.
    pub async fn load_and_store(&self, id: u64, kind: LoadKind) -> Result<(), LoadFailure> {
        let sh = &self.shared;
        let started = Instant::now();
        let loaded = {
            let _in_flight = sh.loads.begin(id, kind);
            self.origin.load(id).await
        };
        let delta_us = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        let now = now_ms();
        let written = match loaded {
            Ok(Some(row)) => {
                let (meta, px) =
                    sh.freshness
                        .stamp(now, delta_us, row.version(), rand::rng().random::<f64>());
                self.cache.set(id, &meta.encode(row.payload()), px).await
            }
            Ok(None) => match sh.freshness.stamp_negative(now, delta_us) {
                Some((meta, px)) => self.cache.set(id, &meta.encode(&[]), px).await,
                None => Ok(()),
            },
            Err(f) => {
                bump(if f == LoadFailure::Timeout {
                    &sh.counters.db_timeouts
                } else {
                    &sh.counters.db_errors
                });
                return Err(f);
            }
        };
        // A failed write-back still served the request (fail open); it was counted in `cache`.
        let _: Result<(), CacheError> = written;
        Ok(())
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
