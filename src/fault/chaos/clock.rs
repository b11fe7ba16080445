//! The opening every fault lane shares: wait for the driver to fix the measured window's start
//! (a fault's AT counts from it), or for the run to stop first; then sleep to each fault's
//! time, the sleep cut short when the run stops.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::fault::FaultSpec;

/// A lane's clock, once the measured window is open.
pub(super) struct Clock {
    /// The measured window's start: every fault's time counts from it.
    pub start: Instant,
    /// The window's end.
    pub end: Instant,
    /// Traffic over or shutdown: stop waiting.
    stop: CancellationToken,
}

impl Clock {
    /// Wait for the window of `duration` to open; None when the run stops first, or when the
    /// lane has no fault to strike (it then waits for nothing).
    pub(super) async fn open(
        faults: &[FaultSpec],
        mut window: watch::Receiver<Option<Instant>>,
        duration: Duration,
        stop: CancellationToken,
    ) -> Option<Clock> {
        if faults.is_empty() {
            return None;
        }
        let start = tokio::select! {
            r = window.wait_for(Option::is_some) => r.ok().and_then(|v| *v),
            _ = stop.cancelled() => None,
        }?;
        Some(Clock {
            start,
            end: start + duration,
            stop,
        })
    }

    /// Sleep until `at`; false when the run stopped first.
    pub(super) async fn sleep_until(&self, at: Instant) -> bool {
        sleep_until(at, &self.stop).await
    }

    /// When `spec` is due.
    pub(super) fn due(&self, spec: &FaultSpec) -> Instant {
        self.start + spec.at.0
    }

    /// When the fault after the `nth` of `faults` is due, or the window's end after the last:
    /// what cuts the `nth`'s watch short.
    pub(super) fn next(&self, faults: &[FaultSpec], nth: usize) -> Instant {
        faults.get(nth + 1).map_or(self.end, |f| self.due(f))
    }
}

/// Sleep until `at`; false when `stop` came first.
pub(super) async fn sleep_until(at: Instant, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(at.into()) => true,
        _ = stop.cancelled() => false,
    }
}
