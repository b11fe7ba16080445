//! The command-line parser: clap derive types only. Every run flag also lives in
//! [`RunFlags`], which doubles as the schema of a scenario file, so the two can never drift.
//!
//! Every flag has a help heading, and its doc comment a first paragraph that fits on one line
//! of `-h` (the summary) before the paragraphs `--help` adds (tests/help.rs holds both).

mod audit;
mod settings;
mod traces;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use audit::AuditCmd;
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
pub struct PrepareCmd {
    /// Strategy, as for `run`
    #[arg(long, short = 's', value_name = "NAME", help_heading = "Strategy")]
    pub strategy: Option<String>,

    /// Scenario file (TOML), as for `run`
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    #[command(flatten)]
    pub shard: ShardFlags,
}

impl PrepareCmd {
    /// The run flags with the strategy given on the command line.
    pub fn flags(&self) -> RunFlags {
        let mut flags = self.flags.clone();
        flags.cache.strategy = self.strategy.clone();
        flags
    }
}

/// Splitting one experiment over several processes or machines (docs/shards.md).
#[derive(Debug, Args, Clone, Default)]
pub struct ShardFlags {
    /// Run shard I of N of this experiment (I counts from 0).
    ///
    /// Open-loop request j of the one unsharded schedule is shard j mod N's, with the key the
    /// unsharded key stream gives it; closed-loop client c and app instance k are shard c mod
    /// N's and k mod N's. Needs --redis-url and --pg-url (servers every shard reaches). Shard 0
    /// seeds, warms and writes the start instant into Redis (unless `stampede prepare` did),
    /// the others wait for it; all start at that instant.
    #[arg(long, value_name = "I/N", value_parser = crate::shard::ShardSpec::parse, conflicts_with = "shards", help_heading = "Shards and live metrics")]
    pub shard: Option<crate::shard::ShardSpec>,

    /// Run shard $JOB_COMPLETION_INDEX of N (a Kubernetes Indexed Job).
    ///
    /// The shard index is read from $JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it;
    /// otherwise as --shard.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Shards and live metrics"
    )]
    pub shards: Option<u32>,

    /// The run's name, the same in all its shards [default: derived]
    ///
    /// Names the run every shard of it joins (its Redis keys and Postgres schema); every shard
    /// of one run gives the same, two runs at once on the same servers differ [default: derived
    /// from the scenario and the shard count]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "ID",
        help_heading = "Shards and live metrics"
    )]
    pub run_id: Option<String>,

    /// When all shards start [default: --start-delay after the setup]
    ///
    /// When every shard starts its traffic (warm-up, then the measured window), as RFC 3339
    /// (2026-12-01T03:00:00Z) or Unix seconds; by default shard 0 (or `prepare`) fixes it at
    /// --start-delay after its setup.
    #[arg(hide_short_help = true, long, value_name = "TIME", value_parser = parse_start_at, help_heading = "Shards and live metrics")]
    pub start_at: Option<u64>,

    /// From the end of the setup to the start instant [default: 5s]
    ///
    /// Time from the end of the setup to the start instant it writes: every shard must have
    /// connected by then (a shard that is not ready in time exits 3).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Shards and live metrics"
    )]
    pub start_delay: Option<crate::values::Dur>,

    /// How long a shard waits for the start signal [default: 60s]
    ///
    /// A shard that has waited this long for the start signal gives up with exit 3.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Shards and live metrics"
    )]
    pub start_timeout: Option<crate::values::Dur>,

    /// How long shard 0 waits at the end for the others [default: 60s]
    ///
    /// How long shard 0 waits at the end for the other shards to finish before it reads the
    /// server counters and removes the run's schema and keys.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Shards and live metrics"
    )]
    pub end_timeout: Option<crate::values::Dur>,
}

/// `--start-at`: RFC 3339 or Unix seconds, as Unix ms.
fn parse_start_at(s: &str) -> Result<u64, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok((secs * 1000.0).round() as u64);
        }
        return Err(format!("--start-at {s}: Unix seconds must be positive"));
    }
    let t = humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
        format!("--start-at {s}: neither RFC 3339 (2026-12-01T03:00:00Z) nor Unix seconds ({e})")
    })?;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .map_err(|_| format!("--start-at {s}: before 1970"))
}

/// Live metrics for Prometheus (docs/shards.md#live-metrics).
#[derive(Debug, Args, Clone, Default)]
pub struct MetricsFlags {
    /// Serve Prometheus/OpenMetrics text at http://ADDR/metrics.
    ///
    /// Served while the run goes; ADDR is e.g. 0.0.0.0:9464. Served: stampede_requests_total{outcome},
    /// stampede_db_calls_total, stampede_shed_total, stampede_redis_errors_total and the
    /// histogram stampede_request_duration_seconds, labelled with strategy and shard, counting
    /// the measured window only.
    #[arg(long, value_name = "ADDR", help_heading = "Shards and live metrics")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Serve the final values this long after the run [default: 0s]
    ///
    /// Keep serving the final values this long after the run, so the last scrape sees them.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Shards and live metrics"
    )]
    pub metrics_linger: Option<crate::values::Dur>,
}

