//! The writes: an open loop of its own beside the reads, evenly spaced over the measured
//! window, to the same instances in turn (each write its own task, so a slow one does not
//! hold the next back), and, once traffic and writes are over, the keys the cache keeps at a
//! version the database no longer holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Driver, Window};
use crate::cache::Admin;
use crate::instance::Instance;
use crate::metrics::Writes;
use crate::origin::Db;
use crate::stats::{Purpose, derive_seed};
use crate::strategy::envelope::Meta;
use crate::trace::replay::Feed;
use crate::workload::KeySampler;

/// Takes a write off the in-flight count however it ends.
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Sends each write as a task of its own to the built-in instances in turn (writes are refused
/// with --target), counted in flight until it ends, cut short when the run aborts.
struct Sender {
    instances: Vec<Arc<Instance>>,
    /// Writers of the same key per write event (`--writers-per-key`).
    writers: u32,
    writes: Arc<Writes>,
    abort: CancellationToken,
    next: usize,
}

impl Sender {
    /// None when there is no built-in instance to write through.
    fn new(d: &Driver, writes: Arc<Writes>) -> Option<Sender> {
        let instances = d.builtin_instances();
        (!instances.is_empty()).then(|| Sender {
            instances,
            writers: d.sc.writes.map_or(1, |w| w.writers),
            writes,
            abort: d.run.abort.clone(),
            next: 0,
        })
    }

    fn send(&mut self, id: u64, due: Instant, ttl_ms: Option<u64>) {
        let first = self.next;
        self.next += 1;
        let (writes, abort) = (self.writes.clone(), self.abort.clone());
        writes.in_flight.fetch_add(1, Relaxed);
        if self.writers > 1 {
            // Racing writers of one key (never from a trace, whose SETs carry their own TTL).
            let (instances, writers) = (self.instances.clone(), self.writers);
            tokio::spawn(async move {
                let _in_flight = InFlight(&writes.in_flight);
                tokio::select! {
                    _ = Instance::write_event(&instances, first, writers, id, due) => {}
                    _ = abort.cancelled() => {}
                }
            });
            return;
        }
        // A crashed instance (holder-crash) takes no writes: the next one up does.
        let n = self.instances.len();
        let pos = (0..n)
            .map(|k| (first + k) % n)
            .find(|&p| !self.instances[p].is_down())
            .unwrap_or(first % n);
        let inst = self.instances[pos].clone();
        tokio::spawn(async move {
            let _in_flight = InFlight(&writes.in_flight);
            tokio::select! {
                _ = inst.write(id, due, ttl_ms) => {}
                _ = abort.cancelled() => {}
            }
        });
    }
}

/// Start the writes of the measured window (None without writes): one every 1/rate from the
/// window's start until its end, or until the run is stopped.
pub(super) fn spawn(
    d: &Driver,
    w: Window,
    shutdown: &CancellationToken,
    trace: Option<Feed>,
) -> Result<Option<JoinHandle<()>>> {
    let (Some(load), Some(writes)) = (d.sc.writes, d.run.writes.clone()) else {
        return Ok(None);
    };
    let Some(mut sender) = Sender::new(d, writes) else {
        return Ok(None);
    };
    let stop = shutdown.clone();
    if let Some(feed) = trace {
        return Ok(Some(tokio::spawn(replay(w, stop, feed, sender))));
    }
    let mut keys = KeySampler::new(
        d.sc.keys,
        load.zipf,
        derive_seed(d.sc.seed, Purpose::Writes, 0),
        0.0,
    )
    .map_err(crate::error::UsageError)?;
    let gap = Duration::from_secs_f64(1.0 / load.rps);
    Ok(Some(tokio::spawn(async move {
        let mut due = w.measure;
        while due < w.end && !stop.is_cancelled() {
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = stop.cancelled() => break,
            }
            sender.send(keys.next_id(), due, None);
            due += gap;
        }
    })))
}

/// The writes of a trace replayed with every op: each SET or DELETE at its own time from the
/// start of the traffic (the warm-up's too: they change the database like any other), a SET's
/// entry with the trace's TTL.
async fn replay(w: Window, stop: CancellationToken, mut feed: Feed, mut sender: Sender) {
    while let Some(next) = feed.next().await {
        let due = w.start + Duration::from_nanos(next.off_ns);
        if due >= w.end || stop.is_cancelled() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {}
            _ = stop.cancelled() => break,
        }
        sender.send(next.id, due, next.ttl_ms());
    }
}

/// Wait until no write and no write's probe is in flight, at most `limit`.
pub(super) async fn drain(writes: &Writes, limit: Duration) {
    let deadline = Instant::now() + limit;
    while (writes.in_flight.load(Relaxed) > 0 || writes.probes.pending.load(Relaxed) > 0)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The written keys after the run, as the cache and the database hold them.
pub struct Divergence {
    /// Keys written at least once.
    pub keys_written: u64,
    /// Of those, keys whose cached entry holds another version than the database's row.
    pub divergent_keys: u64,
}

/// Compare every written key's cached version with its row's: run after writes stopped and
/// in-flight work ended, so what differs now would stay wrong until the entry's TTL.
pub async fn divergence(writes: &Writes, db: &Db, admin: &Admin) -> Result<Divergence> {
    let keys = writes.versions.written();
    let ids: Vec<i64> = keys.iter().map(|&k| k as i64).collect();
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(2000) {
        rows.extend(db.versions(chunk).await?);
    }
    let db_version: std::collections::HashMap<u64, u64> = rows
        .into_iter()
        .map(|(id, v)| (id as u64, v as u64))
        .collect();
    let cached = admin.get_many(&keys).await?;
    let divergent = keys
        .iter()
        .zip(&cached)
        .filter(|(k, bytes)| {
            let Some(m) = bytes.as_deref().and_then(Meta::decode) else {
                return false;
            };
            !m.negative && db_version.get(k).is_some_and(|&v| v != m.version)
        })
        .count();
    Ok(Divergence {
        keys_written: keys.len() as u64,
        divergent_keys: divergent as u64,
    })
}
