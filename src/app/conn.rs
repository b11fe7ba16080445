//! Keep-alive HTTP/1.1 connections to the app under test, on hyper's client connections.
//!
//! A load generator's client must cost less than the app it drives, or the two share the
//! machine's cores unevenly and the app's throughput is understated. reqwest's pooled client
//! (which this replaced on the request path) parses a `Url` per request, checks a connection
//! out of a pool shared under a lock with its own bookkeeping and builds a full request with
//! its default headers; measured beside wrk on the same app it spent 2.8× wrk's CPU per
//! request and held 0.57× wrk's rate. Here a request takes an idle connection off a stack
//! (a lock held for one push or pop, never across an await), writes an origin-form GET with
//! the headers prepared once, reads the body to its end and puts the connection back.
//!
//! Plain `http://` and `https://` (rustls on *ring*, the system's roots) both go through it.

use std::sync::Arc;
use std::sync::Mutex;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HOST, HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;

use crate::error::UsageError;

/// Why a request got no response (the results count the two apart; no message is kept, as
/// none is reported per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection or the TLS handshake could not be made.
    Connect,
    /// The connection broke, or the response was not HTTP.
    Transport,
}

/// Where the app listens and how to reach it.
struct Origin {
    /// `host:port`, as connected to.
    addr: String,
    /// The Host header (the authority as written in the URL, credentials left out).
    host: HeaderValue,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

/// The connections to one app, and the request every GET shares.
pub struct Pool {
    origin: Origin,
    /// Headers sent with every request (`--header`, and Basic auth from the URL's userinfo).
    headers: Vec<(HeaderName, HeaderValue)>,
    idle: Mutex<Vec<SendRequest<Empty<Bytes>>>>,
    /// One permit per connection that may be open: a request holds one from before it takes
    /// or opens a connection until it gives it back.
    conns: tokio::sync::Semaphore,
    /// Connections opened so far.
    opened: std::sync::atomic::AtomicU64,
}

/// A GET's answer: the status and, when asked for, the body.
pub struct Answer {
    pub status: u16,
    pub body: Option<Bytes>,
}

impl Pool {
    /// At most `conns` connections to `url` (scheme and authority; the path is given per
    /// request), kept alive between requests.
    pub fn new(url: &str, headers: Vec<(HeaderName, HeaderValue)>, conns: usize) -> Result<Pool> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| UsageError::new(format!("--target: not a URL ({e})")))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(UsageError::new("--target: give an http:// or https:// URL").into()),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| UsageError::new("--target: the URL has no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        // The Host header carries no credentials.
        let shown = authority
            .as_str()
            .rsplit('@')
            .next()
            .unwrap_or(authority.as_str());
        let mut headers = headers;
        if let Some((userinfo, _)) = authority.as_str().rsplit_once('@') {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(userinfo);
            let mut v = HeaderValue::from_str(&format!("Basic {token}"))
                .context("the URL's credentials do not make a header")?;
            v.set_sensitive(true);
            headers.push((hyper::header::AUTHORIZATION, v));
        }
        let tls = if tls {
            crate::tls::install_provider();
            let config = crate::tls::web_client_config()?;
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|_| UsageError::new(format!("--target: '{host}' is not a TLS name")))?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
        } else {
            None
        };
        Ok(Pool {
            origin: Origin {
                addr,
                host: HeaderValue::from_str(shown).context("the URL's host is not a header")?,
                tls,
            },
            headers,
            idle: Mutex::new(Vec::with_capacity(conns.min(4096))),
            conns: tokio::sync::Semaphore::new(conns.min(tokio::sync::Semaphore::MAX_PERMITS)),
            opened: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn take(&self) -> Option<SendRequest<Empty<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.pop()
    }

    fn give_back(&self, s: SendRequest<Empty<Bytes>>) {
        if s.is_closed() {
            return;
        }
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    /// Connections opened so far (those refused included: each was an attempt the app saw).
    pub fn opened(&self) -> u64 {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, Failure> {
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tcp = tokio::net::TcpStream::connect(self.origin.addr.as_str())
            .await
            .map_err(|_| Failure::Connect)?;
        let _ = tcp.set_nodelay(true);
        // The connection runs as a task of its own: it ends when its sender is dropped (or the
        // app closes it), and with the runtime.
        match &self.origin.tls {
            None => {
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(|_| Failure::Connect)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(send)
            }
            Some((connector, name)) => {
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|_| Failure::Connect)?;
                let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|_| Failure::Connect)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(send)
            }
        }
    }

    /// GET `path` (origin form: `/items/42?x=1`), reading the body to its end (a connection
    /// is reused only then) and keeping it when `keep_body`.
    pub async fn get(&self, path: String, keep_body: bool) -> Result<Answer, Failure> {
        let uri = hyper::Uri::try_from(path).map_err(|_| Failure::Transport)?;
        // Never closed, so acquiring fails only if it were: then there is no connection.
        let _conn = self.conns.acquire().await.map_err(|_| Failure::Transport)?;
        // A kept-alive connection the app has closed meanwhile fails before the request is
        // written: that request goes out once more, on a new connection (as hyper's pooled
        // client does); a request that may have reached the app is never sent twice.
        let (mut send, mut reused) = match self.take() {
            Some(s) => (s, true),
            None => (self.connect().await?, false),
        };
        let resp = loop {
            if send.ready().await.is_err() {
                if reused {
                    (send, reused) = (self.connect().await?, false);
                    continue;
                }
                return Err(Failure::Transport);
            }
            let mut req = hyper::Request::new(Empty::<Bytes>::new());
            *req.uri_mut() = uri.clone();
            let h = req.headers_mut();
            h.insert(HOST, self.origin.host.clone());
            for (name, value) in &self.headers {
                h.append(name.clone(), value.clone());
            }
            match send.send_request(req).await {
                Ok(r) => break r,
                Err(e) if reused && e.is_canceled() => {
                    (send, reused) = (self.connect().await?, false);
                }
                Err(_) => return Err(Failure::Transport),
            }
        };
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut kept: Option<Vec<u8>> = keep_body.then(Vec::new);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| Failure::Transport)?;
            if let (Some(k), Some(d)) = (kept.as_mut(), frame.data_ref()) {
                k.extend_from_slice(d);
            }
        }
        self.give_back(send);
        Ok(Answer {
            status,
            body: kept.map(Bytes::from),
        })
    }
}
