//! Typed errors that decide the exit code (docs/design.md): usage errors exit 2, environment
//! failures exit 3; a broken threshold or regression is not an error but exit 1.

pub const EXIT_FAILED_CHECK: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_ENV: u8 = 3;
/// Stopped by Ctrl-C or SIGTERM after writing what was measured (128 + SIGINT, as shells do).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Bad flags, a bad scenario file, or a combination that makes no sense.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// A server could not be reached or did not behave (exit 3).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

/// Exit code for an error that ended the command: 2 when any cause is a usage error,
/// 3 otherwise (the environment failed: a server, the file system, the network).
pub fn exit_code(e: &anyhow::Error) -> u8 {
    // Anything that is not the user's input is the environment's failure: a server, the
    // file system, the network.
    if e.chain().any(|c| c.is::<UsageError>()) {
        EXIT_USAGE
    } else {
        EXIT_ENV
    }
}
