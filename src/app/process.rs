//! The app under test, when stampede starts it (`--app-cmd`): a shell command in a process
//! group of its own, its output in a log file, handed to a watchdog like the servers (so a
//! SIGKILL of the tool still takes it down), and stopped as a group — SIGTERM, a grace, then
//! SIGKILL — at the end, on a failure and on Ctrl-C alike: dropping it stops it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use tempfile::TempDir;

use crate::error::EnvError;
use crate::redact;
use crate::servers::watchdog::Watchdog;
use crate::servers::{ServerError, log_tail, server_dir, stop_child, try_reap};

/// Prefix of the app's scratch dir (the watchdog's), in the temp dir.
const APP_DIR_PREFIX: &str = "stampede-app-";
/// How long the app has to stop after SIGTERM before its group is SIGKILLed.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A running app under test.
#[derive(Debug)]
pub struct ManagedApp {
    child: Option<Child>,
    log: PathBuf,
    /// Scratch dir the watchdog removes; held so it lives as long as the app.
    _dir: TempDir,
    /// Declared last: dismissed only once the app is stopped.
    watchdog: Watchdog,
    /// How it ended, once it has.
    status: Option<ExitStatus>,
    /// The credentials in its command and environment: its log may print them, and the end
    /// of its log goes into error messages.
    secrets: Vec<String>,
}

/// How to tell the app is ready.
pub enum Ready {
    /// This URL answers with a 2xx status.
    Url(String),
    /// This port on 127.0.0.1 (or the host given) accepts TCP connections.
    Tcp(String),
}

impl ManagedApp {
    /// Start `cmd` with `sh -c` in its own process group, with `env` added to the tool's
    /// environment, its stdout and stderr appended to `log`.
    pub async fn start(
        cmd: &str,
        env: &[(String, String)],
        log: &Path,
    ) -> Result<ManagedApp, ServerError> {
        let (dir, watchdog) = server_dir(APP_DIR_PREFIX, "the app").await?;
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| {
                ServerError::setup(format!("opening the app's log {}", log.display()), e)
            })?;
        let err = out.try_clone().map_err(|e| {
            ServerError::setup(format!("opening the app's log {}", log.display()), e)
        })?;
        let child = Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            // Its own group: stopped as a whole (the shell and whatever it started), and out
            // of the terminal's, so a Ctrl-C reaches the tool, which stops it in order.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                ServerError::setup(format!("starting the app ({})", redact::command(cmd)), e)
            })?;
        let mut secrets = redact::command_secrets(cmd);
        for (k, v) in env {
            secrets.extend(redact::value_secrets(k, v));
        }
        let app = ManagedApp {
            log: log.to_path_buf(),
            _dir: dir,
            watchdog,
            status: None,
            secrets,
            child: Some(child),
        };
        if let Some(c) = &app.child
            && let Err(e) = app.watchdog.watch(c.id())
        {
            // Dropped: stopped. An app the watchdog does not cover could outlive a killed tool.
            return Err(ServerError::setup("handing the app to its watchdog", e));
        }
        Ok(app)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// How it ended, if it has (reaped then).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none()
            && let Some(c) = self.child.as_mut()
            && let Some(s) = try_reap(c, &self.watchdog)
        {
            self.status = Some(s);
            self.child = None;
        }
        self.status
    }

    /// Wait until the app is ready, at most `limit`; fails at once if it exits, with the last
    /// lines of its log.
    pub async fn wait_ready(&mut self, ready: &Ready, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        super::http::install_crypto_provider();
        let client = match ready {
            Ready::Url(_) => Some(
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(1))
                    .no_proxy()
                    .build()?,
            ),
            Ready::Tcp(_) => None,
        };
        loop {
            if let Some(s) = self.exited() {
                return Err(EnvError(format!(
                    "the app exited before it was ready ({s}); the end of its log {}:\n{}",
                    self.log.display(),
                    redact::scrub(&log_tail(&[&self.log]), &self.secrets)
                ))
                .into());
            }
            let up = match (ready, &client) {
                (Ready::Url(u), Some(c)) => {
                    c.get(u).send().await.is_ok_and(|r| r.status().is_success())
                }
                (Ready::Tcp(addr), _) => tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio::net::TcpStream::connect(addr.as_str()),
                )
                .await
                .is_ok_and(|r| r.is_ok()),
                _ => false,
            };
            if up {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let what = match ready {
                    Ready::Url(u) => format!("{} did not answer 2xx", redact::url(u)),
                    Ready::Tcp(a) => format!("nothing accepted connections on {a}"),
                };
                return Err(EnvError(format!(
                    "the app was not ready within {} ({what}; raise --app-ready-timeout or check --app-ready); the end of its log {}:\n{}",
                    humantime::format_duration(limit),
                    self.log.display(),
                    redact::scrub(&log_tail(&[&self.log]), &self.secrets)
                ))
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stop the app's whole process group: SIGTERM, up to 3 s, then SIGKILL; reap.
    /// Idempotent. Blocks the calling thread for at most the grace.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The group, not just the shell: `sh -c` may have forked the app.
            if let Ok(pid) = libc::pid_t::try_from(child.id())
                && try_reap(&mut child, &self.watchdog).is_none()
            {
                // SAFETY: kill(2) on the group of our own unreaped child: its pid, so the
                // group id, cannot have been reused.
                unsafe { libc::kill(-pid, libc::SIGTERM) };
            }
            stop_child(&mut child, &self.watchdog, libc::SIGTERM, STOP_GRACE);
            // The leader is reaped; anything of its group still alive (a child that ignored
            // SIGTERM and outlived the shell) is killed too.
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: as above; a group with no member left makes this fail with ESRCH.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for ManagedApp {
    fn drop(&mut self) {
        self.stop();
    }
}
