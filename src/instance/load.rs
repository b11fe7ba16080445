//! One load, as admit → load → store: the protections admit it (or refuse it without
//! reaching the database), the origin loads the row, and the store writes it back with the
//! SET that [`write_back::decide`] picks (plain, checked against a lease or the writers'
//! versions, or none), then fills the in-process tier with what Redis kept.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rand::RngExt;

use super::coordinate::Claim;
use super::{Instance, now_ms};
use crate::cache::SetCheck;
use crate::l1::Ticket;
use crate::metrics::{Why, bump};
use crate::origin::{LoadFailure, Loaded};
use crate::protect::{Permit, Refused};
use crate::strategy::write_back::{self, Set, Value};

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
