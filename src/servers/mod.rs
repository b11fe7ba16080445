//! Managed redis-server and Postgres: start on free loopback ports, wait until ready,
//! kill/restart, stop on drop. Each server is owned by a guard whose `Drop` stops it and
//! removes its temp dir, so no process or directory outlives the tool.
//!
//! # Nothing left behind, whatever kills the tool
//!
//! `Drop` runs on a normal exit, on an error and after Ctrl-C, SIGTERM or SIGHUP (which the
//! app turns into a shutdown). It cannot run when the tool is killed outright: SIGKILL, the
//! OOM killer, a cancelled CI job past its grace period. The servers run in their own
//! process groups (so that a Ctrl-C at the terminal reaches only the tool, which then
//! stops them after writing its results), so nothing else would stop them either. Two
//! mechanisms cover that case:
//!
//! * A **watchdog** per server temp dir ([`watchdog`]): a `/bin/sh` process, started as the
//!   tool's user, blocked reading a pipe whose only write end the tool holds. The kernel
//!   closes that end when the tool dies, by any signal; the watchdog then SIGKILLs the
//!   server's process group and removes the dir, within a fraction of a second. It follows
//!   Redis restarts (each new process is announced to it) and is killed, without acting,
//!   when the guard stops the server normally.
//! * A **reaper** ([`reaper`]): each temp dir holds an owner record (pid, start time, boot
//!   id), and the first server a process starts removes the dirs of owners that are
//!   provably dead, with any server still running from them. This covers what the watchdog
//!   cannot: watchdogs killed together with the tool (`kill -9` of a whole session).
//!
//! Why not `prctl(PR_SET_PDEATHSIG)`, set in the server between fork and exec? Its "parent
//! death" is the exit of the *thread* that forked, not of the process: a server spawned
//! from a thread that ends before the tool does (a tokio blocking-pool thread, retired
//! after 10 s idle; a caller's own thread when stampede is used as a library) would be
//! killed in the middle of a healthy run. And the kernel clears the setting when the new
//! process changes its credentials, which is exactly what happens to the postmaster when
//! the tool runs as root (it runs as user `postgres`). A pipe's end-of-file depends on
//! neither: every thread shares the descriptor, it closes only when the whole process is
//! gone, and the watchdog, running as the tool's user (root included), may signal the
//! `postgres` user's processes.
//!
//! What is left uncovered: the microseconds between spawning a server and announcing it to
//! its watchdog (then only the dir is removed, and the server is the reaper's), and a
//! server whose pid was reused after it exited by itself, was reaped by init once the tool
//! died, all before the watchdog acted (the group kill would then miss or hit a stranger;
//! it needs the pid counter to wrap within milliseconds).

mod pg_user;
pub mod postgres;
pub mod reaper;
pub mod redis;
pub(crate) mod watchdog;

pub use self::postgres::ManagedPostgres;
pub use self::redis::ManagedRedis;

use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use self::watchdog::Watchdog;

/// How many log lines an error carries: enough to show the cause, short enough to read.
const LOG_TAIL_LINES: usize = 20;

/// Environment failures (exit code 3 in the CLI): a server binary missing, failed to start,
/// not ready in time. Each message says what failed and, where it can, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A server binary is not installed where we look for it.
    #[error("{program} not found {searched}: install it ({install})")]
    NotFound {
        /// The missing program, e.g. `redis-server`.
        program: &'static str,
        /// Where we looked, e.g. `on PATH`.
        searched: String,
        /// The install hint, e.g. `Debian: apt-get install redis-server`.
        install: &'static str,
    },

    /// Postgres refuses to run as root and there is no unprivileged user to run it as.
    #[error(
        "running as root, and Postgres refuses to run as root, but there is no `{user}` user to run it as: \
         create it (Debian: apt-get install postgresql creates it; or useradd --system {user}) \
         or run stampede as a normal user"
    )]
    NoUnprivilegedUser {
        /// The user we looked for.
        user: &'static str,
    },

    /// Preparing the server's files (temp dir, data dir, template, log) failed.
    #[error("{what}: {source}")]
    Setup {
        /// What we were doing, with the path involved.
        what: String,
        /// The underlying I/O error.
        source: io::Error,
    },

    /// The server process (or a helper such as `initdb`) exited before it was ready.
    #[error("{what} exited during start-up ({status}); its log ended with:\n{tail}")]
    Exited {
        /// The program and port, e.g. `redis-server on 127.0.0.1:40123`.
        what: String,
        /// How it exited.
        status: ExitStatus,
        /// The last lines of its log (the temp dir holding the log is removed with the server).
        tail: String,
    },

    /// The server kept running but did not answer in time.
    #[error(
        "{what} did not answer within {timeout:?} (last error: {last_error}); its log ended with:\n{tail}"
    )]
    NotReady {
        /// The program and port.
        what: String,
        /// How long we waited.
        timeout: Duration,
        /// The last error seen while probing it.
        last_error: String,
        /// The last lines of its log (the temp dir holding the log is removed with the server).
        tail: String,
    },

    /// A managed Redis Cluster did not form, or a node did not rejoin, in time.
    #[error("{what}; the nodes' logs ended with:\n{tail}")]
    Cluster {
        /// What was awaited and what the nodes said last.
        what: String,
        /// The last lines of every node's log (their temp dirs go with the cluster).
        tail: String,
    },

    /// The server answered but its one-time setup (e.g. `CREATE EXTENSION`) failed.
    #[error("{what}: {source}; the server log ended with:\n{tail}")]
    Init {
        /// The statement or step that failed, with the hint to fix it.
        what: String,
        /// The database error.
        source: tokio_postgres::Error,
        /// The last lines of its log (the temp dir holding the log is removed with the server).
        tail: String,
    },
}

