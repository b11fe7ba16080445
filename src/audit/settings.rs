//! The audit's settings, resolved from its flags and checked: every default in one place, and
//! every refusal naming the flag.

use std::time::Duration;

use crate::app::{self, TargetSpec};
use crate::cli::AuditCmd;
use crate::error::UsageError;

use super::CHECKS;

/// Everything an audit was told, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub target: TargetSpec,
    pub redis_url: Option<String>,
    pub pg_url: Option<String>,
    pub managed_redis: bool,
    pub cache_prefix: Option<String>,
    /// The outage check may shut down the external Redis and start it with this command
    /// (`--allow-kill-external` and `--redis-restart-cmd`); None: only a managed one.
    pub redis_restart_cmd: Option<String>,
    pub db_cost: Duration,
    pub ttl: Duration,
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub require: Vec<String>,
    pub keys: u64,
    pub users_target: Option<String>,
    /// The identity's carrier: ("header", NAME) or ("cookie", NAME).
    pub user_via: Option<(&'static str, String)>,
    pub user_a: String,
    pub user_b: String,
    pub user_marker: Option<String>,
    /// The update's method and path template.
    pub update: Option<(reqwest::Method, String)>,
    pub update_body: String,
    pub expect: String,
    pub rounds: u32,
    pub stale_max: f64,
    pub outage: Duration,
    pub deadline: Duration,
    pub recover_within: Duration,
    pub concurrency: u32,
    pub app_processes: u32,
    pub herd_max: u32,
    pub no_cache_variant: Option<(String, String)>,
    pub requests: u32,
}

fn names(flag: &str, list: &[String]) -> Result<Vec<String>, UsageError> {
    let mut out = Vec::new();
    for n in list.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if !CHECKS.contains(&n) {
            return Err(UsageError::new(format!(
                "{flag} {n}: no such check; the checks are {}",
                CHECKS.join(", ")
            )));
        }
        out.push(n.to_string());
    }
    Ok(out)
}

fn positive(flag: &str, d: Duration) -> Result<Duration, UsageError> {
    if d.is_zero() {
        return Err(UsageError::new(format!("{flag} must be more than 0")));
    }
    Ok(d)
}

/// The app's servers: both or neither, one Redis (no cluster), and the consent and the way
/// back a kill of an external Redis needs.
fn check_servers(cmd: &AuditCmd) -> Result<(), UsageError> {
    if cmd.redis_url.is_some() != cmd.pg_url.is_some() {
        return Err(UsageError::new(
            "give both --redis-url and --pg-url (the app's servers), or neither for managed ones",
        ));
    }
    if cmd
        .redis_url
        .as_deref()
        .is_some_and(crate::cache::is_cluster)
    {
        return Err(UsageError::new(
            "the audit reads one Redis's keys and its INFO (commandstats, errorstats): a Redis Cluster (redis+cluster://) is not supported yet; give one of your app's Redis servers, or run the audit against a single-server copy",
        ));
    }
    if (cmd.allow_kill_external || cmd.redis_restart_cmd.is_some()) && cmd.redis_url.is_none() {
        return Err(UsageError::new(
            "--allow-kill-external and --redis-restart-cmd are for an external Redis (--redis-url): the audit kills and restarts a managed one itself",
        ));
    }
    if cmd.allow_kill_external != cmd.redis_restart_cmd.is_some() {
        return Err(UsageError::new(
            "to kill an external Redis the audit needs both --allow-kill-external (it sends SHUTDOWN NOSAVE) and --redis-restart-cmd CMD (how to start it again)",
        ));
    }
    Ok(())
}

