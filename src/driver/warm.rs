//! The cache at the start of a run (`--start`, `--warm`): the keys a long-running service would
//! hold (steady), none (cold), or all written at once (synchronized), with the K most popular
//! written just now. Rows are read from Postgres in bulk on the admin connection and written to
//! Redis pipelined (or into each instance's own memory, for a library that keeps its entries
//! in its process): warming is not traffic, sends no load and counts as no DB call.

use std::time::Instant;

use anyhow::Result;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::{Driver, Path};
use crate::cache::{Admin, Cache};
use crate::instance::now_ms;
use crate::origin::Db;
use crate::results::StartFigures;
use crate::scenario::LoadShape;
use crate::stats::{Purpose, derive_seed};
use crate::steady::{self, KeyState, SteadyParams};
use crate::values::Size;
use crate::workload::Start;

/// Keys read and written per round trip.
const CHUNK: usize = 2000;

impl Driver {
    /// Fill the cache as `--start` and `--warm` ask. `delta_us` is the load cost entries carry
    /// for XFetch until a real load replaces it.
    pub async fn warm(
        &self,
        db: &Db,
        admin: &Admin,
        delta_us: u32,
        shutdown: &CancellationToken,
    ) -> Result<StartFigures> {
        self.warm_for(db, admin, delta_us, shutdown, None).await
    }

    /// Which keys are present at the start, and whether each was drawn with its own TTL and
    /// remaining time (steady) or is written now (the K most popular, and synchronized).
    fn start_states(&self) -> Result<Vec<KeyState>> {
        let sc = &self.sc;
        let policy = &self.policy.freshness;
        Ok(match sc.start {
            Start::Steady => {
                // Closed loop: the rate is not known in advance, so every key counts as
                // requested often enough to stay cached (its remaining TTL still spread).
                let rps = match sc.load {
                    LoadShape::Open { rps, .. } => rps * (1.0 - sc.missing_ratio.0),
                    LoadShape::Closed { .. } => f64::MAX / 1e6,
                };
                let params = SteadyParams {
                    keys: sc.keys,
                    zipf: sc.zipf,
                    rps,
                    // Under swr the soft TTL, and the stale window apart (see
                    // SteadyParams::stale_ms).
                    ttl_ms: policy.ttl_ms,
                    jitter: sc.jitter.0,
                    warm_top: sc.warm,
                    stale_ms: policy.life_ms() - policy.ttl_ms,
                };
                let seed = derive_seed(sc.seed, Purpose::Steady, 0);
                match &sc.trace {
                    // A replay's keys at the rates the trace itself asks them.
                    Some(t) => {
                        let index = t.index(sc.value_size as u32).map_err(anyhow::Error::msg)?;
                        let run_s = t.found.run_s;
                        steady::draw_by(&params, seed, |id| index.rate(id, run_s))
                    }
                    None => steady::draw(&params, seed),
                }
            }
            Start::Cold => full_ttl(1..=sc.warm),
            Start::Synchronized => full_ttl(1..=sc.keys),
        })
    }

    /// [`Driver::warm`] for traffic that starts at the Unix ms `at` (a sharded run's start
    /// instant, seconds away): the entries are what the cache holds at that instant, their
    /// expiries pushed back by the wait.
    pub async fn warm_for(
        &self,
        db: &Db,
        admin: &Admin,
        delta_us: u32,
        shutdown: &CancellationToken,
        at: Option<u64>,
    ) -> Result<StartFigures> {
        let sc = &self.sc;
        let t = Instant::now();
        let policy = &self.policy.freshness;
        // No cache: nothing to hold at the start either.
        if !policy.caches() {
            return Ok(StartFigures {
                mode: sc.start,
                keys_cached: 0,
                expiring_in_window: 0,
                ms: 0,
                left_out_at_limit: 0,
                budget_note: None,
            });
        }
        let states = self.start_states()?;
        // Keys written now get the jitter as a real write would (a synchronized start with
        // jitter is the spread mass expiry jitter is for); the draw is seeded like the rest.
        let mut rng = StdRng::seed_from_u64(derive_seed(sc.seed, Purpose::Steady, 1));
        let written_now = full_ttl_top(sc);
        let mut cached = 0u64;
        let mut expiring = 0u64;
        // Traffic starts right after warming: an entry whose soft expiry comes before the end
        // of the warm-up and the window expires in the run.
        let window_end =
            at.unwrap_or_else(now_ms) + (sc.warmup.0 + sc.duration.0).as_millis() as u64;
        // Under a memory limit the start state stops at the budget, most popular keys first
        // (the order of `states`): what a cache at its limit keeps, never an OOM.
        let mut budget = match sc.memory_limit() {
            Some(l) => Some(Budget::new(admin, l.maxmemory.0, sc.value_size).await?),
            None => None,
        };
        // An in-process cache (Caffeine's): each instance is warmed as its own process
        // would be, and Redis holds nothing.
        let in_process: Vec<&Cache> = self
            .paths
            .iter()
            .filter_map(|p| match p {
                Path::Builtin(i) if i.cache().is_in_process() => Some(i.cache()),
                _ => None,
            })
            .collect();
        let mut i = 0;
        while i < states.len() {
            if shutdown.is_cancelled() {
                break;
            }
            let mut len = CHUNK.min(states.len() - i);
            if let Some(b) = &budget {
                len = len.min(b.room());
                if len == 0 {
                    break;
                }
            }
            let chunk = &states[i..i + len];
            let ids: Vec<i64> = chunk.iter().map(|k| k.rank as i64).collect();
            let rows = db.rows(&ids).await?;
            let real_now = now_ms();
            let now = at.map_or(real_now, |a| a.max(real_now));
            let wait = now - real_now;
            let mut entries = Vec::with_capacity(rows.len());
            let mut expiring_here = 0;
            for (k, (_, payload, version)) in chunk.iter().zip(&rows) {
                let (meta, px) = if k.rank <= written_now {
                    policy.stamp(now, delta_us, *version as u64, rng.random::<f64>())
                } else {
                    policy.stamp_at(now, k.ttl_ms, k.remaining_ms, delta_us, *version as u64)
                };
                if meta.soft_expiry_ms < window_end {
                    expiring_here += 1;
                }
                entries.push((k.rank, meta.encode(payload.as_bytes()), px + wait));
            }
            let written = if in_process.is_empty() {
                admin.set_many(&entries).await
            } else {
                in_process.iter().for_each(|c| c.warm_in_process(&entries));
                Ok(())
            };
            match written {
                Ok(()) => {}
                // Noeviction refused a write: the limit is reached sooner than measured (the
                // server's own allocations grew). What was written before it stays.
                Err(e) if budget.is_some() && format!("{e:#}").contains("OOM") => {
                    if let Some(b) = budget.as_mut() {
                        b.refused = true;
                    }
                    break;
                }
                Err(e) => return Err(e),
            }
            // Their loads' causes: a warmed key gone after its TTL expired, not a first load.
            for (id, _, px) in &entries {
                self.run.loads.book.stored(*id, real_now + px);
            }
            cached += entries.len() as u64;
            expiring += expiring_here;
            i += len;
            if let Some(b) = budget.as_mut() {
                b.wrote(admin, entries.len()).await?;
            }
        }
        let left_out = states.len() as u64 - cached;
        let budget_note = match budget.as_ref() {
            _ if !in_process.is_empty() => Some(format!(
                "; in each of the {} instances' own memory, none in Redis (the library keeps its entries in its process)",
                in_process.len()
            )),
            Some(b) => Some(b.note(cached, states.len() as u64)),
            None => None,
        };
        Ok(StartFigures {
            mode: sc.start,
            keys_cached: cached,
            expiring_in_window: expiring,
            ms: t.elapsed().as_millis() as u64,
            left_out_at_limit: if budget.is_some() { left_out } else { 0 },
            budget_note,
        })
    }
}

