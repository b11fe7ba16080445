//! One measured request as the client sees it: its deadline and retries ([`with_retries`],
//! [`within`]), its end counted exactly once ([`Pending`]), and the tally of goodput and
//! retries per timeline bucket ([`Tally`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::instance::Served;
use crate::metrics::{InstanceTally, Outcome, Recorder};
use crate::results::Bucket;

/// The measured requests' end: each is finished or abandoned, exactly once; and what the
/// client got of them: goodput and retries, in total and by the timeline bucket of their
/// scheduled start.
pub(super) struct Tally {
    pub(super) finished: AtomicU64,
    pub(super) abandoned: AtomicU64,
    pub(super) goodput: AtomicU64,
    pub(super) retries: AtomicU64,
    /// Retries that waited for a "retry after D" answer's D.
    pub(super) retry_after_waits: AtomicU64,
    /// The shortest of those waits, µs (u64::MAX: none).
    retry_after_min_us: AtomicU64,
    board: std::sync::OnceLock<Board>,
}

/// Goodput and retries per timeline bucket, by scheduled time (a request counts in the
/// bucket it was due in, so a late answer shows where the demand was).
struct Board {
    measure: Instant,
    interval_ns: u64,
    within_us: u64,
    goodput: Box<[AtomicU64]>,
    retries: Box<[AtomicU64]>,
}

impl Board {
    fn slot(&self, at: Instant) -> Option<usize> {
        let ns = at.checked_duration_since(self.measure)?.as_nanos() as u64;
        let i = (ns / self.interval_ns.max(1)) as usize;
        (i < self.goodput.len()).then_some(i)
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            finished: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            goodput: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retry_after_waits: AtomicU64::new(0),
            retry_after_min_us: AtomicU64::new(u64::MAX),
            board: std::sync::OnceLock::new(),
        }
    }
}

impl Tally {
    /// Fix the window the board counts in (once, before traffic).
    pub(super) fn open(
        &self,
        measure: Instant,
        window: Duration,
        interval: Duration,
        within: Duration,
    ) {
        let n = (window.as_nanos() / interval.as_nanos().max(1)) as usize + 1;
        let zeros = || (0..n).map(|_| AtomicU64::new(0)).collect();
        let _ = self.board.set(Board {
            measure,
            interval_ns: interval.as_nanos() as u64,
            within_us: within.as_micros() as u64,
            goodput: zeros(),
            retries: zeros(),
        });
    }

    #[inline]
    pub(super) fn answered(&self, outcome: Outcome, scheduled: Instant, latency_us: u64) {
        let Some(b) = self.board.get() else { return };
        if outcome.answered() && latency_us <= b.within_us {
            self.goodput.fetch_add(1, Relaxed);
            if let Some(i) = b.slot(scheduled) {
                b.goodput[i].fetch_add(1, Relaxed);
            }
        }
    }

    /// A retry waited `waited` after a "retry after D" answer.
    fn waited_as_told(&self, waited: Duration) {
        self.retry_after_waits.fetch_add(1, Relaxed);
        self.retry_after_min_us
            .fetch_min(waited.as_micros() as u64, Relaxed);
    }

    /// The shortest wait after a "retry after D" answer, ms; None without one.
    pub(super) fn retry_after_min_ms(&self) -> Option<f64> {
        let us = self.retry_after_min_us.load(Relaxed);
        (self.retry_after_waits.load(Relaxed) > 0).then(|| us as f64 / 1000.0)
    }

    pub(super) fn retried(&self, at: Instant) {
        self.retries.fetch_add(1, Relaxed);
        if let Some(b) = self.board.get()
            && let Some(i) = b.slot(at)
        {
            b.retries[i].fetch_add(1, Relaxed);
        }
    }

    /// Put each bucket's goodput and retries on the `timeline` of a window of `window`
    /// cut every `interval`.
    pub(super) fn place(&self, timeline: &mut [Bucket], interval: Duration, window: Duration) {
        // The bucket ending at t (a tick, a ms or two late) holds the requests due in the
        // interval before it: board slot round(t / interval) - 1. The drain's bucket, past
        // the window, holds none.
        let (iv_ms, window_ms) = (
            (interval.as_millis() as u64).max(1),
            window.as_millis() as u64,
        );
        let mut last = None;
        for b in timeline
            .iter_mut()
            .filter(|b| b.t_ms <= window_ms + iv_ms / 2)
        {
            let slot = ((b.t_ms + iv_ms / 2) / iv_ms).checked_sub(1);
            if slot.is_none() || slot == last {
                continue;
            }
            last = slot;
            (b.goodput, b.retries) = self.bucket(slot.unwrap_or_default() as usize);
        }
        // Retries sent after the window (during the drain) go in the last bucket, so the
        // timeline still adds up to the total.
        let placed: u64 = timeline.iter().map(|b| b.retries).sum();
        if let Some(b) = timeline.last_mut() {
            b.retries += self.retries.load(Relaxed).saturating_sub(placed);
        }
    }

