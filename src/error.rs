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

/// Every usage problem found in one pass, so that one error lists them all rather than the
/// user fixing them one run at a time.
#[derive(Debug, Default)]
pub struct Problems(Vec<String>);

impl Problems {
    pub fn push(&mut self, problem: impl Into<String>) {
        let p = problem.into();
        if !self.0.contains(&p) {
            self.0.push(p);
        }
    }

    /// The value of `r`, or `None` with its error noted.
    pub fn take<T>(&mut self, r: Result<T, UsageError>) -> Option<T> {
        r.map_err(|e| self.push(e.0)).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each problem whose condition holds: a table of refusals read as one.
    pub fn refuse<'a>(&mut self, refusals: impl IntoIterator<Item = (bool, &'a str)>) {
        for (on, said) in refusals {
            if on {
                self.push(said);
            }
        }
    }

    /// Ok when nothing was found; else one error: the problem, or each of them on its line.
    pub fn into_result(self) -> Result<(), UsageError> {
        match &self.0[..] {
            [] => Ok(()),
            [one] => Err(UsageError::new(one.clone())),
            many => Err(UsageError::new(format!(
                "{} problems:\n  - {}",
                many.len(),
                many.join("\n  - ")
            ))),
        }
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
