//! The flags of `stampede audit` (docs/audit.md): the app under test as for `run --target`,
//! the servers, which checks run, and each check's inputs and thresholds. Command line only,
//! like `--target`'s flags: an audit describes one app on one machine, not a workload.

use std::path::PathBuf;

use clap::Args;

use super::TargetFlags;
use crate::values::Dur;

#[derive(Debug, Args)]
pub struct AuditCmd {
    #[command(flatten)]
    pub target: TargetFlags,

    /// The app's Redis [default: a managed one]
    ///
    /// Without it stampede starts a Redis of the audit's own (the app's alone: the ttl check
    /// scans all of it, the outage check kills and pauses it).
    #[arg(long, value_name = "URL", help_heading = "Servers")]
    pub redis_url: Option<String>,

    /// The app's Postgres [default: a managed one]
    ///
    /// Without it stampede starts a Postgres of the audit's own and gives the app a role of its
    /// own, so its statements are told from the tool's.
    #[arg(long, value_name = "URL", help_heading = "Servers")]
    pub pg_url: Option<String>,

    /// Let the outage check shut down the external Redis (SHUTDOWN NOSAVE)
    ///
    /// The server stops without saving: every client's data not yet persisted is lost, not
    /// only the app's. Needs --redis-restart-cmd to start it again; without both, the outage
    /// check is skipped on an external Redis.
    #[arg(long, help_heading = "Servers")]
    pub allow_kill_external: bool,

    /// The command that starts the external Redis again (sh -c)
    ///
    /// Run after the outage check's kill, once the outage has lasted --outage; the audit then
    /// waits up to 30 s for Redis to answer PING.
    #[arg(long, value_name = "CMD", help_heading = "Servers")]
    pub redis_restart_cmd: Option<String>,

    /// On an external Redis: the app's key prefix [default: CACHE_PREFIX]
    ///
    /// The ttl check scans only keys starting with it and fresh caches remove only those; on
    /// the managed Redis every key is the app's.
    #[arg(long, value_name = "PREFIX", help_heading = "Servers")]
    pub cache_prefix: Option<String>,

    /// Cost of one load through stampede_load(id) [default: 20ms]
    ///
    /// The seeded function sleeps this long inside Postgres, so that concurrent misses of one
    /// key overlap (herd) and the cache has something to save (break-even).
    #[arg(long, value_name = "DURATION", help_heading = "Servers")]
    pub db_cost: Option<Dur>,

    /// The TTL the app is told in CACHE_TTL_MS [default: 30s]
    ///
    /// Long enough that nothing the audit wrote expires while a later check reads it.
    #[arg(long, value_name = "DURATION", help_heading = "Servers")]
    pub ttl: Option<Dur>,

