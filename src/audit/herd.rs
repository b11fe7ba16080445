//! herd: many concurrent requests on one cold key must not all load it. One request on a cold
//! key first tells how many statements one load sends (an ORM may send several); then
//! `--concurrency` requests at once on another cold key: the app's loads of it are the
//! pg_stat_statements delta divided by that calibration. One load is coordination across
//! instances, one per app process (`--app-processes`) is coordination within each; more than
//! `--herd-max` fails.

use anyhow::Result;
use serde_json::json;

use super::lab::Lab;
use super::{CheckResult, Settings, Verdict};

/// The figures the verdict rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counted {
    /// Statements one load sent (the calibration's delta).
    pub per_load: Option<u64>,
    /// Statements the concurrent requests sent.
    pub burst: Option<u64>,
    pub concurrency: u32,
}

/// The app's loads of the herd's key, or why there is no figure.
pub fn loads(c: &Counted) -> Result<f64, String> {
    match (c.per_load, c.burst) {
        (None, _) | (_, None) => Err("pg_stat_statements could not be read".to_string()),
        (Some(0), _) => Err(
            "one request on a cold key sent no statement the audit can see: the app does not load from this database's items (or its statements are not its role's)".to_string(),
        ),
        (Some(p), Some(b)) => Ok(b as f64 / p as f64),
    }
}

pub fn decide(c: &Counted, herd_max: u32, app_processes: u32) -> Verdict {
    let n = match loads(c) {
        Ok(n) => n,
        Err(why) => return Verdict::skip(why),
    };
    let conc = c.concurrency;
    if n <= 1.0 {
        return Verdict::pass(format!(
            "{n:.0} load for {conc} concurrent requests on one cold key: coordinated"
        ));
    }
    if n <= f64::from(herd_max) {
        return Verdict::pass(format!(
            "{n:.1} loads for {conc} concurrent requests on one cold key: at most one per app process ({app_processes}), within --herd-max {herd_max}"
        ));
    }
    Verdict::fail(format!(
        "{n:.1} loads for {conc} concurrent requests on one cold key (--herd-max {herd_max}): the misses are not coordinated"
    ))
}

pub async fn check(lab: &mut Lab, s: &Settings) -> Result<CheckResult> {
    let lab = &*lab;
    let base = s.key_base("herd");
    lab.fresh_cache().await?;
    let calib = lab.url(None, base);
    let s0 = lab.app_statements().await;
    let first = lab.get(&calib, None).await;
    let s1 = lab.app_statements().await;
    // The burst's connections opened beforehand, on the calibration key (now cached), so
    // the burst's requests reach the app together rather than one connect apart.
    let warm = (0..s.concurrency).map(|_| lab.get(&calib, None));
    futures_util::future::join_all(warm).await;
    let herd = lab.url(None, base + 1);
    let s2 = lab.app_statements().await;
    let burst = (0..s.concurrency).map(|_| lab.get(&herd, None));
    let answers = futures_util::future::join_all(burst).await;
    let s3 = lab.app_statements().await;
    let c = Counted {
        per_load: s0.zip(s1).map(|(a, b)| b.saturating_sub(a)),
        burst: s2.zip(s3).map(|(a, b)| b.saturating_sub(a)),
        concurrency: s.concurrency,
    };
    let v = decide(&c, s.herd_max, s.app_processes);
    let evidence = json!({
        "source": lab.statements_source(),
        "statements_per_load": c.per_load,
        "calibration_status": first.status,
        "concurrent_requests": s.concurrency,
        "answered_2xx": answers.iter().filter(|a| a.ok()).count(),
        "statements_during_burst": c.burst,
        "loads": loads(&c).ok(),
        "herd_max": s.herd_max,
        "app_processes": s.app_processes,
    });
    let raw = json!(
        answers
            .iter()
            .map(|a| json!([a.status, a.ms]))
            .collect::<Vec<_>>()
    );
    Ok(CheckResult::new("herd", v, evidence, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn c(per: u64, burst: u64) -> Counted {
        Counted {
            per_load: Some(per),
            burst: Some(burst),
            concurrency: 100,
        }
    }

    #[test]
    fn loads_are_the_delta_over_the_calibration() {
        assert_eq!(loads(&c(3, 12)), Ok(4.0));
        assert_eq!(decide(&c(1, 1), 1, 1).status, Status::Pass);
        assert_eq!(decide(&c(2, 2), 1, 1).status, Status::Pass);
        let v = decide(&c(1, 37), 1, 1);
        assert_eq!(v.status, Status::Fail);
        assert!(v.reason.starts_with("37.0 loads for 100"), "{}", v.reason);
        let v = decide(&c(1, 4), 4, 4);
        assert_eq!(v.status, Status::Pass);
        assert!(v.reason.contains("one per app process (4)"), "{}", v.reason);
        assert_eq!(decide(&c(0, 5), 1, 1).status, Status::Skip);
    }
}
