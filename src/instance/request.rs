//! One request through an instance, in the order it runs: read the cache, let the freshness
//! policy judge what was found, and on a miss let the coordination decide who loads
//! ([`Coordinator`]), then load it as admit → load → store.
//!
//! Coordination is one type, asked once per situation — a miss, an early recompute (XFetch),
//! a background refresh (SWR). Each situation is one method; each coordination (none,
//! single-flight, mutex, both, lease) is one arm in them, so a new coordination is a new arm,
//! not edits scattered through the request path. What a caller wins is a [`Claim`]: it loads,
//! then hands the result back through [`Claim::release`]. The mutex and the lease are both a
//! token in Redis taken with `SET NX PX`, waited for the same way (polls with jitter, bounded
//! by `--lock-wait`, then the timeout policy). They differ in what the token guards: the lock
//! guards the load and is released after it; the lease guards the SET, which must present it
//! and consumes it, and a write's delete removes it, so a load that read the row before that
//! write cannot store it.
//!
//! A load: the protections admit it (or refuse it without reaching the database), the origin
//! loads the row, and the store writes it back with the SET that [`write_back::decide`] picks
//! (plain, checked against a lease or the writers' versions, or none), then fills the
//! in-process tier with what Redis kept.
//!
//! The waits of a miss whose load is elsewhere (a follower, a lock held by another instance)
//! are in `mod.rs`, beside the instance.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rand::RngExt;

use super::crash::{Board, Held, Holdings};
use super::{Found, Instance, Served, now_ms, now_ms_f64};
use crate::cache::{Cache, CacheError, SetCheck};
use crate::l1::Ticket;
use crate::metrics::{Counters, Outcome, Why, bump};
use crate::origin::{LoadFailure, Loaded};
use crate::protect::{Permit, Refused};
use crate::strategy::envelope::Meta;
use crate::strategy::freshness::Verdict;
use crate::strategy::lock::{LoadTimes, Settings};
use crate::strategy::single_flight::{Leader, Role, SingleFlight, Slot};
use crate::strategy::write_back::{self, Set, Value};
use crate::strategy::{Coordination, StaleRead};

impl Instance {
    /// Serve one request for item `id` ("GET /item/{id}"): how it was served and the version
    /// it served.
    ///
    /// The paths that load (miss, early recompute) are boxed: their futures (pool checkout,
    /// query) are ~2 KB, and an unboxed one would size every open-loop worker for them, hit
    /// path or idle alike, so memory would grow with the peak number of workers.
    pub async fn handle(self: &Arc<Self>, id: u64) -> Served {
        if self.crash.is_some() {
            // Boxed like the loading paths: only a run with holder-crash pays for it.
            return Box::pin(self.serve_mortal(id)).await;
        }
        self.serve(id).await
    }

    /// [`Instance::handle`] on an instance that cannot crash.
    pub(super) async fn serve(self: &Arc<Self>, id: u64) -> Served {
        // No cache: the same load as a miss's, with nothing read before it or kept after.
        if !self.policy.freshness.caches() {
            return Box::pin(self.fill(id, None, Why::Absent)).await;
        }
        let l1 = match self.l1_first(id) {
            Ok(served) => return served,
            Err(ticket) => ticket,
        };
        let began = Instant::now();
        let found = self.read(id).await;
        self.run.cost.read(began);
        let (meta, bytes) = match found {
            Found::Entry(m, b) => (m, b),
            Found::Absent | Found::Failed => {
                drop(l1);
                bump(&self.run.counters.cold_misses);
                let why = match found {
                    Found::Failed => Why::ReadFailed,
                    _ => Why::Absent,
                };
                return Box::pin(self.fill(id, None, why)).await;
            }
        };
        let u: f64 = 1.0 - rand::rng().random::<f64>(); // (0, 1]
        match self.policy.freshness.judge(&meta, now_ms_f64(), u) {
            Verdict::Fresh => {
                if meta.negative {
                    bump(&self.run.counters.negative_hits);
                }
                if let Some(t) = l1 {
                    t.store(&meta);
                }
                (Outcome::Hit, meta.version)
            }
            Verdict::Stale => match self.policy.freshness.stale_read {
                StaleRead::RefreshBehind => {
                    self.refresh_behind(id, meta.computed_at_ms);
                    (Outcome::Stale, meta.version)
                }
                StaleRead::ExtendAndRecompute => {
                    Box::pin(self.extend_and_recompute(id, meta, &bytes)).await
                }
            },
            Verdict::RefreshAhead => {
                if self.refresh_behind(id, meta.computed_at_ms) {
                    bump(&self.run.counters.eager_refreshes);
                }
                (Outcome::Hit, meta.version)
            }
            Verdict::Recompute { lead_ms } => {
                Box::pin(self.recompute_early(id, meta, lead_ms)).await
            }
            // Kept past its expiry only to be served if the load fails (--fail-safe) or a wait
            // for the lock runs out.
            Verdict::Expired => Box::pin(self.expired(id, meta)).await,
        }
    }

