//! The user a managed Postgres runs as: Postgres refuses to run as root, so as root the server
//! (and initdb) run as the unprivileged `postgres` user. The server's start hands its dirs to
//! that user; the reaper takes dirs owned by it as the tool's own.

use std::ffi::CString;

use super::ServerError;

/// The unprivileged user the server runs as when we are root.
pub(crate) const SERVER_USER: &str = "postgres";

/// Uid and gid to run initdb and the server as; `None` runs them as ourselves.
pub(crate) type RunAs = Option<(u32, u32)>;

/// Postgres refuses to run as root, so as root we run it as the `postgres` user.
pub(crate) fn run_as() -> Result<RunAs, ServerError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    lookup_user(SERVER_USER)
        .map(Some)
        .ok_or(ServerError::NoUnprivilegedUser { user: SERVER_USER })
}

/// Uid and gid of `name`, via the thread-safe getpwnam_r.
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    let mut buf_len = 1024;
    loop {
        let mut buf = vec![0 as libc::c_char; buf_len];
        // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids); getpwnam_r
        // fills it with pointers into `buf`, which outlives every use below.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the lengths given.
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf_len < 1 << 20 {
            buf_len *= 4;
            continue;
        }
        return (rc == 0 && !found.is_null()).then_some((pwd.pw_uid, pwd.pw_gid));
    }
}

/// The uid the server runs as when the tool is root (the `postgres` user), if any: the
/// reaper accepts temp dirs handed to it as the tool's own.
pub(crate) fn server_uid() -> Option<u32> {
    run_as().ok().flatten().map(|(uid, _)| uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn finds_the_user_postgres_runs_as() {
        assert!(lookup_user("root").is_some_and(|(uid, _)| uid == 0));
        assert_eq!(lookup_user("no-such-user-stampede"), None);
    }
}