/// Share of `maxmemory` the start state may fill: the rest is left for the run's own keys
/// (the heartbeat, locks, lease tokens) and the server's buffers, so that the first write
/// of the traffic is not already refused.
const BUDGET_SHARE: f64 = 0.95;

/// Keys written per round trip under a limit at most: small enough that the last chunk
/// cannot overshoot the budget by much.
const LIMITED_CHUNK: usize = 250;

/// The room left for the start state under a memory limit, measured from the server's
/// `used_memory` after every chunk.
struct Budget {
    maxmemory: u64,
    budget: u64,
    used: u64,
    /// Bytes one entry costs, measured from the last chunk (estimated before the first).
    per_key: f64,
    /// A write was refused with OOM before the budget was reached.
    refused: bool,
}

impl Budget {
    async fn new(admin: &Admin, maxmemory: u64, value_size: usize) -> Result<Budget> {
        let used = admin.memory_stats().await?.used_memory;
        Ok(Budget {
            maxmemory,
            budget: (maxmemory as f64 * BUDGET_SHARE) as u64,
            used,
            // The payload, the entry's 40-byte header, the key and Redis's per-key overhead.
            per_key: value_size as f64 + 40.0 + 100.0,
            refused: false,
        })
    }

    /// How many more entries fit.
    fn room(&self) -> usize {
        let left = self.budget.saturating_sub(self.used) as f64;
        ((left / self.per_key.max(1.0)) as usize).min(LIMITED_CHUNK)
    }

    /// `n` entries were written: measure what they cost.
    async fn wrote(&mut self, admin: &Admin, n: usize) -> Result<()> {
        let used = admin.memory_stats().await?.used_memory;
        if n > 0 && used > self.used {
            self.per_key = (used - self.used) as f64 / n as f64;
        }
        self.used = used;
        Ok(())
    }

    /// The status line's account of it.
    fn note(&self, cached: u64, drawn: u64) -> String {
        let why = if self.refused {
            "a write was refused with OOM"
        } else {
            "the budget was reached"
        };
        if drawn == 0 && self.used > self.maxmemory {
            // A cold start holds nothing: what matters is that Redis alone is already over.
            format!(
                " (maxmemory {}: Redis's own used_memory {} is over it before any entry, so every write will be refused)",
                Size(self.maxmemory),
                self.used
            )
        } else if cached >= drawn {
            format!(
                " (under maxmemory {}: all fit, used_memory {} of a {} budget)",
                Size(self.maxmemory),
                self.used,
                self.budget
            )
        } else {
            format!(
                "; stopped at the memory limit ({why}): the {cached} most popular of the {drawn} keys the start would hold, used_memory {} of maxmemory {} (start state budget {}%)",
                self.used,
                Size(self.maxmemory),
                (BUDGET_SHARE * 100.0) as u32
            )
        }
    }
}

/// Keys written just now, with their full TTL (stamped as a write would, jitter included).
fn full_ttl(ranks: std::ops::RangeInclusive<u64>) -> Vec<KeyState> {
    ranks
        .map(|rank| KeyState {
            rank,
            ttl_ms: 0,
            remaining_ms: 0,
        })
        .collect()
}

/// The ranks written now rather than drawn: the warm set, or every key when synchronized.
fn full_ttl_top(sc: &crate::scenario::Scenario) -> u64 {
    match sc.start {
        Start::Synchronized => sc.keys,
        _ => sc.warm,
    }
}
