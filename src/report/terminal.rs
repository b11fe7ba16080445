//! The summary printed at the end of a run: what was asked, what happened, and the server
//! counters beside the tool's own so a reader can see they agree.

use std::fmt::Write as _;

use crate::fault::FaultKind;
use crate::metric::Metric;
use crate::protect::breaker::State;
use crate::protect::rate::RateScope;
use crate::results::{FaultReport, Latency, RunResult};
use crate::strategy::lock::LockTimeoutPolicy;

/// Breaker events listed one per line in the summary; the rest are counted (all are in the JSON).
const EVENTS_SHOWN: usize = 8;

fn lat(l: &Latency) -> String {
    format!(
        "p50 {:.2}  p95 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}  mean {:.2} ms",
        l.p50, l.p95, l.p99, l.p999, l.max, l.mean
    )
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| v.to_string())
}

/// The writes and how far the cache strayed from the database (nothing without writes).
fn writes(o: &mut String, r: &RunResult) {
    let Some(lat) = &r.db.write_latency_ms else {
        return;
    };
    let d = &r.db;
    let _ = writeln!(
        o,
        "  writes    committed {} (server counted {})  errors {}  latency p50 {:.2}  p99 {:.2} ms  invalidate {}",
        d.writes,
        opt(d.writes_server),
        d.write_errors,
        lat.p50,
        lat.p99,
        r.scenario.invalidate.map_or("delete", |i| i.name())
    );
    let c = &r.consistency;
    let _ = writeln!(
        o,
        "  consistency stale reads {} ({:.3}%)  staleness p50 {:.2}  p99 {:.2}  max {:.2} ms  divergent keys {} of {} written  stale sets refused {}  invalidation failures {}",
        c.stale_reads,
        c.stale_read_ratio * 100.0,
        c.staleness_ms.p50,
        c.staleness_ms.p99,
        c.staleness_ms.max,
        r.shown(Metric::DivergentKeys),
        c.keys_written,
        c.stale_sets_refused,
        c.invalidation_failures
    );
    if c.writes_probed + c.writes_unprobed > 0 {
        let _ = writeln!(
            o,
            "            writes left wrong {} of {} probed ({:.1}%, read back once each key settled){}  divergent {} key-ms",
            c.writes_left_wrong,
            c.writes_probed,
            c.writes_left_wrong_ratio * 100.0,
            if c.writes_unprobed > 0 {
                format!(", {} not probed", c.writes_unprobed)
            } else {
                String::new()
            },
            c.divergent_ms
        );
    }
    if let Some(n) = &c.note {
        let _ = writeln!(o, "            {n}");
    }
    if c.invalidation_failures > 0 {
        let _ = writeln!(
            o,
            "            {} invalidations failed: the one way lease and versioned can still leave a key diverged",
            c.invalidation_failures
        );
    }
}

/// One line saying which strategy ran on which workload.
pub fn describe(r: &RunResult) -> String {
    format!(
        "{}: {}",
        r.strategy,
        super::describe(&r.scenario).join(", ")
    )
}

fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

/// The recovery verdict in one line, with its baseline.
fn recovery(o: &mut String, rc: &crate::results::recovery::Recovery) {
    use crate::results::recovery::Verdict;
    let b = &rc.baseline;
    let base = format!(
        "baseline {:.1}-{:.1} s: goodput {:.0}/s{}, db {:.0}/s, p99 {:.1} ms",
        b.from_ms as f64 / 1000.0,
        b.to_ms as f64 / 1000.0,
        b.goodput_per_s,
        b.hit_rate
            .map_or_else(String::new, |h| format!(", hit rate {:.1}%", h * 100.0)),
        b.db_calls_per_s,
        b.p99_ms
    );
    let line = match rc.verdict {
        Verdict::NotJudged => format!("not judged: {}", rc.reason),
        _ => rc.reason.clone(),
    };
    let _ = writeln!(o, "  recovery  {line}");
    let _ = writeln!(o, "            {base}");
}

