//! The re-warm job (`--rewarm-every D --rewarm-top K`): refresh-ahead on a schedule, as a
//! service's cron re-loads its hot keys before they expire. Every D from the start of the
//! traffic it re-loads the K most popular keys (ranks 1..=K, the ones `--warm` writes) and
//! writes each with a full TTL, spread over the run's instances in turn (key `id` on instance
//! `(id - 1) mod instances`, so the shards of a sharded run share the keys out, not repeat
//! them), each instance at most `--db-pool` at once. Its loads go through the instance's coordination and protections like
//! any other and are DB calls, also counted apart (`db.rewarm_calls`).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::{Driver, Window};
use crate::instance::Instance;

/// Start the job (None without `--rewarm-every`, or with no built-in instance). It hands
/// back how many of its runs started in the measured window.
pub(super) fn spawn(
    d: &Driver,
    w: Window,
    shutdown: &CancellationToken,
) -> Option<JoinHandle<u64>> {
    let r = d.sc.rewarm?;
    let instances: Vec<Arc<Instance>> = d.builtin_instances();
    if instances.is_empty() {
        return None;
    }
    // Where each of the run's instances is among this process's (None: another shard's).
    let mut local: Vec<Option<usize>> = vec![None; d.sc.instances.max(1) as usize];
    let numbers = match d.shard {
        Some(s) => s.instances(d.sc.instances),
        None => (0..d.sc.instances).collect(),
    };
    for (pos, i) in numbers.into_iter().enumerate() {
        if let Some(slot) = local.get_mut(i as usize) {
            *slot = Some(pos);
        }
    }
    let (stop, abort) = (shutdown.clone(), d.run.abort.clone());
    let at_once = d.sc.db_pool.max(1) as usize;
    Some(tokio::spawn(async move {
        let mut measured_runs = 0u64;
        let mut due = w.start + r.every.0;
        while due < w.end && !stop.is_cancelled() {
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = stop.cancelled() => break,
            }
            if due >= w.measure {
                measured_runs += 1;
            }
            // Every instance takes its share at once, at most `at_once` of it in flight.
            let gates: Vec<Arc<Semaphore>> = instances
                .iter()
                .map(|_| Arc::new(Semaphore::new(at_once)))
                .collect();
            let mut set = JoinSet::new();
            for id in 1..=r.top {
                let Some(pos) = local[((id - 1) % local.len() as u64) as usize] else {
                    continue;
                };
                let (inst, gate) = (instances[pos].clone(), gates[pos].clone());
                set.spawn(async move {
                    let _turn = gate.acquire_owned().await;
                    inst.rewarm(id).await;
                });
            }
            tokio::select! {
                _ = async { while set.join_next().await.is_some() {} } => {}
                // Ctrl-C, or the run over: a re-warm still running is dropped with the set.
                _ = stop.cancelled() => break,
                _ = abort.cancelled() => break,
            }
            // A run that took longer than D is followed by the next at once, never by several.
            due = (due + r.every.0).max(Instant::now());
        }
        measured_runs
    }))
}
