//! One simulated app instance and the request path through it: read the cache, let the
//! freshness policy judge what was found, and when a load is needed let the coordination
//! decide who performs it. Each instance has its own Redis connections, DB pool and in-process
//! state (single-flight table, SWR refresh set); all instances share one Redis and one Postgres.
//!
//! What an instance applies is its copy of the run's [`RunPolicy`], fixed for the run; what it
//! changes is the run's [`RunState`], shared. A request's path, from the read through a miss's
//! claim to its load and store, is `request.rs`. This file holds the instance and the request's
//! other ways to an answer: the waits of a miss that another loads (a follower, a lock held
//! elsewhere), the values kept past expiry (fail-safe, soft timeout, Rails' race TTL) and the
//! in-process tier in front of Redis. Background refreshes are in `refresh.rs`, writes in
//! `write.rs`, the holder-crash fault's switch in `crash.rs`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngExt;
use tokio_util::sync::CancellationToken;

use crate::cache::Cache;
use crate::l1::{L1, L1Invalidate, Ticket};
use crate::metrics::{CostTimes, Counters, LoadTracker, Outcome, Why, Writes, bump};
use crate::origin::{LoadFailure, Origin};
use crate::protect::{self, Guard};
use crate::strategy::envelope::{HEADER_LEN, Meta};
use crate::strategy::failsafe;
use crate::strategy::freshness::Verdict;
use crate::strategy::lock::{LoadTimes, LockTimeoutPolicy, LockWaiters};
use crate::strategy::policy::RunPolicy;
use crate::strategy::single_flight;

pub mod crash;
mod refresh;
mod request;
mod write;

pub use refresh::drain_refreshes;

use request::{Claim, Coordinator, Fill};

/// The run's state, shared by every instance: what the run counts and what is in flight.
/// The policy the instances apply is apart, fixed and copied into each ([`RunPolicy`]).
pub struct RunState {
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
    /// The writes and their commit log; None without writes (`--write-rps 0`).
    pub writes: Option<Arc<Writes>>,
    /// Every instance's in-process tier (`--l1`), for the write probes; empty without one.
    pub tiers: Mutex<Vec<Arc<crate::l1::L1>>>,
    /// Every load's time, which `--lock-ttl auto` sizes the lock's lease from.
    pub load_times: Arc<LoadTimes>,
    /// With the holder-crash fault: the keys a crash blocked and who waited on them.
    pub crash: Option<Arc<crash::Board>>,
}

impl RunState {
    /// A run's state before traffic: nothing counted, nothing in flight (`loads`, with the
    /// book its causes are kept in); the writes' log when the policy has writes.
    pub fn new(policy: &RunPolicy, loads: LoadTracker) -> RunState {
        RunState {
            counters: Arc::new(Counters::default()),
            loads: Arc::new(loads),
            cost: CostTimes::default(),
            refreshes_in_flight: AtomicU64::new(0),
            window_end_ms: AtomicU64::new(0),
            abort: CancellationToken::new(),
            protect: protect::Board::default(),
            writes: policy.writes.then(|| Arc::new(Writes::default())),
            tiers: Mutex::new(Vec::new()),
            load_times: Arc::default(),
            crash: policy.crashable.then(Arc::default),
        }
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
    /// The run's policy, copied: read on every request, so no pointer to chase.
    policy: RunPolicy,
    run: Arc<RunState>,
    /// The in-process tier in front of Redis (`--l1`).
    l1: Option<Arc<crate::l1::L1>>,
    /// With the holder-crash fault: whether it is down, and what its work dies with.
    crash: Option<crash::Switch>,
}

impl Instance {
    /// The instance's cache client (Redis, or its own entries for an in-process library).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }
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
    /// The entry's header, and the bytes read (header and value) for a push-back that writes
    /// the entry it read back (Rails' race TTL).
    Entry(Meta, Vec<u8>),
    Absent,
    /// The read failed (fail open: served as absent, loaded blind).
    Failed,
}

/// How a request was served and the version of the row it served (0: none, or not known);
/// for [`Outcome::RetryAfter`], which serves none, the answer's hint in ms.
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
    pub fn new(
        cache: Cache,
        origin: Origin,
        guard: Guard,
        policy: RunPolicy,
        run: Arc<RunState>,
    ) -> Instance {
        Instance {
            cache,
            origin,
            coord: Coordinator::new(
                policy.coordination,
                policy.lock,
                policy.lease_ttl_ms,
                run.load_times.clone(),
            )
            .with_refresh(policy.refresh),
            guard,
            refreshing: Mutex::new(HashSet::new()),
            throttle: failsafe::Throttle::default(),
            policy,
            run,
            l1: None,
            crash: None,
        }
    }

