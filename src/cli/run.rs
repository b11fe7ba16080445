//! `run`'s command line beyond the run settings (`settings/`): the command itself, where its
//! output goes, the app under test, repeated trials, shards and live metrics, and `prepare`,
//! which sets a sharded run up.

use std::path::PathBuf;

use clap::Args;

use super::RunFlags;

/// Why the defaults are what they are, for `run --help` and `compare --help`.
pub const DEFAULTS_WHY: &str = "Defaults: 10k req/s for 10 s over 10000 keys (Zipf 1.0) on 2 app instances, TTL 3 s, loads of 10 ms on 16 connections per instance, starting from the steady state. Chosen so that every strategy shows its mechanism: the 10 hottest keys expire at least twice in the window (cache-aside herds of ~10 on the hottest), the pools stay under ~50% busy (nothing queues or is shed), XFetch recomputes early, mutex waiters contend, single-flight followers wait and SWR serves stale. A TTL longer than the run, or a cold start into a small pool, measures something else: the run says so (diagnoses).";

#[derive(Debug, Args)]
#[command(after_long_help = DEFAULTS_WHY)]
pub struct RunCmd {
    #[command(flatten)]
    pub setup: RunSetup,

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

#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputFlags {
    /// Write the full results (JSON, versioned schema) to FILE.
    ///
    /// With --repeat, FILE is a directory that gets <strategy>/trial-N.json and summary.json,
    /// as compare writes.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Write a self-contained HTML report to FILE at the end.
    ///
    /// The report holds the timelines as inline SVG and opens offline.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// No progress bar and no summary table; errors are still printed.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The app under test (`--target`): command line only, not scenario files (an app's command
/// and headers belong to the machine that runs it, not to the workload).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "App under test")]
// Every flag of the app under test needs the app: `--target` (which is one of them).
#[group(requires = "target")]
pub struct TargetFlags {
    /// Drive this HTTP endpoint instead of the built-in app.
    ///
    /// Each request is a GET of this URL with {key} replaced by the Zipf-drawn item id, e.g.
    /// 'http://127.0.0.1:8080/items/{key}'. Open loop (--rps, latency from the scheduled time)
    /// or closed loop (--clients), on a keep-alive connection pool. The start is cold (stampede
    /// cannot warm an app's cache); DB calls, herds and hit rates come from the servers
    /// (docs/app.md).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,

    /// Deadline of one request to the target [default: 5s]
    ///
    /// Connecting included; a request past it is counted in http.timeouts.
    #[arg(long, value_name = "DURATION")]
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
    #[arg(hide_short_help = true, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub http_conns: Option<u32>,

    /// A header sent with every request, 'Name: value' (repeatable).
    ///
    /// Repeat it for several (e.g. for auth). Values are not written to the results.
    #[arg(long, value_name = "'NAME: VALUE'")]
    pub header: Vec<String>,

    /// The statuses that count as success [default: any 2xx]
    ///
    /// Comma-separated or repeated. Other statuses are errors, counted by class in
    /// http.status.
    #[arg(hide_short_help = true, long, value_name = "CODE", value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(100..=599))]
    pub expect_status: Vec<u16>,

    /// A regex the response body must match to count as success.
    ///
    /// A regular expression the response body must match for the request to count as success
    /// (so a 200 with the wrong body is an error).
    #[arg(hide_short_help = true, long, value_name = "REGEX")]
    pub expect_body: Option<String>,

    /// Start the app under test with this shell command.
    ///
    /// It runs in its own process group, stopped at the end, on failures and on Ctrl-C. Its
    /// environment has REDIS_URL, DATABASE_URL (a role of its own on a managed Postgres),
    /// DB_SCHEMA (the seeded items table and the stampede_load(id) function), CACHE_PREFIX,
    /// CACHE_TTL_MS (--ttl), DB_POOL (--db-pool), INSTANCE and PORT (a free port, also put
    /// for {port} in --target and --app-ready). One process per --instances, each with its
    /// own INSTANCE (0 to N-1) and PORT; the requests are spread over them.
    #[arg(long, value_name = "CMD")]
    pub app_cmd: Option<String>,

