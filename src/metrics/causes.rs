//! Why each DB call was made. Every measured statement gets exactly one [`Cause`], decided
//! when its load begins by a fixed precedence (docs/results.md), so the causes add up to
//! `db.calls` by construction:
//!
//! 1. `herd`: another load of the key was in flight (what a perfect coordination saves);
//! 2. `refresh`: an early recompute (XFetch), a background refresh (swr, eager refresh) or the
//!    re-warm job;
//! 3. `after_fault`: the request's cache read failed, its wait for another loader ran out,
//!    the key's previous load failed, or its entry was lost to a fault (drop-cache, Redis
//!    killed) before it expired;
//! 4. `invalidation`: a write deleted the entry since it was stored;
//! 5. `expiry`: the entry had expired (gone past its TTL, or found past its expiry); under a
//!    steady start also a key the start left absent, as a long-running service's would be;
//! 6. `eviction`: the entry was gone before its expiry under a memory limit, or the full
//!    cache refused its write-back (noeviction);
//! 7. `first`: the key was never cached in this run (its compulsory load);
//! 8. `other`: none of these (a value no cache keeps: a missing id without negative caching,
//!    every load under no-cache; an entry gone early with nothing to explain it).
//!
//! What the request saw comes with the load ([`Why`]); what happened to the key before is
//! kept per id in one word ([`CauseBook`]): a flat table indexed by id for the run's keys
//! (at most [`DIRECT_MAX`]) and a bounded, tagged table for any other id (missing ids, the
//! tail of a huge trace), where a slot another id took over forgets the first one's history.
//! One atomic read per load and one write per write-back: nothing per request.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The wall clock in unix ms (what write-backs stamp their expiries with).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Causes, in the order results and summaries list them.
pub const CAUSES: [Cause; 8] = [
    Cause::Expiry,
    Cause::First,
    Cause::Eviction,
    Cause::Invalidation,
    Cause::Herd,
    Cause::Refresh,
    Cause::AfterFault,
    Cause::Other,
];

/// Why a DB call was made (see the module's precedence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    First,
    Expiry,
    Eviction,
    Invalidation,
    Herd,
    Refresh,
    AfterFault,
    Other,
}

