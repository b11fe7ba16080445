//! Typed errors that decide the exit code (DESIGN §8): usage errors exit 2, environment
//! failures exit 3; a broken threshold or regression is not an error but exit 1.

pub const EXIT_FAILED_CHECK: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_ENV: u8 = 3;

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
    // EnvError and servers::ServerError exit 3, and so does anything unclassified (I/O, the network).
    if e.chain().any(|c| c.is::<UsageError>()) {
        EXIT_USAGE
    } else {
        EXIT_ENV
    }
}
