//! Loads behind the requests: a background refresh (swr's stale read, an eager refresh),
//! deduplicated per key per instance and coordinated as the strategy's `refresh` says, and
//! the re-warm job's loads. Each runs in a task of its own, counted in flight so the driver
//! can wait for them at the end of the run, and dropped when the run aborts.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::{Found, Instance, RunState};
use crate::metrics::{Why, bump};

impl Instance {
    /// SWR, eager refresh: start one background refresh of `id` in this instance unless one
    /// is running (false then); `seen_at` is when the value that called for it was computed.
    pub(super) fn refresh_behind(self: &Arc<Self>, id: u64, seen_at: u64) -> bool {
        {
            let mut r = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
            if !r.insert(id) {
                return false;
            }
        }
        let me = Arc::clone(self);
        self.run.refreshes_in_flight.fetch_add(1, Relaxed);
        let abort = self.run.abort.clone();
        // A crash of the instance (holder-crash) drops its refreshes where they stand, as it
        // does its requests.
        let life = self.life();
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
                    self.0.run.refreshes_in_flight.fetch_sub(1, Relaxed);
                }
            }
            let _done = Done(&me, id);
            let died = async {
                match &life {
                    Some(l) => l.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = me.refresh(id, seen_at) => {}
                _ = abort.cancelled() => {}
                _ = died => {}
            }
        });
        true
    }

    async fn refresh(&self, id: u64, seen_at: u64) {
        let Some(claim) = self
            .coord
            .refresh(&self.cache, &self.run.counters, id)
            .await
        else {
            bump(&self.run.counters.refreshes_skipped);
            return;
        };
        // Holding the lock: the instance that refreshed before us may have released just now
        // (a value computed after the one that called for this refresh). Laravel looks; a
        // library that regenerates on taking the lock (dogpile.cache) loads again.
        if self.policy.refresh_rechecks
            && claim.locked()
            && let Found::Entry(m, _) = self.read(id).await
            && m.computed_at_ms > seen_at
        {
            bump(&self.run.counters.refreshes_skipped);
            claim
                .release(&self.cache, &self.run.counters, id, Ok(m.version))
                .await;
            return;
        }
        bump(&self.run.counters.background_refreshes);
        let r = self
            .load_claimed(id, &claim, Why::Refresh, super::request::Fill::Request)
            .await;
        claim.release(&self.cache, &self.run.counters, id, r).await;
    }

    /// Re-warm `id` (`--rewarm-every`): load it and write it back with a full TTL whether or
    /// not its entry is still fresh, under the coordination as a background refresh is (a key
    /// whose lock or lease another loader holds is left to it). Through the same protections
    /// as any load: a refused one keeps the entry there is.
    pub async fn rewarm(&self, id: u64) {
        if self.is_down() {
            return;
        }
        let Some(claim) = self
            .coord
            .refresh(&self.cache, &self.run.counters, id)
            .await
        else {
            return;
        };
        let r = self
            .load_claimed(id, &claim, Why::Refresh, super::request::Fill::Rewarm)
            .await;
        claim.release(&self.cache, &self.run.counters, id, r).await;
    }
}

/// Wait until background refreshes have finished, at most `limit`.
pub async fn drain_refreshes(run: &RunState, limit: Duration) {
    let deadline = Instant::now() + limit;
    while run.refreshes_in_flight.load(Relaxed) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
