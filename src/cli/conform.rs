//! `stampede conform`'s flags: the library, the run flags `run` takes, the trials and where
//! the reference apps and the output are.

use std::path::PathBuf;

use clap::Args;

use super::RunFlags;

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
}
