//! The closed loop: each client sends its next request when the last one returns. Clients are
//! spread over the instances; each draws keys from its own seeded stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{Driver, Path, Pending, Traffic, Window, drain_limit};
use crate::stats::{Purpose, derive_seed};
use crate::workload::{KeySampler, combine_digests};

pub(super) async fn run(
    d: &Driver,
    clients: u32,
    w: Window,
    shutdown: &CancellationToken,
) -> Result<Traffic> {
    let sc = &d.sc;
    let started = Arc::new(AtomicU64::new(0));
    let warmup = Arc::new(AtomicU64::new(0));
    // Each client's key digest, written while it is still growing (the first draws only).
    let digests: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..clients)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let mut workers = JoinSet::new();
    // A shard runs the clients c ≡ index (mod count), dealt over its own instances in turn,
    // which gives client c the instance the unsharded run gives it when the instances divide
    // evenly among the shards.
    let mut mine = 0usize;
    let paths: Arc<[Path]> = d.paths.clone().into();
    for c in 0..clients {
        if d.shard.is_some_and(|s| !s.owns(u64::from(c))) {
            continue;
        }
        let (paths, home) = (paths.clone(), mine % d.paths.len());
        mine += 1;
        let mut keys = KeySampler::new(
            sc.keys,
            sc.zipf,
            derive_seed(sc.seed, Purpose::Client, u64::from(c)),
            sc.missing_ratio.0,
        )
        .map(|k| k.with_missing(sc.missing_ids))
        .map_err(crate::error::UsageError)?;
        let by_instance = d.by_instance.clone();
        let (recorder, tally, started, warmup, stop, digests) = (
            d.recorder.clone(),
            d.tally.clone(),
            started.clone(),
            warmup.clone(),
            shutdown.clone(),
            digests.clone(),
        );
        let (client, abort) = (sc.client, d.run.abort.clone());
        workers.spawn(async move {
            tokio::time::sleep_until(w.start.into()).await;
            loop {
                let began = Instant::now();
                if began >= w.end || stop.is_cancelled() {
                    return;
                }
                let measured = began >= w.measure;
                let id = keys.next_id();
                let (digest, drawn) = keys.digest();
                let slot = &digests[c as usize];
                if drawn > slot.1.load(Relaxed) {
                    slot.0.store(digest, Relaxed);
                    slot.1.store(drawn, Relaxed);
                }
                let pending = if measured {
                    started.fetch_add(1, Relaxed);
                    Some(Pending::new(&recorder, &tally, began, began))
                } else {
                    warmup.fetch_add(1, Relaxed);
                    None
                };
                // A crashed instance's client (holder-crash) is sent to the next one up.
                let at = up_from(&paths, home);
                let (path, pending) = (&paths[at], pending.map(|p| p.on(&by_instance[at])));
                let (outcome, version) = match &client {
                    None => path.handle(id, measured).await,
                    // The client moves on at its deadline; the work it left goes on.
                    Some(c) => {
                        let attempt = |_| {
                            let path = path.clone();
                            async move { path.handle(id, measured).await }
                        };
                        super::with_retries(
                            attempt,
                            c,
                            began,
                            id ^ began.elapsed().as_nanos() as u64,
                            &tally,
                            measured,
                            &abort,
                        )
                        .await
                    }
                };
                if let Some(p) = pending {
                    // Latency first: the staleness lookup is bookkeeping.
                    p.finish(outcome);
                    if let Some(st) = path.staleness(id, outcome, version, began) {
                        recorder.record_stale_read(st);
                    }
                }
                // A request served from memory (an in-process tier or store) awaits nothing
                // that is pending, and a client that never yields keeps its worker thread:
                // the loads, refreshes and ticks of the run would wait behind it (measured:
                // 50 ms loads taking 2.4 s, one client of 60 served). Tokio's budget makes
                // it yield every 128 requests, and costs nothing when a request yielded.
                tokio::task::coop::consume_budget().await;
            }
        });
    }
    let limit = w.end.saturating_duration_since(Instant::now()) + drain_limit(shutdown);
    drain(&mut workers, limit, shutdown).await;
    let key_digest = combine_digests(
        digests
            .iter()
            .map(|(d, n)| (d.load(Relaxed), n.load(Relaxed))),
    );
    let s = started.load(Relaxed);
    Ok(Traffic {
        scheduled: s,
        shed: 0,
        unsent: 0,
        warmup: warmup.load(Relaxed),
        dispatched: s,
        lag: None,
        key_digest,
    })
}

/// The path at `home`, or when its instance is down the next one up (itself if none is): its
/// position.
#[inline]
fn up_from(paths: &[Path], home: usize) -> usize {
    let n = paths.len();
    if !paths[home].down() {
        return home;
    }
    (1..n)
        .map(|k| (home + k) % n)
        .find(|&i| !paths[i].down())
        .unwrap_or(home)
}

/// Wait for the workers, at most `limit` (5 s once shutdown is signalled), then abort the
/// rest — their requests in flight are dropped and counted as abandoned — and wait until
/// they are gone: a run must end even when a server stopped answering.
async fn drain(workers: &mut JoinSet<()>, limit: Duration, shutdown: &CancellationToken) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            r = workers.join_next() => if r.is_none() { return },
            _ = tokio::time::sleep_until(deadline) => break,
            _ = shutdown.cancelled(), if deadline - tokio::time::Instant::now() > Duration::from_secs(5) => {
                // Interrupted: give in-flight requests a short grace period, not the full limit.
                let grace = tokio::time::Instant::now() + Duration::from_secs(5);
                while tokio::time::Instant::now() < grace {
                    tokio::select! {
                        r = workers.join_next() => if r.is_none() { return },
                        _ = tokio::time::sleep_until(grace) => break,
                    }
                }
                break;
            }
        }
    }
    workers.abort_all();
    while workers.join_next().await.is_some() {}
}