    /// With --app-cmd: URL that is 2xx when up [default: port open]
    ///
    /// The URL that answers 2xx once the app is ready; by default, readiness is the target's
    /// port accepting connections.
    #[arg(hide_short_help = true, long, value_name = "URL")]
    pub app_ready: Option<String>,

    /// With --app-cmd: time allowed to get ready [default: 30s]
    ///
    /// How long the app may take to be ready before the run fails.
    #[arg(hide_short_help = true, long, value_name = "DURATION")]
    pub app_ready_timeout: Option<crate::values::Dur>,

    /// With --app-cmd: the app's output file [default: a temp file]
    ///
    /// The file the app's output goes to; by default a file in the temp dir, named in the
    /// results.
    #[arg(hide_short_help = true, long, value_name = "FILE")]
    pub app_log: Option<PathBuf>,

    /// For an app that is already running: the schema it reads.
    ///
    /// With no --app-cmd, servers given with --redis-url and --pg-url: stampede creates the
    /// schema, seeds the items table and the stampede_load(id) function in it, and drops it at
    /// the end.
    #[arg(hide_short_help = true, long, value_name = "NAME")]
    pub schema: Option<String>,

    /// Regex of the app's DB calls [default: by role, else by schema]
    ///
    /// Which statements of pg_stat_statements are the app's DB calls (a Postgres regular
    /// expression on the statement text). Default: every statement of the app's own role on a
    /// managed Postgres, else every statement naming the run's schema.
    #[arg(hide_short_help = true, long, value_name = "REGEX")]
    pub db_match: Option<String>,
}

#[derive(Debug, Args)]
pub struct PrepareCmd {
    #[command(flatten)]
    pub setup: RunSetup,

    #[command(flatten)]
    pub shard: ShardFlags,
}

/// What `run` and `prepare` resolve: the strategy, a scenario file and the run settings.
#[derive(Debug, Args, Clone)]
pub struct RunSetup {
    /// The strategy, e.g. mutex or swr+lease [default: cache-aside]
    ///
    /// A preset (cache-aside, mutex, single-flight, xfetch, swr, jitter), lease, or a
    /// combination with `+` of at most one of cache-aside|xfetch|swr (expire is another name
    /// for cache-aside; xfetch+swr is both: early recompute before the soft expiry, stale
    /// after it) with mutex, single-flight and/or jitter, or with lease (and jitter), such as
    /// swr+mutex or swr+lease. no-cache (alone) loads every request, the baseline
    /// of the break-even hit rate. A library preset (alone) reproduces a caching library's
    /// semantics: laravel-flexible, rails-race-ttl, symfony, caffeine-refresh, spring-sync,
    /// fusion, bentocache, dogpile (docs/strategies.md).
    #[arg(long, short = 's', value_name = "NAME", help_heading = "Strategy")]
    pub strategy: Option<String>,

    /// Scenario file (TOML) setting any run flag; flags given here win.
    ///
    /// Its keys are the run flags with `_` for `-`.
    #[arg(long, value_name = "FILE", help_heading = "Scenario file")]
    pub scenario: Option<PathBuf>,

    #[command(flatten)]
    pub flags: RunFlags,
}

impl RunSetup {
    /// The run flags with the strategy given on the command line.
    pub fn flags(&self) -> RunFlags {
        let mut flags = self.flags.clone();
        flags.cache.strategy = self.strategy.clone();
        flags
    }
}

/// Splitting one experiment over several processes or machines (docs/shards.md).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Shards and live metrics")]
pub struct ShardFlags {
    /// Run shard I of N of this experiment (I counts from 0).
    ///
    /// Open-loop request j of the one unsharded schedule is shard j mod N's, with the key the
    /// unsharded key stream gives it; closed-loop client c and app instance k are shard c mod
    /// N's and k mod N's. Needs --redis-url and --pg-url (servers every shard reaches). Shard 0
    /// seeds, warms and writes the start instant into Redis (unless `stampede prepare` did),
    /// the others wait for it; all start at that instant.
    #[arg(long, value_name = "I/N", value_parser = crate::shard::ShardSpec::parse, conflicts_with = "shards")]
    pub shard: Option<crate::shard::ShardSpec>,