    /// Run only these checks, comma-separated.
    ///
    /// Of ttl, users, read-your-write, outage, herd, break-even and commands.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Checks"
    )]
    pub only: Vec<String>,

    /// Leave these checks out, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Checks"
    )]
    pub skip: Vec<String>,

    /// A SKIP of these checks is a failure, comma-separated.
    ///
    /// By default a check that cannot run here (no --update, no --no-cache-variant, an
    /// external Redis for the outage) is SKIP and does not fail the audit.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Checks"
    )]
    pub require: Vec<String>,

    /// How many keys the load phase asks for [default: 200]
    #[arg(long, value_name = "N", help_heading = "ttl")]
    pub keys: Option<u64>,

    /// The URL of the personalised route [default: --target]
    ///
    /// With {key} (and {port} under --app-cmd), as --target.
    #[arg(long, value_name = "URL", help_heading = "users")]
    pub users_target: Option<String>,

    /// The header that carries the user's identity.
    ///
    /// Without it (or --user-cookie) the users check is SKIP.
    #[arg(long, value_name = "NAME", help_heading = "users")]
    pub user_header: Option<String>,

    /// The cookie that carries the user's identity.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with = "user_header",
        help_heading = "users"
    )]
    pub user_cookie: Option<String>,

    /// The first identity [default: alice]
    #[arg(long, value_name = "VALUE", help_heading = "users")]
    pub user_a: Option<String>,

    /// The second identity [default: bob]
    #[arg(long, value_name = "VALUE", help_heading = "users")]
    pub user_b: Option<String>,

    /// How a user shows in an answer, with {user} [default: the identity]
    ///
    /// A regular expression with {user} for the identity, used when the answers are volatile (timestamps, request ids):
    /// then B's answer leaks A's data when it matches with A's identity and not with B's.
    #[arg(long, value_name = "REGEX", help_heading = "users")]
    pub user_marker: Option<String>,

    /// The update request, e.g. 'PUT /items/{key}'.
    ///
    /// 'METHOD PATH' with {key}; the path is joined to --target's origin. Without it the check
    /// is SKIP.
    #[arg(long, value_name = "'METHOD PATH'", help_heading = "read-your-write")]
    pub update: Option<String>,

    /// The update's body: {key}, {value}, {num} [default: {value}]
    ///
    /// {value} is a token unique to each update (e.g. rw3x1a2b3c4d); {num} a decimal integer
    /// unique to each update (ten digits), for an app whose update takes a number, e.g.
    /// '{"price": {num}}'. ({n} in --target's key patterns is something else: a run of digits.)
    #[arg(long, value_name = "TEMPLATE", help_heading = "read-your-write")]
    pub update_body: Option<String>,

    /// What a read shows after the update [default: {value}]
    ///
    /// With {key}, {value} and {num}, as in --update-body; a read whose body contains it has
    /// the new value (e.g. '"price":{num}' or just {num}).
    #[arg(long, value_name = "TEMPLATE", help_heading = "read-your-write")]
    pub expect: Option<String>,

    /// Keys updated in turn, then raced [default: 10]
    #[arg(long, value_name = "N", help_heading = "read-your-write")]
    pub rounds: Option<u32>,

    /// Most stale reads after an update, a share [default: 0]
    ///
    /// Of the reads that started after an update completed, the share that returned the old
    /// value; above it the check fails.
    #[arg(long, value_name = "SHARE", help_heading = "read-your-write")]
    pub stale_after_update_max: Option<f64>,

    /// How long Redis is killed, then paused [default: 3s]
    #[arg(long, value_name = "DURATION", help_heading = "outage")]
    pub outage: Option<Dur>,

    /// Longest answer allowed during a fault [default: 1s]
    #[arg(long, value_name = "DURATION", help_heading = "outage")]
    pub deadline: Option<Dur>,

    /// How soon hits resume once Redis is back [default: 5s]
    #[arg(long, value_name = "DURATION", help_heading = "outage")]
    pub recover_within: Option<Dur>,

    /// Requests sent at once on one cold key [default: 100]
    #[arg(long, value_name = "N", help_heading = "herd")]
    pub concurrency: Option<u32>,

    /// How many processes the app runs [default: 1]
    ///
    /// An app coordinated per process loads a key once per process.
    #[arg(long, value_name = "N", help_heading = "herd")]
    pub app_processes: Option<u32>,

    /// Most loads of one key allowed [default: --app-processes]
    #[arg(long, value_name = "N", help_heading = "herd")]
    pub herd_max: Option<u32>,

    /// The app's switch to bypass its cache, ENV=VALUE.
    ///
    /// The app is started again with it for the same workload without the cache; without it
    /// the check is SKIP.
    #[arg(long, value_name = "ENV=VALUE", help_heading = "break-even")]
    pub no_cache_variant: Option<String>,

    /// Requests of each workload [default: 400]
    #[arg(long, value_name = "N", help_heading = "break-even")]
    pub requests: Option<u32>,

    /// Write audit.json, audit.md and each check's raw results to DIR.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub out: Option<PathBuf>,

    /// No status lines; the report card is still printed.
    #[arg(long, short, help_heading = "Output")]
    pub quiet: bool,
}
