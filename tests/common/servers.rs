//! Set-up the server tests share: a Redis and a Postgres started on free loopback ports (the
//! tool's own managed servers, stopped when dropped), clients for them, processes killed
//! however a test ends, free ports and waiting for something to answer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use stampede::servers::{ManagedPostgres, ManagedRedis, postgres::PgStartOptions};

/// A Redis and a Postgres for a test that drives the tool against "external" servers; both
/// stopped when this is dropped, pass or fail.
pub struct Servers {
    pub redis: ManagedRedis,
    pub pg: ManagedPostgres,
}

impl Servers {
    /// Both servers, Postgres accepting `max_connections` (None: its default).
    pub async fn start(max_connections: Option<u32>) -> Servers {
        let _quiet = super::quiet_work();
        let redis = ManagedRedis::start().await.expect("starting redis-server");
        let opts = match max_connections {
            Some(max_connections) => PgStartOptions { max_connections },
            None => PgStartOptions::default(),
        };
        let pg = ManagedPostgres::start(opts)
            .await
            .expect("starting postgres");
        Servers { redis, pg }
    }

    /// Both servers, each speaking TLS only when asked (certificates made for it, as `run
    /// --tls` does), Postgres with its default settings.
    pub async fn with_tls(redis_tls: bool, pg_tls: bool) -> Servers {
        let _quiet = super::quiet_work();
        let redis = ManagedRedis::start_with(redis_tls)
            .await
            .expect("starting redis-server");
        Servers {
            redis,
            pg: postgres(pg_tls).await,
        }
    }

    /// (redis URL, postgres URL)
    pub fn urls(&self) -> (String, String) {
        (self.redis.url(), self.pg.url())
    }
}

/// How many pairs of shared servers a test binary runs at most: a shared turn (a light or
/// waiting test's) has a pair to itself, so two of them on the shared servers run side by
/// side on two pairs (one pair held the writes file's three light tests, 65 s of turns, one
/// after another while the machine had room for two).
const PAIRS: usize = 2;

/// The servers of the tests of one binary that are running: a test that is not about the
/// managed servers themselves (their start, stop, kill or restart) runs the tool against these
/// (`--redis-url`, `--pg-url`) instead of paying a redis-server and a Postgres start and stop
/// per run. Each holder keeps them up; the last one to drop its handle stops them, pass or
/// fail. A test picks up the handle another one holds, so one pool usually serves the whole
/// binary; its second pair starts the first time two shared turns want one at once. Each
/// run gets its own schema and key namespace, and removes them; runs still take turns
/// (`cpu_turn`), and a shared turn claims a pair of its own ([`on_shared`]), so what INFO
/// counts between a run's readings is that run's.
pub struct Pool {
    pairs: [OnceLock<Servers>; PAIRS],
    /// Which pairs a shared turn has claimed.
    claimed: Mutex<[bool; PAIRS]>,
    freed: Condvar,
}

impl Pool {
    /// Pair `i`, started on first use.
    fn pair(&self, i: usize) -> &Servers {
        self.pairs[i].get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to start the shared servers")
                .block_on(Servers::start(None))
        })
    }

    /// A pair no other shared turn has, waited for.
    fn claim(self: &Arc<Pool>) -> Claim {
        let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(i) = claimed.iter().position(|c| !c) {
                claimed[i] = true;
                return Claim {
                    pool: Arc::clone(self),
                    index: i,
                };
            }
            claimed = self.freed.wait(claimed).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A pair of the pool that one shared turn uses alone, until dropped.
struct Claim {
    pool: Arc<Pool>,
    index: usize,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claimed = self.pool.claimed.lock().unwrap_or_else(|e| e.into_inner());
        claimed[self.index] = false;
        self.pool.freed.notify_one();
    }
}

/// The handle of [`on_shared`]: keeps the pool up and, for a shared turn, its pair claimed.
pub struct OnShared {
    // Dropped first: the pair is given back before the pool may stop.
    _claim: Option<Claim>,
    _pool: Arc<Pool>,
}

