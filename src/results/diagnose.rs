//! Diagnoses: what a run says about itself when it cannot show what was asked — no key
//! expired, the strategy's mechanism never fired, requests were shed (and at what bottleneck),
//! the database pool was saturated, the generator fell behind. Computed from the figures of a
//! finished result; they never change the exit code.

use serde::{Deserialize, Serialize};

use super::RunResult;
use crate::scenario::LoadShape;
use crate::strategy::{Coordination, Freshness, StaleRead};
use crate::values::start::Start;

/// Every diagnosis code, with when it is given.
pub const CODES: [(&str, &str); 7] = [
    (
        "no-expiry",
        "no cache entry expired in the measured window, so expiry herds and every freshness policy had nothing to act on",
    ),
    (
        "mechanism-idle",
        "the strategy's mechanism never fired (no early recompute, no lock contention, no follower, no stale response)",
    ),
    ("shed", "requests were shed; the bottleneck is named"),
    (
        "db-saturated",
        "loads waited for a pooled connection longer than a statement takes, for a sustained part of the run",
    ),
    (
        "generator-behind",
        "the load generator fell behind its schedule or used most of the machine",
    ),
    (
        "below-break-even",
        "the run's hit rate is below its break-even hit rate: the cache cost more latency than loading every request would have",
    ),
    (
        "hot-shard",
        "on a Redis Cluster, one primary served more than twice its fair share of the primaries' commands (one node of all nodes', with --read-from-replicas), at 1000 commands a second or more",
    ),
];

/// Above this share of the machine's CPU the generator competes with the servers it measures.
pub const CPU_WARN: f64 = 0.5;
/// A request dispatched this late (ms) means the generator, or the machine, fell behind. A
/// shared 2-core machine shows stalls of 10–30 ms now and then without the run being wrong
/// (the latency counts them); past this, a stretch of the schedule was measured late.
pub const LAG_WARN_MS: f64 = 50.0;

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Diagnosis {
    /// One of [`CODES`].
    pub code: String,
    /// What was seen, with its numbers, and what to do.
    pub message: String,
}

fn d(code: &str, message: String) -> Diagnosis {
    debug_assert!(
        CODES.iter().any(|(c, _)| *c == code),
        "undocumented code {code}"
    );
    Diagnosis {
        code: code.to_string(),
        message,
    }
}

/// The diagnoses of a finished run, in the order of [`CODES`].
pub fn diagnose(r: &RunResult) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let sc = &r.scenario;
    let secs = sc.duration.0.as_secs_f64().max(1e-9);
    let expired = r.redis.expiries > 0;
    // Without a cache nothing can expire, and no mechanism is there to fire.
    let caches = sc.strategy.caches();
    if caches && !expired && r.requests.completed > 0 {
        let why = if sc.ttl.0 >= sc.duration.0
            && r.start.as_ref().is_none_or(|s| s.mode != Start::Steady)
        {
            format!(
                "the TTL ({}) is not shorter than the run ({}) and the cache started {}: use --start steady, or a TTL shorter than the run",
                sc.ttl,
                sc.duration,
                r.start
                    .as_ref()
                    .map_or("empty", |s| if s.mode == Start::Synchronized {
                        "synchronized"
                    } else {
                        "empty"
                    })
            )
        } else {
            "too few keys were cached or requested for one to run out: lengthen the run or shorten the TTL".to_string()
        };
        out.push(d(
            "no-expiry",
            format!("no cache entry expired in the measured window: {why}"),
        ));
    }
    if let Some(idle) = idle_mechanism(r) {
        let reason = if expired {
            ""
        } else {
            " (no key expired, so it had nothing to act on)"
        };
        out.push(d("mechanism-idle", format!("{} never fired{reason}", idle)));
    }
    if r.requests.shed > 0 {
        out.push(d("shed", shed_message(r, secs)));
    }
    if let Some(m) = saturated(r) {
        out.push(d("db-saturated", m));
    }
    let g = &r.generator;
    if r.requests.unsent > 0 {
        out.push(d(
            "generator-behind",
            format!(
                "{} of {} requests due in the window were never sent: the generator could not dispatch them by its end (the rate is beyond what this machine can send); the run ended on time",
                r.requests.unsent, r.requests.scheduled
            ),
        ));
    }
    if g.cpu_utilization > CPU_WARN {
        out.push(d(
            "generator-behind",
            format!(
                "the generator used {:.0}% of the machine's {} cores: its own work competes with the servers, so the latency and the rate held partly measure the tool",
                g.cpu_utilization * 100.0,
                g.cores
            ),
        ));
    }
    if g.max_dispatch_lag_ms > LAG_WARN_MS {
        out.push(d(
            "generator-behind",
            format!(
                "requests were dispatched up to {:.1} ms after their scheduled time: the generator (or the machine it runs on) fell behind; the latency counts that delay",
                g.max_dispatch_lag_ms
            ),
        ));
    }
    if let Some(m) = below_break_even(r) {
        out.push(d("below-break-even", m));
    }
    if let Some(nodes) = &r.redis.nodes
        && let Some(m) = crate::cluster::figures::hot_shard(
            nodes,
            r.redis.hottest_node_share,
            secs,
            sc.cluster.read_from_replicas,
        )
    {
        out.push(d("hot-shard", m));
    }
    out
}

