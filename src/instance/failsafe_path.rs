//! The request path's part for values kept past their expiry: the fail-safe (serve the kept
//! value when the load fails, and throttle the key), the soft timeout (answer with it when the
//! load is slow, and let the load finish behind the request), and the push-back of a stale
//! read that extends the entry and recomputes it (Rails' race TTL). The decisions are [`crate::strategy::failsafe`]'s and the freshness
//! policy's; this is the thin shell that talks to Redis and the database through the
//! instance's one load path.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::{Instance, Served, now_ms, now_ms_f64, served};
use crate::metrics::{Outcome, Why, bump};
use crate::origin::LoadFailure;
use crate::strategy::envelope::{HEADER_LEN, Meta};

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

    /// [`StaleRead::ExtendAndRecompute`] (Rails' race TTL): the first reader of an entry in
    /// its stale window writes it back with its expiry pushed by the window (`--stale`), then
    /// recomputes it in the request. The read and the push are separate commands (as Rails'
    /// are), so readers that read before the push recompute too.
    ///
    /// [`StaleRead::ExtendAndRecompute`]: crate::strategy::StaleRead::ExtendAndRecompute
    pub(super) async fn extend_and_recompute(&self, id: u64, meta: Meta) -> Served {
        if let Ok(Some(bytes)) = self.cache.get(id).await
            && let Some(now) = Meta::decode(&bytes)
            && now.computed_at_ms == meta.computed_at_ms
        {
            let (pushed, px) = self.policy.freshness.extend(&now, now_ms());
            // A failed push leaves the entry as it was: more readers recompute (fail open).
            if self
                .cache
                .set(id, &pushed.encode(&bytes[HEADER_LEN..]), px)
                .await
                .is_ok()
            {
                bump(&self.run.counters.race_pushes);
            }
        }
        self.fill(id, Some(meta), Why::Expired).await
    }
}