    /// Read `id` from the cache; a Redis failure is told apart, and served as absent (fail
    /// open).
    pub(super) async fn read(&self, id: u64) -> Found {
        match self.cache.get(id).await {
            Ok(Some(bytes)) => match Meta::decode(&bytes) {
                Some(m) => Found::Entry(m, bytes),
                None => Found::Absent,
            },
            Ok(None) => Found::Absent,
            Err(_) => Found::Failed,
        }
    }

    /// The value is absent (or expired): get it loaded under the coordination. `stale` is a
    /// value kept past its expiry, served if a wait runs out under `--lock-timeout-policy stale`;
    /// `why`: what the request saw.
    pub(super) async fn fill(&self, id: u64, stale: Option<Meta>, why: Why) -> Served {
        match self.coord.miss(&self.cache, &self.run.counters, id).await {
            Miss::Load(claim) | Miss::Unavailable(claim) => {
                let r = self.load_claimed(id, &claim, why, Fill::Request).await;
                claim.release(&self.cache, &self.run.counters, id, r).await;
                self.served(id, r, Outcome::Miss, stale.as_ref())
            }
            Miss::LoadLocked(claim) => self.load_locked(id, claim, stale.as_ref(), why).await,
            Miss::Follow(rx) => self.follow(id, rx, stale).await,
            Miss::WaitForLock { claim, token } => {
                let (began, mut ended) = (Instant::now(), None);
                let served = self
                    .wait_for_lock(id, claim, token, (stale, why), &mut ended)
                    .await;
                if let Some(b) = &self.run.crash {
                    b.note_wait(id, began, ended.unwrap_or(began), served.0);
                }
                served
            }
        }
    }
}

/// One instance's coordination: its kind, its in-process flights and the lock settings.
pub struct Coordinator {
    kind: Coordination,
    /// Who performs a background refresh: the strategy's `refresh` choice (`kind` unless
    /// the strategy refreshes under a lock it does not take on a miss, as `laravel-flexible`).
    refresh_kind: Coordination,
    flights: SingleFlight,
    pub lock: Settings,
    /// How long a lease token lives unless its SET consumes it (`--lease-ttl`), ms.
    lease_ttl_ms: u64,
    /// The run's load times, which `--lock-ttl auto` sizes the lock's lease from.
    times: Arc<LoadTimes>,
    /// The tokens this instance holds, tracked when it can crash (holder-crash), and the
    /// board a token taken again after a crash is noted on.
    holdings: Option<(Holdings, Arc<Board>)>,
}

/// The right to load a key, with what must be released afterwards.
pub struct Claim<'a> {
    leader: Option<Leader<'a>>,
    /// Our token, when we hold the Redis lock or the key's lease.
    token: Option<u64>,
    /// Whether the token is a lease (the SET presents it) rather than a lock.
    lease: bool,
    /// The lock's lease when it was taken, ms (what an extension renews it to).
    ttl_ms: u64,
    /// The token in the instance's holdings, when they are tracked.
    held: Option<Held<'a>>,
}

