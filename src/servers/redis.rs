//! A managed `redis-server` on a free loopback port: no persistence, its own temp dir and log,
//! killable (a crash) and restartable (empty, same port) for the chaos faults. A node of a
//! managed cluster is one too, with its role's arguments and a bus port (see `cluster`).

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::reaper::REDIS_DIR_PREFIX;
use super::watchdog::Watchdog;
use super::{
    LaunchError, ServerError, find_on_path, free_port, kill_and_reap, log_len, log_tail,
    port_busy_since, server_dir, stop_child, try_reap,
};

/// How long a start or restart may take before we call the server broken.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one PING may take; a live local server answers in well under a millisecond.
const PING_TIMEOUT: Duration = Duration::from_millis(500);
/// Fresh ports to try when another process takes ours between `free_port` and the bind.
const START_ATTEMPTS: u32 = 3;
/// Tries on the same port for a restart, `RESTART_BACKOFF` apart: the old socket may
/// linger for a moment after a kill.
const RESTART_ATTEMPTS: u32 = 10;
const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// How long `stop` lets Redis shut down after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A `redis-server` child process and its temp dir. Dropping it stops the server and
/// removes the dir. If the tool dies without dropping it, its watchdog does both.
#[derive(Debug)]
pub struct ManagedRedis {
    binary: PathBuf,
    port: u16,
    /// `None` while killed or stopped.
    child: Option<Child>,
    /// Working dir and logs; removed on drop (after `Drop::drop` stopped the server).
    dir: TempDir,
    /// Kills the running server and removes `dir` if the tool dies. Declared after `dir`:
    /// it is dismissed only once the dir is gone.
    watchdog: Watchdog,
    /// With `--tls`: the certificates made for this server (in `dir`); it then speaks TLS only.
    tls: Option<Box<crate::tls::RunCerts>>,
    /// Configuration a run set on the server (its memory limit, as `--name value` pairs),
    /// given again to every restart: a crashed cache comes back empty, not unconfigured.
    config: Vec<String>,
    /// Arguments of the server's role that every launch gets, before `config`: a cluster
    /// node's `--cluster-enabled yes` and the like. Set once, at the start.
    base_args: Vec<String>,
    /// A cluster node's bus port (`--cluster-port`): chosen free with the port, kept across
    /// restarts (the other nodes know the node by both). `None` outside a cluster.
    bus_port: Option<u16>,
}

/// Where a server started with TLS gets its certificates.
#[derive(Debug, Clone)]
pub(crate) enum Certs {
    /// Plain TCP.
    None,
    /// A CA and certificates made for this server, in its temp dir.
    Generate,
    /// Certificates made elsewhere and shared (a cluster's nodes, which must trust each
    /// other: one CA for all). The files must outlive the server.
    Shared(crate::tls::RunCerts),
}

/// How to start a [`ManagedRedis`] beyond the defaults.
#[derive(Debug, Clone)]
pub(crate) struct NodeOptions {
    pub(crate) certs: Certs,
    /// Given to every launch and restart; see `ManagedRedis::base_args`.
    pub(crate) base_args: Vec<String>,
    /// A cluster node: `--cluster-port` on a free port of its own.
    pub(crate) cluster_bus: bool,
}

impl ManagedRedis {
    /// Start redis-server on a free 127.0.0.1 port with persistence off, its own temp dir
    /// and log file, and wait (up to 10 s) until it answers PING. On failure the process is
    /// killed and the error carries the last lines of its log.
    pub async fn start() -> Result<Self, ServerError> {
        Self::start_with(false).await
    }

    /// As [`ManagedRedis::start`]; with `tls`, the server speaks TLS only (no plain port),
    /// with a CA and a server certificate generated in its temp dir. Clients may present
    /// a certificate signed by that CA (the client pair is there too) but need not.
    pub async fn start_with(tls: bool) -> Result<Self, ServerError> {
        Self::start_node(NodeOptions {
            certs: if tls { Certs::Generate } else { Certs::None },
            base_args: Vec::new(),
            cluster_bus: false,
        })
        .await
    }