/// The hit rate below the break-even, with the figures it comes from.
fn below_break_even(r: &RunResult) -> Option<String> {
    let c = r.cost.as_ref()?;
    let (h, hr) = (c.break_even_hit_rate?, c.set_against(r)?);
    if hr >= h {
        return None;
    }
    let ms = |v: Option<f64>| v.unwrap_or(0.0);
    let from = if c.load_ms_from == super::cost::THIS_RUN {
        String::new()
    } else {
        format!(", L from {}", c.load_ms_from)
    };
    Some(format!(
        "the hit rate {:.1}% is below the break-even {:.1}% (Redis read G {:.3} ms, load L {:.3} ms{from}, write-back S {:.3} ms: a hit costs G, a miss G + L + S{}): every request loading would have been faster on average; raise the hit rate (longer TTL, fewer keys) or do not cache loads this cheap",
        hr * 100.0,
        h * 100.0,
        ms(c.redis_read_ms),
        ms(c.load_ms),
        ms(c.write_back_ms),
        c.where_words(),
    ))
}

/// The strategy's mechanism, named, when it never fired.
fn idle_mechanism(r: &RunResult) -> Option<String> {
    let s = sc_strategy(r);
    let mut idle = Vec::new();
    match s.freshness {
        Freshness::Xfetch if r.db.early_recomputes == 0 => idle.push("xfetch's early recompute"),
        Freshness::XfetchSwr if r.db.early_recomputes == 0 && r.outcomes.stale == 0 => {
            idle.push("xfetch+swr's early recompute and stale window")
        }
        Freshness::Swr if s.stale_read == StaleRead::RefreshBehind && r.outcomes.stale == 0 => {
            idle.push("swr's stale-while-revalidate")
        }
        _ => {}
    }
    match s.coordination {
        Coordination::SingleFlight if r.outcomes.waited == 0 => {
            idle.push("single-flight (no request followed another's load)")
        }
        Coordination::Mutex | Coordination::MutexSingleFlight if r.lock.contended == 0 => {
            idle.push("the mutex (no lock was contended)")
        }
        Coordination::Lease if r.lock.contended == 0 => {
            idle.push("the lease (no request found a key's lease out)")
        }
        _ => {}
    }
    (!idle.is_empty()).then(|| idle.join(" and "))
}

fn sc_strategy(r: &RunResult) -> crate::strategy::StrategySpec {
    r.scenario.strategy
}

/// Name the bottleneck that shed requests, with its numbers.
fn shed_message(r: &RunResult, secs: f64) -> String {
    let sc = &r.scenario;
    let shed = r.requests.shed;
    if r.generator.max_dispatch_lag_ms > 250.0 {
        return format!(
            "{shed} requests were shed while the generator ran {:.0} ms behind its schedule: the machine could not keep up with this rate",
            r.generator.max_dispatch_lag_ms
        );
    }
    let loads_per_s = (r.db.calls.value().unwrap_or(0) + r.db.pool_timeouts) as f64 / secs;
    let conns = u64::from(sc.instances) * u64::from(sc.db_pool);
    let stmt_ms =
        r.db.statement_ms_mean
            .unwrap_or(sc.db_cost.0.as_secs_f64() * 1000.0)
            .max(0.001);
    let capacity = conns as f64 * 1000.0 / stmt_ms;
    let cap_per_instance = u64::from(sc.max_inflight) + u64::from(sc.backlog);
    if r.db.pool_busy > 0.8 || r.db.pool_wait_ms_mean.unwrap_or(0.0) > stmt_ms {
        let cold = match r.start.as_ref().map(|s| s.mode) {
            Some(Start::Cold) | None => "; cold start: use --start steady, or raise --db-pool",
            Some(Start::Synchronized) => "; synchronized start: every key expired at once",
            Some(Start::Steady) => "; raise --db-pool or lower the rate",
        };
        format!(
            "{shed} requests were shed: {loads_per_s:.0} loads/s met DB pools that serve {capacity:.0} loads/s ({conns} connections × {stmt_ms:.1} ms), so requests piled up to the in-flight cap ({cap_per_instance} per instance){cold}"
        )
    } else {
        let rate = match sc.load {
            LoadShape::Open { rps, .. } => format!("{rps:.0} req/s"),
            LoadShape::Closed { clients } => format!("{clients} clients"),
        };
        format!(
            "{shed} requests were shed at the in-flight cap ({cap_per_instance} per instance, --max-inflight + --backlog) under {rate}: raise the cap, or add instances"
        )
    }
}

/// Loads waiting for a connection longer than a statement takes, in enough buckets.
fn saturated(r: &RunResult) -> Option<String> {
    let stmt_ms =
        r.db.statement_ms_mean
            .unwrap_or(r.scenario.db_cost.0.as_secs_f64() * 1000.0);
    let busy: Vec<&super::Bucket> = r
        .timeline
        .iter()
        .filter(|b| b.db_calls > 0 && b.pool_wait_ms > stmt_ms)
        .collect();
    let n = r.timeline.len();
    // Sustained: at least 3 buckets and a tenth of the run, so one expiry herd queueing for a
    // moment is not called saturation.
    if busy.len() < 3 || busy.len() * 10 < n {
        return None;
    }
    let worst = busy.iter().map(|b| b.pool_wait_ms).fold(0.0, f64::max);
    Some(format!(
        "loads waited for a pooled connection longer than a statement takes ({stmt_ms:.1} ms) in {} of {n} timeline buckets (worst mean wait {worst:.0} ms): the pools ({} × {} connections) are the bottleneck, not the strategy",
        busy.len(),
        r.scenario.instances,
        r.scenario.db_pool
    ))
}