impl ServerError {
    /// Wrap an I/O error from a set-up step, naming the step.
    pub(crate) fn setup(what: impl Into<String>, source: io::Error) -> Self {
        ServerError::Setup {
            what: what.into(),
            source,
        }
    }
}

/// Why one launch attempt failed: a busy port is worth another try, anything else is not.
pub(crate) enum LaunchError {
    PortBusy(ServerError),
    Failed(ServerError),
}

impl LaunchError {
    pub(crate) fn into_inner(self) -> ServerError {
        match self {
            LaunchError::PortBusy(e) | LaunchError::Failed(e) => e,
        }
    }
}

/// A free TCP port on 127.0.0.1: bind port 0, read what the kernel chose, release it.
/// Racy by nature (another process may take it before the server binds it), which is why
/// the starters retry on "Address already in use".
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// The first executable file named `program` in a directory of `$PATH`.
pub(crate) fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The last `LOG_TAIL_LINES` lines of each of `logs` that exists and is non-empty, for an
/// error message. Never fails: a missing log is reported as such.
pub(crate) fn log_tail(logs: &[&Path]) -> String {
    let mut out = Vec::new();
    for log in logs {
        let Ok(bytes) = fs::read(log) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            continue;
        }
        let start = lines.len().saturating_sub(LOG_TAIL_LINES);
        if logs.len() > 1 {
            // The file name only: the temp dir holding it is gone by the time anyone reads this.
            let name = log.file_name().map_or_else(
                || log.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            out.push(format!("-- {name} --"));
        }
        out.extend(lines[start..].iter().map(|l| format!("  {l}")));
    }
    if out.is_empty() {
        "  (log is empty)".to_owned()
    } else {
        out.join("\n")
    }
}

/// Send `signal` to one process. Errors (typically ESRCH: already gone) are ignored because
/// every caller follows up by reaping the child, which settles the matter.
fn signal_pid(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}

/// SIGKILL the child's whole process group. Children are spawned with `process_group(0)`,
/// so the group id is the child's pid and holds only the server and its own workers
/// (Postgres backends, a Redis fork): nothing of anyone else's.
fn kill_group(child: &Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions. The child is not reaped yet, so
    // its pid (and therefore the group id) cannot have been reused.
    if unsafe { libc::kill(-pid, libc::SIGKILL) } != 0 {
        signal_pid(child.id(), libc::SIGKILL);
    }
}

