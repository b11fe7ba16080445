//! A managed throwaway Postgres cluster on a free loopback port, with pg_stat_statements
//! loaded. Its data dir is copied from a reusable initdb template in the user's cache dir,
//! so only the first run pays for initdb. When run as root, the server runs as the
//! unprivileged `postgres` user, because Postgres refuses to run as root. It can be killed
//! (SIGKILL of its whole process group, as a machine crash would) and restarted on the same
//! port and data dir, through crash recovery, for the chaos faults.

mod datadir;

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

use self::datadir::{PgBinaries, find_binaries, prepare_cluster};
use super::pg_user::{RunAs, run_as};
use super::reaper::{PG_DIR_PREFIX, postmaster_shm};
use super::watchdog::Watchdog;
use super::{
    LaunchError, ServerError, free_port, kill_and_reap, log_len, log_tail, port_busy_since,
    server_dir, stop_child, try_reap,
};

/// How long the server may take to accept connections before we call it broken.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one connection attempt may take while waiting for readiness.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Fresh ports to try when another process takes ours between `free_port` and the bind.
const START_ATTEMPTS: u32 = 3;
/// How long `stop` lets the postmaster finish a fast shutdown before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Tries on the same port for a restart, `RESTART_BACKOFF` apart: the old socket may
/// linger for a moment after a kill.
const RESTART_ATTEMPTS: u32 = 10;
const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// What Postgres logs when it starts on a data dir it was not shut down from cleanly.
const CRASH_RECOVERY_LOG: &str = "automatic recovery in progress";
/// The pg_hba.conf of a server with TLS, in its temp dir.
const TLS_HBA: &str = "pg_hba_tls.conf";
/// The superuser initdb creates; the url connects as it (trust auth, loopback only).
const DB_USER: &str = "stampede";

/// Server settings a run may choose.
#[derive(Debug, Clone)]
pub struct PgStartOptions {
    /// `max_connections` of the server: must exceed the app-side pool sizes of all instances.
    pub max_connections: u32,
}

impl Default for PgStartOptions {
    fn default() -> Self {
        PgStartOptions {
            max_connections: 100,
        }
    }
}

/// A postmaster child process and the temp dir holding its data dir, socket and log.
/// Dropping it shuts the server down and removes the dir. If the tool dies without
/// dropping it, its watchdog kills the server's process group and removes the dir.
#[derive(Debug)]
pub struct ManagedPostgres {
    port: u16,
    /// `None` once stopped or killed.
    child: Option<Child>,
    /// What a restart needs to launch the server again as it was.
    bins: PgBinaries,
    opts: PgStartOptions,
    run_as: RunAs,
    /// Data dir (`data/`), Unix socket and `postgres.log`; removed on drop, after
    /// `Drop::drop` stopped the server.
    dir: TempDir,
    /// Kills the server and removes `dir` if the tool dies. Declared after `dir`: it is
    /// dismissed only once the dir is gone.
    watchdog: Watchdog,
    startup: Duration,
    template_reused: bool,
    /// With `--tls`: the certificates made for this server (in `dir`); it then accepts TCP
    /// connections over TLS only.
    tls: Option<crate::tls::RunCerts>,
}

impl ManagedPostgres {
    /// Start a throwaway cluster on a free 127.0.0.1 port, wait (up to 30 s) until it
    /// accepts connections, and create pg_stat_statements in database `postgres`. On
    /// failure the server is stopped and the error carries the last lines of its log.
    pub async fn start(opts: PgStartOptions) -> Result<Self, ServerError> {
        Self::start_with(opts, false).await
    }