    /// A measured request for `id` (the herd model counts the hottest key's).
    #[inline]
    pub fn note_request(&self, id: u64) {
        self.run.loads.note_request(id);
    }

    /// How long a newer version than `served` had been committed when a read of `id` that
    /// began at `began` served it; None when the read was not stale (always without writes).
    /// Counted apart too when the in-process tier served it (`outcome` l1-hit).
    #[inline]
    pub fn staleness(&self, id: u64, outcome: Outcome, served: u64, began: Instant) -> Option<u64> {
        // A retry-after answer served nothing (its second field is a hint).
        if !self.policy.track_staleness || outcome == Outcome::RetryAfter {
            return None;
        }
        let st = self
            .run
            .writes
            .as_ref()?
            .versions
            .staleness(id, served, began);
        if st.is_some() && outcome == Outcome::L1Hit {
            bump(&self.run.counters.l1_stale_reads);
        }
        st
    }

    /// XFetch drew this reader to recompute ahead of expiry. The current value is still valid,
    /// so when the coordination finds someone else already recomputing, serve it.
    async fn recompute_early(&self, id: u64, seen: Meta, lead_ms: f64) -> Served {
        let Some(claim) = self
            .coord
            .early(&self.cache, &self.run.counters, id, seen.version)
            .await
        else {
            return (Outcome::Hit, seen.version);
        };
        // Holding the lock, look again: another instance may have recomputed it just now
        // (its value is newer than the one that drew us), and a second load would be wasted.
        if claim.locked()
            && let Found::Entry(m, _) = self.read(id).await
            && m.computed_at_ms > seen.computed_at_ms
        {
            claim
                .release(&self.cache, &self.run.counters, id, Ok(m.version))
                .await;
            return (Outcome::Hit, m.version);
        }
        bump(&self.run.counters.early_recomputes);
        self.run
            .counters
            .early_lead_us
            .fetch_add((lead_ms * 1000.0) as u64, Relaxed);
        let r = self
            .load_claimed(id, &claim, Why::Early, Fill::Request)
            .await;
        claim.release(&self.cache, &self.run.counters, id, r).await;
        // Refused by a protection: the value that drew us is still valid, serve it.
        if r.is_err_and(LoadFailure::refused) {
            return (Outcome::Hit, seen.version);
        }
        served(r, Outcome::Miss, Some(&seen))
    }