    /// As [`ManagedRedis::start`], with `options`: shared certificates, the arguments of a
    /// role (a cluster node), a bus port.
    pub(crate) async fn start_node(options: NodeOptions) -> Result<Self, ServerError> {
        let binary = find_on_path("redis-server").ok_or(ServerError::NotFound {
            program: "redis-server",
            searched: "on PATH".to_owned(),
            install: "Debian: apt-get install redis-server",
        })?;
        let (dir, watchdog) = server_dir(REDIS_DIR_PREFIX, "redis-server").await?;
        let mut redis = ManagedRedis {
            binary,
            port: 0,
            child: None,
            dir,
            watchdog,
            tls: None,
            config: Vec::new(),
            base_args: options.base_args,
            bus_port: None,
        };
        match options.certs {
            Certs::None => {}
            Certs::Generate => {
                redis.tls = Some(Box::new(
                    crate::tls::generate_run_certs(redis.dir.path()).map_err(|e| {
                        ServerError::setup("writing certificates for redis-server", e)
                    })?,
                ));
            }
            Certs::Shared(certs) => redis.tls = Some(Box::new(certs)),
        }
        let mut attempt = 1;
        loop {
            let port = || {
                free_port().map_err(|e| ServerError::setup("finding a free port on 127.0.0.1", e))
            };
            redis.port = port()?;
            if options.cluster_bus {
                // Its own free port, not port + 10000 (which may be taken, or past 65535).
                // The kernel may hand out the port just released again: ask until it differs.
                let mut bus = port()?;
                while bus == redis.port {
                    bus = port()?;
                }
                redis.bus_port = Some(bus);
            }
            match redis.launch().await {
                Ok(()) => return Ok(redis),
                Err(LaunchError::PortBusy(_)) if attempt < START_ATTEMPTS => attempt += 1,
                Err(e) => return Err(e.into_inner()),
            }
        }
    }

    /// `redis://127.0.0.1:PORT/` (`rediss://` with TLS), for the redis crate.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// The certificates of a server started with TLS.
    pub fn certs(&self) -> Option<&crate::tls::RunCerts> {
        self.tls.as_deref()
    }

    /// The TCP port, stable across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A cluster node's bus port (`--cluster-port`); `None` outside a cluster.
    pub fn bus_port(&self) -> Option<u16> {
        self.bus_port
    }

