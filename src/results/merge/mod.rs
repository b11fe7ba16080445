//! Merging the results of a sharded run's shards into the one result of the experiment, as
//! a fold: each part of a result merges itself ([`rules::Merge`], one impl per part in
//! [`parts`], every field naming its rule), so a field that does not say how it merges does
//! not compile. Counts are summed, HdrHistograms merged losslessly (percentiles recomputed
//! from the merged distribution, never averaged), timelines aligned on the wall clock, and
//! the figures only the servers can give (their call count, INFO, herds across shards from
//! the load ledger) taken from what shard 0 read once for the whole window. Pure: the caller
//! reads the files.

pub mod parts;
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};

use super::shard::{Merged, ShardFigures};
use super::{Bucket, Known, Latency, RunResult, decode_histogram};
use crate::error::UsageError;
use rules::{Merge, any, both, by_parent, either, first, min, recomputed, same};

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
            use crate::results::comparable::{STRATEGY_SETTINGS, WORKLOAD_SETTINGS, differences};
            let keys: Vec<&str> = WORKLOAD_SETTINGS
                .iter()
                .chain(STRATEGY_SETTINGS.iter())
                .copied()
                .collect();
            let diff = differences(&first.scenario, &r.scenario, &keys)
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
    let rs: Vec<&RunResult> = shards.iter().map(|(_, r)| r).collect();
    let mut m = rs[0].clone();
    // Shard 0's own buckets are placed on the run's interval grid as the others' are.
    m.timeline = align(&m.timeline, 0, &[], 0, grid(&m));
    for r in &rs[1..] {
        m.merge(r)?;
    }
    let notes = notes(&rs, &m);
    finish(&mut m)?;
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

impl Merge for RunResult {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let RunResult {
            schema,
            tool_version,
            strategy,
            started_at_ms,
            interrupted,
            scenario,
            start,
            requests,
            outcomes,
            hit_rate,
            db,
            cost,
            l1,
            redis,
            lock,
            latency_ms,
            service_ms,
            latency_by_outcome_ms,
            histograms,
            timeline,
            faults,
            recovery,
            breaker,
            instances: per_instance,
            servers,
            generator,
            thresholds,
            diagnoses,
            consistency,
            http,
            app,
            shard,
            merged,
        } = o;
        same(&mut self.schema, schema);
        same(&mut self.tool_version, tool_version);
        same(&mut self.strategy, strategy);
        // The timeline first: it is placed by both shards' starts, before they merge.
        self.timeline = align(
            &self.timeline,
            self.started_at_ms.saturating_sub(*started_at_ms),
            timeline,
            started_at_ms.saturating_sub(self.started_at_ms),
            grid(self),
        );
        min(&mut self.started_at_ms, started_at_ms);
        any(&mut self.interrupted, interrupted);
        same(&mut self.scenario, scenario);
        let mine = self.shard.clone().unwrap_or_default();
        let theirs = shard.clone().unwrap_or_default();
        // The start is the state the shard that set up left; the faults are the reports of
        // the shard that executed them (the others only record the schedule).
        if theirs.set_up && !(mine.set_up && self.start.is_some()) && start.is_some() {
            self.start.clone_from(start);
        }
        if theirs.executed_faults && !mine.executed_faults {
            self.faults.clone_from(faults);
        }
        either(&mut self.shard, shard)?;
        self.requests.merge(requests)?;
        self.outcomes.merge(outcomes)?;
        recomputed(&mut self.hit_rate, hit_rate);
        // The pools' busy share is weighed by the shards' instances.
        let busy = self.db.pool_busy * f64::from(self.generator.instances)
            + db.pool_busy * f64::from(generator.instances);
        let instances = self.generator.instances + generator.instances;
        self.db.merge(db)?;
        self.db.pool_busy = if instances == 0 {
            0.0
        } else {
            busy / f64::from(instances)
        };
        both(&mut self.cost, cost)?;
        either(&mut self.l1, l1)?;
        self.redis.merge(redis)?;
        self.lock.merge(lock)?;
        recomputed(&mut self.latency_ms, latency_ms);
        recomputed(&mut self.service_ms, service_ms);
        recomputed(&mut self.latency_by_outcome_ms, latency_by_outcome_ms);
        self.histograms.merge(histograms)?;
        recomputed(&mut self.recovery, recovery);
        // Every instance's breaker changes, in time order (a stable sort keeps shard order).
        self.breaker.extend(breaker.iter().cloned());
        self.breaker.sort_by_key(|e| e.at_ms);
        // The shards drive disjoint instances: their figures side by side, by instance.
        self.instances.extend(per_instance.iter().cloned());
        self.instances.sort_by_key(|i| i.instance);
        first(&mut self.servers, servers);
        self.generator.merge(generator)?;
        recomputed(&mut self.thresholds, thresholds);
        recomputed(&mut self.diagnoses, diagnoses);
        self.consistency.merge(consistency)?;
        // An app under test is never sharded.
        same(&mut self.http, http);
        same(&mut self.app, app);
        by_parent(&mut self.merged, merged);
        Ok(())
    }
}

/// The run's interval and measured window, ms: the grid its timeline is placed on.
fn grid(r: &RunResult) -> (u64, u64) {
    (
        (r.scenario.interval.0.as_millis() as u64).max(1),
        r.scenario.duration.0.as_millis() as u64,
    )
}