    /// Run shard $JOB_COMPLETION_INDEX of N (a Kubernetes Indexed Job).
    ///
    /// The shard index is read from $JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it;
    /// otherwise as --shard.
    #[arg(hide_short_help = true, long, value_name = "N")]
    pub shards: Option<u32>,

    /// The run's name, the same in all its shards [default: derived]
    ///
    /// Names the run every shard of it joins (its Redis keys and Postgres schema); every shard
    /// of one run gives the same, two runs at once on the same servers differ [default: derived
    /// from the scenario and the shard count]
    #[arg(hide_short_help = true, long, value_name = "ID")]
    pub run_id: Option<String>,

    /// When all shards start [default: --start-delay after the setup]
    ///
    /// When every shard starts its traffic (warm-up, then the measured window), as RFC 3339
    /// (2026-12-01T03:00:00Z) or Unix seconds; by default shard 0 (or `prepare`) fixes it at
    /// --start-delay after its setup.
    #[arg(hide_short_help = true, long, value_name = "TIME", value_parser = crate::shard::parse_start_at)]
    pub start_at: Option<u64>,

    /// From the end of the setup to the start instant [default: 5s]
    ///
    /// Time from the end of the setup to the start instant it writes: every shard must have
    /// connected by then (a shard that is not ready in time exits 3).
    #[arg(hide_short_help = true, long, value_name = "DURATION")]
    pub start_delay: Option<crate::values::Dur>,

    /// How long a shard waits for the start signal [default: 60s]
    ///
    /// A shard that has waited this long for the start signal gives up with exit 3.
    #[arg(hide_short_help = true, long, value_name = "DURATION")]
    pub start_timeout: Option<crate::values::Dur>,

    /// How long shard 0 waits at the end for the others [default: 60s]
    ///
    /// How long shard 0 waits at the end for the other shards to finish before it reads the
    /// server counters and removes the run's schema and keys.
    #[arg(hide_short_help = true, long, value_name = "DURATION")]
    pub end_timeout: Option<crate::values::Dur>,
}

/// Live metrics for Prometheus (docs/shards.md#live-metrics).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Shards and live metrics")]
pub struct MetricsFlags {
    /// Serve Prometheus/OpenMetrics text at http://ADDR/metrics.
    ///
    /// Served while the run goes; ADDR is e.g. 0.0.0.0:9464. Served: stampede_requests_total{outcome},
    /// stampede_db_calls_total, stampede_shed_total, stampede_redis_errors_total and the
    /// histogram stampede_request_duration_seconds, labelled with strategy and shard, counting
    /// the measured window only.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Serve the final values this long after the run [default: 0s]
    ///
    /// Keep serving the final values this long after the run, so the last scrape sees them.
    #[arg(hide_short_help = true, long, value_name = "DURATION")]
    pub metrics_linger: Option<crate::values::Dur>,
}

/// Repeated trials: medians with intervals instead of one draw of the noise.
#[derive(Debug, Args, Clone, Copy)]
#[command(next_help_heading = "Trials")]
pub struct TrialFlags {
    /// Run every strategy N times, interleaved, each on a fresh cache.
    ///
    /// Trials are interleaved (A B C, C B A, …) so the machine's drift hits them alike, each
    /// trial on a fresh cache and fresh counters; from 5 trials figures get 95% intervals and
    /// ties are tested.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Give every trial the same seed.
    ///
    /// By default trial k, counted from 1, uses seed + k - 1, so each draws other keys.
    #[arg(hide_short_help = true, long)]
    pub same_seed: bool,
}