#[derive(Debug, Args)]
#[command(after_long_help = DEFAULTS_WHY)]
pub struct CompareCmd {
    /// Strategies to run, comma-separated, or all (the six presets).
    ///
    /// E.g. cache-aside,mutex,swr+mutex,lease; `all` is the six presets (lease, no-cache
    /// and the library presets such as laravel-flexible or fusion are named explicitly).
    /// With no-cache, every other strategy's break-even takes its load time (L) from the
    /// no-cache run.
    #[arg(
        long,
        value_name = "LIST",
        required_unless_present = "variant",
        help_heading = "Strategy"
    )]
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
    /// shock below the knee), to within 5%, in at most --max-runs runs.
    #[arg(long, value_name = "FLAG", value_parser = ["rps"], hide_possible_values = true, requires_all = ["boundary_min", "boundary_max"], help_heading = "Boundary")]
    pub boundary: Option<String>,

    /// The lowest rate the boundary bisection tries (needed with --boundary).
    #[arg(
        long,
        value_name = "RATE",
        requires = "boundary",
        help_heading = "Boundary"
    )]
    pub boundary_min: Option<Rate>,

    /// The highest rate the boundary bisection tries (needed with --boundary).
    #[arg(
        long,
        value_name = "RATE",
        requires = "boundary",
        help_heading = "Boundary"
    )]
    pub boundary_max: Option<Rate>,

    /// Most runs per strategy for one boundary
    ///
    /// Both ends count: 8 runs bisect 40..200 req/s to within 5%.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=50), help_heading = "Boundary")]
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

/// Repeated trials: medians with intervals instead of one draw of the noise.
#[derive(Debug, Args, Clone, Copy)]
pub struct TrialFlags {
    /// Run every strategy N times, interleaved, each on a fresh cache.
    ///
    /// Trials are interleaved (A B C, C B A, …) so the machine's drift hits them alike, each
    /// trial on a fresh cache and fresh counters; from 5 trials figures get 95% intervals and
    /// ties are tested.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100), help_heading = "Trials")]
    pub repeat: u32,

    /// Give every trial the same seed.
    ///
    /// By default trial k, counted from 1, uses seed + k - 1, so each draws other keys.
    #[arg(hide_short_help = true, long, help_heading = "Trials")]
    pub same_seed: bool,
}

#[derive(Debug, Args)]
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
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "60s",
        help_heading = "Dead runs"
    )]
    pub older_than: crate::values::Dur,

    /// rediss:// only: CA file (PEM) to verify Redis's certificate with.
    ///
    /// Instead of the system's store, as `run --redis-ca`; Postgres's TLS is the URL's sslmode
    /// and sslrootcert.
    #[arg(long, value_name = "FILE", help_heading = "Servers and TLS")]
    pub redis_ca: Option<PathBuf>,

    /// rediss:// only: client certificate (PEM); with --redis-key.
    ///
    /// For a Redis that requires one (tls-auth-clients yes).
    #[arg(
        long,
        value_name = "FILE",
        requires = "redis_key",
        help_heading = "Servers and TLS"
    )]
    pub redis_cert: Option<PathBuf>,

    /// rediss:// only: the private key (PEM) of --redis-cert.
    #[arg(
        long,
        value_name = "FILE",
        requires = "redis_cert",
        help_heading = "Servers and TLS"
    )]
    pub redis_key: Option<PathBuf>,

    /// rediss:// only: do not verify Redis's certificate at all.
    ///
    /// Prints a warning: anyone on the path can read and change the traffic. --redis-insecure
    /// alone is --redis-insecure=true; --redis-insecure=false verifies.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true, help_heading = "Servers and TLS")]
    pub redis_insecure: Option<bool>,
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
pub struct CheckCmd {
    /// The results to judge: a `run --out` file or a `compare --out` directory.
    ///
    /// A results file from `run --out`, or a directory from `compare --out`.
    #[arg(value_name = "CURRENT", help_heading = "Arguments")]
    pub current: PathBuf,

    /// The results CURRENT is judged against.
    ///
    /// A results file, or a `compare --out` directory when CURRENT is one.
    #[arg(long, value_name = "BASE", help_heading = "Comparison")]
    pub baseline: PathBuf,

