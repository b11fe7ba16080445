//! Coordination as one type: who performs a load, asked once per situation — a miss, an early
//! recompute (XFetch), a background refresh (SWR). Each situation is one method; each
//! coordination (none, single-flight, mutex, both) is one arm in them, so a new coordination
//! is a new arm, not edits scattered through the request path. What a caller wins is a
//! [`Claim`]: it loads, then hands the result back through [`Claim::release`].

use rand::RngExt;

use crate::cache::Cache;
use crate::metrics::{Counters, bump};
use crate::origin::LoadFailure;
use crate::strategy::Coordination;
use crate::strategy::lock::Settings;
use crate::strategy::single_flight::{Leader, Role, SingleFlight, Slot};

/// One instance's coordination: its kind, its in-process flights and the lock settings.
pub struct Coordinator {
    kind: Coordination,
    flights: SingleFlight,
    pub lock: Settings,
}

/// The right to load a key, with what must be released afterwards.
pub struct Claim<'a> {
    leader: Option<Leader<'a>>,
    /// Our lock token, when we hold the Redis lock.
    token: Option<u64>,
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
    pub fn new(kind: Coordination, lock: Settings) -> Coordinator {
        Coordinator {
            kind,
            flights: SingleFlight::default(),
            lock,
        }
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
        if !self.kind.mutex() {
            return Miss::Load(Claim {
                leader,
                token: None,
            });
        }
        let token = rand::rng().random::<u64>();
        match cache.try_lock(id, token, self.lock.ttl_ms).await {
            Ok(true) => {
                bump(&counters.lock_acquired);
                Miss::LoadLocked(Claim {
                    leader,
                    token: Some(token),
                })
            }
            Ok(false) => {
                bump(&counters.lock_contended);
                Miss::WaitForLock {
                    claim: Claim {
                        leader,
                        token: None,
                    },
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
                Miss::Unavailable(Claim {
                    leader: Some(leader),
                    token: None,
                })
            }
        }
    }

    /// XFetch drew a reader to recompute a still-valid value early. None: someone else is on
    /// it (or the lock cannot be had), so serve the current value.
    pub async fn early(&self, cache: &Cache, counters: &Counters, id: u64) -> Option<Claim<'_>> {
        let Ok(leader) = self.join(id) else {
            return None;
        };
        let claim = Claim {
            leader,
            token: None,
        };
        self.lock_or_yield(cache, counters, id, claim).await
    }

    /// SWR refreshes a stale value behind the request that served it (deduplicated per
    /// instance by the caller). None: another instance is refreshing it.
    pub async fn refresh(&self, cache: &Cache, counters: &Counters, id: u64) -> Option<Claim<'_>> {
        let claim = Claim {
            leader: None,
            token: None,
        };
        self.lock_or_yield(cache, counters, id, claim).await
    }

    /// Under a mutex, take the lock or give way (the value in hand is still servable).
    async fn lock_or_yield<'a>(
        &'a self,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        mut claim: Claim<'a>,
    ) -> Option<Claim<'a>> {
        if !self.kind.mutex() {
            return Some(claim);
        }
        let token = rand::rng().random::<u64>();
        match cache.try_lock(id, token, self.lock.ttl_ms).await {
            Ok(true) => {
                bump(&counters.lock_acquired);
                claim.token = Some(token);
                Some(claim)
            }
            Ok(false) => {
                bump(&counters.lock_contended);
                claim.release_leader(Ok(()));
                None
            }
            Err(_) => {
                bump(&counters.lock_unavailable);
                claim.release_leader(Ok(()));
                None
            }
        }
    }

    /// A waiter found the lock free again: take it over.
    pub async fn take_over<'a>(
        &self,
        cache: &Cache,
        counters: &Counters,
        id: u64,
        token: u64,
        mut claim: Claim<'a>,
    ) -> Result<Claim<'a>, Claim<'a>> {
        if let Ok(true) = cache.try_lock(id, token, self.lock.ttl_ms).await {
            bump(&counters.lock_acquired);
            claim.token = Some(token);
            Ok(claim)
        } else {
            Err(claim)
        }
    }
}

impl Claim<'_> {
    /// Whether this claim holds the Redis lock.
    pub fn locked(&self) -> bool {
        self.token.is_some()
    }

    fn release_leader(&mut self, result: Result<(), LoadFailure>) {
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
        result: Result<(), LoadFailure>,
    ) {
        if let Some(token) = self.token.take() {
            // Ok(false): our lease ran out before we released, so someone else may have loaded too.
            if let Ok(false) = cache.unlock(id, token).await {
                bump(&counters.lock_lost);
            }
        }
        self.release_leader(result);
    }
}