impl Cause {
    /// The name results and summaries use.
    pub fn name(self) -> &'static str {
        match self {
            Cause::First => "first",
            Cause::Expiry => "expiry",
            Cause::Eviction => "eviction",
            Cause::Invalidation => "invalidation",
            Cause::Herd => "herd",
            Cause::Refresh => "refresh",
            Cause::AfterFault => "after_fault",
            Cause::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the request path saw when it decided to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// No entry in the cache.
    Absent,
    /// An entry past its expiry (kept by a grace, or judged expired).
    Expired,
    /// The cache read failed (Redis down or not answering): the request loads blind.
    ReadFailed,
    /// The wait for another loader (lock, lease, single-flight) ran out.
    WaitRanOut,
    /// XFetch drew the request to recompute before expiry.
    Early,
    /// A background refresh (swr, eager refresh) or the re-warm job.
    Refresh,
}

/// Ids kept in the flat table at most (8 bytes each): beyond, the tagged table.
pub const DIRECT_MAX: usize = 1 << 22;
/// Slots of the tagged table (ids outside the flat table).
const HASHED_SLOTS: usize = 1 << 16;

const EXP_MASK: u64 = (1 << 32) - 1;
const EPOCH_SHIFT: u32 = 32;
const STORED: u64 = 1 << 40;
const INVALIDATED: u64 = 1 << 41;
const FAILED: u64 = 1 << 42;
const NOT_KEPT: u64 = 1 << 43;
const SET_FAILED: u64 = 1 << 44;
const TAG_SHIFT: u32 = 45;

/// Each key's history as far as its causes need it, in one word per id: when its entry
/// expires (ms from `base_ms`), the cache-loss epoch it was stored in, whether a write deleted
/// it, whether its last load failed or was not kept, and (tagged table) a tag of the id.
#[derive(Debug)]
pub struct CauseBook {
    direct: Box<[AtomicU64]>,
    hashed: Box<[AtomicU64]>,
    base_ms: u64,
    /// Bumped each time a fault empties the cache (drop-cache, Redis killed).
    lost: AtomicU64,
    /// Under a steady start a key absent at the start counts as expired.
    absent_is_expiry: bool,
    /// A memory limit is in force: an entry gone early was evicted.
    evicts: bool,
    /// No cache (no-cache): every load but a herd's is `other`.
    uncached: bool,
    /// Each instance keeps its own entries (an in-process library): a key another instance
    /// stored is absent here until this instance loads it. The book is the run's, so such a
    /// load counts as `first`, and so does one after this instance's own copy expired while
    /// another's, stored later, still lives.
    per_process: bool,
}

impl Default for CauseBook {
    fn default() -> Self {
        CauseBook::new(0, false, false, false)
    }
}

fn mix(id: u64) -> u64 {
    // splitmix64's finaliser: spreads consecutive ids over slots and tags.
    let mut z = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl CauseBook {
    /// A book for ids up to `keys` kept flat (the run's ids are 1..=keys), the rest tagged;
    /// `uncached`: the strategy keeps nothing.
    pub fn new(keys: u64, absent_is_expiry: bool, evicts: bool, uncached: bool) -> CauseBook {
        let direct = (keys as usize).saturating_add(1).min(DIRECT_MAX);
        CauseBook {
            direct: (0..direct).map(|_| AtomicU64::new(0)).collect(),
            hashed: (0..HASHED_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            base_ms: unix_ms(),
            lost: AtomicU64::new(0),
            absent_is_expiry,
            evicts,
            uncached,
            per_process: false,
        }
    }

    /// The book of a run whose instances keep their entries in their own memory.
    pub fn per_process(mut self, on: bool) -> CauseBook {
        self.per_process = on;
        self
    }

    /// Whether the run's instances keep their entries in their own memory.
    pub fn is_per_process(&self) -> bool {
        self.per_process
    }

    /// The slot of `id` and the tag its word carries there.
    #[inline]
    fn slot(&self, id: u64) -> (&AtomicU64, u64) {
        match self.direct.get(id as usize) {
            Some(s) => (s, 0),
            None => {
                let h = mix(id);
                let s = &self.hashed[(h as usize) & (HASHED_SLOTS - 1)];
                (s, (h >> TAG_SHIFT) << TAG_SHIFT)
            }
        }
    }

    /// `id`'s word when the slot holds its history (0: nothing known).
    #[inline]
    fn word(&self, id: u64) -> (&AtomicU64, u64, u64) {
        let (s, tag) = self.slot(id);
        let w = s.load(Relaxed);
        let mine = if w != 0 && w >> TAG_SHIFT << TAG_SHIFT == tag {
            w
        } else {
            0
        };
        (s, tag, mine)
    }

    fn epoch(&self) -> u64 {
        self.lost.load(Relaxed) & 0xff
    }

    /// The cache kept `id` until the unix ms `expires_ms`.
    pub fn stored(&self, id: u64, expires_ms: u64) {
        let (s, tag) = self.slot(id);
        let exp = expires_ms.saturating_sub(self.base_ms).clamp(1, EXP_MASK);
        s.store(tag | STORED | (self.epoch() << EPOCH_SHIFT) | exp, Relaxed);
    }

    /// A load of `id` brought a value no cache keeps (no-cache, a missing id without negative
    /// caching).
    pub fn not_kept(&self, id: u64) {
        let (s, tag) = self.slot(id);
        s.store(tag | NOT_KEPT | (self.epoch() << EPOCH_SHIFT), Relaxed);
    }

    /// The write-back of `id` failed (Redis refused it: out of memory, or down).
    pub fn set_failed(&self, id: u64) {
        let (s, tag) = self.slot(id);
        s.store(tag | SET_FAILED | (self.epoch() << EPOCH_SHIFT), Relaxed);
    }

    /// A write deleted `id`'s entry.
    pub fn invalidated(&self, id: u64) {
        let (s, _, w) = self.word(id);
        if w & STORED != 0 {
            s.fetch_or(INVALIDATED, Relaxed);
        }
    }

    /// A load of `id` failed: the next one is a retry after a fault.
    pub fn failed(&self, id: u64) {
        let (s, tag, w) = self.word(id);
        s.store((if w == 0 { tag } else { w }) | FAILED, Relaxed);
    }

    /// A fault emptied the cache (all of it or a share): entries stored before are gone early.
    /// In a run whose instances keep their own entries nothing is lost: a drop or an outage
    /// of Redis does not reach them.
    pub fn cache_lost(&self) {
        if self.per_process {
            return;
        }
        self.lost.fetch_add(1, Relaxed);
    }

    /// The cause of a load of `id` that saw `why`; `herd` when another load of the key was
    /// in flight as it began; `now_ms` unix ms.
    pub fn cause(&self, id: u64, why: Why, herd: bool, now_ms: u64) -> Cause {
        if herd {
            return Cause::Herd;
        }
        let w = match why {
            Why::Early | Why::Refresh => return Cause::Refresh,
            Why::ReadFailed | Why::WaitRanOut => return Cause::AfterFault,
            _ if self.uncached => return Cause::Other,
            Why::Expired | Why::Absent => self.word(id).2,
        };
        if w & FAILED != 0 {
            return Cause::AfterFault;
        }
        if why == Why::Expired {
            return Cause::Expiry;
        }
        if w & SET_FAILED != 0 {
            // Refused by a full cache (noeviction) is the memory limit's doing; else the
            // cache failed.
            return if self.evicts {
                Cause::Eviction
            } else {
                Cause::AfterFault
            };
        }
        if w & STORED == 0 {
            return match (w & NOT_KEPT != 0, self.absent_is_expiry) {
                (true, _) => Cause::Other,
                (false, true) => Cause::Expiry,
                (false, false) => Cause::First,
            };
        }
        if w & INVALIDATED != 0 {
            return Cause::Invalidation;
        }
        if now_ms >= self.base_ms + (w & EXP_MASK) {
            return Cause::Expiry;
        }
        if (w >> EPOCH_SHIFT) & 0xff != self.epoch() {
            return Cause::AfterFault;
        }
        if self.evicts {
            Cause::Eviction
        } else if self.per_process {
            Cause::First
        } else {
            Cause::Other
        }
    }
}

/// Measured statements by cause (index: [`Cause`]'s order of declaration).
#[derive(Debug, Default)]
pub struct CauseCounts([AtomicU64; 8]);

impl CauseCounts {
    #[inline]
    pub fn count(&self, c: Cause) {
        self.0[c.index()].fetch_add(1, Relaxed);
    }

    /// The count of `c` so far.
    pub fn get(&self, c: Cause) -> u64 {
        self.0[c.index()].load(Relaxed)
    }
}

/// The hottest key's figures for the herd model: its requests, its loads and the herds they
/// formed, and how long a load of it took from the miss to the write-back.
#[derive(Debug, Default)]
pub struct HotKey {
    /// The key (0: none chosen).
    pub id: u64,
    pub requests: AtomicU64,
    pub loads: AtomicU64,
    /// Loads that began with no other load of the key in flight (each starts a herd).
    pub leaders: AtomicU64,
    pub peak: AtomicU64,
    /// Load plus write-back of the key's loads, µs, and how many.
    pub fill_us: AtomicU64,
    pub fills: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_entries_a_key_another_instance_holds_is_a_first_load_here() {
        let b = CauseBook::new(10, false, false, false).per_process(true);
        let now = b.base_ms + 1000;
        b.stored(3, now + 500);
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::First);
        assert_eq!(b.cause(3, Why::Absent, false, now + 500), Cause::Expiry);
        // A drop of the Redis keys does not reach an instance's own entries.
        b.cache_lost();
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::First);
    }

    #[test]
    fn precedence_and_history() {
        let b = CauseBook::new(10, false, false, false);
        let now = b.base_ms + 1000;
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::First);
        assert_eq!(b.cause(3, Why::Absent, true, now), Cause::Herd);
        assert_eq!(b.cause(3, Why::Early, false, now), Cause::Refresh);
        assert_eq!(b.cause(3, Why::ReadFailed, false, now), Cause::AfterFault);
        b.stored(3, now + 500);
        assert_eq!(
            b.cause(3, Why::Absent, false, now),
            Cause::Other,
            "gone early"
        );
        assert_eq!(b.cause(3, Why::Absent, false, now + 500), Cause::Expiry);
        assert_eq!(b.cause(3, Why::Expired, false, now), Cause::Expiry);
        b.cache_lost();
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::AfterFault);
        assert_eq!(b.cause(3, Why::Absent, false, now + 600), Cause::Expiry);
        b.stored(3, now + 500);
        b.invalidated(3);
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::Invalidation);
        b.failed(3);
        assert_eq!(b.cause(3, Why::Expired, false, now), Cause::AfterFault);
        b.stored(3, now + 500);
        assert_eq!(b.cause(3, Why::Absent, false, now), Cause::Other);
        b.not_kept(4);
        assert_eq!(b.cause(4, Why::Absent, false, now), Cause::Other);
        b.set_failed(5);
        assert_eq!(b.cause(5, Why::Absent, false, now), Cause::AfterFault);
        let u = CauseBook::new(10, true, false, true);
        assert_eq!(
            u.cause(3, Why::Absent, false, now),
            Cause::Other,
            "no cache"
        );
        assert_eq!(u.cause(3, Why::Absent, true, now), Cause::Herd);
        let e = CauseBook::new(10, true, true, false);
        assert_eq!(e.cause(3, Why::Absent, false, now), Cause::Expiry, "steady");
        e.stored(3, now + 500);
        assert_eq!(e.cause(3, Why::Absent, false, now), Cause::Eviction);
        e.set_failed(4);
        assert_eq!(e.cause(4, Why::Absent, false, now), Cause::Eviction, "OOM");
    }

    #[test]
    fn ids_outside_the_flat_table_are_tagged() {
        let b = CauseBook::new(10, false, false, false);
        let now = b.base_ms + 1000;
        // Ids past the run's keys share a bounded table: one that lands on another's slot
        // finds no history of its own.
        let a = 1_000_000u64;
        b.stored(a, now + 500);
        assert_eq!(b.cause(a, Why::Absent, false, now + 500), Cause::Expiry);
        let other = (a + 1..).find(|&o| {
            (mix(o) as usize) & (HASHED_SLOTS - 1) == (mix(a) as usize) & (HASHED_SLOTS - 1)
        });
        let other = other.expect("a colliding id");
        assert_eq!(b.cause(other, Why::Absent, false, now), Cause::First);
        assert_eq!(b.cause(10, Why::Absent, false, now), Cause::First);
    }
}