    /// As [`ManagedPostgres::start`]; with `tls`, a CA and a server certificate are made in
    /// the temp dir, `ssl` is on and TCP connections must use TLS (`hostssl` only; the
    /// tool's own readiness probe goes through the Unix socket).
    pub async fn start_with(opts: PgStartOptions, tls: bool) -> Result<Self, ServerError> {
        let started = Instant::now();
        let run_as = run_as()?;
        let (dir, watchdog) = server_dir(PG_DIR_PREFIX, "Postgres").await?;
        // Written before the dir is handed to the server user: the key must be its own.
        let certs = if tls {
            let certs = crate::tls::generate_run_certs(dir.path())
                .map_err(|e| ServerError::setup("writing certificates for Postgres", e))?;
            let hba = dir.path().join(TLS_HBA);
            std::fs::write(
                &hba,
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
            )
            .map_err(|e| ServerError::setup(format!("writing {}", hba.display()), e))?;
            Some(certs)
        } else {
            None
        };
        // Finding binaries runs `postgres --version` and preparing the data dir copies tens
        // of megabytes or runs initdb: blocking work, kept off the async workers.
        let dir_path = dir.path().to_owned();
        let (bins, template_reused) = tokio::task::spawn_blocking(move || {
            let bins = find_binaries()?;
            let reused = prepare_cluster(&bins, &dir_path, run_as)?;
            Ok::<_, ServerError>((bins, reused))
        })
        .await
        .map_err(|e| {
            ServerError::setup("preparing the Postgres data dir", std::io::Error::other(e))
        })??;

        let mut pg = ManagedPostgres {
            port: 0,
            child: None,
            bins,
            opts,
            run_as,
            dir,
            watchdog,
            startup: Duration::ZERO,
            template_reused,
            tls: certs,
        };
        let mut attempt = 1;
        let (client, connection) = loop {
            pg.port = free_port()
                .map_err(|e| ServerError::setup("finding a free port on 127.0.0.1", e))?;
            match pg.launch().await {
                Ok(connected) => break connected,
                Err(LaunchError::PortBusy(_)) if attempt < START_ATTEMPTS => attempt += 1,
                Err(e) => return Err(e.into_inner()),
            }
        };
        pg.init(client, connection).await?;
        pg.startup = started.elapsed();
        Ok(pg)
    }

    /// `postgres://stampede@127.0.0.1:PORT/postgres`; with TLS, verify-full against the
    /// run's CA.
    pub fn url(&self) -> String {
        match &self.tls {
            None => format!("postgres://{DB_USER}@127.0.0.1:{}/postgres", self.port),
            Some(c) => format!(
                "postgres://{DB_USER}@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
                self.port,
                c.ca.display()
            ),
        }
    }

    /// The certificates of a server started with TLS.
    pub fn certs(&self) -> Option<&crate::tls::RunCerts> {
        self.tls.as_ref()
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir holding the data dir, socket and log (removed when this is dropped).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The postmaster's pid; `None` once stopped or killed.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL the server's whole process group (postmaster and backends at once, as a
    /// machine crash would: nothing is flushed, nobody cleans up) and reap it. Its shared
    /// memory segment is released; the data dir stays. Idempotent. Blocks briefly (the reap).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child, &self.watchdog);
            release_shared_memory(&self.data_dir());
        }
    }

