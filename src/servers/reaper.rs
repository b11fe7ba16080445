//! Removing what dead runs left behind: the safety net behind the watchdog, for the cases
//! it cannot cover (the watchdog killed along with the tool, e.g. a `kill -9` of every
//! process of the session, or the machine rebooting with a persistent /tmp).
//!
//! Every server temp dir holds an owner record ([`OWNER_FILE`]): the pid of the process
//! that made it, that process's start time (field 22 of `/proc/PID/stat`, in clock ticks
//! since boot) and the boot id. A pid alone would not do: once its owner is dead the pid
//! may be reused, and a live stranger would keep the dir forever; a start time alone would
//! not do across reboots. The owner is alive only if a process with that pid, that start
//! time and that boot id exists (and is not a zombie).
//!
//! The first managed server a process starts scans the temp root once for stampede's dirs
//! (`stampede-redis-XXXXXX`, `stampede-pg-XXXXXX`, the names the starters give them). It
//! leaves alone every dir without a readable, complete record (being created right now, or
//! not ours to judge) and every dir whose owner is alive. In the others it SIGKILLs the
//! server processes still running from the dir, provably: a `redis-server` or `postgres`
//! process whose working directory is inside the dir (Redis and the postmaster run with the
//! dir, resp. its data dir, as their cwd, and the backends inherit it). Each is checked
//! through a pidfd opened before the check, so a pid reused between check and kill cannot
//! be hit. Then it releases Postgres' SysV shared memory segment if nobody is attached to
//! it and the dead postmaster created it, and removes the dir.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

/// The owner record's file name, in each server temp dir.
pub const OWNER_FILE: &str = "stampede-owner";
/// The temp dir name prefixes the starters use; `tempfile` appends 6 random alphanumerics.
pub(crate) const REDIS_DIR_PREFIX: &str = "stampede-redis-";
pub(crate) const PG_DIR_PREFIX: &str = "stampede-pg-";
/// The processes a server dir's server may run as (`/proc/PID/comm`).
const SERVER_COMMS: [&str; 2] = ["redis-server", "postgres"];
/// How long killed leftovers may take to go before the dir is kept for a later run.
const KILL_WAIT: Duration = Duration::from_secs(3);
const RECORD_HEADER: &str = "stampede owner record v1";

/// What was cleaned up in one dead run's temp dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The temp dir.
    pub dir: PathBuf,
    /// Server processes that were still running from it and were killed.
    pub killed: Vec<u32>,
    /// `None` once removed, else why it was kept.
    pub kept_because: Option<String>,
}

/// The process that owns a temp dir.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Clock ticks after boot (field 22 of `/proc/PID/stat`).
    start: u64,
    /// `/proc/sys/kernel/random/boot_id`; empty if unreadable (then not compared).
    boot: String,
}

impl Owner {
    fn current() -> io::Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            pid,
            start: read_stat(pid)?.start,
            boot: boot_id().unwrap_or_default(),
        })
    }

    fn render(&self) -> String {
        format!(
            "{RECORD_HEADER}\npid {}\nstart {}\nboot {}\n",
            self.pid, self.start, self.boot
        )
    }

    /// `None` unless the record is complete: a dir whose record cannot be read is left alone.
    fn parse(text: &str) -> Option<Owner> {
        if !text.ends_with('\n') {
            return None;
        }
        let mut lines = text.lines();
        if lines.next()? != RECORD_HEADER {
            return None;
        }
        let mut field = |name: &str| {
            lines
                .next()?
                .strip_prefix(name)?
                .strip_prefix(' ')
                .map(str::to_owned)
        };
        let pid = field("pid")?.parse().ok()?;
        let start = field("start")?.parse().ok()?;
        let boot = field("boot")?;
        Some(Owner { pid, start, boot })
    }

    /// Alive unless provably dead: another boot, no such process, another process under
    /// the same pid (start time differs), or a zombie. When `/proc` cannot tell, alive.
    fn alive(&self) -> bool {
        if !self.boot.is_empty()
            && let Ok(now) = boot_id()
            && !now.is_empty()
            && now != self.boot
        {
            return false;
        }
        match read_stat(self.pid) {
            Ok(stat) => stat.start == self.start && !stat.dead(),
            Err(e) => e.kind() != io::ErrorKind::NotFound,
        }
    }
}