    /// The server's working dir (removed when this is dropped).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The server's pid; `None` while killed or stopped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL the server, as in a crash, and reap it. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child, &self.watchdog);
        }
    }

    /// Start a new, empty redis-server on the same port with the same arguments and wait
    /// until it answers. Kills the running one first, if any. Retries for a while if the
    /// port is briefly still taken.
    pub async fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        let mut attempt = 1;
        loop {
            match self.launch().await {
                Ok(()) => return Ok(()),
                Err(LaunchError::PortBusy(_)) if attempt < RESTART_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(RESTART_BACKOFF).await;
                }
                Err(e) => return Err(e.into_inner()),
            }
        }
    }

    /// Arguments (`--maxmemory`, `8388608`, …) that every later restart starts the server
    /// with, replacing those given before: the configuration a run set on the running server
    /// (by CONFIG SET), so that the server a kill-redis fault brings back has it too.
    pub fn keep_config(&mut self, args: Vec<String>) {
        self.config = args;
    }

    /// Stop gracefully: SIGTERM, up to 2 s to exit, then SIGKILL; reap. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child, &self.watchdog, libc::SIGTERM, STOP_GRACE);
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// stdout/stderr of the process: where Redis reports problems it hits before it
    /// opens its log file (bad arguments, unwritable log).
    fn out_path(&self) -> PathBuf {
        self.dir.path().join("redis.out")
    }

    fn what(&self) -> String {
        format!("redis-server on 127.0.0.1:{}", self.port)
    }

    /// The tail of the log and of stdout/stderr, for an error message.
    fn tail(&self) -> String {
        log_tail(&[&self.log_path(), &self.out_path()])
    }

    /// Spawn one redis-server on `self.port` and wait until it answers PING. On failure
    /// the process is killed and reaped before returning.
    async fn launch(&mut self) -> Result<(), LaunchError> {
        let (log, out) = (self.log_path(), self.out_path());
        // Logs are appended across restarts, so only what this launch wrote tells whether
        // the port was busy.
        let (log_start, out_start) = (log_len(&log), log_len(&out));
        let child = self.spawn().map_err(LaunchError::Failed)?;
        // Covered from here on, restarts included: each new process is announced.
        let watched = self.watchdog.watch(child.id());
        self.child = Some(child);
        if let Err(e) = watched {
            self.kill();
            return Err(LaunchError::Failed(ServerError::setup(
                format!("handing {} to its watchdog", self.what()),
                e,
            )));
        }

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = try_reap(child, &self.watchdog)
            {
                self.child = None;
                let err = ServerError::Exited {
                    what: self.what(),
                    status,
                    tail: self.tail(),
                };
                let busy = port_busy_since(&log, log_start) || port_busy_since(&out, out_start);
                return Err(if busy {
                    LaunchError::PortBusy(err)
                } else {
                    LaunchError::Failed(err)
                });
            }
            let pid = self.child.as_ref().map_or(0, Child::id);
            let last_error =
                match ping(self.port, self.tls.as_ref().map(|c| c.ca.as_path()), pid).await {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                };
            if Instant::now() >= deadline {
                self.kill();
                return Err(LaunchError::Failed(ServerError::NotReady {
                    what: self.what(),
                    timeout: READY_TIMEOUT,
                    last_error,
                    tail: self.tail(),
                }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn spawn(&self) -> Result<Child, ServerError> {
        let out_path = self.out_path();
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(|e| ServerError::setup(format!("creating {}", out_path.display()), e))?;
        let err = out.try_clone().map_err(|e| {
            ServerError::setup(
                format!("duplicating the handle of {}", out_path.display()),
                e,
            )
        })?;
        let mut cmd = Command::new(&self.binary);
        match &self.tls {
            None => {
                cmd.arg("--port").arg(self.port.to_string());
            }
            // TLS only: no plain port, so a client without TLS cannot get in unnoticed.
            Some(c) => {
                cmd.args(["--port", "0", "--tls-port"])
                    .arg(self.port.to_string())
                    .arg("--tls-cert-file")
                    .arg(&c.server_cert)
                    .arg("--tls-key-file")
                    .arg(&c.server_key)
                    .arg("--tls-ca-cert-file")
                    .arg(&c.ca)
                    .args(["--tls-auth-clients", "optional"]);
            }
        }
        cmd.args(["--bind", "127.0.0.1"])
            // No RDB snapshots and no AOF: a restart must come back empty, like a crash of a
            // pure cache, and persistence would only add disk noise to the measurements.
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .args(["--protected-mode", "yes"])
            .args(["--daemonize", "no"])
            .args(&self.base_args);
        if let Some(bus) = self.bus_port {
            cmd.arg("--cluster-port").arg(bus.to_string());
        }
        cmd.args(&self.config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            // Own process group: a Ctrl-C at the terminal must not kill the server before the
            // tool has written its results; the tool stops it itself.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                ServerError::setup(
                    format!("starting {} on port {}", self.binary.display(), self.port),
                    e,
                )
            })
    }
}

impl Drop for ManagedRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One raw RESP PING; `Ok` on `+PONG`. A raw socket keeps readiness free of any client
/// library's reconnect logic. With `ca`, over TLS verified against it.
/// Ready when the server on `port` answers as process `pid`: a server that lost the race for
/// its port aborts, but until it has, the port answers for whichever server holds it (another
/// node of the same cluster, picked the same free port a moment earlier), so a PONG alone
/// would take that one for this one.
async fn ping(port: u16, ca: Option<&std::path::Path>, pid: u32) -> Result<(), String> {
    let exchange = async {
        match ca {
            None => {
                let stream = TcpStream::connect(("127.0.0.1", port))
                    .await
                    .map_err(|e| e.to_string())?;
                answers_as(stream, pid).await
            }
            Some(ca) => answers_as(crate::tls::connect_loopback(port, ca).await?, pid).await,
        }
    };
    tokio::time::timeout(PING_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("INFO server got no answer within {PING_TIMEOUT:?}")))
}

