//! break-even: the cache must make the answers faster. The same workload (`--requests` over a
//! small hot set, a few at a time) runs on a fresh cache, then on the app started again with
//! `--no-cache-variant` (its own switch to bypass the cache). An app's hit and miss costs are
//! invisible from outside, so the verdict compares the mean answers: slower with the cache
//! fails. SKIP without the variant.

use anyhow::Result;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::lab::{Lab, spread};
use super::{CheckResult, Settings, Verdict};

/// Keys of the workload: few, so most requests of the cached run hit.
const HOT_KEYS: u64 = 20;
/// Requests in flight.
const IN_FLIGHT: usize = 8;

/// One workload's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

pub fn decide(
    cached: Option<Figures>,
    uncached: Option<Figures>,
    hit_rate: Option<f64>,
) -> Verdict {
    let (Some(c), Some(u)) = (cached, uncached) else {
        return Verdict::skip("a workload got no 2xx answer: nothing to compare");
    };
    let hr = hit_rate.map_or_else(|| "unknown".to_string(), |h| format!("{:.1}%", h * 100.0));
    if c.mean_ms > u.mean_ms {
        return Verdict::fail(format!(
            "the cache makes the mean answer slower: {:.2} ms with it, {:.2} ms without (hit rate {hr})",
            c.mean_ms, u.mean_ms
        ));
    }
    Verdict::pass(format!(
        "the cache saves {:.2} ms a mean answer: {:.2} ms with it, {:.2} ms without (hit rate {hr})",
        u.mean_ms - c.mean_ms,
        c.mean_ms,
        u.mean_ms
    ))
}

/// The workload on the app whose URL template is `url`; the 2xx answers' latencies.
async fn workload(lab: &Lab, s: &Settings, url: &str, port: Option<u16>) -> (Vec<f64>, u64) {
    let base = s.key_base("break-even");
    let answers: Vec<_> = futures_util::stream::iter(0..u64::from(s.requests))
        .map(|i| {
            let u = crate::app::fill_port(url, port)
                .replace(crate::app::KEY_MARK, &(base + i % HOT_KEYS).to_string());
            async move { lab.get(&u, None).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let failed = answers.iter().filter(|a| !a.ok()).count() as u64;
    (
        answers.iter().filter(|a| a.ok()).map(|a| a.ms).collect(),
        failed,
    )
}

fn figures(ms: &[f64]) -> Option<Figures> {
    spread(ms).map(|(mean_ms, p50_ms, p95_ms)| Figures {
        mean_ms,
        p50_ms,
        p95_ms,
    })
}

fn shown(f: Option<Figures>, failed: u64) -> Value {
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({
        "mean_ms": f.map(|f| r(f.mean_ms)),
        "p50_ms": f.map(|f| r(f.p50_ms)),
        "p95_ms": f.map(|f| r(f.p95_ms)),
        "not_2xx": failed,
    })
}

pub async fn check(
    lab: &mut Lab,
    s: &Settings,
    say: &(dyn Fn(&str) + Sync),
) -> Result<CheckResult> {
    let Some((k, v)) = s.no_cache_variant.clone() else {
        return Ok(CheckResult::new(
            "break-even",
            Verdict::skip(
                "no --no-cache-variant ENV=VALUE: the audit cannot run the app without its cache",
            ),
            json!({}),
            Value::Null,
        ));
    };
    let template = s.target.url.clone();
    lab.fresh_cache().await?;
    let before = lab.hits_misses().await;
    let (cached_ms, cached_failed) = workload(lab, s, &template, lab.app.port).await;
    let after = lab.hits_misses().await;
    let hit_rate = before.zip(after).and_then(|((h0, m0), (h1, m1))| {
        let (h, m) = (h1.saturating_sub(h0), m1.saturating_sub(m0));
        (h + m > 0).then(|| h as f64 / (h + m) as f64)
    });
    let variant = lab.start_app(&[(k.clone(), v)], say).await?;
    let (plain_ms, plain_failed) = workload(lab, s, &template, variant.port).await;
    drop(variant);
    let (c, u) = (figures(&cached_ms), figures(&plain_ms));
    let verdict = decide(c, u, hit_rate);
    let evidence = json!({
        "source": "HTTP answers' latencies (2xx only); hit rate from INFO keyspace_hits/misses",
        "requests": s.requests,
        "hot_keys": HOT_KEYS,
        "in_flight": IN_FLIGHT,
        "with_cache": shown(c, cached_failed),
        "without_cache": shown(u, plain_failed),
        "variant": format!("{k}=***"),
        "hit_rate": hit_rate.map(|h| (h * 1000.0).round() / 1000.0),
    });
    let raw = json!({"with_cache_ms": cached_ms, "without_cache_ms": plain_ms});
    Ok(CheckResult::new("break-even", verdict, evidence, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn f(mean: f64) -> Option<Figures> {
        Some(Figures {
            mean_ms: mean,
            p50_ms: mean,
            p95_ms: mean,
        })
    }

    #[test]
    fn the_means_decide() {
        let v = decide(f(2.0), f(25.0), Some(0.95));
        assert_eq!(v.status, Status::Pass);
        assert!(v.reason.contains("saves 23.00 ms"), "{}", v.reason);
        assert!(v.reason.contains("hit rate 95.0%"), "{}", v.reason);
        assert_eq!(decide(f(41.0), f(25.0), None).status, Status::Fail);
        assert_eq!(decide(None, f(25.0), None).status, Status::Skip);
    }
}
