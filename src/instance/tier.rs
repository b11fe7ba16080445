//! The request path's hooks into the instance's in-process tier (`--l1`): read it first,
//! cache what a Redis read or a load brought back (unless an invalidation of the key arrived
//! meanwhile), and after a write drop the key here and tell the other instances (`pubsub`;
//! under `tracking` Redis tells them). Lock polls and re-checks read Redis, never the tier.

use std::sync::Arc;
use std::time::Duration;

use super::{Instance, Served, now_ms_f64};
use crate::l1::{L1, L1Invalidate, Ticket};
use crate::metrics::{Outcome, bump};
use crate::strategy::freshness::Verdict;

/// How long a write's probe lets its invalidation reach the other instances' tiers before it
/// looks at them: a pub/sub message or a tracking push is sent by Redis before it answers
/// the write's own command, so it is on its way already; this bounds its delivery.
const PROBE_GRACE: Duration = Duration::from_millis(50);

impl Instance {
    /// Give this instance the in-process tier `l1` (and list it for the write probes).
    pub fn with_l1(mut self, l1: Arc<L1>) -> Instance {
        self.run
            .tiers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(l1.clone());
        self.l1 = Some(l1);
        self
    }

    /// The tier first: how the request was served when it holds a fresh entry, else the
    /// ticket with which the Redis read may cache what it finds (None without a tier).
    #[inline]
    pub(super) fn l1_first(&self, id: u64) -> Result<Served, Option<Ticket<'_>>> {
        let Some(l1) = &self.l1 else {
            return Err(None);
        };
        if let Some(m) = l1.get(id) {
            // u = 1: XFetch never draws an early recompute on the tier; its lottery runs on
            // the Redis reads (an entry past its soft expiry goes to Redis like a miss).
            if matches!(
                self.policy.freshness.judge(&m, now_ms_f64(), 1.0),
                Verdict::Fresh
            ) {
                if m.negative {
                    bump(&self.run.counters.negative_hits);
                }
                return Ok((Outcome::L1Hit, m.version));
            }
        }
        Err(Some(l1.begin(id)))
    }

    /// A load of `id` begins: the ticket with which its write-back also fills the tier.
    pub(super) fn l1_load(&self, id: u64) -> Option<Ticket<'_>> {
        self.l1.as_ref().map(|l| l.begin(id))
    }

    /// A write through this instance invalidated `id` in Redis: drop it from this tier and,
    /// under `pubsub`, from every other (a failed PUBLISH is an invalidation failure).
    pub(super) async fn l1_after_write(&self, id: u64) {
        let Some(l1) = &self.l1 else {
            return;
        };
        l1.drop_key(id);
        if l1.mode() == L1Invalidate::Pubsub && self.cache.publish_l1(id).await.is_err() {
            bump(&self.run.counters.invalidation_failures);
        }
    }

    /// For a write's probe: the oldest version of `id` any instance's tier would serve once
    /// the write's invalidation has had [`PROBE_GRACE`] to arrive, and until when (unix ms).
    /// None without a tier, or when none holds the key.
    pub(super) async fn l1_probe(&self, id: u64) -> Option<(u64, u64)> {
        self.l1.as_ref()?;
        tokio::time::sleep(PROBE_GRACE).await;
        let tiers = self
            .run
            .tiers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        tiers
            .iter()
            .filter_map(|t| t.peek(id))
            .min_by_key(|&(v, _)| v)
    }
}
