//! `stampede advise`'s own flags: what to minimise, the search space, the time it may take,
//! where its runs go and the answer's forms. The workload is every run setting, as for `run`.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};

use super::{RunFlags, TargetFlags};
use crate::strategy::{LIBRARIES, Library};
use crate::values::Dur;

/// `--for`'s values: each library's name for it, as declared with the library.
fn library() -> impl clap::builder::TypedValueParser<Value = Library> {
    // One name per library: the rows of one library's versions share it.
    let mut names: Vec<&'static str> = Vec::new();
    for d in &LIBRARIES {
        if !names.contains(&d.for_name) {
            names.push(d.for_name);
        }
    }
    PossibleValuesParser::new(names).try_map(|n| Library::for_name(&n).ok_or("not a library"))
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Advise")]
pub struct AdviseCmd {
    /// The figure to make as low as possible, e.g. db_calls, p99, stale_ratio
    ///
    /// One lower-is-better name of the metric list (docs/results.md): db_calls, p99, p95,
    /// p50, peak_concurrent, stale_ratio, error_rate, redundant_loads, recovery_back … The budgets the
    /// answer must meet are the thresholds (--threshold NAME=VALUE, or the scenario's
    /// [thresholds]), the names `run` and `check` use.
    #[arg(long, value_name = "NAME")]
    pub minimize: String,

    /// Strategies to search [default: presets, no-cache, three compositions]
    ///
    /// The default is the six presets, no-cache, swr+mutex, xfetch+mutex and
    /// xfetch+swr+mutex. As compare's
    /// --strategies; each is also tried at its own settings' declared search
    /// values (β, stale window, jitter, lock wait, lease, eager refresh). A library preset
    /// (symfony, bentocache, dogpile …) is searched when named here, at its library's own
    /// settings.
    #[arg(long, value_name = "LIST")]
    pub strategies: Option<String>,

    /// Search a setting over VALUES, e.g. lock-wait=100ms,1s (repeatable)
    ///
    /// VALUES in sweep --axis's syntax (a list, or a range such as 1s..8s:x2). Replaces the setting's declared search values; a setting of the workload (ttl, rps …)
    /// is searched only when named here. Strategies that do not use it are not varied.
    #[arg(long, value_name = "NAME=VALUES")]
    pub vary: Vec<String>,

    /// Longest the whole search may take, server start included
    ///
    /// The final trials' time is reserved first; the rounds before share the rest.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub time: Dur,

    /// Scenario file (TOML): the workload, its [thresholds] the budgets
    ///
    /// As for `run`; its strategy is replaced by each candidate.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    #[command(flatten)]
    pub target: TargetFlags,

    /// Search the app's setting NAME over VALUES (repeatable)
    ///
    /// With --target and --app-cmd. NAME=VALUE,VALUE…, e.g. --app-setting CACHE_BETA=0,1,2 --app-setting CACHE_LOCK=off,on.
    /// The app (--app-cmd) is started again for each candidate with NAME=VALUE in its
    /// environment. The baseline is the app at its own defaults (no setting given); each
    /// setting moves alone over its values, then the best value of each (where it beat the
    /// defaults in round 0) are crossed into one more candidate. "Simplest" is fewest settings
    /// moved. The objective and budgets are the servers' figures (db_calls, redundant_loads,
    /// p99 …): hit rate, stale and waited are never known for an app and are refused.
    #[arg(
        long,
        value_name = "NAME=VALUES",
        requires = "app_cmd",
        help_heading = "App under test"
    )]
    pub app_setting: Vec<String>,

    /// A fixed set of the app's settings as one candidate
    ///
    /// Repeatable, with --target and --app-cmd. NAME=ENV=VALUE[,ENV=VALUE…], e.g. --variant tuned=CACHE_BETA=2,CACHE_LOCK=on: the app
    /// started with those variables is one more candidate, named app:NAME.
    #[arg(
        long,
        value_name = "NAME=ENV=VALUE,…",
        requires = "app_cmd",
        help_heading = "App under test"
    )]
    pub variant: Vec<String>,

    /// Keep every run, advise.json and advise.md in DIR
    ///
    /// DIR/runs/<round>/<candidate>/trial-N.json; DIR/final holds the final trials as a
    /// comparison (`stampede report DIR --html FILE`).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,

    /// With --out: read the runs already in DIR instead of running them again
    ///
    /// The plan is seeded, so the same command makes the same runs in the same order.
    #[arg(long, requires = "out", help_heading = "Output")]
    pub resume: bool,

    /// Write the answer in a library's own terms: laravel, rails, spring …
    ///
    /// laravel, rails, symfony, caffeine, spring, fusioncache, bentocache or dogpile; or say
    /// what the library cannot express. Where the recommendation needs a lock wider than the
    /// library's (a distributed one where Symfony's is per host), the answer says what the
    /// library does instead, what that costs in the run's figures, and the nearest strategy
    /// the library can express.
    #[arg(
        long = "for",
        value_parser = library(),
        value_name = "LIBRARY",
        hide_possible_values = true,
        help_heading = "Output"
    )]
    pub library: Option<Library>,

    /// Write a scenario with thresholds around the answer to FILE, for CI
    ///
    /// The workload, the recommended strategy and its settings, and thresholds as wide as
    /// check's tolerances around its measured medians, plus the budgets.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub ci_out: Option<PathBuf>,

    /// No progress bar and no status lines; the answer is still printed
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,

    /// Print the search's plan and stop, before any server starts
    ///
    /// The rounds (every named strategy in round 0, the settings variants that fit), the
    /// final trials and the estimate; or, when --time is too short, the refusal with the
    /// time the search needs (exit 2), as the search itself would.
    #[arg(long, help_heading = "Output")]
    pub plan_only: bool,
}

#[cfg(test)]
mod tests {
    /// `--for` is parsed from the libraries' declarations.
    #[test]
    fn for_names_a_declared_library() {
        use clap::Parser;
        let cmd = |lib: &str| {
            crate::cli::Cli::try_parse_from([
                "stampede",
                "advise",
                "--minimize",
                "p99",
                "--for",
                lib,
            ])
        };
        for l in crate::strategy::Library::all() {
            let crate::cli::Command::Advise(a) = cmd(l.decl().for_name).unwrap().command else {
                panic!("not advise");
            };
            assert_eq!(
                a.library,
                crate::strategy::Library::for_name(l.decl().for_name)
            );
            assert!(a.library.is_some());
        }
        let e = cmd("memcached").err().unwrap().to_string();
        assert!(e.contains("laravel") && e.contains("fusioncache"), "{e}");
    }
}