/// Two timelines on one wall clock: each bucket is placed by its end time since the earlier
/// start (`a_offset`, `b_offset`: how much later each side started), in `interval` steps;
/// the drain buckets (past the window) share the last slot.
fn align(
    a: &[Bucket],
    a_offset: u64,
    b: &[Bucket],
    b_offset: u64,
    (interval, window): (u64, u64),
) -> Vec<Bucket> {
    let mut slots: BTreeMap<u64, Bucket> = BTreeMap::new();
    let sides = [(a, a_offset), (b, b_offset)];
    for (bucket, offset) in sides
        .iter()
        .flat_map(|(side, offset)| side.iter().map(move |b| (b, *offset)))
    {
        let drain = bucket.t_ms > window;
        let slot = if drain {
            u64::MAX
        } else {
            (bucket.t_ms + offset).div_ceil(interval)
        };
        let t_ms = if drain {
            bucket.t_ms
        } else {
            (slot * interval).min(window)
        };
        match slots.get_mut(&slot) {
            Some(acc) => {
                // Infallible for buckets: they hold no histogram.
                let _ = acc.merge(bucket);
                acc.t_ms = acc.t_ms.max(t_ms);
            }
            None => {
                slots.insert(
                    slot,
                    Bucket {
                        t_ms,
                        ..bucket.clone()
                    },
                );
            }
        }
    }
    slots.into_values().collect()
}

/// What the fold recomputes once every shard is in: the figures derived from others, and
/// those only shard 0 read for the whole run.
fn finish(m: &mut RunResult) -> Result<()> {
    let completed = m.requests.completed;
    m.requests.amplification =
        crate::results::per_scheduled(m.requests.attempts, m.requests.scheduled);
    m.hit_rate = Known::or_unknown(
        (completed > 0).then(|| {
            (m.outcomes.hit + m.outcomes.stale + m.outcomes.l1_hit) as f64 / completed as f64
        }),
        || "no request completed".to_string(),
    );
    let share = |n: u64| (completed > 0).then(|| n as f64 / completed as f64);
    if let Some(l1) = &mut m.l1 {
        l1.hit_rate = share(l1.hits);
        l1.redis_hit_rate = share(m.outcomes.hit + m.outcomes.stale);
    }
    m.consistency.stale_read_ratio = share(m.consistency.stale_reads).unwrap_or(0.0);
    let d = &mut m.db;
    // A herd spans processes: no shard's own count sees another shard's loads, so the
    // client-side figures of a 1-process run are unknown here; the ledger's (statements
    // running in Postgres) have names of their own, as they count something else.
    let why = "a sharded run's loads are counted per process, and a herd spans processes: see db.ledger_peak_key_herd and db.ledger_redundant_loads (statements running in Postgres, from the load ledger)";
    d.peak_key_herd = Known::unknown(why);
    d.redundant_loads = Known::unknown(why);
    d.herd_model = None;
    let whole = m.shard.as_ref().and_then(|s| s.whole_run.as_ref());
    let ledger = whole.and_then(|w| w.ledger);
    d.ledger_peak_key_herd = ledger.map(|l| l.peak_herd);
    d.ledger_redundant_loads = ledger.map(|l| l.redundant);
    d.calls_server_read = None;
    match whole {
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
    m.redis.keyspace_hit_rate = match (m.redis.keyspace_hits, m.redis.keyspace_misses) {
        (Some(h), Some(s)) if h + s > 0 => Some(h as f64 / (h + s) as f64),
        _ => None,
    };
    let decode = |s: &str, what: &str| decode_histogram(s).map_err(|e| anyhow!("{what}: {e:#}"));
    let h = &m.histograms;
    m.latency_ms = Latency::of(&decode(&h.latency_us, "latency histogram")?);
    m.service_ms = Latency::of(&decode(&h.service_us, "service histogram")?);
    m.latency_by_outcome_ms = h
        .by_outcome_us
        .iter()
        .map(|(k, v)| Ok((k.clone(), Latency::of(&decode(v, "per-outcome histogram")?))))
        .collect::<Result<_>>()?;
    // A run with a fault: its break-even from the merged timeline's undisturbed part.
    if let (Some(c), Some(part)) = (
        &mut m.cost,
        super::undisturbed::of(&m.scenario, &m.faults, &m.timeline),
    ) {
        *c = super::cost::CostFigures::of_part(&part);
    }
    let g = &mut m.generator;
    let requests = m.requests.scheduled + m.requests.warmup;
    g.cpu_per_request_us = if requests == 0 {
        0.0
    } else {
        g.cpu_seconds * 1e6 / requests as f64
    };
    Ok(())
}

/// How the figures that cannot simply be added were merged.
fn notes(rs: &[&RunResult], m: &RunResult) -> Vec<String> {
    let mut notes = vec![
        "db.peak_concurrent and db.peak_in_flight are the sums of the shards' peaks: an upper bound (the shards' peaks need not coincide)".to_string(),
    ];
    let ledger = m
        .shard
        .as_ref()
        .and_then(|s| s.whole_run.as_ref())
        .and_then(|w| w.ledger);
    notes.push(match ledger {
        Some(l) => format!(
            "db.ledger_peak_key_herd and db.ledger_redundant_loads are computed over every shard's {} loads from the load ledger, on the server's clock (loads running in Postgres; loads queued for a connection are not in it)",
            l.loads
        ),
        None => "no load ledger was read: the run's herds across shards are unknown".to_string(),
    });
    notes.push(
        "db.by_cause is the shards' counts added: each shard sees only its own loads, so a herd that spans shards counts under the other causes (herd is a lower bound); there is no herd model".to_string(),
    );
    notes.push(
        "timeline: buckets aligned on the wall clock and summed; a bucket's p99_ms is the highest shard's (an upper bound: buckets keep no histogram)".to_string(),
    );
    if rs
        .iter()
        .any(|r| r.generator.key_digest != rs[0].generator.key_digest)
    {
        notes.push("the shards' key digests differ (closed loop: each runs its own clients' streams), so the merged result has none".into());
    }
    notes.push(
        "generator: cpu and cores summed over the shards' processes, max lag and peak RSS the largest".into(),
    );
    notes
}