/// `INFO server` on `stream`: Ok when its `process_id` is `pid`.
async fn answers_as(
    mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    pid: u32,
) -> Result<(), String> {
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .await
        .map_err(|e| e.to_string())?;
    // The section is about 1 kB; it is read until its process_id line is whole.
    let mut reply = Vec::with_capacity(2048);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection closed before INFO server was answered".into());
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        if !text.starts_with('$') {
            return Err(format!("INFO server answered {:?}", text.trim_end()));
        }
        let id = text.find("\r\nprocess_id:").and_then(|at| {
            let rest = &text[at + "\r\nprocess_id:".len()..];
            rest.find("\r\n").map(|end| &rest[..end])
        });
        if let Some(id) = id {
            return match id.trim().parse::<u32>() {
                Ok(p) if p == pid => Ok(()),
                Ok(p) => Err(format!("the port answers as process {p}, not {pid}")),
                Err(_) => Err(format!("INFO server gave the process id {id:?}")),
            };
        }
        if reply.len() > 16 * 1024 {
            return Err("INFO server has no process_id".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::test_support::pid_alive;

    async fn redis_ping(url: &str) -> redis::RedisResult<String> {
        let client = redis::Client::open(url)?;
        let mut con = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async(&mut con).await
    }

    #[tokio::test]
    async fn start_kill_restart_drop() {
        let started = Instant::now();
        let mut redis = ManagedRedis::start().await.expect("redis-server starts");
        eprintln!("redis start-up took {:?}", started.elapsed());
        assert_eq!(redis.url(), format!("redis://127.0.0.1:{}/", redis.port()));
        assert_eq!(redis_ping(&redis.url()).await.expect("PING"), "PONG");

        // A value written before the crash must be gone after the restart.
        let client = redis::Client::open(redis.url()).expect("client");
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut con)
            .await
            .expect("SET");

        let first_pid = redis.pid().expect("running");
        redis.kill();
        assert_eq!(redis.pid(), None);
        assert!(!pid_alive(first_pid));
        redis.kill(); // idempotent
        assert!(
            redis_ping(&redis.url()).await.is_err(),
            "PING after kill must fail"
        );

        let port = redis.port();
        let started = Instant::now();
        redis.restart().await.expect("restart");
        eprintln!("redis restart took {:?}", started.elapsed());
        assert_eq!(redis.port(), port);
        assert_eq!(
            redis_ping(&redis.url()).await.expect("PING after restart"),
            "PONG"
        );
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("reconnect");
        let v: Option<String> = redis::cmd("GET")
            .arg("k")
            .query_async(&mut con)
            .await
            .expect("GET");
        assert_eq!(v, None, "restarted server is empty");

        let pid = redis.pid().expect("running");
        let dir = redis.dir.path().to_owned();
        assert!(dir.exists());
        drop(redis);
        assert!(!pid_alive(pid), "redis-server {pid} still alive after drop");
        assert!(!dir.exists(), "{} left behind", dir.display());
    }

    /// Two nodes of one cluster were handed the same free port: the second one's probe
    /// reached the first and took it for itself. Readiness asks the server who it is.
    #[tokio::test]
    async fn a_port_that_answers_for_another_process_is_not_ready() {
        let redis = ManagedRedis::start().await.expect("redis-server starts");
        let pid = redis.pid().expect("running");
        assert_eq!(ping(redis.port(), None, pid).await, Ok(()));
        let other = ping(redis.port(), None, pid + 1)
            .await
            .expect_err("another pid");
        assert!(
            other.contains(&format!("answers as process {pid}")),
            "{other}"
        );
    }

    #[tokio::test]
    async fn restart_while_running_and_stop_is_idempotent() {
        let mut redis = ManagedRedis::start().await.expect("redis-server starts");
        let old = redis.pid().expect("running");
        redis.restart().await.expect("restart while running");
        assert_ne!(redis.pid(), Some(old));
        assert!(!pid_alive(old));
        redis.stop();
        redis.stop();
        assert_eq!(redis.pid(), None);
    }

    #[tokio::test]
    async fn busy_port_on_restart_reports_log_tail() {
        let mut redis = ManagedRedis::start().await.expect("redis-server starts");
        redis.kill();
        // Someone else takes the port while Redis is down: restart must give up with an
        // error naming the cause, not hang.
        let _squatter = std::net::TcpListener::bind(("127.0.0.1", redis.port())).expect("bind");
        let err = redis.restart().await.expect_err("port is taken");
        let msg = err.to_string();
        assert!(msg.contains("Address already in use"), "{msg}");
        assert_eq!(redis.pid(), None);
    }
}