    /// Allowed worsening per metric, e.g. db_calls=10%,p99=25%.
    ///
    /// Repeatable. N% is relative to the baseline, a bare number is absolute (calls, ms); rates
    /// (hit_rate, error_rate, stale_ratio) take percentage points.
    #[arg(
        long,
        value_name = "METRIC=TOL",
        value_delimiter = ',',
        help_heading = "Comparison"
    )]
    pub tolerance: Vec<String>,

    /// Compare even when the two scenarios differ in what matters.
    ///
    /// What matters: strategy, load, keys, zipf, ttl, db cost, duration, …
    #[arg(long, help_heading = "Comparison")]
    pub force: bool,

    /// Output format
    #[arg(long, value_enum, default_value = "text", help_heading = "Output")]
    pub format: CheckFormat,

    /// Exit 2 when a metric is not comparable (unknown on either side).
    ///
    /// A figure a run could not measure (null in its JSON, with the reason beside it) is never
    /// judged as 0: its row says `not comparable`. Without --strict that is reported and the
    /// exit code is decided by the regressions alone; with it, any such row exits 2.
    #[arg(long, help_heading = "Comparison")]
    pub strict: bool,
}

#[derive(Debug, Args)]
pub struct ReportCmd {
    /// Results files, or directories of them (one results file per strategy).
    ///
    /// In a directory, summary.json is skipped; several results are overlaid and compared.
    /// Sweep directories (`sweep --out`) give their maps, and along maxmemory the measured hit
    /// rates over the exact LRU curve; `mrc --json`'s document gives its curve (with --html).
    #[arg(
        required = true,
        value_name = "RESULT.json|DIR",
        help_heading = "Arguments"
    )]
    pub inputs: Vec<PathBuf>,

    /// Write a self-contained HTML report to FILE (else print the summaries).
    ///
    /// The report has inline SVG and CSS and opens offline; without it, each result's summary is
    /// printed.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,
}

/// The headings of `run --help` (and of `compare` and `sweep`, which share its flags), in the
/// order they are shown. clap shows a heading once, where its first flag is declared, so this
/// is the order of the headings' first flags; tests/help.rs holds the help to it.
pub const RUN_HEADINGS: &[&str] = &[
    "Strategy",
    "Scenario file",
    "Load",
    "Trace",
    "Keys and values",
    "Redis memory",
    "Database",
    "Servers and TLS",
    "Protection",
    "Faults",
    "Client",
    "Recovery verdict",
    "Writes",
    "Cluster",
    "Output",
    "Thresholds",
    "App under test",
    "Trials",
    "Shards and live metrics",
];

/// Why the defaults are what they are, for `run --help` and `compare --help`.
pub const DEFAULTS_WHY: &str = "Defaults: 10k req/s for 10 s over 10000 keys (Zipf 1.0) on 2 app instances, TTL 3 s, loads of 10 ms on 16 connections per instance, starting from the steady state. Chosen so that every strategy shows its mechanism: the 10 hottest keys expire at least twice in the window (cache-aside herds of ~10 on the hottest), the pools stay under ~50% busy (nothing queues or is shed), XFetch recomputes early, mutex waiters contend, single-flight followers wait and SWR serves stale. A TTL longer than the run, or a cold start into a small pool, measures something else: the run says so (diagnoses).";

#[derive(Debug, Args)]
#[command(after_long_help = DEFAULTS_WHY)]
pub struct RunCmd {
    /// The strategy, e.g. mutex or swr+lease [default: cache-aside]
    ///
    /// A preset (cache-aside, mutex, single-flight, xfetch, swr, jitter), lease, or a
    /// combination with `+` of at most one of cache-aside|xfetch|swr (expire is another name
    /// for cache-aside) with mutex, single-flight and/or jitter, or with lease (and jitter),
    /// such as swr+mutex or swr+lease. no-cache (alone) loads every request, the baseline
    /// of the break-even hit rate. A library preset (alone) reproduces a caching library's
    /// semantics: laravel-flexible, rails-race-ttl, symfony, caffeine-refresh, spring-sync,
    /// fusion (docs/strategies.md).
    #[arg(long, short = 's', value_name = "NAME", help_heading = "Strategy")]
    pub strategy: Option<String>,

    /// Scenario file (TOML) setting any run flag; flags given here win.
    ///
    /// Its keys are the run flags with `_` for `-`.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,

    #[command(flatten)]
    pub target: TargetFlags,

    #[command(flatten)]
    pub output: OutputFlags,

    #[command(flatten)]
    pub trials: TrialFlags,

    #[command(flatten)]
    pub shard: ShardFlags,

    #[command(flatten)]
    pub metrics: MetricsFlags,
}

