//! The timeline: one bucket per `--interval` of the measured window, taken by a ticker task
//! from the per-thread recorders and the load tracker, plus one last bucket for what finished
//! during the drain. Only measured requests and measured statements are ever recorded, so the
//! buckets add up to the totals exactly: nothing has to be cleared at the window's start.
//! Each bucket also takes what the run's running sums of its cost inputs grew by (Redis reads,
//! write-backs, loads, the hottest key's counts), so the break-even and the herd model can be
//! read from the part of the window outside its faults; the request path pays nothing more.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Window;
use crate::instance::RunState;
use crate::live::Live;
use crate::metrics::{CountersSnapshot, Interval, Recorder, pct_ms};
use crate::results::Bucket;
use crate::results::undisturbed::BucketCost;

/// What the ticker hands back.
pub struct Ticked {
    pub buckets: Vec<Bucket>,
    /// The rare-event counters when the window opened (taken by the ticker as it wakes).
    pub counters_at_measure: CountersSnapshot,
    /// The cost inputs' running sums when the last bucket was taken.
    pub cost_mark: BucketCost,
}

/// Where the ticker feeds the live metrics (`--metrics-listen`).
pub struct Feed {
    export: crate::exporter::Export,
    shed: Arc<std::sync::atomic::AtomicU64>,
}

impl Feed {
    pub fn new(export: crate::exporter::Export, shed: Arc<std::sync::atomic::AtomicU64>) -> Feed {
        Feed { export, shed }
    }
}

/// Start the ticker: it waits for the window to open, then takes one bucket per `interval`
/// until the window closes or the run is stopped.
pub fn spawn(
    run: Arc<RunState>,
    recorder: Arc<Recorder>,
    interval: Duration,
    w: Window,
    stop: CancellationToken,
    mut live: Live,
    feed: Option<Feed>,
) -> JoinHandle<Ticked> {
    tokio::spawn(async move {
        // Without a warm-up the window opens with the traffic: take the baseline now, before
        // any request can count an event, rather than race the first requests.
        if w.measure > w.start {
            tokio::select! {
                _ = tokio::time::sleep_until(w.measure.into()) => {}
                _ = stop.cancelled() => {}
            }
        }
        let counters_at_measure = run.counters.snapshot();
        tokio::time::sleep_until(w.measure.into()).await;
        run.counters.redis_health.take_bucket_up();
        run.counters.pg_health.take_bucket_up();
        run.protect.take_bucket_open();
        let window = w.end.saturating_duration_since(w.measure);
        let mut buckets =
            Vec::with_capacity((window.as_nanos() / interval.as_nanos().max(1)) as usize + 2);
        let mut iv = Recorder::new_interval();
        let mut mark = BucketCost::default();
        let mut tick = w.measure;
        while !stop.is_cancelled() {
            tick += interval;
            let last = tick >= w.end;
            let due = if last { w.end } else { tick };
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = stop.cancelled() => {}
            }
            let mut b = take(
                &run,
                &recorder,
                &mut iv,
                &mut mark,
                Instant::now().min(w.end),
                w,
            );
            // Stopped before the bucket's end (Ctrl-C), or a window that is not a whole
            // number of intervals: a partial bucket.
            b.partial = Instant::now() + Duration::from_millis(1) < due
                || due.saturating_duration_since(tick - interval) + Duration::from_millis(1)
                    < interval;
            if let Some(f) = &feed {
                let errors = run.counters.redis_errors.load(Relaxed);
                f.export.add_interval(
                    &iv,
                    run.loads.calls.load(Relaxed),
                    f.shed.load(Relaxed),
                    errors.saturating_sub(counters_at_measure.redis_errors),
                );
            }
            live.tick(&b);
            buckets.push(b);
            if last {
                break;
            }
        }
        Ticked {
            buckets,
            counters_at_measure,
            cost_mark: mark,
        }
    })
}

/// The cost inputs' running sums now: only measured work is ever added to them.
fn cost_sums(run: &RunState) -> BucketCost {
    let c = run.cost.sums();
    let l = &run.loads;
    let h = &l.hot;
    BucketCost {
        read_us: c.read_us,
        reads: c.reads,
        write_back_us: c.write_back_us,
        write_backs: c.write_backs,
        load_us: l.pool_wait_us.load(Relaxed) + l.statement_us.load(Relaxed),
        loads: l.calls.load(Relaxed),
        hot_requests: h.requests.load(Relaxed),
        hot_loads: h.loads.load(Relaxed),
        hot_leaders: h.leaders.load(Relaxed),
        hot_fill_us: h.fill_us.load(Relaxed),
        hot_fills: h.fills.load(Relaxed),
    }
}

/// The bucket of what finished since the last one, stamped `at`; `mark`: the cost inputs'
/// sums at the last bucket, moved to now.
fn take(
    run: &RunState,
    recorder: &Recorder,
    iv: &mut Interval,
    mark: &mut BucketCost,
    at: Instant,
    w: Window,
) -> Bucket {
    recorder.take_interval(iv);
    let now = cost_sums(run);
    let cost = now.since(mark);
    *mark = now;
    let db_calls = run.loads.interval_calls.swap(0, Relaxed);
    let waited_us = run.loads.interval_pool_wait_us.swap(0, Relaxed);
    Bucket {
        t_ms: at.saturating_duration_since(w.measure).as_millis() as u64,
        requests: iv.requests,
        db_calls,
        pool_wait_ms: if db_calls == 0 {
            0.0
        } else {
            waited_us as f64 / 1000.0 / db_calls as f64
        },
        hits: iv.hits,
        stale: iv.stale,
        errors: iv.errors,
        rejected: iv.rejected,
        p99_ms: pct_ms(&iv.latency, 0.99),
        stale_reads: iv.stale_reads,
        writes: run
            .writes
            .as_ref()
            .map_or(0, |w| w.interval_committed.swap(0, Relaxed)),
        redis_up: run.counters.redis_health.take_bucket_up(),
        postgres_up: run.counters.pg_health.take_bucket_up(),
        breaker_open: run.protect.take_bucket_open(),
        // Filled by scheduled time at the end of the run.
        goodput: 0,
        retries: 0,
        partial: false,
        cost,
    }
}

/// What finished during the drain, as one last bucket (None when nothing did); `mark`: the
/// cost inputs' sums at the ticker's last bucket.
pub fn drain_bucket(
    run: &RunState,
    recorder: &Recorder,
    w: Window,
    mut mark: BucketCost,
) -> Option<Bucket> {
    let mut iv = Recorder::new_interval();
    let mut b = take(run, recorder, &mut iv, &mut mark, Instant::now(), w);
    b.partial = true;
    (b.requests > 0 || b.db_calls > 0 || b.writes > 0).then_some(b)
}
