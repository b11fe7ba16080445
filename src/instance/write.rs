//! Writes through an instance (`--write-rps`): the UPDATE, the commit in the run's log, the
//! invalidation `--invalidate` asks for, and the probe that reads the key back once it has
//! settled to tell whether the write left the cache wrong.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rand::RngExt;

use super::{Instance, now_ms};
use crate::metrics::bump;
use crate::strategy::envelope::Meta;
use crate::strategy::invalidate::Invalidate;

/// Longest a write's probe waits for its key to settle (the fills in flight at its commit
/// written back, no other write of the key in flight) before the write is counted unprobed.
const PROBE_SETTLE_LIMIT: Duration = Duration::from_secs(5);

impl Instance {
    /// One write of `id`, due at `due`: the UPDATE (its own transaction), the commit recorded
    /// in the run's commit log as soon as it is acknowledged, then the invalidation. A failed
    /// UPDATE is a write error; a failed or late invalidation is counted apart (the cache may
    /// keep the old version until its TTL). Under `--invalidate set|versioned` the entry it
    /// writes lives `ttl_ms` when given (a replayed trace's SET carries its own), else the
    /// run's TTL.
    pub async fn write(self: &Arc<Self>, id: u64, due: Instant, ttl_ms: Option<u64>) {
        if let Some(fills) = self.write_unprobed(id, due, ttl_ms).await {
            self.probe(id, fills);
        }
    }

    /// One write event of `writers` writers racing on `id` (`--writers-per-key`), each through
    /// the next of `instances` from `first`: all at once, then one read-back of the key, so
    /// the per-write consistency figures count events.
    pub async fn write_event(
        instances: &[Arc<Instance>],
        first: usize,
        writers: u32,
        id: u64,
        due: Instant,
    ) {
        let racing = (0..writers as usize).map(|k| {
            let inst = &instances[(first + k) % instances.len()];
            inst.write_unprobed(id, due, None)
        });
        let done = futures_util::future::join_all(racing).await;
        // The fills in flight at any writer's commit: the read-back waits for all of them.
        let mut fills: Vec<u64> = done.into_iter().flatten().flatten().collect();
        fills.sort_unstable();
        fills.dedup();
        if let Some(inst) = instances.get(first % instances.len().max(1)) {
            inst.probe(id, fills);
        }
    }

    /// `--write-gap`'s pause, drawn for this writer (none without it).
    async fn write_gap(&self) {
        if let Some(g) = self.policy.write_gap {
            // Drawn before the await: the thread's generator is not Send.
            let pause = g.at(rand::rng().random::<f64>());
            tokio::time::sleep(pause).await;
        }
    }

    /// One writer's write (see [`Instance::write`]) without its read-back: the fills in
    /// flight at its commit, which a read-back must wait for; None when there is nothing to
    /// read back (the write failed, or nothing is cached).
    async fn write_unprobed(
        self: &Arc<Self>,
        id: u64,
        due: Instant,
        ttl_ms: Option<u64>,
    ) -> Option<Vec<u64>> {
        let w = self.run.writes.as_ref()?;
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
        let deleted_first = if self.policy.invalidate == Invalidate::DeleteFirst
            && self.policy.freshness.caches()
        {
            let r = self.cache.delete(id).await;
            self.write_gap().await;
            Some(r)
        } else {
            None
        };
        let Some(row) = self.origin.write(id).await else {
            w.errors.fetch_add(1, Relaxed);
            w.record_latency(due.elapsed().as_micros() as u64);
            return None;
        };
        let version = row.version();
        w.versions.commit(id, version, Instant::now());
        // The fills that may have read the row before this commit: the probe waits for them.
        let fills_at_commit = probes.in_flight.fills_of(id);
        w.note_committed();
        // No cache, nothing to invalidate or read back: the database is the only copy.
        if !self.policy.freshness.caches() {
            w.record_latency(due.elapsed().as_micros() as u64);
            return None;
        }
        if self.policy.invalidate != Invalidate::DeleteFirst {
            self.write_gap().await;
        }
        let book = &self.run.loads.book;
        let invalidated = match self.policy.invalidate {
            Invalidate::Delete => {
                let r = self.cache.delete(id).await;
                if r.is_ok() {
                    book.invalidated(id);
                }
                r
            }
            Invalidate::DeleteGuarded => {
                let r = self
                    .cache
                    .guarded_delete(id, version, self.policy.marker_px_ms)
                    .await;
                if r.is_ok() {
                    book.invalidated(id);
                }
                r
            }
            Invalidate::DeleteFirst => {
                let r = deleted_first.unwrap_or(Ok(()));
                if r.is_ok() {
                    book.invalidated(id);
                }
                r
            }
            Invalidate::Set | Invalidate::Versioned => {
                let delta_us = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                let (meta, px) = match ttl_ms {
                    Some(t) => self
                        .policy
                        .freshness
                        .stamp_at(now_ms(), t, t, delta_us, version),
                    None => self.policy.freshness.stamp(
                        now_ms(),
                        delta_us,
                        version,
                        rand::rng().random::<f64>(),
                    ),
                };
                let versioned = self.policy.invalidate == Invalidate::Versioned;
                match self
                    .cache
                    .writer_set(
                        id,
                        &meta.encode(row.payload()),
                        px,
                        version,
                        versioned,
                        self.policy.marker_px_ms,
                    )
                    .await
                {
                    Ok(false) => {
                        bump(&self.run.counters.stale_sets_refused);
                        Ok(())
                    }
                    Ok(true) => {
                        book.stored(id, now_ms() + px);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Invalidate::None => Ok(()),
        };
        if invalidated.is_err() {
            bump(&self.run.counters.invalidation_failures);
        }
        self.l1_after_write(id).await;
        w.record_latency(due.elapsed().as_micros() as u64);
        drop(writing);
        Some(fills_at_commit)
    }

    /// Read `id` back once it has settled after a write: every fill in flight at the
    /// commit has written back and no other write of the key is in flight. One GET, apart
    /// from the traffic (in no outcome or hit figure of the tool; Redis's INFO counts it). A
    /// fixed delay would miss the UPDATE-then-DEL race, whose stale write-back lands up to a
    /// load time after the DEL. Its own task, so the write's latency does not include it.
    fn probe(self: &Arc<Self>, id: u64, fills: Vec<u64>) {
        let Some(w) = self.run.writes.clone() else {
            return;
        };
        let me = Arc::clone(self);
        let abort = self.run.abort.clone();
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