/// The database's capacity beside the demand before and after the shocks: what decides
/// whether the cache can refill.
fn demand(o: &mut String, r: &RunResult, rc: &crate::results::recovery::Recovery) {
    let sc = &r.scenario;
    let Some(stmt) = r.db.statement_ms_mean.filter(|&m| m > 0.0) else {
        return;
    };
    if r.app.is_some() {
        return;
    }
    let conns = sc.instances * sc.db_pool;
    let after = r
        .faults
        .iter()
        .filter(|f| f.kind.is_shock() && f.recovery_window_ms > 0)
        .map(|f| f.loads_after as f64 * 1000.0 / f.recovery_window_ms as f64)
        .fold(None::<f64>, |a, v| Some(a.map_or(v, |a| a.max(v))));
    let _ = writeln!(
        o,
        "            capacity ~{:.0} loads/s ({conns} connections / {stmt:.1} ms a statement); steady demand {:.0} loads/s{}",
        f64::from(conns) * 1000.0 / stmt,
        rc.baseline.db_calls_per_s,
        after.map_or_else(String::new, |a| format!(
            "; right after the shock {a:.0} loads/s asked"
        ))
    );
}

/// A shock: what it did, and the DB calls in the second after it ended.
fn shock(o: &mut String, f: &FaultReport) {
    let what = match f.kind {
        FaultKind::DropCache => format!(
            "removed {} cached entries",
            f.removed
                .map_or_else(|| "no".to_string(), |n| n.to_string())
        ),
        FaultKind::SlowDb => format!(
            "loads cost ×{} for {} (to {})",
            f.factor.unwrap_or(1.0),
            secs(f.down_ms),
            secs(f.at_ms + f.down_ms)
        ),
        _ => format!(
            "rate offered ×{} for {} (to {})",
            f.factor.unwrap_or(1.0),
            secs(f.down_ms),
            secs(f.at_ms + f.down_ms)
        ),
    };
    let _ = writeln!(
        o,
        "  shock     {} at {}: {what}; db calls during it {}, db errors {}; in the {} ms after it {} loads asked, {} db calls sent ({} redundant)",
        f.kind,
        secs(f.at_ms),
        f.db_calls_during,
        f.db_errors_during,
        f.recovery_window_ms,
        f.loads_after,
        f.recovery_stampede,
        f.recovery_redundant,
    );
    if let Some(n) = &f.note
        && f.kind != FaultKind::DropCache
    {
        let _ = writeln!(o, "            note: {n}");
    }
}

