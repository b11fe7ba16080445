//! A sleep finer than tokio's: its timer wheel ticks in whole milliseconds, and a round trip
//! of a data centre is 0.2-1 ms. A Linux `timerfd` (CLOCK_MONOTONIC, the clock `Instant` reads)
//! polled by tokio's reactor wakes within tens of microseconds of its deadline, without a
//! thread spinning. Written by hand: it is a few system calls on `libc`, which the crate already
//! uses, where a crate for it would bring its own reactor glue.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// Longer waits than this sleep on tokio's timer first, then finely for the rest.
const COARSE_FROM: Duration = Duration::from_millis(3);

/// One timer, re-armed for each wait; one per direction of a proxied connection.
pub struct FineTimer {
    fd: AsyncFd<OwnedFd>,
}

impl FineTimer {
    pub fn new() -> io::Result<FineTimer> {
        // SAFETY: timerfd_create takes no pointers; a negative result is an error.
        let raw: RawFd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns the descriptor (an OwnedFd, never replaced): it is closed
        // only when the AsyncFd drops it, after deregistering it from the reactor.
        let fd = unsafe { AsyncFd::register(fd)? };
        Ok(FineTimer { fd })
    }

    /// Wait until `deadline` (at once if it has passed).
    pub async fn sleep_until(&mut self, deadline: Instant) -> io::Result<()> {
        let now = Instant::now();
        if deadline <= now {
            return Ok(());
        }
        if deadline - now > COARSE_FROM {
            tokio::time::sleep_until((deadline - Duration::from_millis(2)).into()).await;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        self.arm(left)?;
        loop {
            let mut guard = self.fd.readable().await?;
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a buffer of 8 on our own descriptor.
            let n = unsafe {
                libc::read(
                    self.fd.get_ref().as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                guard.clear_ready();
                continue;
            }
            return Err(e);
        }
    }

    /// Fire once, `after` from now.
    fn arm(&self, after: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                // A zero value would disarm it: at least 1 ns.
                tv_nsec: (after.subsec_nanos().max(1)) as libc::c_long,
            },
        };
        // SAFETY: both pointers are to valid itimerspec values for the call's duration.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fine_sleep_ends_after_its_deadline_and_well_within_a_millisecond_past_it() {
        let mut t = FineTimer::new().expect("timerfd");
        let mut late = Vec::new();
        for us in [200u64, 500, 5_000] {
            let deadline = Instant::now() + Duration::from_micros(us);
            t.sleep_until(deadline).await.expect("sleep");
            let now = Instant::now();
            assert!(now >= deadline, "woke before its deadline");
            late.push(now - deadline);
        }
        // Bounds that catch a millisecond timer, not a loaded machine's scheduling.
        late.sort();
        assert!(late[1] < Duration::from_millis(5), "{late:?}");
    }
}
