//! The command-line parser: clap derive types only. Every run flag also lives in
//! [`RunFlags`], which doubles as the schema of a scenario file, so the two can never drift.
//!
//! Every flag has a help heading, and its doc comment a first paragraph that fits on one line
//! of `-h` (the summary) before the paragraphs `--help` adds (tests/help.rs holds both).

mod audit;
mod traces;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use audit::AuditCmd;
use serde::Deserialize;
pub use traces::{MrcCmd, TraceFlags, TraceStatsCmd};

use crate::fault::FaultSpec;
use crate::origin::DbQuery;
use crate::protect::rate::RateScope;
use crate::strategy::lock::LockTimeoutPolicy;
use crate::workload::{Arrival, Start};

use crate::thresholds::{ThresholdArg, Thresholds};
use crate::values::{Dur, Percent, Rate, Size};

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
        RunFlags {
            strategy: self.strategy.clone(),
            ..self.flags.clone()
        }
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

/// The long help of `--fault`: the grammar and every kind with its keys.
const FAULT_HELP: &str = "A fault: KIND@AT[+FOR][,KEY=VALUE…], repeatable; AT counts from the start of the measured window, FOR is how long it lasts. The same keys as a scenario file's [[fault]] table, read by the same code; any fault given on the command line (this flag or a shorthand) replaces the file's faults.

Kinds: kill-redis@AT+FOR, kill-postgres@AT+FOR, pause-redis@AT+FOR, drop-cache@AT (keys fraction, order), slow-db@AT+FOR (key factor), spike@AT+FOR (key factor), failover@AT and migrate-slot@AT (key slot) on a Redis Cluster. E.g. --fault kill-redis@3s+2s, --fault drop-cache@4s,fraction=100%,order=hottest, --fault slow-db@5s+3s,factor=4, --fault spike@5s+2s,factor=3, --fault migrate-slot@2s,slot=hottest. The per-kind flags of earlier versions (--kill-redis-at T --redis-down-for D, --drop-cache-at T, --drop-fraction P, …) still work as shorthands for the same faults; they are left out of the help, and docs/faults.md lists them.";

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
        RunFlags {
            strategy: self.strategy.clone(),
            ..self.flags.clone()
        }
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

