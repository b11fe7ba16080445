//! The network between an app instance and a server, made in user space (this kernel has no
//! `netem` qdisc): a TCP proxy of the tool's own on loopback, one per instance and server, that
//! delays each direction's bytes by half the configured round trip (with jitter), in order, on a
//! timer finer than tokio's ([`timer`]); and that can, switched during the run without
//! reconnecting, hold every byte (a partition: connections stay open, new ones are accepted and
//! hang; when it heals the held bytes are delivered, never dropped, since RESP has no request ids
//! and a multiplexed client would hand later replies to the wrong requests), reset every
//! connection (RST, existing and new), add latency, limit the bytes a second, or hold a close
//! (slow close) — the network faults ([`crate::fault::chaos`]).
//!
//! Toxiproxy's Rust port (noxious) was the reference; its latency is whole milliseconds and its
//! timeout toxic drops bytes, which is why this is the tool's own. The tool's own connections
//! (INFO, `pg_stat_statements`, the heartbeat, probes) never go through a proxy.

pub mod timer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::RngExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::values::Rtt;

/// What the proxy does with the bytes, switchable during the run (the network faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Forward, after the delay.
    #[default]
    Pass,
    /// Hold every byte (new connections are accepted and hang) until the mode changes.
    Blackhole,
    /// Reset every connection, and each new one as it comes.
    Reset,
}

/// The proxy's settings, shared with its connections: read for every chunk, so a change takes
/// effect at once on connections already open.
pub struct Control {
    /// Half the round trip's base, µs: each direction's delay.
    one_way_us: AtomicU64,
    /// Half the round trip's jitter, µs: each chunk's delay is drawn in ± this.
    jitter_us: AtomicU64,
    /// A latency fault's added round trip, halved per direction, µs.
    extra_us: AtomicU64,
    /// A bandwidth fault's bytes a second, each direction (0: unlimited).
    rate: AtomicU64,
    /// A slow-close fault's hold on a close, µs (0: passed on at once).
    close_delay_us: AtomicU64,
    mode: watch::Sender<Mode>,
    /// Connections accepted, and resets sent.
    pub accepted: AtomicU64,
    pub resets: AtomicU64,
    /// Chunks of the server's bytes handed to the client: a reply got through.
    pub replies: AtomicU64,
}

impl Control {
    fn new(rtt: Rtt) -> Control {
        let c = Control {
            one_way_us: AtomicU64::new(0),
            jitter_us: AtomicU64::new(0),
            extra_us: AtomicU64::new(0),
            rate: AtomicU64::new(0),
            close_delay_us: AtomicU64::new(0),
            mode: watch::Sender::new(Mode::Pass),
            accepted: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            replies: AtomicU64::new(0),
        };
        c.set_rtt(rtt);
        c
    }

    /// The round trip from now on.
    pub fn set_rtt(&self, rtt: Rtt) {
        self.one_way_us
            .store(rtt.base.0.as_micros() as u64 / 2, Relaxed);
        self.jitter_us
            .store(rtt.jitter.0.as_micros() as u64 / 2, Relaxed);
    }

    /// Pass, hold or reset from now on.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// A round trip added to the configured one from now on (zero: none).
    pub fn set_extra(&self, added: Duration) {
        self.extra_us.store(added.as_micros() as u64 / 2, Relaxed);
    }

    /// At most `bytes_per_sec` each direction from now on (0: unlimited).
    pub fn set_rate(&self, bytes_per_sec: u64) {
        self.rate.store(bytes_per_sec, Relaxed);
    }

    /// How long a close is held before the other end learns of it, from now on.
    pub fn set_close_delay(&self, delay: Duration) {
        self.close_delay_us.store(delay.as_micros() as u64, Relaxed);
    }

    /// The configured round trip's base (without a latency fault's addition).
    pub fn rtt_base(&self) -> Duration {
        Duration::from_micros(self.one_way_us.load(Relaxed) * 2)
    }

    /// The delay of one chunk: half the round trip, ± half its jitter.
    fn delay(&self) -> Duration {
        let (base, jitter) = (
            self.one_way_us.load(Relaxed) + self.extra_us.load(Relaxed),
            self.jitter_us.load(Relaxed) as i64,
        );
        if jitter == 0 {
            return Duration::from_micros(base);
        }
        let d = base as i64 + rand::rng().random_range(-jitter..=jitter);
        Duration::from_micros(d.max(0) as u64)
    }
}

