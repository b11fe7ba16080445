//! Live metrics for Prometheus (`run --metrics-listen ADDR`): the measured window's figures as
//! OpenMetrics text at `/metrics`, labelled with the strategy and the shard. The request path
//! never touches it: the timeline ticker adds each bucket's figures, and at the end the run's
//! final totals replace them, so the last scrape reads exactly what the result says.
//! Percentiles are left to the query (`histogram_quantile`), never exported as gauges.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::error::EnvError;
use crate::metrics::{Interval, Outcome};

/// Upper bounds of the request-duration histogram's buckets, seconds: 0.5 ms to 10 s, dense
/// where a cache hit (sub-ms) and a load (the DB cost, 10 ms by default) fall.
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The figures exported, measured window only.
struct State {
    outcomes: [u64; Outcome::COUNT],
    db_calls: u64,
    shed: u64,
    redis_errors: u64,
    /// Latency from the scheduled start, µs.
    latency: Histogram<u64>,
}

/// What the totals are when the run ends (they replace the running figures).
pub struct Final<'a> {
    pub outcomes: [u64; Outcome::COUNT],
    pub db_calls: u64,
    pub shed: u64,
    pub redis_errors: u64,
    pub latency: &'a Histogram<u64>,
}

/// The exported figures of one run, with its labels.
#[derive(Clone)]
pub struct Export {
    strategy: String,
    shard: String,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("strategy", &self.strategy)
            .field("shard", &self.shard)
            .finish()
    }
}

impl Export {
    /// `shard`: "I/N" for a shard, "" for a 1-process run.
    pub fn new(strategy: &str, shard: &str) -> Export {
        Export {
            strategy: strategy.to_string(),
            shard: shard.to_string(),
            state: Arc::new(Mutex::new(State {
                outcomes: [0; Outcome::COUNT],
                db_calls: 0,
                shed: 0,
                redis_errors: 0,
                latency: Histogram::new_with_bounds(1, 3_600_000_000, 2)
                    .expect("valid histogram bounds"),
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One timeline bucket's requests, and the window's running totals of the counters.
    pub fn add_interval(&self, iv: &Interval, db_calls: u64, shed: u64, redis_errors: u64) {
        let mut s = self.state();
        for (a, b) in s.outcomes.iter_mut().zip(iv.outcomes) {
            *a += b;
        }
        let _ = s.latency.add(&iv.latency);
        s.db_calls = db_calls;
        s.shed = shed;
        s.redis_errors = redis_errors;
    }

    /// The run's final totals, exactly as its result has them.
    pub fn finish(&self, f: Final<'_>) {
        let mut s = self.state();
        s.outcomes = f.outcomes;
        s.db_calls = f.db_calls;
        s.shed = f.shed;
        s.redis_errors = f.redis_errors;
        s.latency.reset();
        let _ = s.latency.add(f.latency);
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("strategy", self.strategy.clone()),
            ("shard", self.shard.clone()),
        ]
    }
}

/// A counter family with one sample per label set.
fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(Vec<(&'static str, String)>, u64)],
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in samples {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for Export {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = self.state();
        let base = self.labels();
        let by_outcome: Vec<_> = Outcome::ALL
            .iter()
            .map(|o| {
                let mut l = base.clone();
                l.push(("outcome", o.name().to_string()));
                (l, s.outcomes[*o as usize])
            })
            .collect();
        // The names go without `_total`: the encoder appends it to a counter's samples.
        counter(
            &mut enc,
            "stampede_requests",
            "Requests completed in the measured window, by outcome.",
            &by_outcome,
        )?;
        counter(
            &mut enc,
            "stampede_db_calls",
            "Statements sent to Postgres in the measured window (one per load that got a connection).",
            &[(base.clone(), s.db_calls)],
        )?;
        counter(
            &mut enc,
            "stampede_shed",
            "Open-loop requests of the measured window not started because their instance was full.",
            &[(base.clone(), s.shed)],
        )?;
        counter(
            &mut enc,
            "stampede_redis_errors",
            "Redis commands of the measured window that failed (connection down, error reply).",
            &[(base.clone(), s.redis_errors)],
        )?;
        let h = &s.latency;
        // The encoder takes each bucket's own count and writes the cumulative `le` series.
        let mut below = 0u64;
        let mut buckets: Vec<(f64, u64)> = BUCKETS_S
            .iter()
            .map(|&b| {
                let us = (b * 1e6) as u64;
                let upto = if h.is_empty() {
                    0
                } else {
                    h.count_between(0, us)
                };
                let own = upto.saturating_sub(below);
                below = upto.max(below);
                (b, own)
            })
            .collect();
        buckets.push((f64::INFINITY, h.len().saturating_sub(below)));
        let sum = if h.is_empty() {
            0.0
        } else {
            h.mean() * h.len() as f64 / 1e6
        };
        let mut m = enc.encode_descriptor(
            "stampede_request_duration_seconds",
            "Latency of the measured window's requests from their scheduled start (open loop: coordinated omission corrected).",
            None,
            MetricType::Histogram,
        )?;
        m.encode_family(&base)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                sum,
                h.len(),
                &buckets,
                None,
            )
    }
}

/// Serve `export` at http://addr/metrics until `stop` is cancelled. Binding fails at once
/// (exit 3) rather than leaving a run that nobody can scrape.
pub async fn serve(
    addr: SocketAddr,
    export: Export,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| EnvError(format!("--metrics-listen {addr}: cannot listen there: {e}")))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let export = export.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    export.render(),
                )
            }
        }),
    );
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        stop.cancelled().await;
    });
    Ok(tokio::spawn(async move {
        let _ = server.await.context("serving /metrics");
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_openmetrics_with_labels_and_the_final_totals() {
        let e = Export::new("mutex", "1/2");
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in [300, 300, 12_000] {
            h.record(v).unwrap();
        }
        let mut outcomes = [0; Outcome::COUNT];
        outcomes[Outcome::Hit as usize] = 2;
        outcomes[Outcome::Miss as usize] = 1;
        e.finish(Final {
            outcomes,
            db_calls: 1,
            shed: 0,
            redis_errors: 0,
            latency: &h,
        });
        let text = e.render();
        assert!(
            text.contains(
                r#"stampede_requests_total{strategy="mutex",shard="1/2",outcome="hit"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"stampede_db_calls_total{strategy="mutex",shard="1/2"} 1"#));
        assert!(text.contains(
            r#"stampede_request_duration_seconds_bucket{le="0.001",strategy="mutex",shard="1/2"} 2"#
        ), "{text}");
        assert!(text.contains(
            r#"stampede_request_duration_seconds_bucket{le="+Inf",strategy="mutex",shard="1/2"} 3"#
        ));
        assert!(text.contains(
            r#"stampede_request_duration_seconds_count{strategy="mutex",shard="1/2"} 3"#
        ));
        assert!(text.trim_end().ends_with("# EOF"));
    }
}