    /// Holding the lock (or the lease): load unless another instance filled the key between
    /// our miss and our token. `stale`: the value the request holds, served if the load is
    /// refused.
    async fn load_locked(
        &self,
        id: u64,
        claim: Claim<'_>,
        stale: Option<&Meta>,
        why: Why,
    ) -> Served {
        if let Found::Entry(m, _) = self.read(id).await
            && m.soft_expiry_ms as f64 > now_ms_f64()
        {
            claim
                .release(&self.cache, &self.run.counters, id, Ok(m.version))
                .await;
            return (Outcome::Hit, m.version);
        }
        let r = self.load_claimed(id, &claim, why, Fill::Request).await;
        claim.release(&self.cache, &self.run.counters, id, r).await;
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
        match tokio::time::timeout(self.policy.lock.wait, single_flight::follow(rx)).await {
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
        bump(&self.run.counters.lock_timeouts);
        match (self.policy.lock.on_timeout, stale) {
            (LockTimeoutPolicy::Error, _) => ((Outcome::Error, 0), Err(LoadFailure::LockTimeout)),
            (LockTimeoutPolicy::RetryAfter, _) => {
                let hint = match self.policy.lock.retry_after {
                    Some(d) => d,
                    // The lock's remaining lease: when its holder will have loaded or lost it.
                    None => self
                        .cache
                        .lock_pttl(id)
                        .await
                        .ok()
                        .flatten()
                        .unwrap_or(self.policy.lock.poll),
                };
                let ms = (hint.as_millis() as u64).max(1);
                ((Outcome::RetryAfter, ms), Err(LoadFailure::LockTimeout))
            }
            (LockTimeoutPolicy::Stale, Some(m)) => ((Outcome::Stale, m.version), Ok(m.version)),
            (_, stale) => {
                // No token of our own: under a lease the fallback serves its load unstored,
                // and with --fallback-writeback off under any coordination.
                let r = if self.policy.lock.fallback_writeback {
                    self.load_and_store(id, None, Why::WaitRanOut).await
                } else {
                    self.load_and_store_as(id, None, Why::WaitRanOut, Fill::Unkept)
                        .await
                };
                (self.served(id, r, Outcome::Fallback, stale.as_ref()), r)
            }
        }
    }

    /// Mutex or lease coordination, token held elsewhere: poll the cache until the value
    /// appears, take the token over if it frees, or give up at `--lock-wait`. `stale`: the
    /// value the request holds; `why`: what it saw. `ended`: when the wait itself ended (the
    /// value seen, the token taken over, the wait run out), before any load of its own.
    async fn wait_for_lock(
        &self,
        id: u64,
        claim: Claim<'_>,
        token: u64,
        (stale, why): (Option<Meta>, Why),
        ended: &mut Option<Instant>,
    ) -> Served {
        let deadline = Instant::now() + self.policy.lock.wait;
        let mut claim = claim;
        loop {
            let now = Instant::now();
            if now >= deadline {
                *ended = Some(now);
                let (served, shared) = self.wait_ran_out(id, stale).await;
                claim
                    .release(&self.cache, &self.run.counters, id, shared)
                    .await;
                return served;
            }
            let pause = self
                .policy
                .lock
                .poll_pause(rand::rng().random::<f64>())
                .min(deadline - now);
            tokio::time::sleep(pause).await;
            if let Found::Entry(m, _) = self.read(id).await
                && m.soft_expiry_ms as f64 > now_ms_f64()
            {
                *ended = Some(Instant::now());
                claim
                    .release(&self.cache, &self.run.counters, id, Ok(m.version))
                    .await;
                return (Outcome::Waited, m.version);
            }
            // Still nothing: the holder may have died or its lease run out; try to take over
            // (unless waiters only re-read: then the wait runs out).
            if self.policy.lock.waiters == LockWaiters::Reread {
                continue;
            }
            claim = match self
                .coord
                .take_over(&self.cache, &self.run.counters, id, token, claim)
                .await
            {
                Ok(c) => {
                    *ended = Some(Instant::now());
                    return self.load_locked(id, c, stale.as_ref(), why).await;
                }
                Err(c) => c,
            };
        }
    }
}

// Values kept past their expiry: the fail-safe (serve the kept value when the load fails, and
// throttle the key), the soft timeout (answer with it when the load is slow, and let the load
// finish behind the request), and the push-back of a stale read that extends the entry and
// recomputes it (Rails' race TTL). The decisions are `strategy::failsafe`'s and the freshness
// policy's; this is the thin shell that talks to Redis and the database through the
// instance's one load path.
impl Instance {
    /// How a request whose load ended in `r` is served ([`served`]), and under `--fail-safe`
    /// any failed load of a request holding a kept value within D serves that value (outcome
    /// `stale`, counted in `fail_safe`) and throttles the key on this instance.
    pub(super) fn served(
        &self,
        id: u64,
        r: Result<u64, LoadFailure>,
        ok: Outcome,
        stale: Option<&Meta>,
    ) -> Served {
        if let (Err(_), Some(m)) = (r, stale)
            && self.policy.fail_safe.servable(m, now_ms_f64())
        {
            bump(&self.run.counters.fail_safe);
            self.throttle
                .arm(id, now_ms(), self.policy.fail_safe.throttle_ms);
            return (Outcome::Stale, m.version);
        }
        served(r, ok, stale)
    }

    /// An entry found past its hard expiry, kept by the grace: a throttled key serves it
    /// without a load; with `--soft-timeout` the load runs behind the request, which answers
    /// with the kept value if the load has not finished by then; else the load as a miss's.
    pub(super) async fn expired(self: &Arc<Self>, id: u64, meta: Meta) -> Served {
        let now = now_ms_f64();
        if self.policy.fail_safe.servable(&meta, now) && self.throttle.throttled(id, now as u64) {
            bump(&self.run.counters.fail_safe);
            bump(&self.run.counters.fail_safe_throttled);
            return (Outcome::Stale, meta.version);
        }
        let Some(soft) = self.policy.fail_safe.soft_timeout_for(&meta, now) else {
            return self.fill(id, Some(meta), Why::Expired).await;
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let me = Arc::clone(self);
        let abort = self.run.abort.clone();
        self.run.refreshes_in_flight.fetch_add(1, Relaxed);
        tokio::spawn(async move {
            // Counted in flight until it ends however it ends, so the driver drains it.
            struct Done<'a>(&'a Instance);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.run.refreshes_in_flight.fetch_sub(1, Relaxed);
                }
            }
            let _done = Done(&me);
            let s = tokio::select! {
                s = me.fill(id, Some(meta), Why::Expired) => s,
                _ = abort.cancelled() => return,
            };
            if let Err(s) = tx.send(s) {
                // The request answered at the soft timeout: this load finished behind it.
                let c = &me.run.counters;
                match s.0 {
                    Outcome::Miss | Outcome::Fallback => bump(&c.soft_timeout_write_backs),
                    // Its failure served no request (the request had its answer): the key is
                    // throttled, but no fail-safe answer was given.
                    Outcome::Stale => {
                        c.fail_safe.fetch_sub(1, Relaxed);
                    }
                    _ => {}
                }
            }
        });
        match tokio::time::timeout(soft, rx).await {
            Ok(Ok(s)) => s,
            // The run ended under it: nothing was served.
            Ok(Err(_)) => (Outcome::Error, 0),
            Err(_) => {
                bump(&self.run.counters.soft_timeouts);
                (Outcome::Stale, meta.version)
            }
        }
    }

    /// [`StaleRead::ExtendAndRecompute`] (Rails' race TTL): a reader of an entry in its stale
    /// window writes the entry it read back with its expiry pushed by the window (`--stale`),
    /// then recomputes it in the request, as ActiveSupport's `handle_expired_entry` does: no
    /// second read before the push, so the readers that recompute too are those whose read
    /// came between the expiry and the push landing.
    ///
    /// [`StaleRead::ExtendAndRecompute`]: crate::strategy::StaleRead::ExtendAndRecompute
    pub(super) async fn extend_and_recompute(&self, id: u64, meta: Meta, bytes: &[u8]) -> Served {
        let (pushed, px) = self.policy.freshness.extend(&meta, now_ms());
        // A failed push leaves the entry as it was: more readers recompute (fail open).
        if self
            .cache
            .set(id, &pushed.encode(&bytes[HEADER_LEN..]), px)
            .await
            .is_ok()
        {
            bump(&self.run.counters.race_pushes);
        }
        self.fill(id, Some(meta), Why::Expired).await
    }
}