/// Write this process's owner record into a new server temp dir. Written aside and renamed
/// into place, so a reader sees no record or a whole one, never a truncated pid.
pub(crate) fn write_owner_record(dir: &Path) -> io::Result<()> {
    let tmp = dir.join(format!(".{OWNER_FILE}.tmp"));
    fs::write(&tmp, Owner::current()?.render())?;
    fs::rename(&tmp, dir.join(OWNER_FILE))
}

/// The parts of `/proc/PID/stat` we use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) state: char,
    pub(crate) start: u64,
}

impl Stat {
    /// Exited: a zombie (or on its way out) does not run anything any more.
    pub(crate) fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Read and parse `/proc/PID/stat`. `NotFound` when there is no such process.
pub(crate) fn read_stat(pid: u32) -> io::Result<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::other(format!("unexpected /proc/{pid}/stat")))
}

/// The command name (field 2) may hold spaces and parentheses, so fields are counted
/// from the last `)`: state is field 3, start time field 22.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        start: fields.get(22 - 3)?.parse().ok()?,
    })
}

fn boot_id() -> io::Result<String> {
    Ok(fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

/// Whether `name` is one the starters give a server temp dir.
pub(crate) fn is_server_dir_name(name: &str) -> bool {
    [REDIS_DIR_PREFIX, PG_DIR_PREFIX].iter().any(|prefix| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric()))
    })
}

/// Run [`reap_leftovers`] once per process, off the async workers, before the first
/// managed server starts. Its findings are not reported: a leftover is nobody's error.
pub(crate) async fn reap_once() {
    static ONCE: Once = Once::new();
    if ONCE.is_completed() {
        return;
    }
    let _ = tokio::task::spawn_blocking(|| {
        ONCE.call_once(|| {
            let _ = reap_leftovers();
        });
    })
    .await;
}

/// Clean up the server temp dirs dead runs left in the temp dir (`$TMPDIR`, else /tmp).
pub fn reap_leftovers() -> Vec<Reaped> {
    reap_leftovers_in(&std::env::temp_dir())
}

/// Clean up the server temp dirs dead runs left in `root`: kill their servers, remove
/// them. Dirs of live runs, dirs without an owner record and dirs of other users are left
/// alone. Never fails: what cannot be cleaned now is left for a later run.
pub fn reap_leftovers_in(root: &Path) -> Vec<Reaped> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(is_server_dir_name) {
            continue;
        }
        let dir = entry.path();
        // Not following symlinks: only a real dir of ours is removed.
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() || !owned_by_us(meta.uid()) {
            continue;
        }
        let Some(owner) = fs::read_to_string(dir.join(OWNER_FILE))
            .ok()
            .and_then(|text| Owner::parse(&text))
        else {
            continue;
        };
        if owner.alive() {
            continue;
        }
        reaped.push(reap_dir(&dir));
    }
    reaped
}

/// Our own dirs; as root also those handed to the user Postgres runs as.
fn owned_by_us(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    uid == me || (me == 0 && super::pg_user::server_uid() == Some(uid))
}

fn reap_dir(dir: &Path) -> Reaped {
    let killed = kill_servers_in(dir);
    let deadline = Instant::now() + KILL_WAIT;
    let gone =
        |&(pid, start): &(u32, u64)| read_stat(pid).map_or(true, |s| s.start != start || s.dead());
    while !killed.iter().all(gone) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = killed.iter().map(|&(pid, _)| pid).collect();
    if let Some(&(pid, _)) = killed.iter().find(|p| !gone(p)) {
        return Reaped {
            dir: dir.to_owned(),
            killed: pids,
            kept_because: Some(format!("process {pid} still running after SIGKILL")),
        };
    }
    release_postgres_shm(&dir.join("data"));
    Reaped {
        dir: dir.to_owned(),
        killed: pids,
        kept_because: fs::remove_dir_all(dir).err().map(|e| e.to_string()),
    }
}