/// How the two users are told apart, with the checks of their marker and their target.
type UserVia = Option<(&'static str, String)>;

fn user_via(cmd: &AuditCmd) -> Result<UserVia, UsageError> {
    let user_via = match (&cmd.user_header, &cmd.user_cookie) {
        (Some(h), _) => {
            reqwest::header::HeaderName::from_bytes(h.as_bytes())
                .map_err(|_| UsageError::new(format!("--user-header {h}: not a header name")))?;
            Some(("header", h.clone()))
        }
        (None, Some(c)) => Some(("cookie", c.clone())),
        (None, None) => None,
    };
    if let Some(m) = &cmd.user_marker {
        if !m.contains("{user}") {
            return Err(UsageError::new(format!(
                "--user-marker {m}: put {{user}} where the identity goes"
            )));
        }
        regex::Regex::new(&m.replace("{user}", "x"))
            .map_err(|e| UsageError::new(format!("--user-marker {m}: {e}")))?;
    }
    if let Some(u) = &cmd.users_target
        && !u.contains(app::KEY_MARK)
    {
        return Err(UsageError::new(format!(
            "--users-target {}: put {{key}} where the item id goes",
            crate::redact::url(u)
        )));
    }
    Ok(user_via)
}

/// `--update 'METHOD PATH'`: the request that changes an item.
fn update(cmd: &AuditCmd) -> Result<Option<(reqwest::Method, String)>, UsageError> {
    Ok(match &cmd.update {
        None => None,
        Some(u) => {
            let (m, p) = u.trim().split_once(' ').ok_or_else(|| {
                UsageError::new(format!(
                    "--update {u}: write 'METHOD PATH', e.g. 'PUT /items/{{key}}'"
                ))
            })?;
            let method = reqwest::Method::from_bytes(m.as_bytes())
                .map_err(|_| UsageError::new(format!("--update {u}: {m} is not an HTTP method")))?;
            let p = p.trim();
            if !p.starts_with('/') || !p.contains(app::KEY_MARK) {
                return Err(UsageError::new(format!(
                    "--update {u}: the path starts with / and holds {{key}}, e.g. 'PUT /items/{{key}}'"
                )));
            }
            Some((method, p.to_string()))
        }
    })
}

/// `--no-cache-variant ENV=VALUE`: the app again without its cache, for the break-even.
fn no_cache_variant(
    cmd: &AuditCmd,
    target: &crate::app::TargetSpec,
) -> Result<Option<(String, String)>, UsageError> {
    Ok(match &cmd.no_cache_variant {
        None => None,
        Some(v) => {
            let (k, val) = v.split_once('=').ok_or_else(|| {
                UsageError::new("--no-cache-variant: write ENV=VALUE, e.g. APP_NO_CACHE=1")
            })?;
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(UsageError::new(format!(
                    "--no-cache-variant: '{k}' is not an environment variable name"
                )));
            }
            if target.app_cmd.is_none() {
                return Err(UsageError::new(
                    "--no-cache-variant starts the app again with that variable: give --app-cmd",
                ));
            }
            Some((k.to_string(), val.to_string()))
        }
    })
}