// The request path's hooks into the instance's in-process tier (`--l1`): read it first, cache
// what a Redis read or a load brought back (unless an invalidation of the key arrived
// meanwhile), and after a write drop the key here and tell the other instances (`pubsub`;
// under `tracking` Redis tells them). Lock polls and re-checks read Redis, never the tier.

/// How long a write's probe lets its invalidation reach the other instances' tiers before it
/// looks at them: a pub/sub message or a tracking push is sent by Redis before it answers
/// the write's own command, so it is on its way already; this bounds its delivery.
const PROBE_GRACE: Duration = Duration::from_millis(50);

impl Instance {
    /// Give this instance the in-process tier `l1` (and list it for the write probes).
    pub fn with_l1(mut self, l1: Arc<L1>) -> Instance {
        self.run
            .tiers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(l1.clone());
        self.l1 = Some(l1);
        self
    }

    /// The tier first: how the request was served when it holds a fresh entry, else the
    /// ticket with which the Redis read may cache what it finds (None without a tier).
    #[inline]
    pub(super) fn l1_first(&self, id: u64) -> Result<Served, Option<Ticket<'_>>> {
        let Some(l1) = &self.l1 else {
            return Err(None);
        };
        if let Some(m) = l1.get(id) {
            // u = 1: XFetch never draws an early recompute on the tier; its lottery runs on
            // the Redis reads (an entry past its soft expiry goes to Redis like a miss).
            if matches!(
                self.policy.freshness.judge(&m, now_ms_f64(), 1.0),
                Verdict::Fresh
            ) {
                if m.negative {
                    bump(&self.run.counters.negative_hits);
                }
                return Ok((Outcome::L1Hit, m.version));
            }
        }
        Err(Some(l1.begin(id)))
    }

    /// A load of `id` begins: the ticket with which its write-back also fills the tier.
    pub(super) fn l1_load(&self, id: u64) -> Option<Ticket<'_>> {
        self.l1.as_ref().map(|l| l.begin(id))
    }

    /// A write through this instance invalidated `id` in Redis: drop it from this tier and,
    /// under `pubsub`, from every other (a failed PUBLISH is an invalidation failure).
    pub(super) async fn l1_after_write(&self, id: u64) {
        let Some(l1) = &self.l1 else {
            return;
        };
        l1.drop_key(id);
        if l1.mode() == L1Invalidate::Pubsub && self.cache.publish_l1(id).await.is_err() {
            bump(&self.run.counters.invalidation_failures);
        }
    }

    /// For a write's probe: the oldest version of `id` any instance's tier would serve once
    /// the write's invalidation has had [`PROBE_GRACE`] to arrive, and until when (unix ms).
    /// None without a tier, or when none holds the key.
    pub(super) async fn l1_probe(&self, id: u64) -> Option<(u64, u64)> {
        self.l1.as_ref()?;
        tokio::time::sleep(PROBE_GRACE).await;
        let tiers = self
            .run
            .tiers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        tiers
            .iter()
            .filter_map(|t| t.peek(id))
            .min_by_key(|&(v, _)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
