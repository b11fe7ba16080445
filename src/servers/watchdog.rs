//! The watchdog that stops a managed server when the tool dies without stopping it.
//!
//! One small `/bin/sh` process per server temp dir, started as the tool's user before the
//! server. Its stdin is the read end of a pipe whose only write end the tool holds
//! (`O_CLOEXEC`, so neither the servers nor any other child inherit it). The tool tells it,
//! one line at a time, which process group to kill (`watch PGID`, sent after every spawn,
//! Redis restarts included), which SysV shared memory segment Postgres holds (`shm ID`),
//! and that both are no longer ours (`unwatch`, sent *before* the tool reaps the server,
//! so the watchdog never holds a group id that could have been reused, nor the id of a
//! segment a cleanly stopped Postgres has already removed). The tool never
//! closes the pipe while it lives, so `read` returns end-of-file only when the tool is
//! gone, however it went (SIGKILL and the OOM killer included): the kernel closes the
//! write end with the process. Then the watchdog SIGKILLs the watched group, releases the
//! segment and removes the temp dir.
//!
//! A normal stop kills the watchdog (SIGKILL; it is blocked in `read`, so it leaves nothing
//! behind) and reaps it once the server is stopped and its dir removed.
//!
//! The watchdog runs in its own process group and ignores HUP, INT, QUIT and TERM: a Ctrl-C
//! or a closed terminal reaches the tool, which stops its servers itself, and must not take
//! the watchdog with it in case the tool is then killed during that stop (as CI does after
//! its grace period).

use std::io::{self, PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::ServerError;

/// The watchdog: reads commands until end-of-file, then acts on the last ones. `$1` is the
/// temp dir. `kill -s SIG -- -PGID` is the spelling dash accepts for a group.
///
/// It does not wait for the killed group to be gone (`kill -0` would count its zombies,
/// which our parent, or init, reaps when it gets to it): `IPC_RMID` on a segment that is
/// still attached frees it at the last detach, and the removal is retried for a while in
/// case a dying server still wrote a file into the dir. Without `ipcrm` (util-linux) the
/// segment (56 bytes on Postgres 15) is left behind.
const SCRIPT: &str = r#"trap '' HUP INT QUIT TERM PIPE
dir=$1
pg=
shm=
while read -r cmd arg; do
  case $cmd in
    watch) pg=$arg ;;
    unwatch) pg= shm= ;;
    shm) shm=$arg ;;
  esac
done
if [ -n "$pg" ]; then
  kill -s KILL -- "-$pg" 2>/dev/null
fi
if [ -n "$shm" ]; then
  ipcrm -m "$shm" 2>/dev/null
fi
n=0
while [ "$n" -lt 50 ]; do
  rm -rf -- "$dir" 2>/dev/null
  [ -e "$dir" ] || break
  sleep 0.1
  n=$((n + 1))
done
"#;

/// The name the watchdog shows in `ps` (its `$0`).
const NAME: &str = "stampede-watchdog";

/// A running watchdog for one temp dir. Dropping it kills and reaps it without letting it
/// act; call it only after the server is stopped (or to give up on a failed start).
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// `None` only inside `orphan` (tests).
    child: Option<Child>,
    /// The write end of the pipe: the only one. Its closing (by the kernel, when the tool
    /// dies) is the watchdog's signal.
    pipe: PipeWriter,
}

