//! The in-process tier's decision, without time or I/O: a fixed-capacity LRU of entry headers
//! with an expiry per entry, and the "pending" markers that keep a read which began before an
//! invalidation from caching what it read (the race every client-side cache has: Redis sends
//! the invalidation on one connection while the read's answer is still on its way on
//! another). The clock is passed in, so every rule is tested exactly.
//!
//! The LRU is a doubly linked list threaded through a slab (indices, not pointers): a hit
//! moves its slot to the front, an insert past capacity evicts the back, all O(1) and with no
//! allocation once the slab is full.

use std::collections::HashMap;

use crate::strategy::envelope::Meta;

const NIL: usize = usize::MAX;

struct Slot {
    id: u64,
    meta: Meta,
    /// Unix ms at which the entry stops being served.
    expires_ms: u64,
    prev: usize,
    next: usize,
}

/// Reads of one key in flight (begun, not finished) and whether an invalidation of the key
/// arrived while they were.
#[derive(Default)]
struct Pending {
    readers: u32,
    spoiled: bool,
}

/// A read in flight: the key and the store's flush epoch when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begun {
    pub id: u64,
    epoch: u64,
}

/// What [`Store::finish`] did with a read's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Cached; `evicted`: the least recently used entry made room for it.
    Yes { evicted: bool },
    /// Not cached: an invalidation of the key, or a flush, arrived after the read began.
    Spoiled,
    /// Not cached: no value, or one already past its expiry.
    No,
}

/// One shard of an instance's in-process tier.
pub struct Store {
    cap: usize,
    index: HashMap<u64, usize>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    pending: HashMap<u64, Pending>,
    /// Bumped by every flush: a read that began before it caches nothing.
    epoch: u64,
}

/// When an entry read at `now_ms` stops being served: after `ttl_ms` (`--l1-ttl`) when
/// given, never after the Redis entry's own hard expiry.
pub fn expiry(now_ms: u64, ttl_ms: Option<u64>, meta: &Meta) -> u64 {
    match ttl_ms {
        Some(t) => now_ms.saturating_add(t).min(meta.hard_expiry_ms),
        None => meta.hard_expiry_ms,
    }
}

impl Store {
    /// A store of at most `cap` entries (at least one).
    pub fn new(cap: usize) -> Store {
        let cap = cap.max(1);
        Store {
            cap,
            index: HashMap::with_capacity(cap.min(1 << 16)),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            pending: HashMap::new(),
            epoch: 0,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.slots[i].prev, self.slots[i].next);
        if p == NIL {
            self.head = n;
        } else {
            self.slots[p].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.slots[n].prev = p;
        }
    }

