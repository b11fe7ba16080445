//! Coordination as one type: who performs a load, asked once per situation — a miss, an early
//! recompute (XFetch), a background refresh (SWR). Each situation is one method; each
//! coordination (none, single-flight, mutex, both, lease) is one arm in them, so a new
//! coordination is a new arm, not edits scattered through the request path. What a caller
//! wins is a [`Claim`]: it loads, then hands the result back through [`Claim::release`].
//!
//! The mutex and the lease are both a token in Redis taken with `SET NX PX`, waited for the
//! same way (polls with jitter, bounded by `--lock-wait`, then the timeout policy). They
//! differ in what the token guards: the lock guards the load and is released after it; the
//! lease guards the SET, which must present it and consumes it, and a write's delete
//! removes it, so a load that read the row before that write cannot store it.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use rand::RngExt;

use super::crash::{Board, Held, Holdings};
use crate::cache::{Cache, CacheError};
use crate::metrics::{Counters, bump};
use crate::origin::LoadFailure;
use crate::strategy::Coordination;
use crate::strategy::lock::{LoadTimes, Settings};
use crate::strategy::single_flight::{Leader, Role, SingleFlight, Slot};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::ManagedRedis;
    use crate::strategy::lock::LockTimeoutPolicy;
    use crate::strategy::single_flight::follow;
    use std::time::Duration;

    /// xfetch under mutex+single-flight: a reader drawn to recompute early leads its instance's
    /// flight of the key, then finds another instance holding the lock and gives way, serving
    /// the value it holds. A request of its instance that missed meanwhile followed it.
    #[tokio::test]
    async fn an_early_leader_that_gives_way_hands_its_followers_the_value_it_serves() {
        let redis = ManagedRedis::start().await.expect("redis-server starts");
        let counters = Arc::new(Counters::default());
        let cache = Cache::open(
            &redis.url(),
            1,
            Duration::from_secs(2),
            Arc::from("test:"),
            counters.clone(),
        )
        .await
        .expect("connecting");
        // Another instance holds the key's lock.
        assert!(cache.try_lock(7, 1, 60_000).await.expect("SET NX"));
        let settings = Settings {
            ttl_ms: 2000,
            auto_factor: None,
            extend: false,
            poll: Duration::from_millis(50),
            wait: Duration::from_secs(2),
            on_timeout: LockTimeoutPolicy::Load,
            waiters: crate::strategy::lock::LockWaiters::Takeover,
            retry_after: None,
            fallback_writeback: true,
        };
        let coord = Coordinator::new(
            Coordination::MutexSingleFlight,
            settings,
            2000,
            Arc::default(),
        );
        // The value that drew the reader is of version 5.
        let mut early = std::pin::pin!(coord.early(&cache, &counters, 7, 5));
        // Polled once, the early reader leads the flight and waits for Redis's answer.
        tokio::select! {
            biased;
            _ = &mut early => panic!("the lock was asked for without waiting for Redis"),
            () = std::future::ready(()) => {}
        }
        let Miss::Follow(rx) = coord.miss(&cache, &counters, 7).await else {
            panic!("a miss while the early reader leads must follow it")
        };
        assert!(
            early.await.is_none(),
            "the lock is held elsewhere: give way"
        );
        assert_eq!(
            follow(rx).await,
            Ok(5),
            "the follower is served the value its leader serves (version 0 served nothing)"
        );
    }
}