/// SIGKILL every server process running from `dir` (see the module docs); returns their
/// pids and start times.
fn kill_servers_in(dir: &Path) -> Vec<(u32, u64)> {
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut killed = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Opened before the check: whatever the pid means later, the signal goes to the
        // process checked.
        let handle = ProcessHandle::open(pid);
        if !runs_from(pid, dir) {
            continue;
        }
        let Ok(stat) = read_stat(pid) else { continue };
        if handle.kill() {
            killed.push((pid, stat.start));
        }
    }
    killed
}

/// A server process whose working directory is `dir` or inside it.
fn runs_from(pid: u32, dir: &Path) -> bool {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    SERVER_COMMS.contains(&comm.trim_end())
        && fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
}

/// A process to SIGKILL: through a pidfd where the kernel has them (5.3+), which keeps
/// naming the same process even if its pid is reused; by pid otherwise.
struct ProcessHandle {
    pid: u32,
    pidfd: Option<std::os::fd::OwnedFd>,
}

impl ProcessHandle {
    fn open(pid: u32) -> ProcessHandle {
        ProcessHandle {
            pid,
            pidfd: pidfd_open(pid),
        }
    }

    /// `true` if the signal was sent.
    fn kill(&self) -> bool {
        match &self.pidfd {
            Some(fd) => pidfd_kill(fd),
            None => libc::pid_t::try_from(self.pid).is_ok_and(|pid| {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
            }),
        }
    }
}

#[cfg(target_os = "linux")]
fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: a fresh descriptor nothing else owns.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: u32) -> Option<std::os::fd::OwnedFd> {
    None
}