/// How a miss is to be served.
pub enum Miss<'a> {
    /// Load it: this caller holds whatever the coordination asks for (maybe nothing).
    Load(Claim<'a>),
    /// Load it holding the Redis lock: re-read the cache first, another instance may have
    /// filled it between our miss and our lock.
    LoadLocked(Claim<'a>),
    /// Another request of this instance is loading it: wait for its result.
    Follow(tokio::sync::watch::Receiver<Slot>),
    /// Another instance holds the lock: wait for the value to appear (or the lock to free),
    /// with `claim` kept so this instance's followers wait on us.
    WaitForLock { claim: Claim<'a>, token: u64 },
    /// The lock could not be asked for (Redis unreachable): load anyway, fail open, as this
    /// instance's one loader of the key (its other requests for it follow this one).
    Unavailable(Claim<'a>),
}

impl Coordinator {
    pub fn new(
        kind: Coordination,
        lock: Settings,
        lease_ttl_ms: u64,
        times: Arc<LoadTimes>,
    ) -> Coordinator {
        Coordinator {
            kind,
            refresh_kind: kind,
            flights: SingleFlight::default(),
            lock,
            lease_ttl_ms,
            times,
            holdings: None,
        }
    }

    /// Track the tokens this instance holds (it can crash holding them).
    pub fn track_holdings(&mut self, board: Arc<Board>) {
        self.holdings = Some((Holdings::default(), board));
    }

    /// The tokens this instance holds, when tracked.
    pub fn holdings(&self) -> Option<&Holdings> {
        self.holdings.as_ref().map(|h| &h.0)
    }

    /// Note `token` of `id` as held (under `kind`), when holdings are tracked.
    fn hold(&self, kind: Coordination, token: u64, id: u64) -> Option<Held<'_>> {
        self.holdings.as_ref().map(|(h, board)| {
            board.note_taken(id);
            h.hold(token, id, kind.lease())
        })
    }

    /// Background refreshes coordinated by `kind` instead (a token in Redis, if any, is a lock).
    pub fn with_refresh(mut self, kind: Coordination) -> Coordinator {
        self.refresh_kind = kind;
        self
    }

    fn claim<'a>(&self, leader: Option<Leader<'a>>, token: Option<u64>) -> Claim<'a> {
        Claim {
            leader,
            token,
            lease: self.kind.lease(),
            ttl_ms: 0,
            held: None,
        }
    }

    /// Take the key's Redis token: the lock under a mutex, the lease under lease. Some(the
    /// lease it was taken for, ms) when taken.
    async fn try_token(
        &self,
        cache: &Cache,
        id: u64,
        token: u64,
    ) -> Result<Option<u64>, CacheError> {
        self.try_token_as(self.kind, cache, id, token).await
    }

    async fn try_token_as(
        &self,
        kind: Coordination,
        cache: &Cache,
        id: u64,
        token: u64,
    ) -> Result<Option<u64>, CacheError> {
        if kind.lease() {
            let ttl = self.lease_ttl_ms;
            return Ok(cache.try_lease(id, token, ttl).await?.then_some(ttl));
        }
        let auto = self.lock.auto_lease_ms(&self.times);
        let ttl = auto.unwrap_or(self.lock.ttl_ms);
        let taken = cache.try_lock(id, token, ttl).await?;
        if taken && auto.is_some() {
            self.times.lease_max_ms.fetch_max(ttl, Relaxed);
        }
        Ok(taken.then_some(ttl))
    }

    fn join(&self, id: u64) -> Result<Option<Leader<'_>>, tokio::sync::watch::Receiver<Slot>> {
        if !self.kind.single_flight() {
            return Ok(None);
        }
        match self.flights.join(id) {
            Role::Leader(l) => Ok(Some(l)),
            Role::Follower(rx) => Err(rx),
        }
    }

    /// A request found nothing usable: who loads it.
    pub async fn miss(&self, cache: &Cache, counters: &Counters, id: u64) -> Miss<'_> {
        let leader = match self.join(id) {
            Ok(l) => l,
            Err(rx) => return Miss::Follow(rx),
        };
        if !self.kind.redis_token() {
            return Miss::Load(self.claim(leader, None));
        }
        let token = rand::rng().random::<u64>();
        match self.try_token(cache, id, token).await {
            Ok(Some(ttl)) => {
                bump(&counters.lock_acquired);
                let mut claim = self.claim(leader, Some(token));
                claim.ttl_ms = ttl;
                claim.held = self.hold(self.kind, token, id);
                Miss::LoadLocked(claim)
            }
            Ok(None) => {
                bump(&counters.lock_contended);
                Miss::WaitForLock {
                    claim: self.claim(leader, None),
                    token,
                }
            }
            Err(_) => {
                // Redis is down: no lock can be had. Documented policy: fail open and load,
                // but coordinate within this instance still: a process-local single-flight,
                // so an outage costs the database one load per key per instance at a time,
                // not one per request (under mutex+single-flight the request leads already).
                bump(&counters.lock_unavailable);
                let leader = match leader {
                    Some(l) => l,
                    None => match self.flights.join(id) {
                        Role::Leader(l) => l,
                        Role::Follower(rx) => return Miss::Follow(rx),
                    },
                };
                Miss::Unavailable(self.claim(Some(leader), None))
            }
        }
    }

    /// XFetch drew a reader to recompute a still-valid value early, the one of version
    /// `serving`. None: someone else is on it (or the lock cannot be had), so serve that value.
    pub async fn early(
        &self,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        serving: u64,
    ) -> Option<Claim<'_>> {
        let Ok(leader) = self.join(id) else {
            return None;
        };
        let claim = self.claim(leader, None);
        self.lock_or_yield(self.kind, cache, counters, id, claim, serving)
            .await
    }

    /// SWR refreshes a stale value behind the request that served it (deduplicated per
    /// instance by the caller). None: another instance is refreshing it.
    pub async fn refresh(&self, cache: &Cache, counters: &Counters, id: u64) -> Option<Claim<'_>> {
        // A refresh leads no flight, so no follower is told what it gives way with.
        let claim = Claim {
            leader: None,
            token: None,
            lease: self.refresh_kind.lease(),
            ttl_ms: 0,
            held: None,
        };
        self.lock_or_yield(self.refresh_kind, cache, counters, id, claim, 0)
            .await
    }

    /// Under a mutex or a lease, take the token or give way (the value in hand, of version
    /// `serving`, is still servable). A claim that gives way hands its instance's followers
    /// that value, the one it serves: they were waiting for this caller's result, and are
    /// served and judged (staleness included) like any response. Version 0 would say they
    /// served nothing.
    async fn lock_or_yield<'a>(
        &'a self,
        kind: Coordination,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        mut claim: Claim<'a>,
        serving: u64,
    ) -> Option<Claim<'a>> {
        if !kind.redis_token() {
            return Some(claim);
        }
        let token = rand::rng().random::<u64>();
        match self.try_token_as(kind, cache, id, token).await {
            Ok(Some(ttl)) => {
                bump(&counters.lock_acquired);
                claim.token = Some(token);
                claim.ttl_ms = ttl;
                claim.held = self.hold(kind, token, id);
                Some(claim)
            }
            Ok(None) => {
                bump(&counters.lock_contended);
                claim.release_leader(Ok(serving));
                None
            }
            Err(_) => {
                bump(&counters.lock_unavailable);
                claim.release_leader(Ok(serving));
                None
            }
        }
    }

    /// A waiter found the lock free again: take it over.
    pub async fn take_over<'a>(
        &'a self,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        token: u64,
        mut claim: Claim<'a>,
    ) -> Result<Claim<'a>, Claim<'a>> {
        if let Ok(Some(ttl)) = self.try_token(cache, id, token).await {
            bump(&counters.lock_acquired);
            claim.token = Some(token);
            claim.ttl_ms = ttl;
            claim.held = self.hold(self.kind, token, id);
            Ok(claim)
        } else {
            Err(claim)
        }
    }
}