/// Every setting of a run. All optional here: unset means "take the scenario file's value,
/// else the default". Field names are the scenario file's keys.
#[derive(Debug, Args, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFlags {
    /// The strategy (scenario file key `strategy`); on the command line it is `run --strategy`,
    /// and `compare --strategies` for a comparison.
    #[arg(skip)]
    pub strategy: Option<String>,

    /// Open loop: requests per second [default: 10000 unless --clients]
    ///
    /// Open loop: start this many requests per second whether or not earlier ones finished
    /// (accepts 10k).
    #[arg(
        long,
        value_name = "RATE",
        conflicts_with = "clients",
        help_heading = "Load"
    )]
    pub rps: Option<Rate>,

    /// Closed loop: this many workers, spread over the instances.
    ///
    /// Each worker sends its next request when its last returns.
    #[arg(long, value_name = "N", help_heading = "Load")]
    pub clients: Option<u32>,

    /// Open-loop spacing of requests: constant or poisson [default: constant]
    ///
    /// constant: evenly spaced, one request every 1/rps seconds.
    ///
    /// poisson: exponential gaps with mean 1/rps (a Poisson process), seeded.
    #[arg(long, value_enum, hide_possible_values = true, help_heading = "Load")]
    pub arrival: Option<Arrival>,

    /// How long the measured part of the run lasts [default: 10s]
    #[arg(long, value_name = "DURATION", help_heading = "Load")]
    pub duration: Option<Dur>,

    /// Unmeasured traffic sent before the measured part [default: 0s]
    ///
    /// Traffic sent before the measured part and excluded from every figure.
    #[arg(long, value_name = "DURATION", help_heading = "Load")]
    pub warmup: Option<Dur>,

    /// Replay this access trace as the traffic (.gz/.zst streamed)
    ///
    /// Each distinct trace key becomes one item (ids in order of first appearance), seeded
    /// with the trace's value size for it; requests go out at the trace's timestamps (times
    /// --speed). The trace decides the rate, the duration and the keys: --duration selects a
    /// slice of trace time, --rps re-times the trace at a constant rate keeping its order.
    /// docs/traces.md has the formats.
    #[arg(long, value_name = "FILE", help_heading = "Trace")]
    pub trace: Option<PathBuf>,

    /// A synthetic workload with a trace's shape (trace-stats --json)
    ///
    /// Reads what `stampede trace-stats FILE --json` wrote and takes its shape as the
    /// defaults: --keys (distinct keys), --zipf (the fitted exponent), --rps (the mean rate;
    /// the reads' share of it, the rest as --write-rps), --value-size-dist (a lognormal with the
    /// trace's mean and median value size) and --ttl (the median TTL). Flags given win. A team
    /// can share the shape without the trace.
    #[arg(long, value_name = "FILE", help_heading = "Trace")]
    pub workload_from: Option<PathBuf>,

    /// The trace's format [default: detected from its content]
    ///
    /// twitter (cache-trace CSV), meta (CacheLib KV replay CSV, v1 or v2), csv or jsonl
    /// (timestamp and key, optional value_size, op, ttl), monitor (redis-cli MONITOR output).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FORMAT",
        value_enum,
        hide_possible_values = true,
        help_heading = "Trace"
    )]
    pub trace_format: Option<crate::trace::Format>,

    /// Map csv/jsonl columns: timestamp=ts,key=k,...
    #[arg(
        hide_short_help = true,
        long,
        value_name = "MAP",
        help_heading = "Trace"
    )]
    pub trace_columns: Option<String>,

    /// Replay reads only, or SETs/DELETEs too as writes [default: reads]
    ///
    /// reads: a look-aside trace's SETs and DELETEs are mostly the app's own write-backs; they
    /// are counted and skipped. all: they are replayed as writes (--invalidate applies).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "OPS",
        value_enum,
        hide_possible_values = true,
        help_heading = "Trace"
    )]
    pub trace_ops: Option<crate::replay::TraceOps>,

    /// Replay the trace X times faster than recorded [default: 1]
    #[arg(hide_short_help = true, long, value_name = "X", help_heading = "Trace")]
    pub speed: Option<f64>,

    /// Place each whole second's requests: even or random [default: even]
    ///
    /// For traces stamped in whole seconds: evenly over the second in trace order, or at
    /// seeded random instants within it (the count per second kept exactly).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "HOW",
        value_enum,
        hide_possible_values = true,
        help_heading = "Trace"
    )]
    pub trace_spread: Option<crate::replay::Spread>,

    /// Skip the trace's first D of trace time [default: 0s]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Trace"
    )]
    pub trace_skip: Option<Dur>,

    /// Distinct item ids (database rows and keys) [default: 10000]
    ///
    /// Number of distinct item ids in the database and in the key space.
    #[arg(long, value_name = "N", help_heading = "Keys and values")]
    pub keys: Option<u64>,

    /// Zipf exponent of key popularity, > 0 [default: 1.0]
    ///
    /// Larger = more skewed.
    #[arg(long, value_name = "S", help_heading = "Keys and values")]
    pub zipf: Option<f64>,

    /// Seed of the key sequence [default: 42]
    ///
    /// The same seed gives the same keys for every strategy.
    #[arg(long, value_name = "N", help_heading = "Keys and values")]
    pub seed: Option<u64>,

    /// Bytes of payload per item [default: 1024]
    #[arg(long, value_name = "BYTES", help_heading = "Keys and values")]
    pub value_size: Option<usize>,

    /// Payload sizes per item: 100..10k or lognormal:mean=1k,sd=2k
    ///
    /// Each item gets its own payload size, drawn from this distribution with the run's seed
    /// (the same seed, the same sizes): `MIN..MAX` uniform with both ends included, or
    /// `lognormal:mean=M,sd=S` with the sizes' own mean and standard deviation. Sizes read as
    /// --maxmemory's (k: 1000, kb: 1024). A write keeps each item's size. Instead of
    /// --value-size.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DIST",
        conflicts_with = "value_size",
        help_heading = "Keys and values"
    )]
    pub value_size_dist: Option<crate::sizes::SizeDist>,

    /// Managed Redis: its memory limit, e.g. 8mb [default: none]
    ///
    /// Set on the managed Redis (CONFIG SET) before the start state is written, and given to
    /// it again after a kill-redis fault. Bytes, or with a unit as Redis reads one (k, m, g:
    /// powers of 1000; kb, mb, gb: of 1024); 0 is no limit. The start state then stops at
    /// the limit. On --redis-url the server's own configuration is read and reported, never
    /// changed, and this flag is refused.
    #[arg(long, value_name = "SIZE", help_heading = "Redis memory")]
    pub maxmemory: Option<Size>,

    /// What Redis does at the limit [default: noeviction]
    ///
    /// Redis's maxmemory-policy: noeviction (writes are refused with OOM; the request is still
    /// answered from the database), allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
    /// volatile-lfu, volatile-random or volatile-ttl. Acts once --maxmemory sets a limit.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        hide_possible_values = true,
        help_heading = "Redis memory"
    )]
    pub maxmemory_policy: Option<crate::cache::EvictionPolicy>,

    /// Keys the approximate LRU/LFU/TTL samples [default: 5]
    ///
    /// Redis's maxmemory-samples, 1 to 64: more is closer to the exact policy and costs more
    /// CPU per eviction.
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Redis memory")]
    pub maxmemory_samples: Option<u32>,

    /// TTL of a cache entry (the soft expiry under swr) [default: 3s]
    ///
    /// Time to live of a cache entry; under swr, its soft expiry.
    #[arg(long, value_name = "DURATION", help_heading = "Keys and values")]
    pub ttl: Option<Dur>,

    /// Time a load spends inside Postgres [default: 10ms]
    ///
    /// Time each load spends inside Postgres, holding a real connection.
    #[arg(long, value_name = "DURATION", help_heading = "Database")]
    pub db_cost: Option<Dur>,

    /// Database connections per app instance [default: 16]
    ///
    /// A load waits for one, then sends its statement (one DB call): peak concurrent counts
    /// statements (at most instances × pool); peak in flight, the per-key herd and redundant
    /// loads count loads, those queued for a connection included.
    #[arg(long, value_name = "N", help_heading = "Database")]
    pub db_pool: Option<u32>,

    /// Deadline of a load [default: none; 1s with a kill-postgres fault]
    ///
    /// Statement timeout of a load and bound on the wait for a pooled connection (and, with a
    /// Postgres fault, on opening a new one); exceeded = error outcome. None by default; 1s when
    /// a kill-postgres fault is scheduled.
    #[arg(long, value_name = "DURATION", help_heading = "Database")]
    pub db_timeout: Option<Dur>,

    /// Simulated app instances [default: 2]
    ///
    /// Each has its own Redis connections, DB pool and in-process state.
    #[arg(long, value_name = "N", help_heading = "Load")]
    pub instances: Option<u32>,

    /// Redis connections per app instance, each multiplexed [default: 1]
    ///
    /// The requests that start together share one write.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Servers and TLS"
    )]
    pub redis_conns: Option<u32>,

    /// Open loop: requests handled at once per instance [default: 2048]
    ///
    /// More are queued up to --backlog, then shed (counted, never silently dropped).
    #[arg(long, value_name = "N", help_heading = "Load")]
    pub max_inflight: Option<u32>,

    /// Open loop: queued requests allowed per instance [default: 0]
    ///
    /// Requests per instance that may queue once --max-inflight are being handled; beyond it
    /// requests are shed.
    #[arg(hide_short_help = true, long, value_name = "N", help_heading = "Load")]
    pub backlog: Option<u32>,

    /// Cache at the start: steady, cold or synchronized [default: steady]
    ///
    /// What the cache holds when traffic starts.
    ///
    /// steady: what a long-running service would hold under this workload: each key present
    /// with the probability its request rate and TTL imply, its remaining TTL spread
    /// (docs/design.md). With --clients, whose rate is not known in advance, every key counts
    /// as requested often enough to stay cached.
    ///
    /// cold: empty; every key's first request misses (a cold start).
    ///
    /// synchronized: every key present, all written at the same instant (the mass expiry TTL
    /// jitter is for).
    #[arg(
        long,
        value_enum,
        hide_possible_values = true,
        help_heading = "Keys and values"
    )]
    pub start: Option<Start>,

    /// The K hottest keys start cached with their full TTL [default: 0]
    ///
    /// The K most popular keys are in the cache with their full TTL when traffic starts;
    /// --start applies to the rest.
    #[arg(long, value_name = "K", help_heading = "Keys and values")]
    pub warm: Option<u64>,

    /// Use this Redis instead of starting one.
    ///
    /// redis://[:password@]host:port[/db]; only the run's own keys are touched.
    #[arg(long, value_name = "URL", help_heading = "Servers and TLS")]
    pub redis_url: Option<String>,

    /// Use this Postgres instead of starting one.
    ///
    /// postgres://user[:password]@host:port/db; the run's schema is dropped afterwards.
    #[arg(long, value_name = "URL", help_heading = "Servers and TLS")]
    pub pg_url: Option<String>,

    /// Deadline of every Redis command [default: 100ms]
    ///
    /// A late or failed command counts as a miss.
    #[arg(long, value_name = "DURATION", help_heading = "Servers and TLS")]
    pub redis_timeout: Option<Dur>,

    /// XFetch: how eagerly to recompute early [default: 1.0]
    ///
    /// How eagerly to recompute before expiry (0 disables early recompute).
    #[arg(long, value_name = "BETA", help_heading = "Strategy")]
    pub beta: Option<f64>,

    /// SWR: how long a stale entry may be served [default: 10s]
    ///
    /// How long past its soft expiry an entry may still be served while it is refreshed.
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub stale: Option<Dur>,

    /// Mutex: lease of the Redis lock (PX) [default: 2s]
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub lock_ttl: Option<Dur>,

    /// Mutex: how often a waiter polls the cache [default: 50ms]
    ///
    /// With ±50% jitter.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Strategy"
    )]
    pub lock_poll: Option<Dur>,

    /// Mutex: longest wait of a waiter [default: 2s]
    ///
    /// How long a waiter waits before applying --lock-timeout-policy.
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub lock_wait: Option<Dur>,

    /// Mutex: past --lock-wait: load, error or stale [default: load]
    ///
    /// What a waiter does when --lock-wait runs out.
    ///
    /// load: load from the database anyway (outcome `fallback`).
    ///
    /// error: give up (outcome `error`).
    ///
    /// stale: serve the stale value if there is one (needs the swr freshness), else load.
    #[arg(
        hide_short_help = true,
        long,
        value_enum,
        value_name = "POLICY",
        hide_possible_values = true,
        help_heading = "Strategy"
    )]
    pub lock_timeout_policy: Option<LockTimeoutPolicy>,

    /// Fail-safe: serve D past expiry on a failure [default: off]
    ///
    /// Every entry stays in Redis D past its hard expiry (past the stale window under swr).
    /// A request that finds such an entry loads as on a miss; only when that load fails (an
    /// error, a timeout, a refusal by --db-limit, --breaker or --db-rate) is the kept value
    /// served (outcome `stale`, counted in db.fail_safe), and the key is not tried again on
    /// that instance for --fail-safe-throttle. Not swr: swr serves stale instead of waiting
    /// for a load, fail-safe only when the load fails; with swr, swr's window comes first. The
    /// same kept entry is what --lock-timeout-policy stale serves when a wait runs out.
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub fail_safe: Option<Dur>,

    /// Fail-safe: no load of a failed key for D [default: 30s]
    ///
    /// After a key's load failed and its kept value was served, the instance serves that
    /// value without a load for D (db.fail_safe_throttled), so a failing database is not
    /// asked for the key by every request.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Strategy"
    )]
    pub fail_safe_throttle: Option<Dur>,

    /// Soft timeout: answer with the kept value at D [default: off]
    ///
    /// When a request holds a kept value (--fail-safe, which it needs) and its load has not
    /// finished within D, it is answered with that value at D (db.soft_timeouts) and the load
    /// goes on behind it and writes back (db.soft_timeout_write_backs). Not a third hard
    /// timeout: a load's hard bounds stay --db-timeout and the client's --request-timeout.
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub soft_timeout: Option<Dur>,

    /// Eager refresh: refresh at P of the TTL [default: off]
    ///
    /// A read of a fresh entry that has lived at least P (e.g. 80%) of its TTL is served and
    /// starts one background refresh of the key in its instance, unless one is running
    /// (db.eager_refreshes); a fixed-threshold counterpart to xfetch's probabilistic early
    /// recompute (Caffeine's refreshAfterWrite, FusionCache's eager refresh).
    #[arg(long, value_name = "P", help_heading = "Strategy")]
    pub eager_refresh: Option<Percent>,

    /// Refresh-ahead: re-load the hot keys every D [default: off]
    ///
    /// A background job re-loads the --rewarm-top most popular keys every D from the start of
    /// the traffic and writes them with a full TTL, fresh or not (refresh-ahead on a
    /// schedule), under the strategy's coordination; its loads are DB calls, also counted
    /// apart (db.rewarm_calls).
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub rewarm_every: Option<Dur>,

    /// Refresh-ahead: how many of the hottest keys [default: 100]
    ///
    /// The keys of popularity rank 1..=K (the most requested) are re-loaded every
    /// --rewarm-every.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "K",
        help_heading = "Strategy"
    )]
    pub rewarm_top: Option<u64>,

    /// L1: in-process LRU entries per instance [default: off]
    ///
    /// Each app instance keeps the entries it read or loaded in an LRU of N entries (an L1
    /// in front of Redis): a request reads it first (outcome `l1-hit`), then Redis, then the
    /// database; a load writes both. Lock polls and re-checks read Redis. What it costs in
    /// consistency depends on --l1-invalidate; docs/l1.md has the figures.
    #[arg(long, value_name = "N", help_heading = "Strategy")]
    pub l1: Option<u64>,

    /// L1: how long an entry is served [default: its Redis TTL]
    ///
    /// An entry is served from the tier for D after it was read or loaded, never past its
    /// Redis entry's own expiry (the default: exactly that).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Strategy"
    )]
    pub l1_ttl: Option<Dur>,

    /// L1: invalidation: ttl, pubsub or tracking [default: ttl]
    ///
    /// ttl: it does not; an entry changed by another instance is served until its L1 TTL.
    ///
    /// pubsub: every write publishes its key on the run's channel and every instance drops
    /// it (a message lost while the subscriber reconnects is lost: the tier keeps serving).
    ///
    /// tracking: Redis client-side caching (CLIENT TRACKING, broadcast mode on the run's
    /// namespace, RESP3 pushes); when that connection drops the tier is flushed and bypassed
    /// until tracking is on again.
    #[arg(
        hide_short_help = true,
        long,
        value_enum,
        value_name = "MODE",
        hide_possible_values = true,
        help_heading = "Strategy"
    )]
    pub l1_invalidate: Option<crate::l1::L1Invalidate>,

    /// Spread TTLs within ±P [default: 0%; 10% under jitter]
    ///
    /// Spread every TTL written uniformly within ±P (e.g. 10%); 0% by default, 10% for
    /// --strategy jitter.
    #[arg(long, value_name = "P", help_heading = "Strategy")]
    pub jitter: Option<Percent>,

    /// Share of requests for ids absent from the database [default: 0%]
    ///
    /// Share of requests for ids that do not exist in the database (e.g. 5%).
    #[arg(long, value_name = "P", help_heading = "Keys and values")]
    pub missing_ratio: Option<Percent>,

    /// How long a not-found sentinel is cached [default: off]
    ///
    /// Cache a not-found sentinel for this long (negative caching).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Keys and values"
    )]
    pub negative_ttl: Option<Dur>,

    /// What a load costs the DB: sleep or heavy [default: sleep]
    ///
    /// sleep: pg_sleep(--db-cost) inside Postgres: a fixed cost that holds a real connection
    /// but no CPU, so only the pool saturates.
    ///
    /// heavy: a CPU-bound aggregate over a seeded `reviews` table: the server's CPU saturates
    /// for real.
    #[arg(
        long,
        value_enum,
        hide_possible_values = true,
        help_heading = "Database"
    )]
    pub db_query: Option<DbQuery>,

    /// Bulkhead: most loads in flight per instance [default: off]
    ///
    /// Most loads in flight at once per instance (a bulkhead): a load over the limit is not
    /// queued, it is refused without reaching Postgres, and its request is served the value it
    /// holds, if any (an xfetch early recompute keeps the current one; under swr, an entry kept
    /// past its window), or else fails fast with outcome `rejected` (not an error).
    #[arg(long, value_name = "N", help_heading = "Protection")]
    pub db_limit: Option<u32>,

    /// Rate limit: most loads per second [default: off]
    ///
    /// A token bucket on loads: at most R a second (accepts 1k), --db-burst at once after an
    /// idle spell, per instance or for the whole run (--db-rate-scope). A load over the limit
    /// is not queued, it is refused without reaching Postgres, like the bulkhead's (stale if
    /// held, else `rejected`); the re-warm job's loads pass through it too.
    #[arg(long, value_name = "R", help_heading = "Protection")]
    pub db_rate: Option<Rate>,

    /// Rate limit: loads let through at once [default: R/10]
    ///
    /// The token bucket's size: after an idle spell this many loads go at once, then one every
    /// 1/R. Default: a tenth of a second's worth (R/10), at least 1.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "B",
        help_heading = "Protection"
    )]
    pub db_burst: Option<u32>,

    /// Rate limit per instance or global [default: instance]
    ///
    /// instance: one bucket of R per app instance (the database sees up to R × instances).
    ///
    /// global: one bucket of R for the whole run, kept in Redis (GCRA in one Lua call, on
    /// Redis's clock, within --redis-timeout); while Redis cannot answer, each instance limits
    /// itself to R / instances, and the time it did is reported.
    #[arg(
        hide_short_help = true,
        long,
        value_enum,
        value_name = "SCOPE",
        hide_possible_values = true,
        help_heading = "Protection"
    )]
    pub db_rate_scope: Option<RateScope>,

    /// A circuit breaker on each instance's loads [default: off]
    ///
    /// It opens when, over --breaker-window (and at least --breaker-min-loads loads), the share
    /// of failed loads reaches --breaker-error-rate or their mean latency reaches
    /// --breaker-latency; while open, loads are refused (stale if held, else `rejected`); after
    /// --breaker-cooldown it lets --breaker-probes loads through and closes if all succeed in
    /// time, else opens again.
    ///
    /// --breaker alone is --breaker=true; --breaker=false turns it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true, help_heading = "Protection")]
    pub breaker: Option<bool>,

    /// Breaker: share of failed loads that opens it [default: 50%]
    ///
    /// The share of failed loads (errors and timeouts) over the window that opens it.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "P",
        help_heading = "Protection"
    )]
    pub breaker_error_rate: Option<Percent>,

    /// Breaker: mean load latency that opens it [default: 1s]
    ///
    /// The mean load latency over the window (pool wait included) that opens it; a probe this
    /// slow fails.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Protection"
    )]
    pub breaker_latency: Option<Dur>,

    /// Breaker: how far back loads are counted [default: 1s]
    ///
    /// How far back the failed loads and latencies that open it are counted.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Protection"
    )]
    pub breaker_window: Option<Dur>,

    /// Breaker: how long it stays open before probing [default: 2s]
    ///
    /// While open it refuses every load.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Protection"
    )]
    pub breaker_cooldown: Option<Dur>,

    /// Breaker: loads let through when half-open [default: 3]
    ///
    /// Loads let through after the cooldown (half-open); it closes when all succeed within
    /// --breaker-latency, else opens again.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Protection"
    )]
    pub breaker_probes: Option<u32>,

    /// Breaker: fewest loads in the window to open it [default: 20]
    ///
    /// The fewest loads in the window before it may open, so a handful of failures does not
    /// trip it.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Protection"
    )]
    pub breaker_min_loads: Option<u32>,

    /// Faults (`[[fault]]` tables: kind, at, down_for and the kind's own keys); on the command line `--fault KIND@AT[+FOR][,KEY=VALUE…]`, and any fault given there replaces them all
    #[arg(
        long = "fault",
        value_name = "KIND@AT[+FOR],…",
        value_parser = crate::fault::parse,
        help_heading = "Faults",
        help = "A fault, e.g. kill-redis@3s+2s or drop-cache@4s,fraction=50%",
        long_help = FAULT_HELP
    )]
    #[serde(default)]
    pub fault: Vec<FaultSpec>,

    /// A sweep axis on a fault's key (`--axis drop-cache.fraction=…`): set on the one fault of
    /// its kind once the file's faults and the flags' are merged.
    #[arg(skip)]
    #[serde(skip)]
    pub fault_keys: Vec<crate::fault::KeySet>,

    /// Crash Redis (SIGKILL) at T into the measured window.
    ///
    /// Crash Redis (SIGKILL) this long after the measured window starts; repeatable, paired in
    /// order with --redis-down-for (scenario file: [[fault]] with kind = "kill-redis", at,
    /// down_for).
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub kill_redis_at: Vec<Dur>,

    /// How long Redis stays down after --kill-redis-at.
    ///
    /// How long Redis stays down after the matching --kill-redis-at before a new, empty one
    /// starts on the same port.
    #[arg(
        hide = true,
        long,
        value_name = "DURATION",
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub redis_down_for: Vec<Dur>,

    /// Crash Postgres at T into the measured window.
    ///
    /// Crash Postgres this long after the measured window starts: SIGKILL of the managed
    /// server's whole process group, then a restart on the same port and data dir (crash
    /// recovery runs); repeatable, paired in order with --postgres-down-for (scenario file:
    /// [[fault]] with kind = "kill-postgres"). Loads fail fast meanwhile: without --db-timeout a
    /// Postgres fault sets it to 1s.
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub kill_postgres_at: Vec<Dur>,

    /// How long Postgres stays down after --kill-postgres-at.
    ///
    /// How long Postgres stays down after the matching --kill-postgres-at before it starts
    /// again.
    #[arg(
        hide = true,
        long,
        value_name = "DURATION",
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub postgres_down_for: Vec<Dur>,

    /// Stall Redis at T into the measured window (CLIENT PAUSE ALL).
    ///
    /// Stall Redis this long after the measured window starts (CLIENT PAUSE ALL: connections
    /// stay open, every command hangs until its --redis-timeout); repeatable, paired in order
    /// with --pause-for (scenario file: [[fault]] with kind = "pause-redis").
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub pause_redis_at: Vec<Dur>,

    /// How long Redis stays paused after --pause-redis-at.
    ///
    /// How long Redis stays paused after the matching --pause-redis-at.
    #[arg(
        hide = true,
        long,
        value_name = "DURATION",
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub pause_for: Vec<Dur>,

    /// Run without the scenario file's faults and shocks (a control run).
    ///
    /// Drops every [[fault]] of the scenario file, so the same workload runs undisturbed: the
    /// control that tells a metastable failure from plain overload.
    #[arg(long, help_heading = "Faults")]
    #[serde(skip)]
    pub no_shocks: bool,

    /// Shock: remove a share of the run's cached entries at T.
    ///
    /// Remove a share (--drop-fraction, of --drop-order) of the run's cached entries this long
    /// after the measured window starts, with UNLINK: only entries, never the run's heartbeat,
    /// locks, lease tokens or version markers; repeatable (scenario file: [[fault]] with kind =
    /// "drop-cache", at, fraction, order).
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub drop_cache_at: Vec<Dur>,

    /// Share of the entries a cache drop removes [default: 100%]
    ///
    /// Applies to every drop-cache shock, the scenario file's included.
    #[arg(hide = true, long, value_name = "P", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub drop_fraction: Option<Percent>,

    /// Drop order: hottest or random [default: hottest]
    ///
    /// hottest: the most popular keys first (the cheapest way to hurt). random: a seeded random
    /// share of the keys.
    #[arg(
        hide = true,
        long,
        value_enum,
        value_name = "ORDER",
        hide_possible_values = true,
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub drop_order: Option<crate::fault::DropOrder>,

    /// Shock: every load costs --slow-db-factor times more from T.
    ///
    /// From this long after the measured window starts, every load costs --slow-db-factor
    /// times its cost (the server really works longer: pg_sleep's argument is multiplied) for
    /// the matching --slow-db-for; repeatable (scenario file: [[fault]] with kind = "slow-db",
    /// at, for, factor). Needs --db-query sleep.
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub slow_db_at: Vec<Dur>,

    /// How long loads stay slow after --slow-db-at.
    #[arg(
        hide = true,
        long,
        value_name = "DURATION",
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub slow_db_for: Vec<Dur>,

    /// Slow-db: how many times its cost a load costs [default: 4]
    ///
    /// Applies to every slow-db shock, the scenario file's included.
    #[arg(hide = true, long, value_name = "K", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub slow_db_factor: Option<f64>,

    /// Shock: the offered rate is multiplied by --spike-factor from T.
    ///
    /// From this long after the measured window starts, the open loop offers --spike-factor
    /// times the rate for the matching --spike-for (the schedule stays exact and seeded);
    /// repeatable (scenario file: [[fault]] with kind = "spike", at, for, factor). Open loop
    /// only.
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub spike_at: Vec<Dur>,

    /// How long the rate stays multiplied after --spike-at.
    #[arg(
        hide = true,
        long,
        value_name = "DURATION",
        help_heading = "Fault shorthands"
    )]
    #[serde(skip)]
    pub spike_for: Vec<Dur>,

    /// Spike: how many times the rate is offered [default: 2]
    ///
    /// Applies to every spike, the scenario file's included.
    #[arg(hide = true, long, value_name = "K", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub spike_factor: Option<f64>,

    /// External Redis: shell command that restarts it after a fault.
    ///
    /// External Redis (--redis-url) only: shell command (run with sh -c) that starts it again
    /// after a fault's SHUTDOWN NOSAVE.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "CMD",
        help_heading = "Faults"
    )]
    pub redis_restart_cmd: Option<String>,

    /// External Redis: allow a pause-redis fault on it.
    ///
    /// External Redis (--redis-url) only: allow a pause-redis fault, which stalls every client of
    /// that server, not only this run.
    #[arg(hide_short_help = true, long, help_heading = "Faults")]
    #[serde(default)]
    pub allow_pause_external: bool,

    /// External Redis: allow a kill-redis fault on it (SHUTDOWN NOSAVE).
    ///
    /// External Redis (--redis-url) only: allow a kill-redis fault, which sends that server
    /// SHUTDOWN NOSAVE: it stops without saving, so every client's data not yet persisted is
    /// lost, not only this run's.
    #[arg(hide_short_help = true, long, help_heading = "Faults")]
    #[serde(default)]
    pub allow_kill_external: bool,

    /// External Postgres: shell command that crashes it at a fault.
    ///
    /// External Postgres (--pg-url) only: shell command (run with sh -c) that crashes it at a
    /// kill-postgres fault, e.g. `pg_ctl stop -D DIR -m immediate` (stampede cannot crash a
    /// server it did not start; pg_terminate_backend only ends sessions).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "CMD",
        help_heading = "Faults"
    )]
    pub pg_kill_cmd: Option<String>,

    /// External Postgres: shell command that starts it again.
    ///
    /// External Postgres (--pg-url) only: shell command (run with sh -c) that starts it again
    /// after the fault's down time.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "CMD",
        help_heading = "Faults"
    )]
    pub pg_restart_cmd: Option<String>,

    /// The client gives up on a request after D [default: never]
    ///
    /// The simulated client's own deadline (the built-in app's counterpart of --http-timeout):
    /// the request counts as timed out at D, while the work it started goes on (the app does
    /// not know the client left) and keeps its in-flight slot until it ends; a load it started
    /// still runs and, if it completes, writes back.
    #[arg(long, value_name = "DURATION", help_heading = "Client")]
    pub request_timeout: Option<Dur>,

    /// Retry a failed or timed-out request up to N times [default: 0]
    ///
    /// Each retry waits --retry-backoff (doubled for each one after), is counted
    /// (requests.retries) and keeps the request's latency counted from its first attempt's
    /// scheduled start.
    #[arg(long, value_name = "N", help_heading = "Client")]
    pub retries: Option<u32>,

    /// The wait before the first retry, doubled after [default: 100ms]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Client"
    )]
    pub retry_backoff: Option<Dur>,

    /// Spread each retry's wait within ±P [default: 0%]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "P",
        help_heading = "Client"
    )]
    pub retry_jitter: Option<Percent>,

    /// Goodput's deadline [default: --request-timeout, else 1s]
    ///
    /// Goodput counts the requests answered with a value (hit, stale, waited, loaded) within D
    /// of their scheduled start: not errors, rejections or timeouts.
    #[arg(long, value_name = "DURATION", help_heading = "Client")]
    pub goodput_within: Option<Dur>,

    /// Baseline span before the first shock [default: 2s]
    ///
    /// The baseline of the recovery verdict: goodput, hit rate, DB calls/s and p99 over this
    /// span before the first shock.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Recovery verdict"
    )]
    pub baseline_window: Option<Dur>,

    /// Share of the baseline's goodput that is back [default: 95%]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "P",
        help_heading = "Recovery verdict"
    )]
    pub recovery_goodput: Option<Percent>,

    /// Hit-rate points under the baseline still back [default: 5]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "POINTS",
        help_heading = "Recovery verdict"
    )]
    pub recovery_hit_points: Option<f64>,

    /// How long both must stay back [default: 2s]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Recovery verdict"
    )]
    pub settle: Option<Dur>,

    /// Least time after the last shock for a verdict [default: 10s]
    ///
    /// With less of the window left after the last shock ends, the verdict is not-judged.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Recovery verdict"
    )]
    pub observe: Option<Dur>,

    /// Writes per second alongside the reads [default: 0]
    ///
    /// Writes per second sent alongside the reads, to the same app instances (an open loop of
    /// its own, evenly spaced over the measured window): each is one transaction, an UPDATE
    /// that bumps the item's version and changes its payload, then the invalidation. Counted as
    /// db.writes, apart from db.calls. 0: no writes, and no consistency figure can be other
    /// than 0.
    #[arg(long, value_name = "RATE", help_heading = "Writes")]
    pub write_rps: Option<Rate>,

    /// Zipf exponent of the keys written [default: --zipf]
    ///
    /// By default the reads' exponent, --zipf.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "S",
        help_heading = "Writes"
    )]
    pub write_zipf: Option<f64>,

    /// What a write does to the cache [default: delete]
    ///
    /// What a write does to the cache after its commit: delete (the key and its lease), set
    /// (the new value), versioned (the new value through a Lua SET that refuses an older
    /// version than the cache or the writers' version marker holds; readers' SETs go through it
    /// too), none (TTL only). compare takes a comma-separated list and runs every strategy with
    /// each, labelled strategy/invalidation. Needs --write-rps.
    #[arg(
        long,
        value_name = "delete|set|versioned|none",
        help_heading = "Writes"
    )]
    pub invalidate: Option<String>,

    /// Lease: how long a lease token lives [default: 2s]
    ///
    /// It lives that long unless the holder's SET consumes it first; one token per key at a
    /// time, and a write's delete removes it. Only with a lease strategy (lease, swr+lease,
    /// xfetch+lease).
    #[arg(long, value_name = "DURATION", help_heading = "Strategy")]
    pub lease_ttl: Option<Dur>,

    /// Start the managed servers with TLS [default: off]
    ///
    /// A CA and server certificates are made for the run in each server's temp dir;
    /// redis-server then listens on TLS only (rediss://) and Postgres accepts TCP over TLS only
    /// (sslmode=verify-full against the run's CA). The result says servers.tls: true.
    ///
    /// --tls alone is --tls=true; --tls=false turns it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true, help_heading = "Servers and TLS")]
    pub tls: Option<bool>,

    /// rediss:// only: CA file (PEM) to verify Redis's certificate with.
    ///
    /// Verify Redis's certificate against this CA file (PEM) instead of the system's store.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        help_heading = "Servers and TLS"
    )]
    pub redis_ca: Option<PathBuf>,

    /// rediss:// only: client certificate (PEM), with --redis-key.
    ///
    /// For a Redis that requires one (tls-auth-clients yes).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        requires = "redis_key",
        help_heading = "Servers and TLS"
    )]
    pub redis_cert: Option<PathBuf>,

    /// rediss:// only: the private key (PEM) of --redis-cert.
    #[arg(
        hide_short_help = true,
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
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true, help_heading = "Servers and TLS")]
    pub redis_insecure: Option<bool>,

    /// Managed cluster: P primaries, R replicas each [default: 3:1]
    ///
    /// Off unless given. Instead of one redis-server: P primaries with R replicas each on free
    /// loopback ports (their cluster bus too), cluster-node-timeout 1000 ms, stopped and
    /// removed after the run like the single server. --redis-cluster alone is 3:1. An external cluster is --redis-url
    /// redis+cluster://host:port[,host:port…].
    #[arg(long, value_name = "P[:R]", num_args = 0..=1, require_equals = true, default_missing_value = "3:1", help_heading = "Cluster")]
    pub redis_cluster: Option<String>,

    /// Cluster: GETs go to replicas [default: off]
    ///
    /// Reads (GET) go to a replica of the key's primary; writes, locks and scripts stay on
    /// the primary. With writes the consistency figures then count replication lag too.
    /// --read-from-replicas alone is --read-from-replicas=true.
    #[arg(hide_short_help = true, long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true, help_heading = "Cluster")]
    pub read_from_replicas: Option<bool>,

    /// Primary a kill or failover strikes [default: hottest]
    ///
    /// On a Redis Cluster, the primary a kill-redis fault kills and a failover hands over.
    /// hottest: the primary serving the slot of the run's most popular key; random: one drawn
    /// with the run's seed; or a node id (CLUSTER NODES) or host:port.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "hottest|random|ID",
        help_heading = "Cluster"
    )]
    pub redis_node: Option<String>,

    /// Cluster fault: a planned CLUSTER FAILOVER at T.
    ///
    /// This long after the measured window starts, the replica of --redis-node's primary takes
    /// over (CLUSTER FAILOVER, a coordinated hand-over without data loss); repeatable (scenario
    /// file: [[fault]] with kind = "failover").
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub failover_at: Vec<Dur>,

    /// Cluster fault: move a slot to another primary at T.
    ///
    /// This long after the measured window starts, the slot of the hottest key (or --slot) moves
    /// to another primary (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE), so requests meet
    /// ASK redirects while it moves; repeatable (scenario file: [[fault]] with kind =
    /// "migrate-slot").
    #[arg(hide = true, long, value_name = "T", help_heading = "Fault shorthands")]
    #[serde(skip)]
    pub migrate_slot_at: Vec<Dur>,

    /// Slot a migrate-slot fault moves [default: the hottest key's]
    ///
    /// On a Redis Cluster, the slot (0 to 16383) a migrate-slot fault moves (its `slot` key
    /// is the same); by default the slot of
    /// the run's most popular key (its entry, lock, lease token and version marker share it).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "N",
        help_heading = "Cluster"
    )]
    pub slot: Option<u16>,

    /// Your own load: the query a miss runs on --pg-url, $1 the key.
    ///
    /// This query (one parameter, $1, the key) on your --pg-url is what a miss runs, at its
    /// real cost (no pg_sleep). stampede then creates, alters and drops nothing in that
    /// database (a read-only role works; every transaction there is read-only, so the server
    /// refuses a query that writes); keys come from --keys-sql or --keys-file; the start
    /// is cold unless --start says otherwise. DB calls are read from pg_stat_statements for
    /// this statement when the extension is there.
    #[arg(long, value_name = "SQL", help_heading = "Database")]
    pub db_sql: Option<String>,

    /// With --db-sql: a query returning the keys, most popular first.
    ///
    /// The keys are the first column of what this query returns (e.g. SELECT id FROM items
    /// ORDER BY views DESC); popularity is Zipf over them in the order returned (the first the
    /// most popular); --keys N keeps the first N. Runs in a READ ONLY transaction.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "SQL",
        conflicts_with = "keys_file",
        help_heading = "Database"
    )]
    pub keys_sql: Option<String>,

    /// With --db-sql: a file of keys, one a line, most popular first.
    ///
    /// The keys, one per line, most popular first (instead of --keys-sql).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "FILE",
        help_heading = "Database"
    )]
    pub keys_file: Option<PathBuf>,

    /// Width of a timeline bucket [default: 100ms]
    #[arg(
        hide_short_help = true,
        long,
        value_name = "DURATION",
        help_heading = "Output"
    )]
    pub interval: Option<Dur>,

    /// Exit 1 when a figure breaks a limit, e.g. p99_ms_max=250.
    ///
    /// E.g. p99_ms_max=250 or hit_rate_min=95% (repeatable; over the scenario's [thresholds]).
    /// Names: db_calls_max, redundant_loads_max, peak_key_herd_max, peak_concurrent_max,
    /// hit_rate_min, stale_ratio_max, error_rate_max, rejected_rate_max, p50_ms_max,
    /// p95_ms_max, p99_ms_max, stale_read_ratio_max, staleness_p99_ms_max, divergent_keys_max,
    /// invalidation_failures_max, writes_left_wrong_ratio_max, recovery_back_ms_max; for `sweep
    /// --boundary rps` also boundary_rps_min (req/s). A limit on a figure the run could not
    /// measure fails (and one the mode can never know is refused before the run).
    #[arg(long = "threshold", value_name = "NAME=VALUE", value_parser = crate::thresholds::parse_arg, help_heading = "Thresholds")]
    #[serde(skip)]
    pub threshold: Vec<ThresholdArg>,

    /// A scenario file's `[thresholds]` table (no flag of its own: --threshold sets one).
    #[arg(skip)]
    #[serde(default)]
    pub thresholds: Option<Thresholds>,
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
