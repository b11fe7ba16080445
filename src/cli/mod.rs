//! The command-line parser: clap derive types only. Every run flag also lives in
//! [`RunFlags`], which doubles as the schema of a scenario file, so the two can never drift.
//!
//! Every flag has a help heading, and its doc comment a first paragraph that fits on one line
//! of `-h` (the summary) before the paragraphs `--help` adds (tests/help.rs holds both).

mod advise;
mod audit;
mod conform;
mod run;
mod settings;
mod traces;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use advise::AdviseCmd;
pub use audit::AuditCmd;
pub use conform::ConformCmd;
pub use run::*;
pub use settings::*;
pub use traces::{MrcCmd, TraceFlags, TraceStatsCmd};

use crate::values::{Dur, Rate};

#[derive(Debug, Parser)]
#[command(
    name = "stampede",
    version,
    about = "Reproduce cache stampedes on a real Redis in front of a real Postgres and measure how each protection strategy holds",
    long_about = None,
    max_term_width = 100,
    after_help = "Exit codes: 0 success, 1 a threshold or regression check failed, 2 bad usage or bad scenario, 3 a server could not start or be reached, 130 interrupted (results still written)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size difference between commands costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one strategy against Redis and Postgres and report what happened.
    Run(RunCmd),
    /// Render results already written (by `run --out` or `compare`) as a report.
    Report(ReportCmd),
    /// Run several strategies on the same seeded workload and rank them by DB calls.
    ///
    /// Each strategy runs on a fresh cache and fresh DB counters.
    Compare(CompareCmd),
    /// Run a library preset beside the real library it models, and say where they differ.
    ///
    /// The preset through the built-in app, the library through its reference app
    /// (examples/libraries), on the same servers, seed and window from a cold start, both
    /// counted by the load ledger; repeated trials, and per figure both values, their ratio
    /// and a verdict, agrees or differs (docs/conform.md).
    Conform(ConformCmd),
    /// Search the strategies and their settings for the one to adopt, under your budgets.
    ///
    /// You name what to minimise and the thresholds it must meet; the workload is yours.
    /// Successive halving: short windows for every candidate, longer ones for the better
    /// half, then repeated trials of the survivors and cache-aside decide (docs/advise.md).
    /// With --target and --app-cmd, the candidates are your app's own settings
    /// (--app-setting NAME=VALUES) and the baseline is the app at its defaults. Answers
    /// recommended, tie (the simplest named) or none-meets (exit 1).
    Advise(AdviseCmd),
    /// Run the cache review checklist against an app and print a report card.
    ///
    /// ttl, users, read-your-write, outage, herd, break-even and commands, each PASS, FAIL or
    /// SKIP with its reason and the evidence the servers and the answers gave (docs/audit.md).
    /// Exit 1 when a check fails.
    Audit(AuditCmd),
    /// Run strategies at every point of one or two axes of run flags; find the boundary.
    ///
    /// Each point is a full run on a fresh cache and fresh counters, as in compare. Writes
    /// DIR/sweep.json, DIR/<strategy>/<axis values>.json and DIR/summary.md; one axis gives a
    /// curve with the knee marked, two a survival map (docs/survival.md).
    Sweep(SweepCmd),
    /// Judge a result against a baseline; exit 1 on a regression.
    ///
    /// The result is a `run --out` file or a `compare --out` directory, the baseline one of the
    /// same kind.
    Check(CheckCmd),
    /// Remove what runs killed outright left on servers you run.
    ///
    /// That is the keys of run namespaces with no live heartbeat (5 s) and the schemas whose
    /// heartbeat is older than --older-than. Never anything else.
    Cleanup(CleanupCmd),
    /// Merge the results of a sharded run's shards into one result.
    ///
    /// The shards' results are those of `run --shard I/N --out …`. Counts are summed,
    /// histograms merged losslessly, timelines aligned on the wall clock, server counters and
    /// herds read once for the whole run; `report` and `check` read the merged file like any
    /// result.
    Merge(MergeCmd),
    /// Set up a sharded run once, before its shards start (e.g. in an init container).
    ///
    /// It seeds the database, warms the cache and writes the start instant into Redis. Shard 0
    /// then only runs its share.
    Prepare(PrepareCmd),
    /// Print a shell's completion script to stdout.
    ///
    /// Shells: bash, zsh, fish, powershell or elvish; the README says where each script goes.
    Completions(CompletionsCmd),
    /// Print the man page (roff) of stampede and every subcommand to stdout.
    ///
    /// E.g. `stampede man > ~/.local/share/man/man1/stampede.1`.
    Man,
    /// Print the JSON Schema of a scenario file or a results file to stdout.
    ///
    /// Draft-07, for an editor to validate a scenario as it is typed or a program to read
    /// results by (docs/results.md).
    Schema(SchemaCmd),
    /// Print the figures of an access trace: rate, keys, Zipf fit, sizes.
    ///
    /// Requests, duration, rate per second, distinct keys, one-hit wonders, the fitted Zipf
    /// exponent, the working set, the op mix and the value-size and TTL distributions
    /// (docs/traces.md defines each).
    TraceStats(TraceStatsCmd),
    /// Print the LRU miss-ratio curve of a trace or of a run's workload.
    ///
    /// Exact (Mattson stack distances) up to 10 M requests, SHARDS sampling past that or at
    /// --sampling-rate; in objects and in bytes (docs/traces.md).
    Mrc(MrcCmd),
}

