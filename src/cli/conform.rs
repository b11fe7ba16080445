//! `stampede conform`'s flags: the library, the run flags `run` takes, the trials and where
//! the reference apps and the output are.

use std::path::PathBuf;

use clap::Args;

use super::RunFlags;
use crate::error::UsageError;
use crate::values::Dur;
use crate::workload::Start;

/// `stampede conform`: a library preset beside the real library (docs/conform.md).
#[derive(Debug, Args)]
#[command(next_help_heading = "Conform")]
pub struct ConformCmd {
    /// The library: symfony, rails or caffeine (or its preset).
    ///
    /// Its `advise --for` name or its preset (rails-race-ttl, …). The preset runs through the built-in app and the library through its reference app in
    /// examples/libraries/<library> (started with --app-cmd, one process per --instances),
    /// on the same servers, seed, window and cold start. Libraries without a reference app
    /// here (laravel, spring, fusioncache) are refused with the reason.
    #[arg(long, value_name = "NAME", help_heading = "Conform")]
    pub library: String,

    /// Scenario file (TOML), as for `run`.
    ///
    /// Its `strategy` is replaced by the library's preset; its start is cold on both sides.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    /// Trials of each side [default: 3]
    ///
    /// Trial t runs both sides on seed + t, one after the other (their order alternating);
    /// the interval of a figure is its range over the trials.
    #[arg(long, value_name = "N", help_heading = "Conform")]
    pub trials: Option<u32>,

    /// Where the reference apps are [default: examples/libraries]
    ///
    /// The directory holding one directory per library, each with its run.sh; by default
    /// examples/libraries under the current directory (the repository's root).
    #[arg(long, value_name = "DIR", help_heading = "Conform")]
    pub apps: Option<PathBuf>,

    /// Time the reference app may take to be ready [default: 60s]
    ///
    /// A JVM or php-fpm takes a few seconds to start on a busy machine; every instance's
    /// process must be ready by then.
    #[arg(long, value_name = "DURATION", help_heading = "Conform")]
    pub app_ready_timeout: Option<crate::values::Dur>,

    /// Write the comparison and every trial's results to DIR.
    ///
    /// DIR/conform.json and DIR/conform.md (the table), and each side's trials as compare
    /// writes them: DIR/<side>/trial-N.json (DIR/<side>.json for one trial); the library's
    /// side is named <library>-library.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,

    /// No progress bars and no table.
    ///
    /// Errors are still printed.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

impl ConformCmd {
    /// `--trials`, 3 when not given.
    pub fn trials(&self) -> u32 {
        self.trials.unwrap_or(3)
    }

    /// `--app-ready-timeout`, 60 s when not given.
    pub fn app_ready_timeout(&self) -> Dur {
        self.app_ready_timeout
            .unwrap_or(Dur(std::time::Duration::from_secs(60)))
    }

    /// The start both sides share: cold, without a warm-up (a target's cache cannot be
    /// warmed by the tool, and a warm-up would fill the two caches differently); the
    /// library's own preset, never `--strategy`'s.
    pub fn refuse_warm(&self) -> Result<(), UsageError> {
        let f = &self.flags;
        if f.cache.strategy.is_some() {
            return Err(UsageError::new(
                "--strategy: conform runs the library's own preset on the built-in side; drop --strategy (use compare for other strategies)",
            ));
        }
        if f.data.start.is_some_and(|s| s != Start::Cold) || f.data.warm.is_some_and(|w| w > 0) {
            return Err(UsageError::new(
                "--start and --warm fill the built-in app's cache, and the library's cache cannot be filled by stampede: conform starts both sides cold",
            ));
        }
        if f.load.warmup.is_some_and(|w| !w.0.is_zero()) {
            return Err(UsageError::new(
                "--warmup: conform measures both sides from the same cold start; drop --warmup",
            ));
        }
        if self.trials() == 0 {
            return Err(UsageError::new("--trials must be 1 or more"));
        }
        Ok(())
    }
}