#[cfg(target_os = "linux")]
fn pidfd_kill(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn pidfd_kill(_fd: &std::os::fd::OwnedFd) -> bool {
    false
}

/// The SysV segment id in `postmaster.pid` (line 7, "key id"), with the postmaster's pid
/// (line 1).
pub(crate) fn postmaster_shm(data: &Path) -> Option<(u32, libc::c_int)> {
    let pidfile = fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let mut lines = pidfile.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let id = lines.nth(5)?.split_whitespace().nth(1)?.parse().ok()?;
    Some((pid, id))
}

/// Remove a dead cluster's segment, only if its dead postmaster created it and nothing is
/// attached to it any more (the id may have been reused since).
fn release_postgres_shm(data: &Path) {
    let Some((pid, id)) = postmaster_shm(data) else {
        return;
    };
    // SAFETY: an all-zero shmid_ds is a valid out-buffer for IPC_STAT.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: ds is a valid shmid_ds to write into.
    if unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) } != 0 {
        return;
    }
    if i64::from(ds.shm_cpid) == i64::from(pid) && ds.shm_nattch == 0 {
        // SAFETY: IPC_RMID takes no buffer.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::test_support::pid_alive;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// A child killed (the whole group) on drop, so a failing test leaves nothing behind.
    struct Guard(Child);

    impl Drop for Guard {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                // SAFETY: kill(2) on the group of our own unreaped child.
                unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
                let _ = self.0.wait();
            }
        }
    }

    fn server_dir(root: &Path, name: &str, owner: Option<&Owner>) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir(&dir).expect("mkdir");
        fs::create_dir(dir.join("data")).expect("mkdir data");
        if let Some(owner) = owner {
            fs::write(dir.join(OWNER_FILE), owner.render()).expect("owner record");
        }
        dir
    }

    /// An owner that existed and is gone: a child that exited and was reaped.
    fn dead_owner() -> Owner {
        let mut child = Command::new("true").spawn().expect("spawn true");
        let start = read_stat(child.id()).map_or(0, |s| s.start);
        let pid = child.id();
        child.wait().expect("reap");
        Owner {
            pid,
            start,
            boot: boot_id().unwrap_or_default(),
        }
    }

    #[test]
    fn parses_stat_with_awkward_command_names() {
        let mut fields = vec!["S"; 19];
        fields.extend(["123456", "0", "0"]);
        let text = format!("42 (a ) b (c)) {}\n", fields.join(" "));
        let stat = parse_stat(&text).expect("parses");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.start, 123_456);
        let me = read_stat(std::process::id()).expect("own stat");
        assert!(!me.dead());
    }

    #[test]
    fn owner_records_round_trip_and_half_records_are_refused() {
        let owner = Owner::current().expect("own record");
        let text = owner.render();
        assert_eq!(Owner::parse(&text), Some(owner.clone()));
        for cut in 1..text.len() {
            assert_eq!(
                Owner::parse(&text[..cut]),
                None,
                "prefix {:?}",
                &text[..cut]
            );
        }
        assert!(owner.alive(), "we are alive");
    }

    #[test]
    fn a_reused_pid_or_another_boot_is_a_dead_owner() {
        let me = Owner::current().expect("own record");
        assert!(!dead_owner().alive(), "exited and reaped");
        let reused = Owner {
            start: me.start.wrapping_sub(1),
            ..me.clone()
        };
        assert!(!reused.alive(), "same pid, other start time: pid reused");
        if !me.boot.is_empty() {
            let rebooted = Owner {
                boot: "00000000-0000-0000-0000-000000000000".to_owned(),
                ..me.clone()
            };
            assert!(!rebooted.alive(), "another boot");
        }
    }

    #[test]
    fn recognises_only_the_starters_dir_names() {
        assert!(is_server_dir_name("stampede-redis-Ab12Cd"));
        assert!(is_server_dir_name("stampede-pg-x9Y8z7"));
        for name in [
            "stampede-redis-",
            "stampede-pg-a/b",
            "stampede-other-abcdef",
            "x",
        ] {
            assert!(!is_server_dir_name(name), "{name}");
        }
    }

    #[test]
    fn removes_only_dead_runs_dirs_and_spares_non_servers_in_them() {
        let root = tempfile::tempdir().expect("temp root");
        let live = server_dir(
            root.path(),
            "stampede-redis-live01",
            Some(&Owner::current().expect("own record")),
        );
        let unrecorded = server_dir(root.path(), "stampede-pg-norec1", None);
        let dead = server_dir(root.path(), "stampede-pg-dead01", Some(&dead_owner()));
        let foreign = server_dir(root.path(), "something-else", Some(&dead_owner()));
        // A process that merely sits in the dead dir (a shell someone cd'ed into) is not a
        // server of it: it must survive.
        let bystander = Guard(
            Command::new("sleep")
                .arg("30")
                .current_dir(dead.join("data"))
                .process_group(0)
                .spawn()
                .expect("spawn sleep"),
        );

        let reaped = reap_leftovers_in(root.path());
        assert_eq!(
            reaped,
            vec![Reaped {
                dir: dead.clone(),
                killed: vec![],
                kept_because: None,
            }]
        );
        assert!(!dead.exists());
        assert!(live.exists() && unrecorded.exists() && foreign.exists());
        assert!(pid_alive(bystander.0.id()), "not a server: left alone");
    }

    #[test]
    fn kills_a_server_still_running_from_a_dead_runs_dir() {
        let Some(redis) = crate::servers::find_on_path("redis-server") else {
            panic!("redis-server is needed for this test");
        };
        let root = tempfile::tempdir().expect("temp root");
        let dead = server_dir(root.path(), "stampede-redis-dead02", Some(&dead_owner()));
        let port = crate::servers::free_port().expect("port");
        let server = Guard(
            Command::new(redis)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .current_dir(&dead)
                .stdout(std::process::Stdio::null())
                .process_group(0)
                .spawn()
                .expect("spawn redis-server"),
        );
        let pid = server.0.id();
        // Until it has exec'd, its comm is not yet redis-server.
        let deadline = Instant::now() + Duration::from_secs(5);
        while fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            != "redis-server"
        {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        let reaped = reap_leftovers_in(root.path());
        assert_eq!(reaped.len(), 1, "{reaped:?}");
        assert_eq!(reaped[0].killed, vec![pid]);
        assert_eq!(reaped[0].kept_because, None);
        assert!(!dead.exists());
        let mut server = server;
        let status = server.0.wait().expect("reap");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
}
