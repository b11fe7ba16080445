//! The in-process tier (L1) in front of Redis (`--l1 N`, `--l1-ttl`, `--l1-invalidate`):
//! each app instance keeps the entries it read or loaded in an LRU of N entries; a request
//! reads it first, then Redis, then the database. How an instance learns that another one
//! changed a key is the `--l1-invalidate` mode: not at all (`ttl`), a message on the run's
//! pub/sub channel (`pubsub`), or Redis's own client-side caching invalidations (`tracking`).
//!
//! The tier holds entry headers only (version, expiries): the request path never reads a
//! payload, and a header costs no allocation to keep. The rules are in [`store`] (pure, the
//! clock passed in); this shell shards them behind short mutexes (never held across an
//! await), counts what they did, and [`listen`] keeps the invalidation connection.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::metrics::{Counters, bump};
use crate::strategy::envelope::Meta;
use crate::values::Dur;

mod listen;
pub mod store;

pub use listen::connect;
use store::{Begun, Store, Stored};

/// How an instance's tier learns that another instance changed a key.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum L1Invalidate {
    /// It does not: an entry is served until its L1 TTL runs out, whatever was written since.
    #[default]
    Ttl,
    /// Every write publishes its key on the run's channel; every instance drops it.
    Pubsub,
    /// Redis client-side caching: CLIENT TRACKING (broadcast mode on the run's namespace,
    /// RESP3 push invalidations); the tier is flushed when that connection drops.
    Tracking,
}

impl L1Invalidate {
    pub fn name(self) -> &'static str {
        match self {
            L1Invalidate::Ttl => "ttl",
            L1Invalidate::Pubsub => "pubsub",
            L1Invalidate::Tracking => "tracking",
        }
    }
}

impl std::fmt::Display for L1Invalidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The in-process tier's settings (`--l1`, `--l1-ttl`, `--l1-invalidate`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct L1Spec {
    /// Entries per instance (LRU).
    pub entries: u64,
    /// How long an entry is served from the tier, at most its Redis entry's remaining life;
    /// null: exactly that remaining life.
    pub ttl: Option<Dur>,
    pub invalidate: L1Invalidate,
}

/// The run's pub/sub channel of L1 invalidations (`--l1-invalidate pubsub`).
pub fn channel(prefix: &str) -> String {
    format!("{prefix}l1:invalidate")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One instance's tier.
pub struct L1 {
    shards: Box<[Mutex<Store>]>,
    ttl_ms: Option<u64>,
    /// False while invalidations may be missed (tracking, its connection down): nothing is
    /// served from the tier or cached in it then.
    live: AtomicBool,
    mode: L1Invalidate,
    counters: Arc<Counters>,
}

/// Shards of a tier this large (a small one is a single exact LRU).
const SHARDED_FROM: u64 = 1024;
const SHARDS: u64 = 16;

impl L1 {
    /// A tier of `spec.entries` entries; live from the start unless it waits for its
    /// invalidation connection (tracking).
    pub fn new(spec: &L1Spec, counters: Arc<Counters>) -> L1 {
        let n = if spec.entries >= SHARDED_FROM {
            SHARDS
        } else {
            1
        };
        let shards = (0..n)
            .map(|i| {
                let cap = spec.entries / n + u64::from(i < spec.entries % n);
                Mutex::new(Store::new(cap as usize))
            })
            .collect();
        L1 {
            shards,
            ttl_ms: spec.ttl.map(|d| d.0.as_millis() as u64),
            live: AtomicBool::new(spec.invalidate != L1Invalidate::Tracking),
            mode: spec.invalidate,
            counters,
        }
    }

    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, Store> {
        self.shards[(id % self.shards.len() as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn mode(&self) -> L1Invalidate {
        self.mode
    }

    /// The version of `id` the tier would serve and until when (unix ms), without touching
    /// its LRU order.
    pub fn peek(&self, id: u64) -> Option<(u64, u64)> {
        if !self.live.load(Relaxed) {
            return None;
        }
        self.shard(id)
            .peek(id, now_ms())
            .filter(|(m, _)| !m.negative)
            .map(|(m, exp)| (m.version, exp))
    }

    /// The entry of `id` the tier holds, unexpired.
    #[inline]
    pub fn get(&self, id: u64) -> Option<Meta> {
        if !self.live.load(Relaxed) {
            return None;
        }
        self.shard(id).get(id, now_ms())
    }

    /// A read of `id` from Redis or the database begins: [`Ticket::store`] caches its value
    /// unless an invalidation of the key arrives first.
    pub fn begin(&self, id: u64) -> Ticket<'_> {
        let begun = self.shard(id).begin(id);
        Ticket {
            l1: self,
            begun: Some(begun),
        }
    }

    /// This instance changed `id` itself (a write through it): drop its entry.
    pub fn drop_key(&self, id: u64) {
        self.shard(id).invalidate(id);
    }

    /// An invalidation of `id` arrived from Redis.
    fn received(&self, id: u64) {
        bump(&self.counters.l1_invalidations_received);
        self.shard(id).invalidate(id);
    }

    /// Invalidations may have been lost: drop everything, serve and cache nothing until
    /// [`L1::resume`].
    fn suspend(&self) {
        self.live.store(false, Relaxed);
        bump(&self.counters.l1_flushes);
        self.flush();
    }

    /// Invalidations flow again: cache only what is read from now on.
    fn resume(&self) {
        self.flush();
        self.live.store(true, Relaxed);
    }

    /// A fresh process's tier: empty (the instance restarted). Reads in flight cache nothing.
    pub fn clear(&self) {
        self.flush();
    }

    fn flush(&self) {
        for s in self.shards.iter() {
            s.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }
}

/// A read in flight for the tier; dropped without [`Ticket::store`], it caches nothing.
pub struct Ticket<'a> {
    l1: &'a L1,
    begun: Option<Begun>,
}

impl Ticket<'_> {
    /// Cache `meta`, the entry the read brought back, unless the key was invalidated (or the
    /// tier flushed) since the read began.
    pub fn store(mut self, meta: &Meta) {
        let Some(b) = self.begun.take() else {
            return;
        };
        let l1 = self.l1;
        let now = now_ms();
        let value = l1
            .live
            .load(Relaxed)
            .then(|| (*meta, store::expiry(now, l1.ttl_ms, meta)));
        match l1.shard(b.id).finish(b, value, now) {
            Stored::Yes { evicted: true } => bump(&l1.counters.l1_evictions),
            Stored::Spoiled => bump(&l1.counters.l1_spoiled),
            Stored::Yes { evicted: false } | Stored::No => {}
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.begun.take() {
            self.l1.shard(b.id).finish(b, None, 0);
        }
    }
}
