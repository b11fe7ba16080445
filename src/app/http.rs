//! The request path to an app under test: one HTTP GET per request on keep-alive connections
//! ([`super::conn`]), with `--http-timeout` as the deadline of each, connection included.
//! Outcomes are counted apart: statuses by class, transport errors, timeouts, and responses
//! that were not what `--expect-status`/`--expect-body` ask for.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Result;
use hyper::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::conn::{Failure, Pool};
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

/// The `http` figures with the connections the pool opened.
impl HttpTarget {
    pub fn figures(&self) -> HttpFigures {
        HttpFigures {
            connections: Some(self.pool.opened()),
            ..self.counts.figures()
        }
    }
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
    /// TCP connections opened to the target over the run, warm-up included (at most
    /// `--http-conns` at once; more over a run only when the app closed some). Absent in
    /// results written before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
}

impl HttpFigures {
    /// The figures of several processes of the app (`--instances`) as one.
    pub fn sum(all: impl IntoIterator<Item = HttpFigures>) -> HttpFigures {
        let mut out = HttpFigures::default();
        for f in all {
            for (class, n) in f.status {
                *out.status.entry(class).or_insert(0) += n;
            }
            out.errors += f.errors;
            out.connect_errors += f.connect_errors;
            out.timeouts += f.timeouts;
            out.unexpected_status += f.unexpected_status;
            out.unexpected_body += f.unexpected_body;
            out.connections = match (out.connections, f.connections) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        }
        out
    }
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
            connections: None,
        }
    }
}

/// The app under test as the request path sees it.
pub struct HttpTarget {
    pool: Pool,
    timeout: Duration,
    /// The request's path (origin form) up to `{key}` and after it.
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

/// The headers of `--header`: resolution reads them here first, so a bad one is refused
/// before anything starts.
pub fn headers(given: &[String]) -> Result<Vec<(HeaderName, HeaderValue)>, UsageError> {
    let mut map = Vec::new();
    for h in given {
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
        map.push((name, value));
    }
    Ok(map)
}

impl HttpTarget {
    /// A client for `url` (its `{port}` already filled in), with at most `conns` keep-alive
    /// connections.
    pub fn new(spec: &TargetSpec, url: &str, conns: usize) -> Result<HttpTarget> {
        install_crypto_provider();
        let (head, tail) = url.split_once(KEY_MARK).ok_or_else(|| {
            UsageError::new(format!(
                "--target {}: no {KEY_MARK}",
                crate::redact::url(url)
            ))
        })?;
        // scheme://authority, then the path the requests carry (origin form).
        let after_scheme = head.find("://").map_or(0, |i| i + 3);
        let path_at = head[after_scheme..]
            .find('/')
            .map_or(head.len(), |i| after_scheme + i);
        if path_at == head.len() {
            return Err(UsageError::new(format!(
                "--target {}: put {KEY_MARK} in the path or query, e.g. http://127.0.0.1:8080/items/{KEY_MARK}",
                crate::redact::url(url)
            ))
            .into());
        }
        let expect_body = match &spec.expect_body {
            Some(r) => Some(
                regex::Regex::new(r).map_err(|e| UsageError::new(format!("--expect-body: {e}")))?,
            ),
            None => None,
        };
        Ok(HttpTarget {
            pool: Pool::new(&head[..path_at], headers(&spec.headers)?, conns)?,
            timeout: spec.http_timeout.0,
            head: head[path_at..].to_string(),
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
        let keep_body = self.expect_body.is_some();
        let answer = match tokio::time::timeout(
            self.timeout,
            self.pool.get(self.url(id), keep_body),
        )
        .await
        {
            Ok(Ok(a)) => a,
            Ok(Err(f)) => {
                if measured {
                    self.counts.errors.fetch_add(1, Relaxed);
                    if f == Failure::Connect {
                        self.counts.connect_errors.fetch_add(1, Relaxed);
                    }
                }
                return Outcome::Error;
            }
            Err(_) => {
                count(&self.counts.timeouts);
                return Outcome::Error;
            }
        };
        let status = answer.status;
        if (100..600).contains(&status) {
            count(&self.counts.class[(status / 100 - 1) as usize]);
        }
        let status_ok = if self.expect_status.is_empty() {
            (200..300).contains(&status)
        } else {
            self.expect_status.contains(&status)
        };
        let body_ok = match (&self.expect_body, &answer.body) {
            (Some(re), Some(b)) if status_ok => re.is_match(&String::from_utf8_lossy(b)),
            _ => true,
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
}