impl Claim<'_> {
    /// Whether this claim holds the Redis lock or the key's lease.
    pub fn locked(&self) -> bool {
        self.token.is_some()
    }

    /// The lock's token and the lease it was taken for (ms), when the claim holds a lock (not
    /// a lease, which its SET consumes and nothing extends).
    pub fn lock_held(&self) -> Option<(u64, u64)> {
        self.token.filter(|_| !self.lease).map(|t| (t, self.ttl_ms))
    }

    /// The lease token the SET after the load must present, when the claim is a lease.
    pub fn lease_token(&self) -> Option<u64> {
        self.token.filter(|_| self.lease)
    }

    fn release_leader(&mut self, result: Result<u64, LoadFailure>) {
        if let Some(l) = self.leader.take() {
            l.finish(result);
        }
    }

    /// Hand the load's result to this instance's followers and free the lock.
    pub async fn release(
        mut self,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        result: Result<u64, LoadFailure>,
    ) {
        if let Some(token) = self.token.take() {
            if self.lease {
                // A SET that presented the lease consumed it; one that did not (a failed or
                // refused load, a value found already there) gives it back.
                let _ = cache.release_lease(id, token).await;
            } else if let Ok(false) = cache.unlock(id, token).await {
                // Our lease of the lock ran out before we released, so someone else may have
                // loaded too.
                bump(&counters.lock_lost);
            }
        }
        self.release_leader(result);
    }
}

