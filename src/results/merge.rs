//! Merging the results of a sharded run's shards into the one result of the experiment:
//! counts summed, HdrHistograms merged losslessly (percentiles recomputed from the merged
//! distribution, never averaged), timelines aligned on the wall clock, and the figures only
//! the servers can give (their call count, INFO, herds across shards from the load ledger)
//! taken from what shard 0 read once for the whole window. Pure: the caller reads the files.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;

use super::shard::{Merged, ShardFigures};
use super::{Bucket, DispatchLag, Latency, RunResult, decode_histogram, encode_histogram};
use crate::error::UsageError;

/// Settings that may differ between shards of one run (every other one must be equal).
const MAY_DIFFER: [&str; 1] = ["scenario_file"];

fn refuse(msg: String) -> anyhow::Error {
    UsageError::new(msg).into()
}

/// Check that `shards` (with `names` for the messages) are the shards of one experiment and
/// say which are missing. Refuses results that are not shards, of different runs or
/// scenarios, with different shard counts, or with an index twice.
fn check(shards: &[(String, RunResult)]) -> Result<(u32, String, Vec<u32>)> {
    let Some((first_name, first)) = shards.first() else {
        return Err(refuse("nothing to merge: give the shards' results".into()));
    };
    let info = |name: &str, r: &RunResult| -> Result<ShardFigures> {
        if r.merged.is_some() {
            return Err(refuse(format!(
                "{name} is already a merged result: merge the shards' own results"
            )));
        }
        r.shard.clone().ok_or_else(|| {
            refuse(format!(
                "{name} is not a shard's result (it was not written by `run --shard I/N`)"
            ))
        })
    };
    let f = info(first_name, first)?;
    let scenario = |r: &RunResult| {
        let mut v = serde_json::to_value(&r.scenario).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            for k in MAY_DIFFER {
                o.remove(k);
            }
        }
        v
    };
    let base = scenario(first);
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for (name, r) in shards {
        let s = info(name, r)?;
        if s.run_id != f.run_id || s.count != f.count {
            return Err(refuse(format!(
                "{name} is shard {}/{} of run {}, but {first_name} is of run {} with {} shards: these are different experiments",
                s.index, s.count, s.run_id, f.run_id, f.count
            )));
        }
        if scenario(r) != base || r.strategy != first.strategy {
            let diff = first
                .scenario
                .differences(
                    &r.scenario,
                    &crate::scenario::WORKLOAD_SETTINGS
                        .iter()
                        .chain(crate::scenario::STRATEGY_SETTINGS.iter())
                        .copied()
                        .collect::<Vec<_>>(),
                )
                .into_iter()
                .map(|(k, a, b)| format!("{k}: {a} vs {b}"))
                .collect::<Vec<_>>();
            return Err(refuse(format!(
                "{name} and {first_name} ran different scenarios ({}): they are not shards of one experiment",
                if diff.is_empty() {
                    "other settings".to_string()
                } else {
                    diff.join(", ")
                }
            )));
        }
        if let Some(other) = seen.insert(s.index, name) {
            return Err(refuse(format!(
                "shard {}/{} appears twice ({other} and {name}): a shard's result may be merged once",
                s.index, s.count
            )));
        }
    }
    let missing = (0..f.count).filter(|i| !seen.contains_key(i)).collect();
    Ok((f.count, f.run_id, missing))
}

fn decode(s: &str, what: &str) -> Result<Histogram<u64>> {
    decode_histogram(s).map_err(|e| anyhow!("{what}: {e:#}"))
}

