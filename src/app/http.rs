//! The request path to an app under test: one HTTP GET per request on a keep-alive pool.
//!
//! The client is reqwest (on hyper and hyper-util's pooled client): the HTTP client of the
//! tokio ecosystem, kept by hyper's maintainers, with the pool, the deadlines, redirects and
//! TLS (rustls, on the *ring* provider) that real clients have. Default headers are set once
//! on the client, so a request allocates only its URL and what the client needs for itself.
//! Outcomes are counted apart: statuses by class, transport errors, timeouts, and responses
//! that were not what `--expect-status`/`--expect-body` ask for.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::{KEY_MARK, TargetSpec};
use crate::error::UsageError;
use crate::metrics::Outcome;

/// What the target answered over the measured window, counted apart.
#[derive(Default)]
pub struct HttpCounts {
    /// Responses by status class: 1xx … 5xx at 0..5.
    class: [AtomicU64; 5],
    /// Requests that got no response: connection refused or reset, protocol errors.
    errors: AtomicU64,
    /// Of `errors`, connections that could not be made.
    connect_errors: AtomicU64,
    /// Requests past `--http-timeout`.
    timeouts: AtomicU64,
    /// Responses whose status was not one `--expect-status` accepts.
    unexpected_status: AtomicU64,
    /// Responses with an accepted status whose body did not match `--expect-body` (or could
    /// not be read).
    unexpected_body: AtomicU64,
}

/// The `http` block of a result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HttpFigures {
    /// Responses by status class ("2xx": n …); classes with no response are left out.
    pub status: std::collections::BTreeMap<String, u64>,
    /// Requests that got no response (connection refused or reset, protocol errors);
    /// timeouts are not included.
    pub errors: u64,
    /// Of `errors`, requests whose connection could not be made.
    pub connect_errors: u64,
    /// Requests that ran out of `--http-timeout`.
    pub timeouts: u64,
    /// Responses whose status was not one `--expect-status` accepts (any 2xx by default).
    pub unexpected_status: u64,
    /// Responses with an accepted status whose body did not match `--expect-body`.
    pub unexpected_body: u64,
}

impl HttpCounts {
    pub fn figures(&self) -> HttpFigures {
        let status = self
            .class
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let n = n.load(Relaxed);
                (n > 0).then(|| (format!("{}xx", i + 1), n))
            })
            .collect();
        HttpFigures {
            status,
            errors: self.errors.load(Relaxed),
            connect_errors: self.connect_errors.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            unexpected_status: self.unexpected_status.load(Relaxed),
            unexpected_body: self.unexpected_body.load(Relaxed),
        }
    }
}

/// The app under test as the request path sees it.
pub struct HttpTarget {
    client: reqwest::Client,
    /// The URL up to `{key}` and after it.
    head: String,
    tail: String,
    expect_status: Vec<u16>,
    expect_body: Option<regex::Regex>,
    pub counts: HttpCounts,
}

/// rustls needs one crypto provider for the process; *ring*, never aws-lc-rs (it needs a C
/// toolchain and cmake on every machine that builds this). Installing it twice is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The headers of `--header`, checked when the scenario was resolved.
fn headers(spec: &TargetSpec) -> Result<HeaderMap, UsageError> {
    let mut map = HeaderMap::new();
    for h in &spec.headers {
        // Not quoted back: a header without its ':' may be a bare credential.
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| UsageError::new("a --header has no ':': write it as 'Name: value'"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            UsageError::new(format!("--header: '{}' is not a header name", name.trim()))
        })?;
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| UsageError::new(format!("--header {name}: the value is not valid")))?;
        // Kept out of debug output, as credentials usually are.
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

impl HttpTarget {
    /// A client for `url` (its `{port}` already filled in), with up to `pool` idle keep-alive
    /// connections kept.
    pub fn new(spec: &TargetSpec, url: &str, pool: usize) -> Result<HttpTarget> {
        install_crypto_provider();
        let (head, tail) = url.split_once(KEY_MARK).ok_or_else(|| {
            UsageError::new(format!(
                "--target {}: no {KEY_MARK}",
                crate::redact::url(url)
            ))
        })?;
        let timeout = spec.http_timeout.0;
        let client = reqwest::Client::builder()
            .default_headers(headers(spec)?)
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(pool)
            .pool_idle_timeout(Duration::from_secs(90))
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let expect_body = match &spec.expect_body {
            Some(r) => Some(
                regex::Regex::new(r).map_err(|e| UsageError::new(format!("--expect-body: {e}")))?,
            ),
            None => None,
        };
        Ok(HttpTarget {
            client,
            head: head.to_string(),
            tail: tail.to_string(),
            expect_status: spec.expect_status.clone(),
            expect_body,
            counts: HttpCounts::default(),
        })
    }

    fn url(&self, id: u64) -> String {
        let mut u = String::with_capacity(self.head.len() + 20 + self.tail.len());
        u.push_str(&self.head);
        let _ = write!(u, "{id}");
        u.push_str(&self.tail);
        u
    }

    /// Send one GET for item `id` and judge the answer; counted only when `measured`.
    pub async fn get(&self, id: u64, measured: bool) -> Outcome {
        let count = |c: &AtomicU64| {
            if measured {
                c.fetch_add(1, Relaxed);
            }
        };
        let resp = match self.client.get(self.url(id)).send().await {
            Ok(r) => r,
            Err(e) => {
                self.count_failure(&e, measured);
                return Outcome::Error;
            }
        };
        let status = resp.status().as_u16();
        if (100..600).contains(&status) {
            count(&self.counts.class[(status / 100 - 1) as usize]);
        }
        let status_ok = if self.expect_status.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expect_status.contains(&status)
        };
        // The body is read to its end either way: a connection goes back to the pool only
        // then, and a timeout while reading it is the app's too.
        let body_ok = match &self.expect_body {
            Some(re) if status_ok => match resp.text().await {
                Ok(text) => re.is_match(&text),
                Err(e) => {
                    self.count_failure(&e, measured);
                    return Outcome::Error;
                }
            },
            _ => {
                let mut resp = resp;
                loop {
                    match resp.chunk().await {
                        Ok(Some(_)) => {}
                        Ok(None) => break true,
                        Err(e) => {
                            self.count_failure(&e, measured);
                            return Outcome::Error;
                        }
                    }
                }
            }
        };
        if !status_ok {
            count(&self.counts.unexpected_status);
            Outcome::Error
        } else if !body_ok {
            count(&self.counts.unexpected_body);
            Outcome::Error
        } else {
            Outcome::Ok
        }
    }

    fn count_failure(&self, e: &reqwest::Error, measured: bool) {
        if !measured {
            return;
        }
        if e.is_timeout() {
            self.counts.timeouts.fetch_add(1, Relaxed);
        } else {
            self.counts.errors.fetch_add(1, Relaxed);
            if e.is_connect() {
                self.counts.connect_errors.fetch_add(1, Relaxed);
            }
        }
    }
}