/// The outage window, what it cost, and the recovery after the restart.
fn faults(o: &mut String, f: &FaultReport, app: bool) {
    if let Some(h) = &f.holder {
        super::holder::fault(o, f, h);
        return;
    }
    if let Some(n) = &f.net {
        super::network::fault(o, f, n);
        return;
    }
    if f.kind.is_shock() && (f.down_ms > 0 || f.removed.is_some()) {
        shock(o, f);
        return;
    }
    if f.down_ms == 0 && f.note.is_some() {
        let _ = writeln!(
            o,
            "  fault     {} at {}: {}",
            f.kind,
            secs(f.at_ms),
            f.note.as_deref().unwrap_or_default()
        );
        return;
    }
    let s = &f.served_during;
    let outage = format!(
        "  fault     {} at {}, {} {} (outage {} to {}): db calls during it {}",
        f.kind,
        secs(f.at_ms),
        match f.kind {
            FaultKind::PauseRedis => "paused",
            FaultKind::Failover | FaultKind::MigrateSlot => "took",
            _ => "down",
        },
        secs(f.down_ms),
        secs(f.at_ms),
        secs(f.at_ms + f.down_ms),
        f.db_calls_during,
    );
    if app {
        // Inside an app the tool sees neither its Redis commands nor how each request was
        // served: what it can tell is the servers' DB calls and the answers it got.
        let _ = writeln!(
            o,
            "{outage} (pg_stat_statements, sampled); requests completed during it {}, of them errors {}",
            s.requests, s.errors
        );
        if let Some(n) = &f.note {
            let _ = writeln!(o, "            note: {n}");
        }
        return;
    }
    let _ = writeln!(
        o,
        "{outage}, redis errors {}, db errors {}; served hit {} stale {} error {} of {}",
        f.redis_errors_during, f.db_errors_during, s.hits, s.stale, s.errors, s.requests
    );
    let ms = |v: Option<u64>| v.map_or_else(|| "never".to_string(), |v| format!("{v} ms"));
    let hit_rate = match f.hit_rate_before {
        Some(b) => format!(
            "hit rate back to 90% of {:.1}% after {}",
            b * 100.0,
            ms(f.hit_rate_recovered_ms)
        ),
        None => "no hit rate before the fault to compare".to_string(),
    };
    let window = if f.recovery_window_ms < 1000 {
        format!("first {} ms (cut short)", f.recovery_window_ms)
    } else {
        "first second".to_string()
    };
    let first_ok = match f.kind {
        FaultKind::KillPostgres => "first successful load after",
        _ => "commands ok after",
    };
    let _ = writeln!(
        o,
        "            recovery: stampede {} db calls ({} redundant) in the {window} after restart, {first_ok} {}, {hit_rate}",
        f.recovery_stampede,
        f.recovery_redundant,
        ms(f.recovered_ms)
    );
    super::cluster::fault(o, f);
    if let Some(n) = &f.note {
        let _ = writeln!(o, "            note: {n}");
    }
}