/// Merge the shards' results. `allow_missing`: merge what there is and mark the result
/// partial instead of refusing.
pub fn merge(mut shards: Vec<(String, RunResult)>, allow_missing: bool) -> Result<RunResult> {
    let (count, run_id, missing) = check(&shards)?;
    if !missing.is_empty() && !allow_missing {
        return Err(refuse(format!(
            "shards {} of {count} are missing: merge all of them, or give --allow-missing to merge these and mark the result partial",
            missing
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    shards.sort_by_key(|(_, r)| r.shard.as_ref().map_or(0, |s| s.index));
    let mut notes = Vec::new();
    let rs: Vec<&RunResult> = shards.iter().map(|(_, r)| r).collect();
    let sum = |f: &dyn Fn(&RunResult) -> u64| rs.iter().map(|r| f(r)).sum::<u64>();
    let mut m = rs[0].clone();
    let lead = rs
        .iter()
        .find(|r| r.shard.as_ref().is_some_and(|s| s.whole_run.is_some()))
        .copied();

    // Histograms, losslessly.
    let mut latency = decode(&rs[0].histograms.latency_us, "latency histogram")?;
    let mut service = decode(&rs[0].histograms.service_us, "service histogram")?;
    let mut by_outcome: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    for (i, r) in rs.iter().enumerate() {
        if i > 0 {
            latency
                .add(decode(&r.histograms.latency_us, "latency histogram")?)
                .map_err(|e| anyhow!("merging latency histograms: {e:?}"))?;
            service
                .add(decode(&r.histograms.service_us, "service histogram")?)
                .map_err(|e| anyhow!("merging service histograms: {e:?}"))?;
        }
        for (k, v) in &r.histograms.by_outcome_us {
            let h = decode(v, "per-outcome histogram")?;
            match by_outcome.get_mut(k) {
                Some(acc) => acc
                    .add(h)
                    .map_err(|e| anyhow!("merging {k} histograms: {e:?}"))?,
                None => {
                    by_outcome.insert(k.clone(), h);
                }
            }
        }
    }
    m.latency_ms = Latency::of(&latency);
    m.service_ms = Latency::of(&service);
    m.latency_by_outcome_ms = by_outcome
        .iter()
        .map(|(k, h)| (k.clone(), Latency::of(h)))
        .collect();
    m.histograms.latency_us = encode_histogram(&latency);
    m.histograms.service_us = encode_histogram(&service);
    m.histograms.by_outcome_us = by_outcome
        .iter()
        .map(|(k, h)| (k.clone(), encode_histogram(h)))
        .collect();

    // Counts.
    m.started_at_ms = rs.iter().map(|r| r.started_at_ms).min().unwrap_or(0);
    m.interrupted = rs.iter().any(|r| r.interrupted);
    let q = &mut m.requests;
    q.scheduled = sum(&|r| r.requests.scheduled);
    q.completed = sum(&|r| r.requests.completed);
    q.shed = sum(&|r| r.requests.shed);
    q.unsent = sum(&|r| r.requests.unsent);
    q.errors = sum(&|r| r.requests.errors);
    q.abandoned = sum(&|r| r.requests.abandoned);
    q.warmup = sum(&|r| r.requests.warmup);
    let o = &mut m.outcomes;
    o.hit = sum(&|r| r.outcomes.hit);
    o.miss = sum(&|r| r.outcomes.miss);
    o.stale = sum(&|r| r.outcomes.stale);
    o.waited = sum(&|r| r.outcomes.waited);
    o.fallback = sum(&|r| r.outcomes.fallback);
    o.error = sum(&|r| r.outcomes.error);
    o.rejected = sum(&|r| r.outcomes.rejected);
    o.l1_hit = sum(&|r| r.outcomes.l1_hit);
    m.hit_rate = (m.requests.completed > 0).then(|| {
        (m.outcomes.hit + m.outcomes.stale + m.outcomes.l1_hit) as f64 / m.requests.completed as f64
    });
    m.l1 = rs.iter().any(|r| r.l1.is_some()).then(|| {
        super::l1::L1Figures::merged(
            rs.iter().filter_map(|r| r.l1.as_ref()),
            m.requests.completed,
            m.outcomes.hit + m.outcomes.stale,
        )
    });
    m.hit_rate_unknown = (m.requests.completed == 0).then(|| "no request completed".to_string());
    let weighted = |v: &dyn Fn(&RunResult) -> Option<f64>, w: &dyn Fn(&RunResult) -> u64| {
        let total = sum(w);
        (total > 0).then(|| {
            rs.iter()
                .map(|r| v(r).unwrap_or(0.0) * w(r) as f64)
                .sum::<f64>()
                / total as f64
        })
    };
    m.cost = merged_cost(&rs);
    let d = &mut m.db;
    // A shard whose DB calls are unknown leaves the sum unknown.
    d.calls = rs.iter().map(|r| r.db.calls).sum::<Option<u64>>();
    d.calls_unknown = d
        .calls
        .is_none()
        .then(|| "a shard's DB calls are unknown".to_string());
    let calls = |r: &RunResult| r.db.calls.unwrap_or(0);
    d.statement_errors = sum(&|r| r.db.statement_errors);
    d.statement_timeouts = sum(&|r| r.db.statement_timeouts);
    d.pool_timeouts = sum(&|r| r.db.pool_timeouts);
    d.connect_errors = sum(&|r| r.db.connect_errors);
    d.limit_refusals = sum(&|r| r.db.limit_refusals);
    d.breaker_refusals = sum(&|r| r.db.breaker_refusals);
    d.rate_refusals = sum(&|r| r.db.rate_refusals);
    d.rewarm_calls = sum(&|r| r.db.rewarm_calls);
    // Each shard runs the job on its own instances' share of the keys, on one schedule.
    d.rewarm_runs = rs.iter().map(|r| r.db.rewarm_runs).max().unwrap_or(0);
    // Shards fall back on their own: the longest any did (spells of two are not one).
    d.rate_fallback_ms = rs.iter().map(|r| r.db.rate_fallback_ms).max().unwrap_or(0);
    d.warmup_calls = sum(&|r| r.db.warmup_calls);
    d.background_refreshes = sum(&|r| r.db.background_refreshes);
    d.refreshes_skipped = sum(&|r| r.db.refreshes_skipped);
    d.early_recomputes = sum(&|r| r.db.early_recomputes);
    d.fail_safe = sum(&|r| r.db.fail_safe);
    d.fail_safe_throttled = sum(&|r| r.db.fail_safe_throttled);
    d.soft_timeouts = sum(&|r| r.db.soft_timeouts);
    d.soft_timeout_write_backs = sum(&|r| r.db.soft_timeout_write_backs);
    d.eager_refreshes = sum(&|r| r.db.eager_refreshes);
    d.race_pushes = sum(&|r| r.db.race_pushes);
    d.statement_ms_mean = weighted(&|r| r.db.statement_ms_mean, &calls);
    d.pool_wait_ms_mean = weighted(&|r| r.db.pool_wait_ms_mean, &calls);
    d.early_lead_ms_mean = weighted(&|r| r.db.early_lead_ms_mean, &|r| r.db.early_recomputes);
    d.pool_busy = weighted(&|r| Some(r.db.pool_busy), &|r| {
        u64::from(r.generator.instances)
    })
    .unwrap_or(0.0);
    // Peaks of different processes happen at different moments: their sum bounds the run's.
    d.peak_concurrent = sum(&|r| r.db.peak_concurrent);
    d.peak_in_flight = rs.iter().map(|r| r.db.peak_in_flight).sum::<Option<u64>>();
    notes.push(
        "db.peak_concurrent and db.peak_in_flight are the sums of the shards' peaks: an upper bound (the shards' peaks need not coincide)".to_string(),
    );
    let ledger = lead.and_then(|r| r.shard.as_ref()?.whole_run.as_ref()?.ledger);
    // A herd spans processes: no shard's own count sees another shard's loads, so the
    // client-side figures of a 1-process run are unknown here; the ledger's (statements
    // running in Postgres) have names of their own, as they count something else.
    let why = "a sharded run's loads are counted per process, and a herd spans processes: see db.ledger_peak_key_herd and db.ledger_redundant_loads (statements running in Postgres, from the load ledger)";
    d.peak_key_herd = None;
    d.peak_key_herd_unknown = Some(why.to_string());
    d.redundant_loads = None;
    d.redundant_loads_unknown = Some(why.to_string());
    match ledger {
        Some(l) => {
            d.ledger_peak_key_herd = Some(l.peak_herd);
            d.ledger_redundant_loads = Some(l.redundant);
            notes.push(format!(
                "db.ledger_peak_key_herd and db.ledger_redundant_loads are computed over every shard's {} loads from the load ledger, on the server's clock (loads running in Postgres; loads queued for a connection are not in it)",
                l.loads
            ));
        }
        None => {
            notes.push(
                "no load ledger was read: the run's herds across shards are unknown".to_string(),
            );
        }
    }
    match lead.and_then(|r| r.shard.as_ref()?.whole_run.as_ref()) {
        Some(w) => {
            d.calls_server = w.calls_server;
            d.calls_server_note = w.calls_server_note.clone();
            m.redis.keyspace_hits = w.keyspace_hits;
            m.redis.keyspace_misses = w.keyspace_misses;
            m.redis.note = Some(
                "INFO read once by shard 0 from its start to the end barrier: every client of the server, all shards".to_string(),
            );
        }
        None => {
            d.calls_server = None;
            d.calls_server_note = Some(
                "shard 0, which reads the server's count for the whole run, is not among the merged results".to_string(),
            );
            m.redis.keyspace_hits = None;
            m.redis.keyspace_misses = None;
            m.redis.note = Some("shard 0, which reads INFO for the whole run, is missing".into());
        }
    }
    d.calls_server_read = None;
    let rd = &mut m.redis;
    rd.errors = sum(&|r| r.redis.errors);
    rd.timeouts = sum(&|r| r.redis.timeouts);
    rd.cold_misses = sum(&|r| r.redis.cold_misses);
    rd.negative_hits = sum(&|r| r.redis.negative_hits);
    rd.expiries = sum(&|r| r.redis.expiries);
    let l = &mut m.lock;
    l.acquired = sum(&|r| r.lock.acquired);
    l.contended = sum(&|r| r.lock.contended);
    l.timeouts = sum(&|r| r.lock.timeouts);
    l.lost = sum(&|r| r.lock.lost);
    l.unavailable = sum(&|r| r.lock.unavailable);

    m.timeline = timeline(
        &rs,
        m.started_at_ms,
        m.scenario.interval.0.as_millis() as u64,
    );
    notes.push(
        "timeline: buckets aligned on the wall clock and summed; a bucket's p99_ms is the highest shard's (an upper bound: buckets keep no histogram)".to_string(),
    );
    // Faults are executed by one shard; its reports are the run's.
    if let Some(f) = rs
        .iter()
        .find(|r| r.shard.as_ref().is_some_and(|s| s.executed_faults))
    {
        m.faults = f.faults.clone();
    }
    m.breaker = rs.iter().flat_map(|r| r.breaker.iter().cloned()).collect();
    m.breaker.sort_by_key(|e| e.at_ms);
    if let Some(s) = rs.iter().find_map(|r| {
        r.start
            .clone()
            .filter(|_| r.shard.as_ref().is_some_and(|s| s.set_up))
    }) {
        m.start = Some(s);
    }

    let g = &mut m.generator;
    g.instances = rs.iter().map(|r| r.generator.instances).sum();
    g.cpu_seconds = rs.iter().map(|r| r.generator.cpu_seconds).sum();
    g.max_dispatch_lag_ms = rs
        .iter()
        .map(|r| r.generator.max_dispatch_lag_ms)
        .fold(0.0, f64::max);
    // Each shard's percentiles are of its own requests: the merged run's are at most the worst
    // shard's, which is what a bound on the precision needs.
    // A shard without them (closed loop, an older file) leaves the merged run's unknown.
    let lags: Option<Vec<DispatchLag>> = rs.iter().map(|r| r.generator.dispatch_lag_ms).collect();
    g.dispatch_lag_ms = lags.map(|lags| {
        let worst = |f: fn(&DispatchLag) -> f64| lags.iter().map(f).fold(0.0, f64::max);
        DispatchLag {
            p50: worst(|l| l.p50),
            p99: worst(|l| l.p99),
            max: g.max_dispatch_lag_ms,
        }
    });
    g.peak_rss_mib = rs
        .iter()
        .map(|r| r.generator.peak_rss_mib)
        .fold(0.0, f64::max);
    g.cores = rs.iter().map(|r| r.generator.cores).sum();
    let requests = m.requests.scheduled + m.requests.warmup;
    g.cpu_per_request_us = if requests == 0 {
        0.0
    } else {
        g.cpu_seconds * 1e6 / requests as f64
    };
    g.cpu_utilization = rs
        .iter()
        .map(|r| r.generator.cpu_utilization * f64::from(r.generator.cores))
        .sum::<f64>()
        / f64::from(g.cores.max(1));
    // Open loop: every shard draws the whole key stream, so their digests are the run's.
    if rs.iter().any(|r| r.generator.key_digest != g.key_digest) {
        g.key_digest = String::new();
        g.key_digest_draws = 0;
        notes.push("the shards' key digests differ (closed loop: each runs its own clients' streams), so the merged result has none".into());
    }
    notes.push(
        "generator: cpu and cores summed over the shards' processes, max lag and peak RSS the largest".into(),
    );

    let indexes: Vec<u32> = rs
        .iter()
        .filter_map(|r| r.shard.as_ref().map(|s| s.index))
        .collect();
    m.shard = None;
    m.merged = Some(Merged {
        run_id,
        count,
        shards: indexes,
        partial: !missing.is_empty(),
        missing,
        notes,
    });
    m.recovery = super::recovery::judge(
        &m.scenario,
        &m.faults,
        super::whole(&m.timeline),
        m.app.is_some(),
    );
    m.thresholds = m.judge(&m.scenario.thresholds);
    m.diagnoses = super::diagnose::diagnose(&m);
    Ok(m)
}

/// The shards' timelines on one wall clock: each bucket is placed by its end time since the
/// earliest start, in `interval` steps; the drain buckets (past the window) go last.
fn timeline(rs: &[&RunResult], start_ms: u64, interval: u64) -> Vec<Bucket> {
    let interval = interval.max(1);
    let window = rs
        .first()
        .map_or(0, |r| r.scenario.duration.0.as_millis() as u64);
    let mut slots: BTreeMap<u64, (Bucket, u64)> = BTreeMap::new();
    for r in rs {
        let offset = r.started_at_ms.saturating_sub(start_ms);
        for b in &r.timeline {
            let at = b.t_ms + offset;
            // The drain bucket ends past the window: all shards' drains share one slot.
            let slot = if b.t_ms > window {
                u64::MAX
            } else {
                at.div_ceil(interval)
            };
            let (acc, waited) = slots.entry(slot).or_insert_with(|| {
                (
                    Bucket {
                        t_ms: if slot == u64::MAX { 0 } else { slot * interval },
                        ..Bucket::default()
                    },
                    0,
                )
            });
            acc.t_ms = acc.t_ms.max(if slot == u64::MAX { b.t_ms } else { 0 });
            acc.requests += b.requests;
            acc.db_calls += b.db_calls;
            *waited += (b.pool_wait_ms * b.db_calls as f64 * 1000.0) as u64;
            acc.hits += b.hits;
            acc.stale += b.stale;
            acc.errors += b.errors;
            acc.rejected += b.rejected;
            acc.p99_ms = acc.p99_ms.max(b.p99_ms);
            acc.redis_up &= b.redis_up;
            acc.postgres_up &= b.postgres_up;
            acc.breaker_open |= b.breaker_open;
        }
    }
    slots
        .into_iter()
        .map(|(slot, (mut b, waited_us))| {
            if slot != u64::MAX {
                b.t_ms = (slot * interval).min(window);
            }
            b.pool_wait_ms = if b.db_calls == 0 {
                0.0
            } else {
                waited_us as f64 / 1000.0 / b.db_calls as f64
            };
            b
        })
        .collect()
}

/// The shards' cost figures as one run's: every mean weighed by what it averages (reads,
/// loads, write-backs); None when a shard has none.
fn merged_cost(rs: &[&RunResult]) -> Option<super::cost::CostFigures> {
    let cs: Vec<&super::cost::CostFigures> =
        rs.iter().map(|r| r.cost.as_ref()).collect::<Option<_>>()?;
    let sum = |v: &dyn Fn(&super::cost::CostFigures) -> (Option<f64>, u64)| {
        cs.iter().fold((0u64, 0u64), |(us, n), c| {
            let (mean, k) = v(c);
            (
                us + (mean.unwrap_or(0.0) * 1000.0 * k as f64).round() as u64,
                n + k,
            )
        })
    };
    Some(super::cost::CostFigures::measured(
        sum(&|c| (c.redis_read_ms, c.redis_reads)),
        sum(&|c| (c.run_load_ms, c.loads)),
        sum(&|c| (c.write_back_ms, c.write_backs)),
    ))
}