    fn push_front(&mut self, i: usize) {
        self.slots[i].prev = NIL;
        self.slots[i].next = self.head;
        if self.head != NIL {
            self.slots[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    fn remove_slot(&mut self, i: usize) {
        self.unlink(i);
        self.index.remove(&self.slots[i].id);
        self.free.push(i);
    }

    /// The entry of `id` if it is held and not expired at `now_ms` (it becomes the most
    /// recently used); an expired one is dropped.
    pub fn get(&mut self, id: u64, now_ms: u64) -> Option<Meta> {
        let i = *self.index.get(&id)?;
        if now_ms >= self.slots[i].expires_ms {
            self.remove_slot(i);
            return None;
        }
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(self.slots[i].meta)
    }

    /// The entry of `id` and its expiry, without making it the most recently used (for the
    /// write probes, which are not traffic); None when absent or expired at `now_ms`.
    pub fn peek(&self, id: u64, now_ms: u64) -> Option<(Meta, u64)> {
        let s = &self.slots[*self.index.get(&id)?];
        (now_ms < s.expires_ms).then_some((s.meta, s.expires_ms))
    }

    /// A read of `id` begins (from Redis or the database): what it brings back may be cached
    /// by [`Store::finish`] unless an invalidation of the key or a flush comes first.
    pub fn begin(&mut self, id: u64) -> Begun {
        self.pending.entry(id).or_default().readers += 1;
        Begun {
            id,
            epoch: self.epoch,
        }
    }

    /// The read `b` ended with `value` (an entry and its expiry), at `now_ms`: cache it unless
    /// the key was invalidated or the store flushed since the read began. An invalidation
    /// spoils every read of the key then in flight, including one that began after it but
    /// before the last of them ended: a missed caching, never a stale entry.
    pub fn finish(&mut self, b: Begun, value: Option<(Meta, u64)>, now_ms: u64) -> Stored {
        let spoiled = match self.pending.get_mut(&b.id) {
            Some(p) => {
                let spoiled = p.spoiled;
                p.readers = p.readers.saturating_sub(1);
                if p.readers == 0 {
                    self.pending.remove(&b.id);
                }
                spoiled
            }
            None => false,
        } || b.epoch != self.epoch;
        let Some((meta, expires_ms)) = value else {
            return Stored::No;
        };
        if spoiled {
            return Stored::Spoiled;
        }
        if expires_ms <= now_ms {
            return Stored::No;
        }
        Stored::Yes {
            evicted: self.put(b.id, meta, expires_ms),
        }
    }

    /// Hold `meta` for `id` until `expires_ms`; whether the least recently used entry was
    /// evicted to make room.
    fn put(&mut self, id: u64, meta: Meta, expires_ms: u64) -> bool {
        if let Some(&i) = self.index.get(&id) {
            self.slots[i].meta = meta;
            self.slots[i].expires_ms = expires_ms;
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            return false;
        }
        let mut evicted = false;
        if self.index.len() >= self.cap && self.tail != NIL {
            self.remove_slot(self.tail);
            evicted = true;
        }
        let slot = Slot {
            id,
            meta,
            expires_ms,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        self.index.insert(id, i);
        self.push_front(i);
        evicted
    }

    /// Another writer changed `id`: drop its entry and spoil the reads of it in flight.
    /// Whether an entry was held.
    pub fn invalidate(&mut self, id: u64) -> bool {
        if let Some(p) = self.pending.get_mut(&id) {
            p.spoiled = true;
        }
        match self.index.get(&id) {
            Some(&i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    /// Drop everything, and cache nothing read before now (the invalidations may have been
    /// lost). How many entries were dropped.
    pub fn flush(&mut self) -> usize {
        let n = self.index.len();
        self.index.clear();
        self.slots.clear();
        self.free.clear();
        self.head = NIL;
        self.tail = NIL;
        self.epoch += 1;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(version: u64, hard_expiry_ms: u64) -> Meta {
        Meta {
            computed_at_ms: 0,
            delta_us: 0,
            soft_expiry_ms: hard_expiry_ms,
            hard_expiry_ms,
            version,
            negative: false,
        }
    }

    fn store_at(s: &mut Store, id: u64, version: u64, expires: u64, now: u64) -> Stored {
        let b = s.begin(id);
        s.finish(b, Some((meta(version, expires), expires)), now)
    }

    #[test]
    fn the_ttl_is_the_redis_entrys_unless_shorter() {
        let m = meta(1, 30_000);
        assert_eq!(expiry(1_000, None, &m), 30_000);
        assert_eq!(expiry(1_000, Some(5_000), &m), 6_000);
        assert_eq!(
            expiry(1_000, Some(60_000), &m),
            30_000,
            "never past Redis's"
        );
    }

    #[test]
    fn an_entry_is_served_until_its_expiry_then_dropped() {
        let mut s = Store::new(4);
        assert_eq!(
            store_at(&mut s, 1, 7, 100, 0),
            Stored::Yes { evicted: false }
        );
        assert_eq!(s.get(1, 99).map(|m| m.version), Some(7));
        assert_eq!(s.get(1, 100), None);
        assert_eq!(s.len(), 0, "an expired entry is dropped when found");
        assert_eq!(store_at(&mut s, 2, 1, 50, 50), Stored::No, "born expired");
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted() {
        let mut s = Store::new(3);
        for id in 1..=3 {
            store_at(&mut s, id, 1, 1_000, 0);
        }
        // 1 is used again: 2 is now the least recently used.
        assert!(s.get(1, 1).is_some());
        assert_eq!(
            store_at(&mut s, 4, 1, 1_000, 2),
            Stored::Yes { evicted: true }
        );
        assert_eq!(s.get(2, 3), None);
        for id in [1, 3, 4] {
            assert!(s.get(id, 3).is_some(), "{id}");
        }
        // A rewrite of a held key evicts nothing and takes the new value.
        assert_eq!(
            store_at(&mut s, 3, 2, 1_000, 4),
            Stored::Yes { evicted: false }
        );
        assert_eq!(s.get(3, 5).map(|m| m.version), Some(2));
        assert_eq!(s.len(), 3);
        // Order now (most recent first): 3, 4, 1: two inserts evict 1 then 4.
        store_at(&mut s, 5, 1, 1_000, 6);
        store_at(&mut s, 6, 1, 1_000, 6);
        assert_eq!(s.get(1, 7), None);
        assert_eq!(s.get(4, 7), None);
        assert!(s.get(3, 7).is_some());
    }

    #[test]
    fn an_invalidation_drops_the_entry_and_spoils_reads_in_flight() {
        let mut s = Store::new(4);
        store_at(&mut s, 1, 1, 1_000, 0);
        // A read of 1 begins (its GET is on its way), then the invalidation arrives first.
        let early = s.begin(1);
        assert!(s.invalidate(1));
        assert_eq!(s.get(1, 1), None);
        assert_eq!(
            s.finish(early, Some((meta(1, 1_000), 1_000)), 2),
            Stored::Spoiled,
            "a value whose read began before the invalidation is not cached"
        );
        // The marker went with its last reader: a read that begins now caches.
        assert_eq!(
            store_at(&mut s, 1, 2, 1_000, 3),
            Stored::Yes { evicted: false }
        );
        assert!(!s.invalidate(9), "nothing held");
    }

    #[test]
    fn overlapping_reads_share_a_marker_until_the_last_ends() {
        let mut s = Store::new(4);
        let a = s.begin(1);
        s.invalidate(1);
        let b = s.begin(1);
        assert_eq!(s.finish(a, None, 1), Stored::No);
        // b began after the invalidation but while a was in flight: not cached either.
        assert_eq!(
            s.finish(b, Some((meta(2, 1_000), 1_000)), 2),
            Stored::Spoiled
        );
        assert!(s.pending.is_empty());
    }

    #[test]
    fn a_flush_empties_the_store_and_spoils_every_read_in_flight() {
        let mut s = Store::new(4);
        store_at(&mut s, 1, 1, 1_000, 0);
        store_at(&mut s, 2, 1, 1_000, 0);
        let b = s.begin(3);
        assert_eq!(s.flush(), 2);
        assert_eq!(s.get(1, 1), None);
        assert_eq!(
            s.finish(b, Some((meta(1, 1_000), 1_000)), 2),
            Stored::Spoiled
        );
        // Reused after the flush: the slab starts over.
        for id in 10..15 {
            store_at(&mut s, id, 1, 1_000, 3);
        }
        assert_eq!(s.len(), 4);
        assert_eq!(s.get(10, 4), None, "the first in was evicted");
    }
}