/// One proxy: a listener on loopback in front of `upstream`, and its connections; stopped when
/// dropped (listener closed, every connection closed).
pub struct Proxy {
    addr: SocketAddr,
    pub control: Arc<Control>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to `upstream` with `rtt` added.
    pub async fn start(upstream: SocketAddr, rtt: Rtt) -> Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("opening the network proxy's listener on loopback")?;
        let addr = listener.local_addr()?;
        let control = Arc::new(Control::new(rtt));
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept(listener, upstream, control.clone(), stop.clone()));
        Ok(Proxy {
            addr,
            control,
            stop,
            task,
        })
    }

    /// Where the app connects instead of the server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    control: Arc<Control>,
    stop: CancellationToken,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.cancelled() => break,
            // Reap finished connections as they end, so the set stays small.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let Ok((client, _)) = accepted else { continue };
        control.accepted.fetch_add(1, Relaxed);
        conns.spawn(connection(client, upstream, control.clone()));
    }
    conns.abort_all();
}

/// Reset `s`: close it with an RST instead of a FIN (SO_LINGER 0).
fn reset(s: &TcpStream, control: &Control) {
    #[allow(deprecated)] // tokio's set_linger is deprecated only for its blocking close.
    let _ = s.set_linger(Some(Duration::ZERO));
    control.resets.fetch_add(1, Relaxed);
}

async fn connection(mut client: TcpStream, upstream: SocketAddr, control: Arc<Control>) {
    let mut mode = control.mode.subscribe();
    if *mode.borrow() == Mode::Reset {
        reset(&client, &control);
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        // The server is gone (a crash): the client's connection ends, as it would directly.
        reset(&client, &control);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let (up_tx, up_rx) = mpsc::channel(256);
        let (down_tx, down_rx) = mpsc::channel(256);
        let work = async {
            tokio::join!(
                read_side(cr, up_tx, &control),
                write_side(sw, up_rx, &control, None),
                read_side(sr, down_tx, &control),
                write_side(cw, down_rx, &control, Some(&control.replies)),
            )
        };
        tokio::select! {
            _ = work => {}
            _ = mode.wait_for(|m| *m == Mode::Reset) => {}
        }
    }
    // Reset: both ends are closed with an RST, as a middlebox's reset would.
    if *control.mode.borrow() == Mode::Reset {
        reset(&client, &control);
        #[allow(deprecated)]
        let _ = server.set_linger(Some(Duration::ZERO));
    }
}

/// Read chunks and hand each on with the time it is due, in order.
async fn read_side(
    mut r: impl tokio::io::AsyncRead + Unpin,
    tx: mpsc::Sender<(Instant, Vec<u8>)>,
    control: &Control,
) {
    let mut last_due = Instant::now();
    loop {
        let mut buf = vec![0u8; 16 * 1024];
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.truncate(n);
        // Never before the chunk ahead of it: jitter must not reorder a stream.
        let due = (Instant::now() + control.delay()).max(last_due);
        last_due = due;
        if tx.send((due, buf)).await.is_err() {
            return;
        }
    }
}

/// Write each chunk when it is due, unless the proxy holds the bytes.
async fn write_side(
    mut w: impl tokio::io::AsyncWrite + Unpin,
    mut rx: mpsc::Receiver<(Instant, Vec<u8>)>,
    control: &Control,
    delivered: Option<&AtomicU64>,
) {
    let Ok(mut timer) = timer::FineTimer::new() else {
        return;
    };
    let mut mode = control.mode.subscribe();
    // With a rate: when the link is free again after the bytes already sent.
    let mut free_at = Instant::now();
    while let Some((due, chunk)) = rx.recv().await {
        let rate = control.rate.load(Relaxed);
        let due = if rate == 0 {
            due
        } else {
            // The chunk goes out once the link has carried it, after those ahead of it.
            let sent = due.max(free_at) + Duration::from_secs_f64(chunk.len() as f64 / rate as f64);
            free_at = sent;
            sent
        };
        if timer.sleep_until(due).await.is_err() {
            return;
        }
        // A partition holds the bytes until it heals (or the connection is reset).
        if mode.wait_for(|m| *m == Mode::Pass).await.is_err() {
            return;
        }
        if w.write_all(&chunk).await.is_err() {
            return;
        }
        if let Some(d) = delivered {
            d.fetch_add(1, Relaxed);
        }
    }
    // The other end closed: a slow close holds the news (the connection stays half-open).
    let hold = Duration::from_micros(control.close_delay_us.load(Relaxed));
    if !hold.is_zero() && timer.sleep_until(Instant::now() + hold).await.is_err() {
        return;
    }
    let _ = w.shutdown().await;
}

/// The host and port of a `redis://` or `postgres://` URL (`default_port` when it has none).
pub fn url_address(url: &str, default_port: u16) -> Option<(String, u16)> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // [::1]:6379, host:6379, host
    if let Some(v6) = hostport.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        let port = rest
            .strip_prefix(':')
            .map_or(Some(default_port), |p| p.parse().ok())?;
        return Some((host.to_string(), port));
    }
    match hostport.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((hostport.to_string(), default_port)),
    }
}