/// What a load is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fill {
    /// A request's load, written back.
    Request,
    /// The re-warm job's, written back.
    Rewarm,
    /// A request's load answered with and not cached (`--fallback-writeback off`).
    Unkept,
}

impl Instance {
    /// One load of `id` (a wait for a connection, then one DB call), and the result written
    /// back with the freshness policy's TTLs: the version loaded (0 for a missing item).
    /// Refused without reaching the database when `--db-limit` loads are in flight, the
    /// breaker is open or `--db-rate` has no token left. Under a lease the SET presents
    /// `lease`; with versioned invalidation it is refused when a newer version is cached or
    /// announced (counted in `stale_sets_refused`; the request still serves what it loaded).
    /// `why`: what the request saw, for the load's cause (`db.by_cause`).
    pub async fn load_and_store(
        &self,
        id: u64,
        lease: Option<u64>,
        why: Why,
    ) -> Result<u64, LoadFailure> {
        self.load_and_store_as(id, lease, why, Fill::Request).await
    }

    /// [`Instance::load_and_store_as`] by the holder of `claim`: under a lease its SET
    /// presents the token; holding a lock with `--lock-extend`, the lease is extended every
    /// third of it while the load runs.
    pub(super) async fn load_claimed(
        &self,
        id: u64,
        claim: &Claim<'_>,
        why: Why,
        fill: Fill,
    ) -> Result<u64, LoadFailure> {
        let load = self.load_and_store_as(id, claim.lease_token(), why, fill);
        match claim.lock_held() {
            Some((token, ttl_ms)) if self.policy.lock.extend => {
                tokio::select! {
                    biased;
                    r = load => r,
                    never = self.keep_extending(id, token, ttl_ms) => match never {},
                }
            }
            _ => load.await,
        }
    }

    /// Extend the lock of `id` (ours: `token`) to `ttl_ms` every third of it, for as long as
    /// the caller polls this; a failed round trip is retried until the lease would have run
    /// out, so one slow reply does not lose it. Once the lock is lost (or cannot be kept), it
    /// stops asking and waits to be dropped with the load.
    async fn keep_extending(&self, id: u64, token: u64, ttl_ms: u64) -> std::convert::Infallible {
        let every = Duration::from_millis((ttl_ms / 3).max(1));
        let lease = Duration::from_millis(ttl_ms);
        let mut held_since = Instant::now();
        loop {
            tokio::time::sleep(every).await;
            loop {
                match self.cache.extend_lock(id, token, ttl_ms).await {
                    Ok(true) => {
                        bump(&self.run.counters.lock_extended);
                        held_since = Instant::now();
                        break;
                    }
                    Ok(false) => return std::future::pending().await,
                    Err(_) if held_since.elapsed() + every / 4 < lease => {
                        tokio::time::sleep(every / 4).await;
                    }
                    Err(_) => return std::future::pending().await,
                }
            }
        }
    }

    /// [`Instance::load_and_store`] for `fill`'s kind of load.
    pub(super) async fn load_and_store_as(
        &self,
        id: u64,
        lease: Option<u64>,
        why: Why,
        fill: Fill,
    ) -> Result<u64, LoadFailure> {
        let began = Instant::now();
        let permit = self.admit().await?;
        let rewarm = fill == Fill::Rewarm;
        let caches = self.policy.freshness.caches() && fill != Fill::Unkept;
        // Taken before the load: an invalidation that arrives while it runs keeps what it
        // read out of the tier.
        let l1 = self.l1_load(id).filter(|_| caches);
        // With writes, the fill (this load and its write-back) is in flight for the write
        // probes: one that read the row before a commit may write it back after the
        // invalidation, and a probe waits for it.
        let _fill = self
            .run
            .writes
            .as_ref()
            .map(|w| w.probes.in_flight.fill(id));
        let (loaded, delta_us) = self.load(id, why, rewarm, permit).await;
        if !caches {
            if fill == Fill::Unkept {
                bump(&self.run.counters.lock_unkept);
            }
            self.run.loads.book.not_kept(id);
            self.run.loads.note_fill(id, began);
            return loaded.map(|row| row.map_or(0, |r| r.version()));
        }
        let row = loaded?;
        let version = self.store(id, lease, row.as_ref(), delta_us, l1).await;
        self.run.loads.note_fill(id, began);
        Ok(version)
    }

