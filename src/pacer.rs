//! The open loop's clock: wait until a request's due time with microsecond precision.
//!
//! tokio's timer wheel has a 1 ms resolution and rounds up, so a request scheduled with
//! `sleep_until` starts on average ~1 ms late, and that lag shows in every latency figure
//! measured from the scheduled time. On Linux a `timerfd` (a high-resolution kernel timer, no
//! timer slack) registered with tokio's I/O driver wakes the dispatcher within tens of µs of the
//! due time, on a runtime worker, without a spinning thread. Elsewhere, or if the timerfd cannot
//! be created, the pacer falls back to tokio's timer.

use std::time::{Duration, Instant};

/// Shortest gap between two wake-ups: requests due closer together than this are dispatched
/// together, so at high rates the clock costs at most 1/MIN_GAP wake-ups a second. Their wait
/// counts in their latency (it is measured from the scheduled time).
pub const MIN_GAP: Duration = Duration::from_micros(100);

pub struct Pacer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<linux::TimerFd>>,
}

impl Pacer {
    /// Must be called inside the tokio runtime (the timerfd registers with its I/O driver).
    pub fn new() -> Pacer {
        Pacer {
            #[cfg(target_os = "linux")]
            fd: linux::TimerFd::new().and_then(|t| {
                use tokio::io::{Interest, unix::AsyncFd};
                // SAFETY: TimerFd owns its descriptor and returns that same one for as long as
                // the AsyncFd (which owns the TimerFd) lives.
                unsafe { AsyncFd::register_with_interest(t, Interest::READABLE) }.ok()
            }),
        }
    }

    /// Return at `at` or shortly after (never before).
    pub async fn wait_until(&mut self, at: Instant) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            loop {
                let now = Instant::now();
                if at <= now {
                    return;
                }
                if fd.get_ref().arm(at - now).is_err() {
                    break;
                }
                let Ok(mut guard) = fd.readable().await else {
                    break;
                };
                // Drain the expiry count and forget the readiness: a readiness left over from
                // an earlier expiry reads nothing (re-arming resets the count), and the next
                // expiry is a new edge for the I/O driver.
                guard.get_inner().consume();
                guard.clear_ready();
            }
        }
        tokio::time::sleep_until(at.into()).await;
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::time::Duration;

    /// A one-shot CLOCK_MONOTONIC timerfd (the clock `Instant` uses), non-blocking.
    pub struct TimerFd(OwnedFd);

    impl TimerFd {
        pub fn new() -> Option<TimerFd> {
            // SAFETY: plain syscall; a non-negative result is a new descriptor we now own.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            // SAFETY: fd is a fresh, valid descriptor owned by nobody else.
            (fd >= 0).then(|| TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        /// Fire once after `d` (which is > 0), replacing any earlier arming.
        pub fn arm(&self, d: Duration) -> std::io::Result<()> {
            // A zero it_value would disarm the timer: wait at least 1 ns.
            let d = d.max(Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: d.as_secs() as libc::time_t,
                    tv_nsec: d.subsec_nanos() as libc::c_long,
                },
            };
            // SAFETY: valid descriptor and a fully initialised itimerspec; old value not wanted.
            let rc = unsafe {
                libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        }

        /// Read (and so reset) the expiry count; false when the timer has not fired (EAGAIN).
        pub fn consume(&self) -> bool {
            let mut buf = [0u8; 8];
            // SAFETY: reading at most 8 bytes into an 8-byte buffer we own.
            let n = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
            n == 8
        }
    }

    impl AsRawFd for TimerFd {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_raw_fd()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_returns_early() {
        let mut p = Pacer::new();
        let t0 = Instant::now();
        for i in 1..=20u64 {
            let at = t0 + Duration::from_micros(300 * i);
            p.wait_until(at).await;
            assert!(Instant::now() >= at, "woke before the due time");
        }
        // A due time in the past returns at once.
        p.wait_until(t0).await;
    }
}