    /// Goodput and retries of bucket `i`.
    fn bucket(&self, i: usize) -> (u64, u64) {
        self.board.get().map_or((0, 0), |b| {
            (
                b.goodput.get(i).map_or(0, |v| v.load(Relaxed)),
                b.retries.get(i).map_or(0, |v| v.load(Relaxed)),
            )
        })
    }
}

/// One measured request in flight. Finishing records its outcome; dropping it unfinished
/// (aborted at the end of the drain, or a panic in the request path) records it as an error
/// abandoned at that moment, so the worst requests stay in the percentiles.
pub(super) struct Pending<'a> {
    recorder: &'a Recorder,
    tally: &'a Tally,
    /// The instance that serves it (`instances[]`), once known.
    by: Option<&'a InstanceTally>,
    scheduled: Instant,
    began: Instant,
    done: bool,
}

impl<'a> Pending<'a> {
    pub(super) fn new(
        recorder: &'a Recorder,
        tally: &'a Tally,
        scheduled: Instant,
        began: Instant,
    ) -> Self {
        Pending {
            recorder,
            tally,
            by: None,
            scheduled,
            began,
            done: false,
        }
    }

    /// Counted in `instance`'s own figures too.
    pub(super) fn on(mut self, instance: &'a InstanceTally) -> Self {
        self.by = Some(instance);
        self
    }

    pub(super) fn finish(mut self, outcome: Outcome) {
        self.record(outcome);
        self.tally.finished.fetch_add(1, Relaxed);
    }

    fn record(&mut self, outcome: Outcome) {
        self.done = true;
        let now = Instant::now();
        let latency_us = (now - self.scheduled).as_micros() as u64;
        self.recorder
            .record(outcome, latency_us, (now - self.began).as_micros() as u64);
        self.tally.answered(outcome, self.scheduled, latency_us);
        if let Some(by) = self.by {
            by.record(outcome, latency_us);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record(Outcome::Error);
            self.tally.abandoned.fetch_add(1, Relaxed);
        }
    }
}

/// One attempt of a request under the client's deadline: the work runs until `deadline`,
/// when the client gives up (outcome `timed-out`); the work itself goes on in a task of its
/// own (the app does not know the client left) until it ends or the run aborts.
pub(super) async fn within<F>(
    work: F,
    deadline: Option<Instant>,
    abort: &CancellationToken,
) -> Served
where
    F: std::future::Future<Output = Served> + Send + 'static,
{
    let Some(deadline) = deadline else {
        return work.await;
    };
    // Boxed so the work can outlive this attempt: only with --request-timeout.
    let mut work = Box::pin(work);
    tokio::select! {
        served = &mut work => served,
        _ = tokio::time::sleep_until(deadline.into()) => {
            let abort = abort.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = work => {}
                    _ = abort.cancelled() => {}
                }
            });
            (Outcome::TimedOut, 0)
        }
    }
}

/// A request as the client sends it with `--request-timeout` and `--retries`: each attempt
/// (made by `attempt(n)`, n from 0) under its deadline, a failed or timed-out one sent again
/// after the backoff — one answered "retry after D" after D instead — every retry counted.
pub(super) async fn with_retries<W, F>(
    mut attempt: W,
    client: &crate::workload::Client,
    scheduled: Instant,
    seed: u64,
    tally: &Tally,
    measured: bool,
    abort: &CancellationToken,
) -> Served
where
    W: FnMut(u32) -> F,
    F: std::future::Future<Output = Served> + Send + 'static,
{
    let mut sent = scheduled;
    let mut n = 0u32;
    loop {
        let deadline = client.timeout.map(|d| sent + d.0);
        let served = within(attempt(n), deadline, abort).await;
        if !matches!(
            served.0,
            Outcome::Error | Outcome::TimedOut | Outcome::RetryAfter
        ) || n >= client.retries
            || abort.is_cancelled()
        {
            return served;
        }
        let refused = Instant::now();
        n += 1;
        let pause = if served.0 == Outcome::RetryAfter {
            // The answer's hint, in ms where a served version would be.
            Duration::from_millis(served.1)
        } else {
            // A cheap per-request draw for the jitter: the same request retries alike.
            let unit =
                (crate::stats::mix64(seed ^ u64::from(n)) >> 11) as f64 / (1u64 << 53) as f64;
            client.backoff_for(n, unit)
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = abort.cancelled() => return served,
        }
        sent = Instant::now();
        if measured {
            tally.retried(sent);
            if served.0 == Outcome::RetryAfter {
                tally.waited_as_told(sent - refused);
            }
        }
    }
}