    /// Ask the protections for a place (`--db-limit`, `--breaker`, `--db-rate`): a refusal is
    /// counted and fails the load without reaching the database.
    async fn admit(&self) -> Result<Permit<'_>, LoadFailure> {
        let global = |ask| async move { self.cache.rate_take(ask).await.ok() };
        let counters = &self.run.counters;
        self.guard
            .admit(&self.run.protect, global)
            .await
            .map_err(|r| match r {
                Refused::Limit => {
                    bump(&counters.limit_refusals);
                    LoadFailure::Limited
                }
                Refused::Breaker => {
                    bump(&counters.breaker_refusals);
                    LoadFailure::BreakerOpen
                }
                Refused::Rate => {
                    bump(&counters.rate_refusals);
                    LoadFailure::RateLimited
                }
            })
    }

    /// Load `id` from the origin, holding `permit`: the row (None: no such item) and how long
    /// the load took, µs.
    async fn load(
        &self,
        id: u64,
        why: Why,
        rewarm: bool,
        permit: Permit<'_>,
    ) -> (Result<Option<Loaded>, LoadFailure>, u32) {
        let started = Instant::now();
        let loaded = {
            let load = self.run.loads.begin_as(id, why, rewarm);
            self.origin.load(id, &load).await
        };
        if loaded.is_ok() {
            self.run.counters.pg_health.note_ok();
        } else {
            // The next load of the key is a retry after a fault.
            self.run.loads.book.failed(id);
        }
        let took = started.elapsed();
        if loaded.is_ok() {
            self.run.load_times.record(took);
        }
        // The place in the bulkhead is freed before the write-back: it bounds loads, not Redis.
        permit.finish(loaded.is_err(), took);
        // XFetch's delta is the whole load as the app waits for it, pool wait included: that
        // is how long a recompute keeps the value from being refreshed (docs/design.md).
        (loaded, took.as_micros().min(u128::from(u32::MAX)) as u32)
    }

    /// Write back what a load of `delta_us` brought (`row`; None: no such item, stored as a
    /// not-found sentinel under negative caching) with the SET [`write_back::decide`] picks, and
    /// fill the tier (`l1`) with it if Redis kept it: the version loaded (0 for none). A
    /// failed write-back still serves the request (fail open; counted by the cache).
    async fn store(
        &self,
        id: u64,
        lease: Option<u64>,
        row: Option<&Loaded>,
        delta_us: u32,
        l1: Option<Ticket<'_>>,
    ) -> u64 {
        let now = now_ms();
        let write_back = Instant::now();
        let fresh = &self.policy.freshness;
        let (value, (meta, px), payload) = match row {
            Some(row) => {
                let stamped = fresh.stamp(now, delta_us, row.version(), rand::rng().random());
                if stamped.0.soft_expiry_ms < self.run.window_end_ms.load(Relaxed) {
                    bump(&self.run.counters.expiring_writes);
                }
                (Value::Row, stamped, row.payload())
            }
            None => match fresh.stamp_negative(now, delta_us) {
                Some(stamped) => (Value::Missing, stamped, &[][..]),
                None => {
                    self.run.loads.book.not_kept(id);
                    self.run.cost.write_back(write_back);
                    return 0;
                }
            },
        };
        let bytes = meta.encode(payload);
        let set = write_back::decide(
            value,
            self.policy.coordination,
            lease,
            self.policy.versioned(),
        );
        // Whether Redis keeps the value: only then does the tier keep it.
        let stored = match set {
            Set::Plain => {
                let ok = self.cache.set(id, &bytes, px).await.is_ok();
                if !ok {
                    self.run.loads.book.set_failed(id);
                }
                ok
            }
            Set::Checked { lease, versioned } => {
                let check = SetCheck { lease, versioned };
                match self
                    .cache
                    .set_checked(id, &bytes, px, meta.version, check)
                    .await
                {
                    Ok(false) => {
                        bump(&self.run.counters.stale_sets_refused);
                        false
                    }
                    r => r.is_ok(),
                }
            }
            Set::Refused => false,
        };
        self.run.cost.write_back(write_back);
        if stored {
            self.run.loads.book.stored(id, now + px);
        }
        // A load writes both tiers (what it stored in Redis).
        if let (Some(t), true) = (l1, stored) {
            t.store(&meta);
        }
        meta.version
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
