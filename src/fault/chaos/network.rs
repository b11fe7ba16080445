//! The network faults' lane (partition, reset, latency, bandwidth, slow-close): at AT the proxies of the
//! struck instances and servers switch (hold every byte, reset every connection, add a round
//! trip, limit the rate), at AT+FOR they switch back. The figures that tell a partition from a
//! crash come from the client (commands that waited their whole deadline) and from the proxy
//! (resets sent, connections opened again, the first reply through after the heal).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::{Record, STAMPEDE_WINDOW, ms_since};
use crate::fault::report::NetFault;
use crate::fault::{FaultKind, FaultSpec};
use crate::metrics::Gauges;
use crate::net::{Control, Mode};

/// How often the lane looks for the first reply after a heal.
const LOOK_EVERY: Duration = Duration::from_millis(2);

/// One instance's proxy to one server, as the faults see it.
pub struct NetLink {
    pub instance: usize,
    /// To Redis (else to Postgres).
    pub redis: bool,
    pub control: Arc<Control>,
}

/// Strike the network faults in order; what each did.
pub(super) async fn lane(
    faults: Vec<FaultSpec>,
    links: Vec<NetLink>,
    shared: Gauges,
    window: watch::Receiver<Option<Instant>>,
    duration: Duration,
    stop: CancellationToken,
) -> Vec<Record> {
    let mut records = Vec::new();
    let Some(clock) = Clock::open(&faults, window, duration, stop).await else {
        return records;
    };
    let start = clock.start;
    let c = &shared.counters;
    let l = &shared.loads;
    let calls = || l.calls.load(Relaxed);
    let redis_errors = || c.redis_errors.load(Relaxed) + c.redis_timeouts.load(Relaxed);
    let db_errors = || {
        l.statement_errors.load(Relaxed)
            + l.connect_errors.load(Relaxed)
            + l.pool_timeouts.load(Relaxed)
    };
    for (nth, spec) in faults.iter().enumerate() {
        if !clock.sleep_until(clock.due(spec)).await {
            break;
        }
        let on = spec.server.unwrap_or_default();
        let struck: Vec<&NetLink> = links
            .iter()
            .filter(|k| spec.instance.is_none_or(|set| set.contains(k.instance)))
            .filter(|k| if k.redis { on.redis() } else { on.postgres() })
            .collect();
        let sum = |f: fn(&Control) -> u64| struck.iter().map(|k| f(&k.control)).sum::<u64>();
        let (calls0, errors0, timeouts0, db0) = (
            calls(),
            redis_errors(),
            c.redis_timeouts.load(Relaxed),
            db_errors(),
        );
        let (resets0, accepted0) = (
            sum(|c| c.resets.load(Relaxed)),
            sum(|c| c.accepted.load(Relaxed)),
        );
        let added = switch(spec, &struck, true);
        let struck_at = Instant::now();
        let mut r = Record {
            kind: spec.kind,
            injected: !struck.is_empty(),
            kill_ms: ms_since(struck_at, start),
            factor: (spec.kind == FaultKind::Latency)
                .then_some(spec.factor)
                .flatten(),
            note: struck
                .is_empty()
                .then(|| "not injected: no proxy of the run matched server= and instance=".into()),
            ..Record::default()
        };
        let heal = start + spec.ends_at();
        let healed = clock.sleep_until(heal).await;
        switch(spec, &struck, false);
        let healed_at = Instant::now();
        r.restart_ms = Some(ms_since(healed_at, start));
        r.db_calls_during = calls() - calls0;
        r.redis_errors_during = redis_errors() - errors0;
        r.db_errors_during = db_errors() - db0;
        let timed_out = c.redis_timeouts.load(Relaxed) - timeouts0;
        let resets = sum(|c| c.resets.load(Relaxed)) - resets0;
        let db_failed = r.db_errors_during;
        // The first reply through after the heal, and the reconnects of the second after it.
        let next = clock.next(&faults, nth);
        let watch_until = (healed_at + STAMPEDE_WINDOW).min(next);
        let replies0 = sum(|c| c.replies.load(Relaxed));
        let calls_healed = calls();
        while healed && Instant::now() < watch_until {
            if sum(|c| c.replies.load(Relaxed)) > replies0 {
                r.first_ok_ms.get_or_insert(ms_since(Instant::now(), start));
            }
            if !clock.sleep_until(Instant::now() + LOOK_EVERY).await {
                break;
            }
        }
        r.recovery_stampede = calls() - calls_healed;
        r.recovery_window_ms = ms_since(Instant::now(), healed_at);
        r.net = Some(NetFault {
            server: on.name().to_string(),
            instances: {
                let mut v: Vec<usize> = struck.iter().map(|k| k.instance).collect();
                v.dedup();
                v
            },
            redis_deadlines_waited: timed_out,
            db_errors: db_failed,
            resets,
            reconnects: sum(|c| c.accepted.load(Relaxed)) - accepted0,
            added_rtt_ms: added.map(|d| d.as_secs_f64() * 1e3),
            rate_bytes_per_sec: (spec.kind == FaultKind::Bandwidth)
                .then(|| spec.rate.map(|r| r.0))
                .flatten(),
            close_delay_ms: (spec.kind == FaultKind::SlowClose)
                .then(|| spec.delay.map(|d| d.0.as_millis() as u64))
                .flatten(),
        });
        records.push(r);
    }
    records
}

/// Switch the fault on (or off) on the struck proxies; a latency fault's added round trip.
fn switch(spec: &FaultSpec, struck: &[&NetLink], on: bool) -> Option<Duration> {
    let mut added = None;
    for k in struck {
        let c = &k.control;
        match spec.kind {
            FaultKind::Partition => c.set_mode(if on { Mode::Blackhole } else { Mode::Pass }),
            FaultKind::Reset => c.set_mode(if on { Mode::Reset } else { Mode::Pass }),
            FaultKind::Latency => {
                let add = match (spec.add, spec.factor) {
                    (Some(d), _) => d.0,
                    (None, Some(f)) => c.rtt_base().mul_f64((f - 1.0).max(0.0)),
                    (None, None) => Duration::ZERO,
                };
                c.set_extra(if on { add } else { Duration::ZERO });
                added = Some(add);
            }
            FaultKind::Bandwidth => c.set_rate(if on { spec.rate.map_or(0, |r| r.0) } else { 0 }),
            FaultKind::SlowClose => c.set_close_delay(match (on, spec.delay) {
                (true, Some(d)) => d.0,
                _ => Duration::ZERO,
            }),
            _ => {}
        }
    }
    added
}