/// The binary's pool of shared servers, started when no test holds it.
pub fn shared_servers() -> Arc<Pool> {
    static SHARED: Mutex<Weak<Pool>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = slot.upgrade() {
        return p;
    }
    let p = Arc::new(Pool {
        pairs: std::array::from_fn(|_| OnceLock::new()),
        claimed: Mutex::new([false; PAIRS]),
        freed: Condvar::new(),
    });
    *slot = Arc::downgrade(&p);
    p
}

/// `args` with a shared pair's `--redis-url` and `--pg-url` added, for `run`, `compare` and
/// `sweep`; hold the handle until the run's turn has ended. A turn alone has the machine, so
/// it takes the first pair as it is; a light or waiting test's turn claims a pair no other
/// shared turn has (waited for), since Redis's counters that a run reads (keyspace hits and
/// misses) are the whole server's, and another run on the same server would count in them.
/// Taken before the turn, as the servers' lock was: servers, share, machine.
pub fn on_shared(args: &[&str]) -> (OnShared, Vec<String>) {
    let pool = shared_servers();
    let claim =
        (super::WEIGHT.with(std::cell::Cell::get) != super::Weight::Alone).then(|| pool.claim());
    let (redis, pg) = pool.pair(claim.as_ref().map_or(0, |c| c.index)).urls();
    let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    v.extend(["--redis-url".into(), redis, "--pg-url".into(), pg]);
    (
        OnShared {
            _claim: claim,
            _pool: pool,
        },
        v,
    )
}

/// A Postgres alone (TLS only when asked), stopped when dropped.
pub async fn postgres(tls: bool) -> ManagedPostgres {
    let _quiet = super::quiet_work();
    ManagedPostgres::start_with(PgStartOptions::default(), tls)
        .await
        .expect("starting postgres")
}

/// A redis-server the test starts itself with settings the tool never uses (cluster mode,
/// client certificates required), on a free loopback port; killed and reaped when dropped,
/// also when the test fails.
pub struct OwnRedis {
    child: Child,
    /// Its working dir, removed with it.
    _dir: tempfile::TempDir,
    pub port: u16,
}

impl OwnRedis {
    /// `redis-server` with `args` after the loopback, no-persistence basics; `tls_port` makes
    /// the free port its TLS port (and the plain one off). Returns once the port accepts.
    pub fn start(args: &[&str], tls_port: bool) -> OwnRedis {
        let dir = tempfile::tempdir().expect("a temp dir");
        let port = free_port();
        let mut cmd = std::process::Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        if tls_port {
            cmd.args(["--port", "0", "--tls-port", &port.to_string()]);
        } else {
            cmd.args(["--port", &port.to_string()]);
        }
        let child = cmd
            .args(args)
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting redis-server");
        let node = OwnRedis {
            child,
            _dir: dir,
            port,
        };
        wait_for("redis-server to listen", Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).ok()
        });
        node
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes a test started, killed and reaped however it ends.
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Children {
    /// Wait for every process; their exit codes and stderr.
    pub fn wait(mut self) -> Vec<(i32, String)> {
        std::mem::take(&mut self.0)
            .into_iter()
            .map(|c| {
                let o = c.wait_with_output().expect("waiting for a process");
                (
                    o.status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                )
            })
            .collect()
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("binding a free port")
        .local_addr()
        .expect("the bound address")
        .port()
}

/// GET http://127.0.0.1:port/path; the body, or None when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// Poll `probe` every 100 ms until it returns Some; panics naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(t.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A connection to the Redis at `url`.
pub async fn redis_conn(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connecting to redis")
}

/// The keys of the Redis at `url` that match `pattern` (KEYS: test servers only).
pub async fn redis_keys(url: &str, pattern: &str) -> Vec<String> {
    let mut c = redis_conn(url).await;
    redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut c)
        .await
        .expect("KEYS")
}

/// A plaintext client of the Postgres at `url`, its connection driven by a task.
pub async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connecting to postgres");
    tokio::spawn(conn);
    client
}

/// The schemas the tool made (`stampede…`) in the Postgres at `url`.
pub async fn schemas(url: &str) -> Vec<String> {
    pg(url)
        .await
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stampede%'",
            &[],
        )
        .await
        .expect("listing schemas")
        .iter()
        .map(|r| r.get(0))
        .collect()
}