/// The protections in front of the loads: what they refused, and the breaker's transitions.
fn protect(o: &mut String, r: &RunResult) {
    let sc = &r.scenario;
    let d = &r.db;
    if let Some(n) = sc.db_limit {
        let _ = writeln!(
            o,
            "  db-limit  {n} loads per instance: {} loads refused (none sent to Postgres)",
            d.limit_refusals
        );
    }
    if let Some(rate) = &sc.db_rate {
        let fallback = match rate.scope {
            RateScope::Global if d.rate_fallback_ms > 0 => format!(
                "; Redis did not answer for the global bucket: instances limited themselves to R/{} for {} ms",
                sc.instances, d.rate_fallback_ms
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "  db-rate   {}: {} loads refused (none sent to Postgres){fallback}",
            rate.describe(sc.instances).trim_start_matches("db-rate "),
            d.rate_refusals
        );
    }
    if let Some(w) = sc.rewarm {
        let _ = writeln!(
            o,
            "  re-warm   top {} keys every {}: {} runs in the window, {} DB calls (in the calls above)",
            w.top, w.every, d.rewarm_runs, d.rewarm_calls
        );
    }
    let Some(b) = &sc.breaker else { return };
    let count = |from: State, to: State| {
        r.breaker
            .iter()
            .filter(|e| e.from == from && e.to == to)
            .count()
    };
    let _ = writeln!(
        o,
        "  breaker   opened {}, re-opened {} after a failed probe, closed {}: {} loads refused; {}",
        count(State::Closed, State::Open),
        count(State::HalfOpen, State::Open),
        count(State::HalfOpen, State::Closed),
        d.breaker_refusals,
        b.describe()
    );
    let line = |o: &mut String, e: &crate::results::BreakerEvent| {
        let _ = writeln!(
            o,
            "            {:>7.2} s  instance {}  {} -> {}: {}",
            e.at_ms as f64 / 1000.0,
            e.instance,
            e.from.name(),
            e.to.name(),
            e.reason
        );
    };
    let n = r.breaker.len();
    if n <= EVENTS_SHOWN {
        r.breaker.iter().for_each(|e| line(o, e));
        return;
    }
    // The first changes and the last ones: how it opened, and how it ended.
    let half = EVENTS_SHOWN / 2;
    r.breaker[..half].iter().for_each(|e| line(o, e));
    let _ = writeln!(
        o,
        "            … {} more state changes (breaker[] in the JSON)",
        n - EVENTS_SHOWN
    );
    r.breaker[n - half..].iter().for_each(|e| line(o, e));
}

/// The in-process tier's line: its share of the answers beside Redis's, what it evicted and
/// heard, what it served stale, and a hit's latency by tier.
fn l1_line(r: &RunResult, l: &crate::results::l1::L1Figures) -> String {
    let share =
        |v: Option<f64>| v.map_or_else(|| "-".to_string(), |h| format!("{:.1}%", h * 100.0));
    let p50 = |name: &str| {
        r.latency_by_outcome_ms
            .get(name)
            .map_or_else(|| "-".to_string(), |h| format!("{:.3} ms", h.p50))
    };
    let mode = r.scenario.l1.map_or("ttl", |s| s.invalidate.name());
    format!(
        "  l1        hits {} ({} of requests; Redis {})  evictions {}  invalidations {}  flushes {}  not cached (invalidated in flight) {}  stale reads {}  [{mode}]\n            hit p50: in-process {}, Redis {}\n",
        l.hits,
        share(l.hit_rate),
        share(l.redis_hit_rate),
        l.evictions,
        l.invalidations_received,
        l.flushes,
        l.spoiled,
        l.stale_reads,
        p50("l1-hit"),
        p50("hit"),
    )
}

pub fn summary(r: &RunResult) -> String {
    let mut o = String::new();
    let app = r.http.is_some();
    head_lines(&mut o, r);
    request_lines(&mut o, r);
    if let Some(l) = &r.l1 {
        o.push_str(&l1_line(r, l));
    }
    if let Some(h) = &r.http {
        o.push_str(&app_lines(r, h));
    }
    db_lines(&mut o, r);
    let rd = &r.redis;
    let _ = writeln!(
        o,
        "  redis     keyspace hits {} misses {} (INFO)  cold misses {}  errors {}  timeouts {}",
        opt(rd.keyspace_hits),
        opt(rd.keyspace_misses),
        rd.cold_misses,
        rd.errors,
        rd.timeouts
    );
    if r.scenario
        .strategy
        .library
        .is_some_and(|l| l.decl().store == crate::strategy::EntryStore::Process)
    {
        let _ = writeln!(
            o,
            "            {}: its entries are in each instance's memory, as the library keeps them; Redis serves none of its reads, and a drop or an outage of Redis does not reach them",
            r.scenario.strategy
        );
    }
    super::memory::memory(&mut o, r);
    super::cluster::terminal(&mut o, r);
    let l = &r.lock;
    if l.acquired + l.contended + l.unavailable > 0 {
        let _ = writeln!(
            o,
            "  lock      acquired {}  contended {}  timeouts {}  lost {}  unavailable {}",
            l.acquired, l.contended, l.timeouts, l.lost, l.unavailable
        );
        if l.extended + l.unkept > 0 || l.lease_ms_max.is_some() {
            let lease = l
                .lease_ms_max
                .map_or(String::new(), |m| format!("  longest auto lease {m} ms"));
            let _ = writeln!(
                o,
                "            extended {}  fallback loads not cached {}{lease}",
                l.extended, l.unkept
            );
        }
    }
    writes(&mut o, r);
    protect(&mut o, r);
    for f in &r.faults {
        faults(&mut o, f, app);
    }
    super::network::instances(&mut o, r);
    if let Some(rc) = &r.recovery {
        recovery(&mut o, rc);
        demand(&mut o, r, rc);
    }
    tail_lines(&mut o, r);
    o
}

/// What ran: the strategy and workload, the trace, and how the cache started.
fn head_lines(o: &mut String, r: &RunResult) {
    let _ = writeln!(
        o,
        "stampede run: {}{}",
        describe(r),
        if r.interrupted { "  [INTERRUPTED]" } else { "" }
    );
    if let Some(t) = &r.scenario.trace {
        let _ = writeln!(o, "  {}", t.describe());
        let _ = writeln!(
            o,
            "  items     {} keys seeded with the trace's value sizes ({} of them given by it), {} bytes (Postgres counted {})",
            t.found.distinct_keys,
            t.found.sized_keys,
            t.found.value_bytes,
            opt(r.db.seeded_bytes)
        );
    }
    let app = r.http.is_some();
    if let Some(st) = &r.start
        && app
    {
        let _ = writeln!(
            o,
            "  start     {}: the app's cache is its own (stampede neither fills nor counts its entries)",
            st.mode.name()
        );
    } else if !r.scenario.strategy.caches() {
        let _ = writeln!(
            o,
            "  start     no cache: nothing is kept in Redis, every request loads from the database"
        );
    } else if let Some(st) = &r.start {
        let _ = writeln!(
            o,
            "  start     {}: {} keys cached in {} ms, {} of them expiring in the window; entries expired in the window {}",
            st.mode.name(),
            st.keys_cached,
            st.ms,
            st.expiring_in_window,
            r.redis.expiries
        );
    }
}

/// What became of the requests, and how the built-in app answered them.
fn request_lines(o: &mut String, r: &RunResult) {
    let (q, oc, app) = (&r.requests, &r.outcomes, r.http.is_some());
    let pct = |n: u64| {
        if q.completed == 0 {
            0.0
        } else {
            n as f64 * 100.0 / q.completed as f64
        }
    };
    let _ = writeln!(
        o,
        "  requests  scheduled {}  completed {}  shed {}  errors {}{}{}",
        q.scheduled,
        q.completed,
        q.shed,
        q.errors,
        if q.abandoned + q.unsent > 0 {
            format!("  abandoned {}  unsent {}", q.abandoned, q.unsent)
        } else {
            String::new()
        },
        if r.scenario.client.is_some() {
            format!("  timed out {}  retries {}", q.timed_out, q.retries)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "  goodput   {} of {} scheduled ({:.1}%) answered with a value within {}",
        q.goodput,
        q.scheduled,
        if q.scheduled == 0 {
            0.0
        } else {
            q.goodput as f64 * 100.0 / q.scheduled as f64
        },
        r.scenario.goodput_within
    );
    if r.scenario.client.as_ref().is_some_and(|c| c.retries > 0) {
        let per = |n: f64| {
            if q.scheduled == 0 {
                "—".to_string()
            } else {
                format!("{:.2}", n / q.scheduled as f64)
            }
        };
        let _ = writeln!(
            o,
            "  attempts  {} = {} first + {} retries: {} per scheduled request; DB calls {} per scheduled request",
            q.attempts,
            q.completed,
            q.retries,
            per(q.attempts as f64),
            r.db.calls
                .value()
                .map_or("unknown".to_string(), |c| per(c as f64))
        );
        if let Some(min) = q.retry_after_wait_ms_min {
            let _ = writeln!(
                o,
                "            {} retries waited as a retry-after answer told them (shortest wait {min:.1} ms)",
                q.retry_after_waits
            );
        }
    }
    // An app under test's answers are in its http line; hit, miss and the rest are the
    // built-in app's outcomes and would all read 0.
    if !app {
        let _ = writeln!(
            o,
            "  outcomes  hit {} ({:.1}%)  miss {}  stale {}  waited {}  fallback {}  error {}{}{}   hit rate {}",
            oc.hit,
            pct(oc.hit),
            oc.miss,
            oc.stale,
            oc.waited,
            oc.fallback,
            oc.error,
            if oc.rejected > 0
                || r.scenario.db_limit.is_some()
                || r.scenario.breaker.is_some()
                || r.scenario.db_rate.is_some()
            {
                format!("  rejected {} ({:.1}%)", oc.rejected, pct(oc.rejected))
            } else {
                String::new()
            },
            if oc.retry_after > 0
                || r.scenario.lock.lock_timeout_policy == LockTimeoutPolicy::RetryAfter
            {
                format!("  retry-after {}", oc.retry_after)
            } else {
                String::new()
            },
            r.shown(Metric::HitRate)
        );
    }
}

/// The database's lines: the tool's count beside the server's, the pool and the loads the
/// strategy added.
fn db_lines(o: &mut String, r: &RunResult) {
    let app = r.http.is_some();
    let d = &r.db;
    let server = match (d.calls_server, &d.calls_server_note) {
        // pg_stat_statements counts a statement when it completes without error.
        (Some(s), _) if d.statement_errors > 0 => format!(
            "server counted {s} completed, + {} that ended in an error",
            d.statement_errors
        ),
        (Some(s), _) => format!("server counted {s}"),
        (None, Some(n)) => format!("server count unavailable: {n}"),
        (None, None) => "server count unavailable".to_string(),
    };
    let _ = writeln!(
        o,
        "  db        calls {} ({server})  peak concurrent {}  {}  peak herd {}  redundant {}",
        r.shown(Metric::DbCalls),
        d.peak_concurrent,
        match d.peak_active_sampled {
            Some(a) => format!("peak active (sampled) {a}"),
            None => format!(
                "peak in flight {}",
                d.peak_in_flight
                    .value()
                    .map_or_else(|| "unknown".to_string(), |n| n.to_string())
            ),
        },
        r.shown(Metric::PeakKeyHerd),
        r.shown(Metric::RedundantLoads)
    );
    cause_lines(o, r);
    // The pools are the built-in app's; an app under test's are its own.
    let mut extra = if app {
        Vec::new()
    } else {
        vec![format!("pool busy {:.0}%", d.pool_busy * 100.0)]
    };
    if let (Some(st), Some(pw)) = (d.statement_ms_mean, d.pool_wait_ms_mean) {
        extra.push(format!(
            "statement {st:.1} ms mean  pool wait {pw:.1} ms mean"
        ));
    }
    if d.warmup_calls > 0 {
        extra.push(format!("warm-up calls {}", d.warmup_calls));
    }
    if d.statement_errors + d.pool_timeouts + d.connect_errors > 0 {
        extra.push(format!(
            "statement errors {} (timeouts {})  pool timeouts {}  connect errors {}",
            d.statement_errors, d.statement_timeouts, d.pool_timeouts, d.connect_errors
        ));
    }
    if d.background_refreshes + d.refreshes_skipped > 0 {
        extra.push(format!(
            "background refreshes {} (skipped {})",
            d.background_refreshes, d.refreshes_skipped
        ));
    }
    if let Some(ms) = d.heavy_query_ms {
        extra.push(format!("heavy query {ms:.1} ms idle"));
    }
    if d.early_recomputes > 0 {
        extra.push(format!(
            "early recomputes {} (mean lead {:.0} ms)",
            d.early_recomputes,
            d.early_lead_ms_mean.unwrap_or(0.0)
        ));
    }
    if d.eager_refreshes > 0 {
        extra.push(format!("eager refreshes {}", d.eager_refreshes));
    }
    if d.race_pushes > 0 {
        extra.push(format!("race-TTL push-backs {}", d.race_pushes));
    }
    if !extra.is_empty() {
        let _ = writeln!(o, "            {}", extra.join("  "));
    }
    if d.fail_safe + d.soft_timeouts > 0 {
        let _ = writeln!(
            o,
            "  fail-safe {} served a kept value when their load failed ({} without a load: throttled); {} answered at the soft timeout, {} of those loads wrote back after",
            d.fail_safe, d.fail_safe_throttled, d.soft_timeouts, d.soft_timeout_write_backs
        );
    }
    if let Some(how) = &d.calls_server_read {
        let _ = writeln!(o, "            server count: {how}");
    }
    if let Some(line) = crate::results::cost::line(r) {
        let _ = writeln!(o, "  cost      {line}");
    }
}

/// Where the DB calls came from, and the hottest key's herd beside its model.
fn cause_lines(o: &mut String, r: &RunResult) {
    let d = &r.db;
    match &d.by_cause {
        crate::results::Known::Value(b) => {
            let evicted = match (b.eviction, r.redis.evicted_keys) {
                (e, Some(k)) if e > 0 || k > 0 => {
                    format!("; Redis evicted {k} keys in the window (INFO evicted_keys)")
                }
                _ => String::new(),
            };
            let _ = writeln!(o, "  causes    {}{evicted}", b.line());
        }
        crate::results::Known::Unknown(why) => {
            let _ = writeln!(o, "  causes    unknown: {why}");
        }
    }
    if let Some(line) = d.herd_model.as_ref().and_then(|m| m.line()) {
        let _ = writeln!(o, "  herd      {line}");
    }
}

/// Latency, the generator's own cost, the diagnoses and the servers.
fn tail_lines(o: &mut String, r: &RunResult) {
    let _ = writeln!(o, "  latency   {}", lat(&r.latency_ms));
    let _ = writeln!(o, "  service   {}", lat(&r.service_ms));
    let g = &r.generator;
    let lag = match &g.dispatch_lag_ms {
        Some(l) => format!(
            "dispatch lag p50 {:.3} p99 {:.3} max {:.2} ms",
            l.p50, l.p99, l.max
        ),
        None if matches!(r.scenario.load, crate::scenario::LoadShape::Closed { .. }) => {
            "no dispatch lag (closed loop: no schedule)".into()
        }
        None => "dispatch lag unknown (not recorded in this file)".into(),
    };
    let _ = writeln!(
        o,
        "  generator cpu {:.2} s ({:.1} µs/request, {:.0}% of {} cores)  peak rss {:.0} MiB  {lag}",
        g.cpu_seconds,
        g.cpu_per_request_us,
        g.cpu_utilization * 100.0,
        g.cores,
        g.peak_rss_mib,
    );
    for d in &r.diagnoses {
        let _ = writeln!(o, "  DIAGNOSIS {}: {}", d.code, d.message);
    }
    let sv = &r.servers;
    let _ = writeln!(
        o,
        "  servers   redis {} at {}, postgres {} at {}{}",
        sv.redis_version,
        sv.redis_url,
        sv.postgres_version,
        sv.pg_url,
        if sv.managed { " (managed)" } else { "" }
    );
}

/// The app under test's lines: what it answered over HTTP, and where its figures come from.
fn app_lines(r: &RunResult, h: &crate::app::http::HttpFigures) -> String {
    let status: Vec<String> = h.status.iter().map(|(c, n)| format!("{c} {n}")).collect();
    let mut o = format!(
        "  http      ok {}  {}  errors {} (connect {})  timeouts {}  unexpected status {}  unexpected body {}{}\n",
        r.outcomes.ok,
        if status.is_empty() {
            "no response".to_string()
        } else {
            status.join("  ")
        },
        h.errors,
        h.connect_errors,
        h.timeouts,
        h.unexpected_status,
        h.unexpected_body,
        h.connections
            .map(|c| format!("  connections opened {c}"))
            .unwrap_or_default()
    );
    if let Some(a) = &r.app {
        o.push_str(&format!(
            "  app       {}{}  ledger loads {}  keys {}\n",
            a.target,
            a.pid
                .map_or_else(String::new, |p| format!(" (pid {p}, stopped)")),
            a.ledger_loads
                .map_or_else(|| "n/a".to_string(), |n| n.to_string()),
            a.ledger_keys
                .map_or_else(|| "n/a".to_string(), |n| n.to_string()),
        ));
        o.push_str(&format!("  note      db.calls: {}\n", a.db_calls_counted));
        for n in &a.notes {
            o.push_str(&format!("  note      {n}\n"));
        }
    }
    o
}