/// `url` with its host and port replaced by `addr`, the rest (user, password, database,
/// options) kept.
pub fn readdress_url(url: &str, addr: SocketAddr) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let user = authority.rsplit_once('@').map(|(u, _)| u);
    Some(match user {
        Some(u) => format!("{scheme}://{u}@{addr}{tail}"),
        None => format!("{scheme}://{addr}{tail}"),
    })
}

/// The first address `host:port` resolves to.
pub async fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    tokio::net::lookup_host((host, port))
        .await
        .with_context(|| format!("resolving {host}:{port} for the network proxy"))?
        .next()
        .with_context(|| format!("{host}:{port} resolves to no address"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_are_read_and_readdressed_with_the_rest_kept() {
        assert_eq!(
            url_address("redis://:pw@10.0.0.2:6380/3", 6379),
            Some(("10.0.0.2".into(), 6380))
        );
        assert_eq!(
            url_address("redis://localhost", 6379),
            Some(("localhost".into(), 6379))
        );
        assert_eq!(
            url_address("postgres://u:p@[::1]:5433/db?sslmode=disable", 5432),
            Some(("::1".into(), 5433))
        );
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(
            readdress_url("redis://:pw@10.0.0.2:6380/3", a).as_deref(),
            Some("redis://:pw@127.0.0.1:4000/3")
        );
        assert_eq!(
            readdress_url("redis://127.0.0.1:6379", a).as_deref(),
            Some("redis://127.0.0.1:4000")
        );
    }

    use super::*;

    /// An echo server on loopback (the proxy is tested on its own here; the real servers are
    /// in tests/network.rs).
    async fn echo() -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, task)
    }

    async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Duration {
        let t = Instant::now();
        s.write_all(msg).await.unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(got, msg, "bytes in order, none lost");
        t.elapsed()
    }

    #[tokio::test]
    async fn a_round_trip_takes_the_configured_rtt_and_a_partition_holds_then_delivers() {
        let (upstream, server) = echo().await;
        let rtt: Rtt = "4ms".parse().unwrap();
        let p = Proxy::start(upstream, rtt).await.unwrap();
        let mut s = TcpStream::connect(p.addr()).await.unwrap();
        let mut took = Vec::new();
        for i in 0..5u8 {
            took.push(round_trip(&mut s, &[i; 100]).await);
        }
        took.sort();
        assert!(took[0] >= Duration::from_millis(4), "{took:?}");
        assert!(took[2] < Duration::from_millis(20), "{took:?}");
        // Held: nothing comes back while the partition lasts, everything after it heals.
        p.control.set_mode(Mode::Blackhole);
        s.write_all(b"held").await.unwrap();
        let mut got = [0u8; 4];
        let early = tokio::time::timeout(Duration::from_millis(100), s.read_exact(&mut got)).await;
        assert!(early.is_err(), "a partition forwards nothing");
        p.control.set_mode(Mode::Pass);
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"held");
        // Reset: the connection is cut with an RST.
        p.control.set_mode(Mode::Reset);
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await;
        assert!(
            matches!(r, Ok(Ok(0)) | Ok(Err(_))),
            "the connection ends: {r:?}"
        );
        assert!(p.control.resets.load(Relaxed) >= 1);
        // New connections are reset too, while the mode lasts.
        let mut s2 = TcpStream::connect(p.addr()).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(2), s2.read(&mut buf)).await;
        assert!(matches!(r, Ok(Ok(0)) | Ok(Err(_))), "reset at once: {r:?}");
        // Stopped with its owner: the listener is gone, nothing listens on its port.
        let addr = p.addr();
        drop(p);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(TcpStream::connect(addr).await.is_err(), "no listener left");
        server.abort();
    }

    #[tokio::test]
    async fn a_latency_fault_adds_its_round_trip_and_a_rate_paces_the_bytes() {
        let (upstream, server) = echo().await;
        let p = Proxy::start(upstream, "0ms".parse().unwrap())
            .await
            .unwrap();
        let mut s = TcpStream::connect(p.addr()).await.unwrap();
        p.control.set_extra(Duration::from_millis(20));
        let t = round_trip(&mut s, b"ping").await;
        assert!(t >= Duration::from_millis(20), "{t:?}");
        p.control.set_extra(Duration::ZERO);
        // 40 kB at 100 kB/s each way: about 0.4 s out (and the echo back overlaps it).
        p.control.set_rate(100_000);
        let t = round_trip(&mut s, &[7u8; 40_000]).await;
        assert!(t >= Duration::from_millis(350), "{t:?}");
        assert!(t < Duration::from_secs(3), "{t:?}");
        p.control.set_rate(0);
        // A slow close: the client's FIN reaches the echo 200 ms late, and the echo's own close
        // comes back 200 ms late again; the bytes before it arrive at once.
        p.control.set_close_delay(Duration::from_millis(200));
        round_trip(&mut s, b"last").await;
        let t = Instant::now();
        s.shutdown().await.unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
        drop(p);
        server.abort();
    }
}