    /// Start the server again on the same port and data dir, with the same settings, and
    /// wait until it accepts connections (after a kill: once crash recovery has replayed the
    /// WAL). Kills the running one first, if any. Retries for a while if the port is briefly
    /// still taken. Returns whether the server logged a crash recovery.
    pub async fn restart(&mut self) -> Result<bool, ServerError> {
        self.kill();
        let log_start = log_len(&self.log_path());
        let mut attempt = 1;
        loop {
            match self.launch().await {
                Ok((client, connection)) => {
                    drop(client);
                    let _ = connection.await;
                    let log = std::fs::read(self.log_path()).unwrap_or_default();
                    let since = log.get(log_start as usize..).unwrap_or_default();
                    return Ok(String::from_utf8_lossy(since).contains(CRASH_RECOVERY_LOG));
                }
                Err(LaunchError::PortBusy(_)) if attempt < RESTART_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(RESTART_BACKOFF).await;
                }
                Err(e) => return Err(e.into_inner()),
            }
        }
    }

    /// Fast shutdown: SIGINT to the postmaster (open sessions are ended), up to 5 s to
    /// finish, then SIGKILL to the server's process group; reap. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take()
            && !stop_child(&mut child, &self.watchdog, libc::SIGINT, STOP_GRACE)
        {
            // Killed, so the postmaster could not release its SysV shared memory segment.
            release_shared_memory(&self.data_dir());
        }
    }

    /// How long `start` took and whether the data dir came from the cached template (if
    /// not, this run paid for initdb).
    pub fn startup(&self) -> (Duration, bool) {
        (self.startup, self.template_reused)
    }

    /// The settings of TLS, when the server has it.
    fn tls_args(&self) -> Vec<String> {
        let Some(c) = &self.tls else {
            return Vec::new();
        };
        let set = |k: &str, v: &Path| ["-c".to_string(), format!("{k}={}", v.display())];
        let mut a = vec!["-c".to_string(), "ssl=on".to_string()];
        a.extend(set("ssl_cert_file", &c.server_cert));
        a.extend(set("ssl_key_file", &c.server_key));
        a.extend(set("ssl_ca_file", &c.ca));
        a.extend(set("hba_file", &self.dir.path().join(TLS_HBA)));
        a
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Ok when the server `client` reached keeps its data in this server's directory: one that
    /// lost the race for its port exits, but until it has, the port answers for whichever
    /// server holds it (another managed Postgres with the same trusted superuser).
    async fn serves_own_data(&self, client: &tokio_postgres::Client) -> Result<(), String> {
        let row = client
            .query_one("SELECT current_setting('data_directory')", &[])
            .await
            .map_err(|e| format!("reading data_directory: {e}"))?;
        let theirs = PathBuf::from(row.get::<_, String>(0));
        let ours = self.data_dir();
        let same = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
        if same(&theirs) == same(&ours) {
            Ok(())
        } else {
            Err(format!(
                "the port answers for the server of {}, not {}",
                theirs.display(),
                ours.display()
            ))
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn what(&self) -> String {
        format!("postgres on 127.0.0.1:{}", self.port)
    }

    fn tail(&self) -> String {
        log_tail(&[&self.log_path()])
    }

    /// Spawn the postmaster on `self.port` and wait until it accepts connections. On
    /// failure the server is stopped. Returns the first connection that succeeded, for
    /// `init`, with its connection task.
    async fn launch(&mut self) -> Result<(Client, JoinHandle<()>), LaunchError> {
        let log = self.log_path();
        let log_start = log_len(&log);
        let child = self.spawn().map_err(LaunchError::Failed)?;
        // Covered from here on, restarts included: each new postmaster's group is announced.
        let watched = self.watchdog.watch(child.id());
        self.child = Some(child);
        if let Err(e) = watched {
            self.stop();
            return Err(LaunchError::Failed(ServerError::setup(
                format!("handing {} to its watchdog", self.what()),
                e,
            )));
        }

        // With TLS, TCP without it is refused: the probe takes the Unix socket.
        let host = match self.tls {
            None => "127.0.0.1".to_string(),
            Some(_) => self.dir.path().display().to_string(),
        };
        let dsn = format!(
            "host={host} port={} user={DB_USER} dbname=postgres connect_timeout={}",
            self.port,
            CONNECT_TIMEOUT.as_secs()
        );
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
                return Err(if port_busy_since(&log, log_start) {
                    LaunchError::PortBusy(err)
                } else {
                    LaunchError::Failed(err)
                });
            }
            let last_error =
                match tokio::time::timeout(CONNECT_TIMEOUT, tokio_postgres::connect(&dsn, NoTls))
                    .await
                {
                    Ok(Ok((client, connection))) => {
                        // The connection task ends when the client is dropped.
                        let task = tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        match self.serves_own_data(&client).await {
                            Ok(()) => {
                                // Up, so its pid file names its segment, which a killed
                                // postmaster cannot release: the watchdog does it if it
                                // kills the server.
                                if let Some((_, shm)) = postmaster_shm(&self.data_dir()) {
                                    self.watchdog.release_shm(shm);
                                }
                                return Ok((client, task));
                            }
                            Err(e) => e,
                        }
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no connection within {CONNECT_TIMEOUT:?}"),
                };
            if Instant::now() >= deadline {
                self.stop();
                let err = ServerError::NotReady {
                    what: self.what(),
                    timeout: READY_TIMEOUT,
                    last_error,
                    tail: self.tail(),
                };
                return Err(LaunchError::Failed(err));
            }
            // Start-up normally takes 100-300 ms; poll often enough not to add much to it.
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn spawn(&self) -> Result<Child, ServerError> {
        let (bins, opts, run_as) = (&self.bins, &self.opts, self.run_as);
        let log_path = self.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| ServerError::setup(format!("creating {}", log_path.display()), e))?;
        let log_err = log.try_clone().map_err(|e| {
            ServerError::setup(
                format!("duplicating the handle of {}", log_path.display()),
                e,
            )
        })?;
        let postgres = bins.bin_dir.join("postgres");
        let mut cmd = Command::new(&postgres);
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            // A throwaway cluster: durability only costs time and disk noise here.
            .args([
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ])
            // The origin's DB load is counted with pg_stat_statements.
            .args(["-c", "shared_preload_libraries=pg_stat_statements"])
            .arg("-c")
            .arg(format!("max_connections={}", opts.max_connections))
            .args(self.tls_args())
            // Log to stderr, which we send to the log file, so errors can quote it.
            .args(["-c", "logging_collector=off"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            // Own process group: a Ctrl-C at the terminal must not stop the server before the
            // tool has written its results; the tool stops it itself.
            .process_group(0);
        if let Some((uid, gid)) = run_as {
            cmd.uid(uid).gid(gid);
        }
        cmd.spawn().map_err(|e| {
            ServerError::setup(
                format!("starting {} on port {}", postgres.display(), self.port),
                e,
            )
        })
    }

    /// One-time set-up once the server answers. Stops the server on failure.
    async fn init(
        &mut self,
        client: Client,
        connection: JoinHandle<()>,
    ) -> Result<(), ServerError> {
        let result = client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await;
        drop(client);
        // The connection task ends once the client is gone; wait so nothing outlives start.
        let _ = connection.await;
        result.map_err(|source| {
            let tail = self.tail();
            self.stop();
            ServerError::Init {
                what: format!(
                    "creating extension pg_stat_statements in {} (it ships with Debian's postgresql package; \
                     elsewhere install postgresql-contrib)",
                    self.what()
                ),
                source,
                tail,
            }
        })
    }
}

impl Drop for ManagedPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// After a SIGKILL the postmaster cannot remove its SysV shared memory segment, which
/// would outlive the run. Its id is on line 7 of `postmaster.pid` ("key id"); the segment
/// is ours alone, as is the data dir.
fn release_shared_memory(data: &Path) {
    if let Some((_, id)) = postmaster_shm(data) {
        // SAFETY: IPC_RMID takes no buffer; a stale or wrong id only makes the call fail.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::test_support::{group_alive, pid_alive};
    use std::fs;

    async fn connect(pg: &ManagedPostgres) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&pg.url(), NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
    }

    #[tokio::test]
    async fn start_query_reuse_template_drop() {
        let opts = PgStartOptions {
            max_connections: 37,
        };
        let first = ManagedPostgres::start(opts.clone())
            .await
            .expect("postgres starts");
        eprintln!("postgres start-up: {:?}", first.startup());
        assert_eq!(
            first.url(),
            format!("postgres://stampede@127.0.0.1:{}/postgres", first.port())
        );
        let client = connect(&first).await;
        let one: i32 = client
            .query_one("SELECT 1", &[])
            .await
            .expect("SELECT 1")
            .get(0);
        assert_eq!(one, 1);
        let count: i64 = client
            .query_one("SELECT count(*) FROM pg_stat_statements", &[])
            .await
            .expect("pg_stat_statements")
            .get(0);
        assert!(
            count >= 1,
            "pg_stat_statements counts statements, got {count}"
        );
        let max: String = client
            .query_one("SHOW max_connections", &[])
            .await
            .expect("SHOW")
            .get(0);
        assert_eq!(max, "37");

        // The first start made or reused the template; either way the second reuses it.
        let second = ManagedPostgres::start(opts)
            .await
            .expect("second postgres starts");
        eprintln!("postgres start-up (second): {:?}", second.startup());
        assert!(second.startup().1, "second start reuses the template");
        assert_ne!(second.port(), first.port());
        let one: i32 = connect(&second)
            .await
            .query_one("SELECT 1", &[])
            .await
            .expect("SELECT 1")
            .get(0);
        assert_eq!(one, 1);
        // Readiness asks which data the server serves: the first one's port, reached while
        // the second started, is not the second.
        assert_eq!(first.serves_own_data(&client).await, Ok(()));
        let other = second
            .serves_own_data(&client)
            .await
            .expect_err("another server");
        assert!(
            other.contains("the port answers for the server of"),
            "{other}"
        );

        for pg in [first, second] {
            let pid = pg.pid().expect("running");
            let dir = pg.dir.path().to_owned();
            assert!(dir.join("data").join("PG_VERSION").exists());
            drop(pg);
            assert!(!pid_alive(pid), "postmaster {pid} still alive after drop");
            assert!(
                !group_alive(pid),
                "a backend of {pid} still alive after drop"
            );
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
        drop(client);
    }

    #[tokio::test]
    async fn stop_kills_a_hung_server_and_frees_its_shared_memory() {
        let mut pg = ManagedPostgres::start(PgStartOptions::default())
            .await
            .expect("postgres starts");
        let pid = pg.pid().expect("running");
        let pidfile = fs::read_to_string(pg.data_dir().join("postmaster.pid")).expect("pid file");
        let shm_id: libc::c_int = pidfile
            .lines()
            .nth(6)
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|id| id.parse().ok())
            .expect("shm id on line 7");
        // A stopped postmaster cannot act on SIGINT: stop must fall back to SIGKILL.
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        let started = Instant::now();
        pg.stop();
        assert!(started.elapsed() >= STOP_GRACE);
        assert!(
            !group_alive(pid),
            "postmaster or backends left after SIGKILL"
        );
        // The segment goes once the last killed backend has detached, a moment later.
        let segment_exists = || {
            // SAFETY: an all-zero shmid_ds is a valid out-buffer for IPC_STAT.
            let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
            // SAFETY: ds is a valid shmid_ds to write into.
            unsafe { libc::shmctl(shm_id, libc::IPC_STAT, &mut ds) == 0 }
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while segment_exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !segment_exists(),
            "shared memory segment {shm_id} left behind"
        );
    }

    #[tokio::test]
    async fn kill_and_restart_runs_crash_recovery_on_the_same_port_and_data() {
        let mut pg = ManagedPostgres::start(PgStartOptions::default())
            .await
            .expect("postgres starts");
        let client = connect(&pg).await;
        // Committed durably (the server runs with synchronous_commit off), as the run's seed is.
        client
            .batch_execute(
                "SET synchronous_commit = on;
                 CREATE TABLE kept (id int); INSERT INTO kept SELECT generate_series(1, 100);
                 CREATE UNLOGGED TABLE lost (id int); INSERT INTO lost SELECT generate_series(1, 100);",
            )
            .await
            .expect("seed");
        let busy = tokio::spawn(async move { client.batch_execute("SELECT pg_sleep(60)").await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (port, old) = (pg.port(), pg.pid().expect("running"));
        pg.kill();
        assert_eq!(pg.pid(), None);
        assert!(
            !group_alive(old),
            "postmaster or backends left after the kill"
        );
        assert!(busy.await.expect("task").is_err(), "the session broke");
        assert!(
            tokio_postgres::connect(&pg.url(), NoTls).await.is_err(),
            "connecting while down must fail"
        );
        pg.kill(); // idempotent

        let started = Instant::now();
        let recovered = pg.restart().await.expect("restart");
        eprintln!("postgres restart took {:?}", started.elapsed());
        assert!(recovered, "the restart went through crash recovery");
        assert_eq!(pg.port(), port);
        assert_ne!(pg.pid(), Some(old));
        let client = connect(&pg).await;
        let count = |t: &'static str| {
            let c = &client;
            async move {
                c.query_one(&format!("SELECT count(*) FROM {t}"), &[])
                    .await
                    .expect("count")
                    .get::<_, i64>(0)
            }
        };
        assert_eq!(count("kept").await, 100, "logged rows survive a crash");
        assert_eq!(count("lost").await, 0, "a crash empties unlogged tables");
        let new = pg.pid().expect("running");
        drop(client);
        drop(pg);
        assert!(!group_alive(new), "the restarted server is stopped on drop");
    }

    #[tokio::test]
    async fn stop_ends_open_sessions_and_is_idempotent() {
        let mut pg = ManagedPostgres::start(PgStartOptions::default())
            .await
            .expect("postgres starts");
        let client = connect(&pg).await;
        // A session busy in a query must not hold up the fast shutdown.
        let busy = tokio::spawn(async move { client.batch_execute("SELECT pg_sleep(60)").await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let pid = pg.pid().expect("running");
        let started = Instant::now();
        pg.stop();
        assert!(
            started.elapsed() < STOP_GRACE,
            "fast shutdown, not the SIGKILL fallback"
        );
        assert!(!pid_alive(pid));
        pg.stop();
        assert_eq!(pg.pid(), None);
        assert!(busy.await.expect("task").is_err(), "the session was ended");
    }
}
