//! What each fault did, as the results file shows it: the fault task's records plus what only
//! the timeline can tell (the hit rate before the fault and when it came back).

use super::{Bucket, FaultReport, Served};
use crate::fault::chaos::Record;

/// The share of the pre-fault hit rate that counts as recovered.
const HIT_RATE_RECOVERED: f64 = 0.9;
/// How much of the timeline before a kill sets the pre-fault hit rate.
const BEFORE_WINDOW_MS: u64 = 1000;

/// The report of each fault: the task's records plus what only the timeline can tell (the
/// hit rate before the fault and when it came back).
pub fn reports(records: &[Record], timeline: &[Bucket]) -> Vec<FaultReport> {
    records
        .iter()
        .map(|r| {
            let hit_rate_before = hit_rate_over(
                timeline,
                r.kill_ms.saturating_sub(BEFORE_WINDOW_MS),
                r.kill_ms,
            );
            let hit_rate_recovered_ms = match (r.restart_ms, hit_rate_before) {
                (Some(back), Some(before)) if before > 0.0 => timeline.iter().find_map(|b| {
                    let rate = bucket_hit_rate(b)?;
                    (b.t_ms > back && rate >= HIT_RATE_RECOVERED * before).then(|| b.t_ms - back)
                }),
                _ => None,
            };
            FaultReport {
                kind: r.kind,
                at_ms: r.kill_ms,
                down_ms: r.restart_ms.map_or(0, |b| b.saturating_sub(r.kill_ms)),
                recovered_ms: r
                    .restart_ms
                    .zip(r.first_ok_ms)
                    .map(|(back, ok)| ok.saturating_sub(back)),
                hit_rate_recovered_ms,
                hit_rate_before,
                db_calls_during: r.db_calls_during,
                redis_errors_during: r.redis_errors_during,
                db_errors_during: r.db_errors_during,
                served_during: r
                    .restart_ms
                    .map(|back| served_over(timeline, r.kill_ms, back))
                    .unwrap_or_default(),
                recovery_stampede: r.recovery_stampede,
                recovery_redundant: r.recovery_redundant,
                recovery_window_ms: r.recovery_window_ms,
                removed: r.removed,
                loads_after: r.loads_after,
                factor: r.factor,
                note: r.note.clone(),
                cluster: r.cluster.clone(),
                holder: r.holder.clone(),
                net: r.net.clone(),
            }
        })
        .collect()
}

/// What the requests of the buckets that end in `(from, to]` got.
fn served_over(timeline: &[Bucket], from: u64, to: u64) -> Served {
    let mut s = Served::default();
    for b in timeline.iter().filter(|b| b.t_ms > from && b.t_ms <= to) {
        s.requests += b.requests;
        s.hits += b.hits;
        s.stale += b.stale;
        s.errors += b.errors;
    }
    s
}

fn bucket_hit_rate(b: &Bucket) -> Option<f64> {
    (b.requests > 0).then(|| (b.hits + b.stale) as f64 / b.requests as f64)
}

/// Hit rate over the buckets that end in `(from, to]`.
fn hit_rate_over(timeline: &[Bucket], from: u64, to: u64) -> Option<f64> {
    let (mut served, mut requests) = (0, 0);
    for b in timeline.iter().filter(|b| b.t_ms > from && b.t_ms <= to) {
        served += b.hits + b.stale;
        requests += b.requests;
    }
    (requests > 0).then(|| served as f64 / requests as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultKind;

    fn bucket(t_ms: u64, requests: u64, hits: u64) -> Bucket {
        Bucket {
            t_ms,
            requests,
            hits,
            redis_up: true,
            ..Bucket::default()
        }
    }

    #[test]
    fn hit_rate_recovery_is_read_from_the_timeline() {
        // 95% before the kill at 1000 ms, nothing during the outage, then a climb back.
        let mut timeline: Vec<Bucket> = (1..=10).map(|i| bucket(i * 100, 100, 95)).collect();
        timeline.extend((11..=20).map(|i| bucket(i * 100, 100, 0)));
        timeline.extend([
            bucket(2100, 100, 40),
            bucket(2200, 100, 80),
            bucket(2300, 100, 86),
            bucket(2400, 100, 95),
        ]);
        let r = Record {
            kind: FaultKind::KillRedis,
            injected: true,
            kill_ms: 1000,
            restart_ms: Some(2000),
            first_ok_ms: Some(2030),
            db_calls_during: 950,
            redis_errors_during: 2000,
            db_errors_during: 0,
            recovery_stampede: 300,
            recovery_redundant: 40,
            recovery_window_ms: 1000,
            ..Record::default()
        };
        let rep = &reports(std::slice::from_ref(&r), &timeline)[0];
        assert_eq!(rep.at_ms, 1000);
        assert_eq!(rep.down_ms, 1000);
        assert_eq!(rep.recovered_ms, Some(30));
        assert_eq!(rep.hit_rate_before, Some(0.95));
        // 86% >= 90% of 95% (85.5%): the bucket ending at 2300.
        assert_eq!(rep.hit_rate_recovered_ms, Some(300));
        // The ten buckets ending in (1000, 2000]: 1000 requests, none served from the cache.
        assert_eq!(
            rep.served_during,
            Served {
                requests: 1000,
                hits: 0,
                stale: 0,
                errors: 0
            }
        );

        // Never recovered within the run, and a fault with no traffic before it.
        let rep = &reports(std::slice::from_ref(&r), &timeline[..22])[0];
        assert_eq!(rep.hit_rate_recovered_ms, None);
        let early = Record {
            kill_ms: 0,
            ..r.clone()
        };
        assert_eq!(reports(&[early], &timeline)[0].hit_rate_before, None);

        // A Redis that never came back has no recovery at all.
        let lost = Record {
            restart_ms: None,
            note: Some("x".into()),
            ..r
        };
        let rep = &reports(&[lost], &timeline)[0];
        assert_eq!((rep.down_ms, rep.recovered_ms), (0, None));
        assert_eq!(rep.served_during, Served::default());
        assert_eq!(rep.hit_rate_recovered_ms, None);
    }
}