impl Settings {
    pub fn resolve(cmd: &AuditCmd) -> Result<Settings, UsageError> {
        let managed = cmd.redis_url.is_none() && cmd.pg_url.is_none();
        let only = names("--only", &cmd.only)?;
        let skip = names("--skip", &cmd.skip)?;
        let require = names("--require", &cmd.require)?;

        check_servers(cmd)?;
        if cmd.target.target.is_none() {
            return Err(UsageError::new(
                "audit needs --target URL, e.g. --target 'http://127.0.0.1:{port}/items/{key}' --app-cmd CMD",
            ));
        }
        let target = crate::scenario::target::resolve(&cmd.target, managed)?
            .ok_or_else(|| UsageError::new("audit needs --target URL"))?;
        let user_via = user_via(cmd)?;
        let update = update(cmd)?;
        let stale_max = cmd.stale_after_update_max.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&stale_max) {
            return Err(UsageError::new(format!(
                "--stale-after-update-max {stale_max}: a share between 0 and 1"
            )));
        }
        let no_cache_variant = no_cache_variant(cmd, &target)?;
        let app_processes = cmd.app_processes.unwrap_or(1);
        let count = |flag: &str, v: Option<u32>, d: u32| -> Result<u32, UsageError> {
            match v.unwrap_or(d) {
                0 => Err(UsageError::new(format!("{flag} must be at least 1"))),
                n => Ok(n),
            }
        };
        let keys = cmd.keys.unwrap_or(200);
        if !(1..=100_000).contains(&keys) {
            return Err(UsageError::new("--keys: between 1 and 100000"));
        }
        let d = |v: &Option<crate::values::Dur>, default: u64| {
            v.map_or(Duration::from_millis(default), |d| d.0)
        };
        Ok(Settings {
            target,
            redis_url: cmd.redis_url.clone(),
            pg_url: cmd.pg_url.clone(),
            managed_redis: managed,
            cache_prefix: cmd.cache_prefix.clone(),
            redis_restart_cmd: cmd
                .allow_kill_external
                .then(|| cmd.redis_restart_cmd.clone())
                .flatten(),
            db_cost: d(&cmd.db_cost, 20),
            ttl: positive("--ttl", d(&cmd.ttl, 30_000))?,
            only,
            skip,
            require,
            keys,
            users_target: cmd.users_target.clone(),
            user_via,
            user_a: cmd.user_a.clone().unwrap_or_else(|| "alice".into()),
            user_b: cmd.user_b.clone().unwrap_or_else(|| "bob".into()),
            user_marker: cmd.user_marker.clone(),
            update,
            update_body: cmd.update_body.clone().unwrap_or_else(|| "{value}".into()),
            expect: cmd.expect.clone().unwrap_or_else(|| "{value}".into()),
            rounds: count("--rounds", cmd.rounds, 10)?,
            stale_max,
            outage: positive("--outage", d(&cmd.outage, 3_000))?,
            deadline: positive("--deadline", d(&cmd.deadline, 1_000))?,
            recover_within: positive("--recover-within", d(&cmd.recover_within, 5_000))?,
            concurrency: count("--concurrency", cmd.concurrency, 100)?,
            app_processes: count("--app-processes", Some(app_processes), 1)?,
            herd_max: count("--herd-max", cmd.herd_max, app_processes)?,
            no_cache_variant,
            requests: count("--requests", cmd.requests, 400)?,
        })
    }

    /// Whether `--only`/`--skip` select this check.
    pub fn selected(&self, name: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|n| n == name))
            && !self.skip.iter().any(|n| n == name)
    }

    /// The inputs and thresholds in force, by flag, for the card.
    pub fn shown(&self) -> Vec<(String, String)> {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        vec![
            ("--keys".into(), self.keys.to_string()),
            ("--ttl".into(), d(self.ttl)),
            ("--db-cost".into(), d(self.db_cost)),
            (
                "--stale-after-update-max".into(),
                self.stale_max.to_string(),
            ),
            ("--rounds".into(), self.rounds.to_string()),
            ("--outage".into(), d(self.outage)),
            ("--deadline".into(), d(self.deadline)),
            ("--recover-within".into(), d(self.recover_within)),
            ("--concurrency".into(), self.concurrency.to_string()),
            ("--herd-max".into(), self.herd_max.to_string()),
            ("--requests".into(), self.requests.to_string()),
        ]
    }

    /// Items the audit seeds: the load phase's keys, then room for the other checks' own
    /// cold keys (each check draws from a range of its own, so none finds another's entries).
    pub fn seeded_keys(&self) -> u64 {
        self.keys + u64::from(self.rounds) * 2 + 200
    }

    /// First key of a check's own range.
    pub fn key_base(&self, check: &str) -> u64 {
        let k = self.keys;
        match check {
            "users" => k + 1,
            "herd" => k + 10,
            "outage" => k + 20,
            "break-even" => k + 40,
            _ => k + 100, // read-your-write: 2 × --rounds keys from here
        }
    }
}