impl RunCmd {
    /// The run flags with the strategy given on the command line.
    pub fn flags(&self) -> RunFlags {
        let mut flags = self.flags.clone();
        flags.cache.strategy = self.strategy.clone();
        flags
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct OutputFlags {
    /// Write the full results (JSON, versioned schema) to FILE.
    ///
    /// With --repeat, FILE is a directory that gets <strategy>/trial-N.json and summary.json,
    /// as compare writes.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub out: Option<PathBuf>,

    /// Write a self-contained HTML report to FILE at the end.
    ///
    /// The report holds the timelines as inline SVG and opens offline.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub html: Option<PathBuf>,

    /// No progress bar and no summary table; errors are still printed.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}

/// The app under test (`--target`): command line only, not scenario files (an app's command
/// and headers belong to the machine that runs it, not to the workload).
#[derive(Debug, Args, Clone, Default)]
pub struct TargetFlags {
    /// Drive this HTTP endpoint instead of the built-in app.
    ///
    /// Each request is a GET of this URL with {key} replaced by the Zipf-drawn item id, e.g.
    /// 'http://127.0.0.1:8080/items/{key}'. Open loop (--rps, latency from the scheduled time)
    /// or closed loop (--clients), on a keep-alive connection pool. The start is cold (stampede
    /// cannot warm an app's cache); DB calls, herds and hit rates come from the servers
    /// (docs/app.md).
    #[arg(long, value_name = "URL", help_heading = "App under test")]
    pub target: Option<String>,

    /// Deadline of one request to the target [default: 5s]
    ///
    /// Connecting included; a request past it is counted in http.timeouts.
    #[arg(long, value_name = "DURATION", help_heading = "App under test")]
    pub http_timeout: Option<crate::values::Dur>,

    /// Connections to the target at most [default: 64]
    ///
    /// With --clients C above 64, C (a client never waits for another's connection). Like
    /// wrk's -c: an open-loop request that finds every connection busy waits for one, and
    /// the wait counts in its latency (from the scheduled time); the in-flight cap still sheds
    /// beyond --max-inflight. A connection per request in flight instead lets a slow app be
    /// flooded with new connections just when it can least take them (measured on
    /// examples/app at 40k req/s: 64 connections held p99 1.9 ms; 256 served 25k req/s at p99
    /// 22 ms; 2048 fell 634 ms behind).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "App under test"
    )]
    pub http_conns: Option<u32>,

    /// A header sent with every request, 'Name: value' (repeatable).
    ///
    /// Repeat it for several (e.g. for auth). Values are not written to the results.
    #[arg(long, value_name = "'NAME: VALUE'", help_heading = "App under test")]
    pub header: Vec<String>,

    /// The statuses that count as success [default: any 2xx]
    ///
    /// Comma-separated or repeated. Other statuses are errors, counted by class in
    /// http.status.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "CODE",
        value_delimiter = ',',
        help_heading = "App under test"
    )]
    pub expect_status: Vec<u16>,

    /// A regex the response body must match to count as success.
    ///
    /// A regular expression the response body must match for the request to count as success
    /// (so a 200 with the wrong body is an error).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "REGEX",
        help_heading = "App under test"
    )]
    pub expect_body: Option<String>,

    /// Start the app under test with this shell command.
    ///
    /// It runs in its own process group, stopped at the end, on failures and on Ctrl-C. Its
    /// environment has REDIS_URL, DATABASE_URL (a role of its own on a managed Postgres),
    /// DB_SCHEMA (the seeded items table and the stampede_load(id) function), CACHE_PREFIX,
    /// CACHE_TTL_MS (--ttl) and PORT (a free port, also put for {port} in --target and
    /// --app-ready).
    #[arg(long, value_name = "CMD", help_heading = "App under test")]
    pub app_cmd: Option<String>,

    /// With --app-cmd: URL that is 2xx when up [default: port open]
    ///
    /// The URL that answers 2xx once the app is ready; by default, readiness is the target's
    /// port accepting connections.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "URL",
        help_heading = "App under test"
    )]
    pub app_ready: Option<String>,

    /// With --app-cmd: time allowed to get ready [default: 30s]
    ///
    /// How long the app may take to be ready before the run fails.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "App under test"
    )]
    pub app_ready_timeout: Option<crate::values::Dur>,

    /// With --app-cmd: the app's output file [default: a temp file]
    ///
    /// The file the app's output goes to; by default a file in the temp dir, named in the
    /// results.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        help_heading = "App under test"
    )]
    pub app_log: Option<PathBuf>,

    /// For an app that is already running: the schema it reads.
    ///
    /// With no --app-cmd, servers given with --redis-url and --pg-url: stampede creates the
    /// schema, seeds the items table and the stampede_load(id) function in it, and drops it at
    /// the end.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "NAME",
        help_heading = "App under test"
    )]
    pub schema: Option<String>,

    /// Regex of the app's DB calls [default: by role, else by schema]
    ///
    /// Which statements of pg_stat_statements are the app's DB calls (a Postgres regular
    /// expression on the statement text). Default: every statement of the app's own role on a
    /// managed Postgres, else every statement naming the run's schema.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "REGEX",
        help_heading = "App under test"
    )]
    pub db_match: Option<String>,
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