/// Whether the child has exited, without reaping it (`waitid` with `WNOWAIT`): until it is
/// reaped its pid, and so its process group id, cannot be reused, which gives the time to
/// tell the watchdog to let go of the group first.
fn exited_unreaped(child: &Child, block: bool) -> io::Result<bool> {
    let pid = libc::id_t::from(child.id());
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: an all-zero siginfo_t is a valid out-buffer for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for waitid to write; WNOWAIT leaves the child unreaped.
        if unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) } == 0 {
            // With WNOHANG and nothing to report, waitid leaves si_pid zero.
            // SAFETY: waitid succeeded, so si_pid is initialised (to zero or the child).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reap the child if it has exited, telling its watchdog to let go of it first.
pub(crate) fn try_reap(child: &mut Child, watchdog: &Watchdog) -> Option<ExitStatus> {
    match exited_unreaped(child, false) {
        Ok(false) => None,
        Ok(true) => {
            watchdog.unwatch();
            child.try_wait().ok().flatten()
        }
        // Cannot tell without reaping (not expected): reap, then let go.
        Err(_) => {
            let status = child.try_wait().ok().flatten();
            if status.is_some() {
                watchdog.unwatch();
            }
            status
        }
    }
}

/// Reap the child, waiting as long as it takes, telling its watchdog to let go first.
fn reap(child: &mut Child, watchdog: &Watchdog) {
    let _ = exited_unreaped(child, true);
    watchdog.unwatch();
    let _ = child.wait();
}

/// Poll `child` until it exits or `timeout` passes; `true` if it exited and has been reaped.
/// Polling (not a blocking wait) keeps the wait bounded, so a synchronous `Drop` can use it.
pub(crate) fn wait_exit(child: &mut Child, watchdog: &Watchdog, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if try_reap(child, watchdog).is_some() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL the child's process group and reap the child. Returns once it is gone.
pub(crate) fn kill_and_reap(child: &mut Child, watchdog: &Watchdog) {
    kill_group(child);
    // SIGKILL cannot be caught, so this wait is short.
    reap(child, watchdog);
}

/// Ask the child to stop with `signal`, give it `grace` to do so, then SIGKILL its group.
/// Returns `true` if the child stopped by itself (so it cleaned up after itself).
pub(crate) fn stop_child(
    child: &mut Child,
    watchdog: &Watchdog,
    signal: libc::c_int,
    grace: Duration,
) -> bool {
    if try_reap(child, watchdog).is_some() {
        return true;
    }
    signal_pid(child.id(), signal);
    if wait_exit(child, watchdog, grace) {
        return true;
    }
    kill_and_reap(child, watchdog);
    false
}

/// A new temp dir for a server, named `PREFIX` + 6 random characters in `$TMPDIR` (else
/// /tmp), holding the owner record, with its watchdog started. Cleans up what dead runs
/// left behind first (once per process).
pub(crate) async fn server_dir(
    prefix: &str,
    program: &str,
) -> Result<(TempDir, Watchdog), ServerError> {
    reaper::reap_once().await;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| {
            ServerError::setup(
                format!(
                    "creating a temp dir for {program} in {}",
                    std::env::temp_dir().display()
                ),
                e,
            )
        })?;
    // Best effort: the record only lets a later run clean up after this one if both the
    // tool and its watchdog are killed. Without one (no /proc, say) the dir is never
    // judged dead, so never removed by mistake.
    let _ = reaper::write_owner_record(dir.path());
    let watchdog = Watchdog::start(dir.path())?;
    Ok((dir, watchdog))
}

/// The current length of a log file (0 if absent): where the next launch starts writing.
pub(crate) fn log_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// Whether a server that exited during start-up failed because its port was taken (lost
/// the race after `free_port`, or the old socket is not released yet), judged from what it
/// wrote to `path` from byte `start` on, so that trying again makes sense. Logs are
/// appended across launches, so earlier launches' complaints must not count.
pub(crate) fn port_busy_since(path: &Path, start: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = Vec::new();
    if let Ok(mut file) = fs::File::open(path)
        && file.seek(SeekFrom::Start(start)).is_ok()
    {
        let _ = file.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).contains("Address already in use")
}

#[cfg(test)]
pub(crate) mod test_support {
    /// Whether a process with this pid exists: `kill(pid, 0)` fails with ESRCH once it is gone.
    pub fn pid_alive(pid: u32) -> bool {
        let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
        // SAFETY: signal 0 only checks for existence and permission.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }

    /// Whether any process of the group led by `pid` is left (a server's workers included).
    pub fn group_alive(pid: u32) -> bool {
        let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
        // SAFETY: signal 0 only checks for existence and permission.
        let rc = unsafe { libc::kill(-pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().expect("free port");
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("port is free again");
    }

    #[test]
    fn log_tail_keeps_last_lines() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("x.log");
        let text: String = (0..50).map(|i| format!("line {i}\n")).collect();
        fs::write(&log, text).expect("write log");
        let tail = log_tail(&[&log]);
        assert_eq!(tail.lines().count(), LOG_TAIL_LINES);
        assert!(tail.ends_with("line 49"));
        assert_eq!(
            log_tail(&[&dir.path().join("missing.log")]),
            "  (log is empty)"
        );
    }
}