#[derive(Debug, Args)]
pub struct MergeCmd {
    /// The shards' results files, or directories holding them.
    ///
    /// Every *.json in a directory that is a shard's result is read.
    #[arg(required = true, value_name = "DIR|FILE", help_heading = "Arguments")]
    pub inputs: Vec<PathBuf>,

    /// Where to write the merged result (JSON, the same schema as `run --out`)
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub out: PathBuf,

    /// Merge even when shards are missing: the merged result is marked partial.
    ///
    /// The merged result names the missing shards. By default a missing shard is refused.
    #[arg(long, help_heading = "Merging")]
    pub allow_missing: bool,

    /// No summary; errors and broken thresholds are still printed.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Strategy")]
#[command(after_long_help = DEFAULTS_WHY)]
pub struct CompareCmd {
    /// Strategies to run, comma-separated, or all (the six presets).
    ///
    /// E.g. cache-aside,mutex,swr+mutex,lease; `all` is the six presets (lease, no-cache
    /// and the library presets such as laravel-flexible or fusion are named explicitly).
    /// With no-cache, every other strategy's break-even takes its load time (L) from the
    /// no-cache run.
    #[arg(long, value_name = "LIST", required_unless_present = "variant")]
    pub strategies: Option<String>,

    /// Scenario file (TOML), as for `run`.
    ///
    /// Its `strategy` is replaced by each of --strategies.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    #[command(flatten)]
    pub target: TargetFlags,

    /// Compare app variants instead of strategies (repeatable).
    ///
    /// With --target and --app-cmd: NAME=ENV=VALUE[,ENV=VALUE…], repeated, e.g.
    /// --variant lock=APP_STRATEGY=lock. The app is started once per variant with that
    /// environment added; results are named by the variant.
    #[arg(
        long,
        value_name = "NAME=ENV=VALUE,…",
        conflicts_with = "strategies",
        help_heading = "App under test"
    )]
    pub variant: Vec<String>,

    /// Write one results file per strategy and a summary to DIR.
    ///
    /// Writes DIR/<strategy>.json (one results file per strategy; DIR/<strategy>/trial-N.json
    /// with --repeat), DIR/summary.json and DIR/summary.md.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,

    /// Write a self-contained HTML report overlaying every strategy to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,

    /// No progress bars and no table.
    ///
    /// Errors and broken thresholds are still printed.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,

    #[command(flatten)]
    pub trials: TrialFlags,
}

/// `stampede sweep`: the run flags along one or two axes (docs/survival.md).
#[derive(Debug, Args)]
#[command(next_help_heading = "Boundary")]
pub struct SweepCmd {
    /// Strategies to run at every point, comma-separated, or all.
    ///
    /// As for compare: e.g. cache-aside,mutex; `all` is the six presets.
    #[arg(long, value_name = "LIST", help_heading = "Strategy")]
    pub strategies: String,

    /// An axis: a numeric run flag and its values, e.g. rps=1k..16k:x2.
    ///
    /// NAME is any numeric, rate, percentage or duration flag of `run` (rps, ttl, beta, zipf,
    /// keys, db-pool, db-cost, instances, write-rps, value-size, …; `-` or `_`). The values
    /// are a list (rps=1000,2000) or a range START..END:STEP with STEP xF (geometric, e.g.
    /// rps=1k..16k:x2) or +D (arithmetic, e.g. ttl=1s..4s:+1s or missing-ratio=10%..100%:+30%;
    /// the end is included when a step reaches it). At most two; an axis overrides its flag.
    #[arg(long = "axis", value_name = "NAME=VALUES", help_heading = "Sweep")]
    pub axes: Vec<String>,

    /// Bisect this flag (rps) to the highest rate that still holds.
    ///
    /// For each value of the other axis (or once, with none): the highest rate between
    /// --boundary-min and --boundary-max that holds (recovered from the run's shock, or with no
    /// shock below the knee), to within 5%, in at most --max-runs runs. Without the two bounds:
    /// an eighth to four times the scenario's own rate.
    #[arg(long, value_name = "FLAG", value_parser = ["rps"], hide_possible_values = true)]
    pub boundary: Option<String>,

    /// The lowest rate the boundary bisection tries [default: rate / 8]
    #[arg(long, value_name = "RATE", requires_all = ["boundary", "boundary_max"])]
    pub boundary_min: Option<Rate>,

    /// The highest rate the boundary bisection tries [default: rate × 4]
    #[arg(long, value_name = "RATE", requires_all = ["boundary", "boundary_min"])]
    pub boundary_max: Option<Rate>,