impl Watchdog {
    /// Start a watchdog that, once the tool is gone, removes `dir` (and kills the group it
    /// is told to watch).
    pub(crate) fn start(dir: &Path) -> Result<Self, ServerError> {
        // Both ends close-on-exec from the start (`pipe2(O_CLOEXEC)` on Linux), so no child
        // spawned by another thread in the meantime can inherit the write end and keep it
        // open after the tool is gone.
        let (read, write) =
            io::pipe().map_err(|e| ServerError::setup("creating the watchdog's pipe", e))?;
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg(NAME)
            .arg(dir)
            // Becoming its stdin (dup2) clears the read end's close-on-exec in the watchdog
            // only; our copy is closed when `Stdio` is dropped after the spawn.
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Not inside the temp dir: it removes it.
            .current_dir("/")
            // Out of the terminal's foreground group: see the module docs.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                ServerError::setup(
                    format!("starting the watchdog (/bin/sh) for {}", dir.display()),
                    e,
                )
            })?;
        Ok(Watchdog {
            child: Some(child),
            pipe: write,
        })
    }

    /// From now on, kill process group `pgid` if the tool dies. A failure means the
    /// watchdog is gone and the server would not be covered.
    pub(crate) fn watch(&self, pgid: u32) -> io::Result<()> {
        self.send(&format!("watch {pgid}\n"))
    }

    /// Forget the watched group and segment. Must be sent while the server is still
    /// unreaped (running or a zombie), so that its pid, and so the group id, cannot have
    /// been reused by the time the watchdog could act on it. Errors are ignored: a watchdog
    /// that cannot read this is gone and kills nothing.
    pub(crate) fn unwatch(&self) {
        let _ = self.send("unwatch\n");
    }

    /// Release this SysV shared memory segment after killing the group (Postgres cannot
    /// release it when killed). Forgotten at the next `unwatch`.
    pub(crate) fn release_shm(&self, id: libc::c_int) {
        let _ = self.send(&format!("shm {id}\n"));
    }

    /// The watchdog's pid, for tests.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Close the pipe without killing the watchdog, as the kernel does when the tool
    /// dies, and return the watchdog process, for tests.
    #[cfg(test)]
    pub(crate) fn orphan(mut self) -> Child {
        let child = self.child.take().expect("not orphaned yet");
        drop(self);
        child
    }

    fn send(&self, line: &str) -> io::Result<()> {
        // One short write (< PIPE_BUF) is atomic; the watchdog reads it whole.
        (&self.pipe).write_all(line.as_bytes())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Killed before the pipe closes (fields drop after this), so it never sees
        // end-of-file and acts. It is our unreaped child: the pid cannot be anyone else's.
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::test_support::{group_alive, pid_alive};
    use std::time::{Duration, Instant};

    /// A stand-in server: two `sleep`s in their own process group, killed (the whole
    /// group) on drop so a failing test leaves nothing behind.
    struct Group(Child);

    impl Group {
        fn spawn() -> Group {
            Group(
                Command::new("/bin/sh")
                    .args(["-c", "sleep 60 & sleep 60"])
                    .process_group(0)
                    .spawn()
                    .expect("spawn sleepers"),
            )
        }
        fn id(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            // Only while the leader is unreaped: then the group id is still ours.
            if let Ok(None) = self.0.try_wait() {
                // SAFETY: kill(2) on the group of our own unreaped child.
                unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
                let _ = self.0.wait();
            }
        }
    }

    /// A private SysV segment, removed on drop if it still exists.
    struct Segment(libc::c_int);

    impl Segment {
        fn new() -> Segment {
            // SAFETY: shmget with IPC_PRIVATE creates a new segment; no pointers involved.
            let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
            assert!(id >= 0, "shmget: {}", io::Error::last_os_error());
            Segment(id)
        }
        fn exists(&self) -> bool {
            // SAFETY: an all-zero shmid_ds is a valid out-buffer for IPC_STAT.
            let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
            // SAFETY: ds is a valid shmid_ds to write into.
            unsafe { libc::shmctl(self.0, libc::IPC_STAT, &mut ds) == 0 }
        }
    }

    impl Drop for Segment {
        fn drop(&mut self) {
            if self.exists() {
                // SAFETY: IPC_RMID takes no buffer.
                unsafe { libc::shmctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
            }
        }
    }

    fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while !done() {
            assert!(Instant::now() < deadline, "{what} within {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn end_of_file_kills_the_watched_group_and_removes_the_dir() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("log"), "x").expect("write");
        let mut server = Group::spawn();
        let pgid = server.id();
        let segment = Segment::new();
        let watchdog = Watchdog::start(dir.path()).expect("watchdog");
        watchdog.watch(pgid).expect("watch");
        watchdog.release_shm(segment.0);
        // The tool "dies": the pipe closes without an unwatch.
        let mut watchdog = watchdog.orphan();
        let status = server.0.wait().expect("server reaped");
        assert!(!status.success(), "killed, not exited: {status:?}");
        wait_until("the whole group gone", Duration::from_secs(5), || {
            !group_alive(pgid)
        });
        assert!(watchdog.wait().expect("watchdog exits").success());
        assert!(!dir.path().exists(), "dir removed by the watchdog");
        assert!(!segment.exists(), "segment released by the watchdog");
    }

    #[test]
    fn unwatched_group_is_left_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = Group::spawn();
        let segment = Segment::new();
        let watchdog = Watchdog::start(dir.path()).expect("watchdog");
        watchdog.watch(server.id()).expect("watch");
        watchdog.release_shm(segment.0);
        watchdog.unwatch();
        let mut orphaned = watchdog.orphan();
        assert!(orphaned.wait().expect("watchdog exits").success());
        assert!(pid_alive(server.id()), "an unwatched group is not killed");
        assert!(segment.exists(), "an unwatched segment is not released");
        // Without a watched group it still removes the dir: the tool is gone.
        assert!(!dir.path().exists());
    }

    #[test]
    fn drop_kills_the_watchdog_before_it_can_act() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = Group::spawn();
        let watchdog = Watchdog::start(dir.path()).expect("watchdog");
        watchdog.watch(server.id()).expect("watch");
        let wd_pid = watchdog.pid();
        drop(watchdog);
        assert!(!pid_alive(wd_pid), "watchdog reaped on drop");
        std::thread::sleep(Duration::from_millis(200));
        assert!(pid_alive(server.id()), "drop must not fire the watchdog");
        assert!(dir.path().exists(), "drop must not remove the dir");
    }
}