    /// Most runs per strategy for one boundary
    ///
    /// Both ends count: 8 runs bisect 40..200 req/s to within 5%.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=50))]
    pub max_runs: u32,

    /// The knee's p99: a point above it is past the knee
    ///
    /// The knee is the first point where goodput falls below 99% of the offered rate or the
    /// p99 latency exceeds this.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "100ms",
        help_heading = "Sweep"
    )]
    pub knee_p99: Dur,

    /// Skip the cells whose result file exists with the same scenario.
    ///
    /// A cell whose stored scenario differs from this sweep's (or that was interrupted) runs
    /// again, and the sweep says so.
    #[arg(long, help_heading = "Sweep")]
    pub resume: bool,

    /// Scenario file (TOML), as for `run`.
    ///
    /// Its `strategy` is replaced by each of --strategies, and the axis flags by each point.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    /// Where the sweep goes: sweep.json, summary.md and a file per cell.
    ///
    /// DIR/sweep.json, DIR/summary.md and DIR/<strategy>/<axis values>.json, e.g.
    /// DIR/mutex/rps=1000,ttl=2000.json (with --repeat also DIR/<strategy>/<axis values>/trial-N.json).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: PathBuf,

    /// No progress bar and no tables; errors are still printed.
    ///
    /// Broken thresholds, and why a resumed cell runs again, are printed too.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,

    #[command(flatten)]
    pub trials: TrialFlags,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Dead runs")]
pub struct CleanupCmd {
    /// The Redis to clean (redis://[:password@]host:port[/db])
    #[arg(long, value_name = "URL", help_heading = "Servers and TLS")]
    pub redis_url: Option<String>,

    /// The Postgres to clean (postgres://user[:password]@host:port/db)
    #[arg(long, value_name = "URL", help_heading = "Servers and TLS")]
    pub pg_url: Option<String>,

    /// Heartbeat age past which a schema's run is dead.
    ///
    /// A schema whose heartbeat is older than this belongs to a dead run (a live run renews it
    /// every second, but seeding a large run takes a while before its first renewal).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub older_than: crate::values::Dur,

    #[command(flatten)]
    pub redis_tls: RedisTlsFlags,
}

/// How `check` prints its verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// An aligned table for a terminal or a CI log.
    Text,
    /// GitHub-flavoured Markdown, fit for $GITHUB_STEP_SUMMARY.
    Markdown,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Comparison")]
pub struct CheckCmd {
    /// The results to judge: a `run --out` file or a `compare --out` directory.
    ///
    /// A results file from `run --out`, or a directory from `compare --out`.
    #[arg(value_name = "CURRENT", help_heading = "Arguments")]
    pub current: PathBuf,

    /// The results CURRENT is judged against.
    ///
    /// A results file, or a `compare --out` directory when CURRENT is one.
    #[arg(long, value_name = "BASE")]
    pub baseline: PathBuf,

    /// Allowed worsening per metric, e.g. db_calls=10%,p99=25%.
    ///
    /// Repeatable. N% is relative to the baseline, a bare number is absolute (calls, ms); rates
    /// (hit_rate, error_rate, stale_ratio) take percentage points.
    #[arg(long, value_name = "METRIC=TOL", value_delimiter = ',')]
    pub tolerance: Vec<String>,

    /// Compare even when the two scenarios differ in what matters.
    ///
    /// What matters: strategy, load, keys, zipf, ttl, db cost, duration, …
    #[arg(long)]
    pub force: bool,

    /// Output format
    #[arg(long, value_enum, default_value = "text", help_heading = "Output")]
    pub format: CheckFormat,

    /// Exit 2 when a metric is not comparable (unknown on either side).
    ///
    /// A figure a run could not measure (null in its JSON, with the reason beside it) is never
    /// judged as 0: its row says `not comparable`. Without --strict that is reported and the
    /// exit code is decided by the regressions alone; with it, any such row exits 2.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Arguments")]
pub struct ReportCmd {
    /// Results files, or directories of them (one results file per strategy).
    ///
    /// In a directory, summary.json is skipped; several results are overlaid and compared.
    /// Sweep directories (`sweep --out`) give their maps, and along maxmemory the measured hit
    /// rates over the exact LRU curve; `mrc --json`'s document gives its curve (with --html).
    #[arg(required = true, value_name = "RESULT.json|DIR")]
    pub inputs: Vec<PathBuf>,

    /// Write a self-contained HTML report to FILE (else print the summaries).
    ///
    /// The report has inline SVG and CSS and opens offline; without it, each result's summary is
    /// printed.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsCmd {
    /// The shell: bash, zsh, fish, powershell or elvish
    #[arg(value_enum, hide_possible_values = true, help_heading = "Arguments")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct SchemaCmd {
    /// Which file's schema
    #[arg(value_enum, help_heading = "Arguments")]
    pub file: SchemaFile,
}

/// The files `stampede schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaFile {
    /// A scenario file (TOML), as `run --scenario` reads it.
    Scenario,
    /// A results file (JSON), as `run --out` writes it.
    Results,
}
