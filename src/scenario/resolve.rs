//! Turns a scenario file plus command-line flags into one validated [`Scenario`]: flags win
//! over the file, the file over the defaults, and every check that can fail before a server
//! starts fails here, naming the file, the key and what is allowed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::servers::{own_load, tls_settings};
use super::{
    Client, FailSafe, LoadShape, MAX_DB_CONNECTIONS, RecoveryCriteria, Rewarm, Scenario, WriteLoad,
};

/// Most keys a run may seed: each is a Postgres row and a cache entry.
const MAX_KEYS: u64 = 50_000_000;
/// Most payload a run may seed (keys × value size): it is stored twice, in Postgres and Redis.
const MAX_DATA_BYTES: u64 = 8 << 30;
use crate::cli::RunFlags;
use crate::error::UsageError;
use crate::fault::{self as schedule, FaultKind, FaultSpec};
use crate::l1::L1Spec;
use crate::origin::DbQuery;
use crate::protect::BreakerSpec;
use crate::protect::rate::RateSpec;
use crate::redact;
use crate::strategy::StrategySpec;
use crate::strategy::invalidate::Invalidate;
use crate::strategy::lock::LockTimeoutPolicy;
use crate::values::{Dur, Percent, Rate};
use crate::workload::{Arrival, Start};

/// `--db-timeout` when a kill-postgres fault is scheduled and none is given: long enough for
/// a healthy 10 ms load on a busy machine, short enough that a request held up by the crash
/// ends within a few seconds (`docs/faults.md`).
pub const PG_FAULT_DB_TIMEOUT: Dur = Dur(Duration::from_secs(1));

/// Where a setting came from, so an error can say which flag or which key of which file.
enum Src<'a> {
    /// The command line, with each fault's name as it was written there (`--fault …` or the
    /// shorthand flags), in the order of the flags' fault list.
    Flags(&'a [String]),
    File(&'a Path),
}

impl Src<'_> {
    fn name(&self, key: &str) -> String {
        match self {
            Src::Flags(_) => format!("--{}", key.replace('_', "-")),
            Src::File(p) => format!("`{key}` in {}", p.display()),
        }
    }
}

/// Read and parse a scenario file; a missing file, a TOML syntax error (with its line) and an
/// unknown key are usage errors naming the file.
pub fn read_file(path: &Path) -> Result<RunFlags, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError::new(format!("cannot read scenario file {}: {e}", path.display()))
    })?;
    toml::from_str(&text).map_err(|e| {
        UsageError::new(format!(
            "scenario file {}: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

fn merge(flags: RunFlags, file: RunFlags) -> RunFlags {
    macro_rules! pick {
        ($($f:ident),* $(,)?) => { RunFlags {
            $($f: flags.$f.or(file.$f),)*
            // Faults given on the command line replace the file's list as a whole.
            fault: if flags.fault.is_empty() && !flags.no_shocks { file.fault } else { flags.fault },
            no_shocks: flags.no_shocks,
            fault_keys: flags.fault_keys,
            kill_redis_at: Vec::new(),
            redis_down_for: Vec::new(),
            kill_postgres_at: Vec::new(),
            postgres_down_for: Vec::new(),
            pause_redis_at: Vec::new(),
            pause_for: Vec::new(),
            drop_cache_at: Vec::new(),
            slow_db_at: Vec::new(),
            slow_db_for: Vec::new(),
            spike_at: Vec::new(),
            spike_for: Vec::new(),
            failover_at: Vec::new(),
            migrate_slot_at: Vec::new(),
            drop_fraction: flags.drop_fraction,
            drop_order: flags.drop_order,
            slow_db_factor: flags.slow_db_factor,
            spike_factor: flags.spike_factor,
            allow_pause_external: flags.allow_pause_external || file.allow_pause_external,
            allow_kill_external: flags.allow_kill_external || file.allow_kill_external,
            threshold: flags.threshold,
        } };
    }
    let mut m = pick!(
        strategy,
        trace,
        workload_from,
        trace_format,
        trace_columns,
        trace_ops,
        speed,
        trace_spread,
        trace_skip,
        rps,
        clients,
        arrival,
        duration,
        warmup,
        keys,
        zipf,
        seed,
        value_size,
        value_size_dist,
        maxmemory,
        maxmemory_policy,
        maxmemory_samples,
        ttl,
        db_cost,
        db_pool,
        db_timeout,
        instances,
        redis_conns,
        max_inflight,
        backlog,
        start,
        warm,
        redis_url,
        pg_url,
        redis_timeout,
        tls,
        redis_ca,
        redis_cert,
        redis_key,
        redis_insecure,
        db_sql,
        keys_sql,
        keys_file,
        interval,
        beta,
        stale,
        lock_ttl,
        lock_poll,
        lock_wait,
        lock_timeout_policy,
        jitter,
        missing_ratio,
        negative_ttl,
        request_timeout,
        retries,
        retry_backoff,
        retry_jitter,
        goodput_within,
        baseline_window,
        recovery_goodput,
        recovery_hit_points,
        settle,
        observe,
        db_query,
        db_limit,
        breaker,
        breaker_error_rate,
        breaker_latency,
        breaker_window,
        breaker_cooldown,
        breaker_probes,
        breaker_min_loads,
        db_rate,
        db_burst,
        db_rate_scope,
        rewarm_every,
        rewarm_top,
        l1,
        l1_ttl,
        l1_invalidate,
        fail_safe,
        fail_safe_throttle,
        soft_timeout,
        eager_refresh,
        redis_restart_cmd,
        pg_kill_cmd,
        pg_restart_cmd,
        thresholds,
        write_rps,
        write_zipf,
        invalidate,
        lease_ttl,
        redis_cluster,
        read_from_replicas,
        redis_node,
        slot,
    );
    // A payload size given on the command line replaces the file's, whichever form it takes.
    if flags.value_size.is_some() {
        m.value_size_dist = None;
    } else if flags.value_size_dist.is_some() {
        m.value_size = None;
    }
    // A load shape given on the command line replaces the file's, whichever kind it is.
    if flags.rps.is_some() {
        m.clients = None;
    } else if flags.clients.is_some() {
        m.rps = None;
    }
    m
}

fn positive_dur(v: Option<Dur>, src: &Src, key: &str) -> Result<(), UsageError> {
    match v {
        Some(d) if d.0.is_zero() => Err(UsageError::new(format!(
            "{} must be longer than 0",
            src.name(key)
        ))),
        _ => Ok(()),
    }
}

fn at_most<T: PartialOrd + Copy + std::fmt::Display>(
    v: Option<T>,
    max: T,
    src: &Src,
    key: &str,
    why: &str,
) -> Result<(), UsageError> {
    match v {
        Some(x) if x > max => Err(UsageError::new(format!(
            "{} must be at most {max} (got {x}): {why}",
            src.name(key)
        ))),
        _ => Ok(()),
    }
}

fn at_least<T: PartialOrd + Copy + std::fmt::Display>(
    v: Option<T>,
    min: T,
    src: &Src,
    key: &str,
) -> Result<(), UsageError> {
    match v {
        Some(x) if x < min => Err(UsageError::new(format!(
            "{} must be at least {min} (got {x})",
            src.name(key)
        ))),
        _ => Ok(()),
    }
}

/// Checks that need only one source's values.
fn check(f: &RunFlags, src: &Src) -> Result<(), UsageError> {
    if let Some(s) = &f.strategy {
        StrategySpec::parse(s)
            .map_err(|e| UsageError::new(format!("{}: {e}", src.name("strategy"))))?;
    }
    if let Some(Rate(r)) = f.rps
        && r <= 0.0
    {
        return Err(UsageError::new(format!(
            "{} must be more than 0 requests per second (got {r})",
            src.name("rps")
        )));
    }
    if matches!(src, Src::File(_)) && f.rps.is_some() && f.clients.is_some() {
        return Err(UsageError::new(format!(
            "{} and {} both set: choose open loop (rps) or closed loop (clients)",
            src.name("rps"),
            src.name("clients")
        )));
    }
    at_least(f.clients, 1, src, "clients")?;
    at_most(
        f.clients,
        100_000,
        src,
        "clients",
        "each client is a task with its own key stream; use the open loop (--rps) for more load",
    )?;
    positive_dur(f.duration, src, "duration")?;
    at_least(f.keys, 1, src, "keys")?;
    at_most(
        f.keys,
        MAX_KEYS,
        src,
        "keys",
        "every key is a row seeded into Postgres and a cache entry",
    )?;
    if let Some(z) = f.zipf
        && !(z > 0.0 && z.is_finite())
    {
        return Err(UsageError::new(format!(
            "{} must be a number above 0 (got {z})",
            src.name("zipf")
        )));
    }
    at_least(f.value_size, 1, src, "value_size")?;
    if let Some(v) = f.value_size
        && v > 16 * 1024 * 1024
    {
        return Err(UsageError::new(format!(
            "{} must be at most 16 MiB (got {v})",
            src.name("value_size")
        )));
    }
    positive_dur(f.ttl, src, "ttl")?;
    at_least(f.db_pool, 1, src, "db_pool")?;
    at_most(
        f.db_pool,
        MAX_DB_CONNECTIONS,
        src,
        "db_pool",
        "every connection is a Postgres backend process",
    )?;
    positive_dur(f.db_timeout, src, "db_timeout")?;
    at_least(f.instances, 1, src, "instances")?;
    if let Some(n) = f.instances
        && n > 256
    {
        return Err(UsageError::new(format!(
            "{} must be at most 256 (got {n})",
            src.name("instances")
        )));
    }
    at_least(f.redis_conns, 1, src, "redis_conns")?;
    at_most(
        f.redis_conns,
        64,
        src,
        "redis_conns",
        "each connection is multiplexed; more only cost CPU",
    )?;
    at_least(f.max_inflight, 1, src, "max_inflight")?;
    at_most(
        f.max_inflight,
        1_000_000,
        src,
        "max_inflight",
        "requests held in memory at once per instance",
    )?;
    at_most(
        f.backlog,
        1_000_000,
        src,
        "backlog",
        "requests held in memory at once per instance",
    )?;
    positive_dur(f.redis_timeout, src, "redis_timeout")?;
    if let Some(d) = f.interval
        && d.0 < Duration::from_millis(10)
    {
        return Err(UsageError::new(format!(
            "{} must be at least 10ms (got {d})",
            src.name("interval")
        )));
    }
    if let Some(b) = f.beta
        && !(b >= 0.0 && b.is_finite())
    {
        return Err(UsageError::new(format!(
            "{} must be 0 or more (got {b})",
            src.name("beta")
        )));
    }
    positive_dur(f.lock_ttl, src, "lock_ttl")?;
    positive_dur(f.lease_ttl, src, "lease_ttl")?;
    check_writes(f, src)?;
    positive_dur(f.lock_poll, src, "lock_poll")?;
    positive_dur(f.negative_ttl, src, "negative_ttl")?;
    at_least(f.db_limit, 1, src, "db_limit")?;
    at_most(
        f.db_limit,
        100_000,
        src,
        "db_limit",
        "loads in flight at once per instance",
    )?;
    if let Some(p) = f.breaker_error_rate
        && p.0 <= 0.0
    {
        return Err(UsageError::new(format!(
            "{} must be above 0% (at 0% any load would open the breaker)",
            src.name("breaker_error_rate")
        )));
    }
    positive_dur(f.breaker_latency, src, "breaker_latency")?;
    positive_dur(f.breaker_window, src, "breaker_window")?;
    positive_dur(f.breaker_cooldown, src, "breaker_cooldown")?;
    at_least(f.breaker_probes, 1, src, "breaker_probes")?;
    at_most(
        f.breaker_probes,
        10_000,
        src,
        "breaker_probes",
        "loads let through at once while half-open",
    )?;
    at_least(f.breaker_min_loads, 1, src, "breaker_min_loads")?;
    // Not finite (NaN included) is refused when the rate is parsed.
    if let Some(Rate(r)) = f.db_rate
        && r <= 0.0
    {
        return Err(UsageError::new(format!(
            "{} must be more than 0 loads per second (got {r})",
            src.name("db_rate")
        )));
    }
    at_least(f.db_burst, 1, src, "db_burst")?;
    at_most(
        f.db_burst,
        1_000_000,
        src,
        "db_burst",
        "loads let through at once",
    )?;
    positive_dur(f.rewarm_every, src, "rewarm_every")?;
    positive_dur(f.fail_safe, src, "fail_safe")?;
    positive_dur(f.fail_safe_throttle, src, "fail_safe_throttle")?;
    positive_dur(f.soft_timeout, src, "soft_timeout")?;
    if let Some(Percent(p)) = f.eager_refresh
        && !(p > 0.0 && p < 1.0)
    {
        return Err(UsageError::new(format!(
            "{} must be between 0% and 100% of the TTL, both excluded (got {}): at 0% every read refreshes, at 100% the entry has expired",
            src.name("eager_refresh"),
            Percent(p)
        )));
    }
    at_least(f.rewarm_top, 1, src, "rewarm_top")?;
    at_least(f.l1, 1, src, "l1")?;
    at_most(f.l1, 100_000_000, src, "l1", "entries per instance")?;
    positive_dur(f.l1_ttl, src, "l1_ttl")?;
    for (i, fault) in f.fault.iter().enumerate() {
        check_shock(fault, &fault_name(src, i, fault))?;
        if fault.down_for.0.is_zero() && !fault.kind.is_instant() {
            return Err(UsageError::new(format!(
                "{}: down_for must be longer than 0",
                fault_name(src, i, fault)
            )));
        }
    }
    for (key, cmd, what) in [
        (
            "redis_restart_cmd",
            &f.redis_restart_cmd,
            "starts your Redis again",
        ),
        ("pg_kill_cmd", &f.pg_kill_cmd, "crashes your Postgres"),
        (
            "pg_restart_cmd",
            &f.pg_restart_cmd,
            "starts your Postgres again",
        ),
    ] {
        if let Some(c) = cmd
            && c.trim().is_empty()
        {
            return Err(UsageError::new(format!(
                "{} is empty: give the shell command that {what}",
                src.name(key)
            )));
        }
    }
    for (key, url, schemes) in [
        (
            "redis_url",
            &f.redis_url,
            &[
                "redis://",
                "rediss://",
                "unix://",
                "redis+cluster://",
                "rediss+cluster://",
            ][..],
        ),
        ("pg_url", &f.pg_url, &["postgres://", "postgresql://"][..]),
    ] {
        if let Some(u) = url
            && !schemes.iter().any(|s| u.starts_with(s))
        {
            return Err(UsageError::new(format!(
                "{} must start with {} (got {})",
                src.name(key),
                schemes.join(" or "),
                redact::url(u)
            )));
        }
    }
    Ok(())
}

/// The write flags' own values: a rate of 0 or more, a Zipf exponent above 0, one known
/// invalidation.
fn check_writes(f: &RunFlags, src: &Src) -> Result<(), UsageError> {
    if let Some(Rate(r)) = f.write_rps
        && !(r >= 0.0 && r.is_finite())
    {
        return Err(UsageError::new(format!(
            "{} must be 0 (no writes) or more writes per second (got {r})",
            src.name("write_rps")
        )));
    }
    if let Some(z) = f.write_zipf
        && !(z > 0.0 && z.is_finite())
    {
        return Err(UsageError::new(format!(
            "{} must be a number above 0 (got {z})",
            src.name("write_zipf")
        )));
    }
    if let Some(i) = &f.invalidate {
        invalidation(i).map_err(|e| UsageError::new(format!("{}: {e}", src.name("invalidate"))))?;
    }
    Ok(())
}

/// One invalidation by name.
pub fn invalidation(name: &str) -> Result<Invalidate, String> {
    if name.contains(',') {
        return Err(format!(
            "'{name}' names several invalidations: a run has one (compare --invalidate takes a list and runs each)"
        ));
    }
    Invalidate::parse(name).ok_or_else(|| {
        format!("unknown invalidation '{name}' (valid: delete, set, versioned, none, delete-first)")
    })
}

/// How a fault is named in an error: the flags that made it, or its table in the file.
fn fault_name(src: &Src, i: usize, f: &FaultSpec) -> String {
    match src {
        Src::Flags(names) => names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("--fault {}", schedule::spell(f))),
        Src::File(p) => format!(
            "[[fault]] #{} (kind = \"{}\") in {}",
            i + 1,
            f.kind,
            p.display()
        ),
    }
}

/// The flags' fault list: each `--fault`, then the shorthands (each kind's `at` flags paired
/// with its duration flags); with each fault's name as written, for errors.
fn faults_from_flags(flags: &mut RunFlags) -> Result<Vec<String>, UsageError> {
    let mut faults = Vec::new();
    for (kind, at, down) in [
        (
            FaultKind::KillRedis,
            &flags.kill_redis_at,
            &flags.redis_down_for,
        ),
        (
            FaultKind::KillPostgres,
            &flags.kill_postgres_at,
            &flags.postgres_down_for,
        ),
        (
            FaultKind::PauseRedis,
            &flags.pause_redis_at,
            &flags.pause_for,
        ),
    ] {
        faults.extend(schedule::pair(kind, at, down).map_err(UsageError)?);
    }
    for (kind, at, down) in [
        (FaultKind::SlowDb, &flags.slow_db_at, &flags.slow_db_for),
        (FaultKind::Spike, &flags.spike_at, &flags.spike_for),
    ] {
        faults.extend(schedule::pair(kind, at, down).map_err(UsageError)?);
    }
    // A drop, a failover and a slot migration are instant: no duration flag to pair with.
    for (kind, at) in [
        (FaultKind::Failover, &flags.failover_at),
        (FaultKind::MigrateSlot, &flags.migrate_slot_at),
    ] {
        faults.extend(
            at.iter()
                .map(|&at| FaultSpec::new(kind, at, Dur(Duration::ZERO))),
        );
    }
    faults.extend(
        flags
            .drop_cache_at
            .iter()
            .map(|&at| FaultSpec::new(FaultKind::DropCache, at, Dur(Duration::ZERO))),
    );
    let mut names: Vec<String> = flags
        .fault
        .iter()
        .map(|f| format!("--fault {}", schedule::spell(f)))
        .collect();
    names.extend(faults.iter().map(|f| {
        let (at, down) = f.kind.flags();
        if f.kind.is_instant() {
            format!("{at} {}", f.at)
        } else {
            format!("{at} {} {down} {}", f.at, f.down_for)
        }
    }));
    flags.fault.extend(faults);
    if flags.no_shocks && !flags.fault.is_empty() {
        return Err(UsageError::new(
            "--no-shocks runs without faults, and fault or shock flags ask for some: drop one or the other",
        ));
    }
    Ok(names)
}

/// A shock's own settings, wherever it was written.
fn check_shock(f: &FaultSpec, name: &str) -> Result<(), UsageError> {
    // Which keys a kind takes is the kind's own list, as on the command line.
    if let Some(key) = schedule::stray_key(f) {
        return Err(UsageError::new(format!(
            "{name}: `{key}` is not a setting of {}; {}",
            f.kind,
            schedule::keys_of(f.kind)
        )));
    }
    if f.kind == FaultKind::DropCache && !f.down_for.0.is_zero() {
        return Err(UsageError::new(format!(
            "{name}: a drop-cache is instant and has no down_for: the cache refills through the traffic"
        )));
    }
    if f.kind.needs_cluster() && !f.down_for.0.is_zero() {
        return Err(UsageError::new(format!(
            "{name}: a {} is instant and has no down_for: it is over once {}",
            f.kind,
            if f.kind == FaultKind::Failover {
                "the replica took over"
            } else {
                "the slot moved"
            }
        )));
    }
    if let Some(p) = f.fraction
        && p.0 <= 0.0
    {
        return Err(UsageError::new(format!(
            "{name}: fraction must be more than 0% (100% drops every entry)"
        )));
    }
    if let Some(k) = f.factor {
        let (lo, hi, what) = match f.kind {
            FaultKind::SlowDb => (1.0, 1000.0, "how many times its cost a load costs"),
            _ => (0.01, 100.0, "how many times the rate is offered"),
        };
        if !(lo..=hi).contains(&k) {
            return Err(UsageError::new(format!(
                "{name}: factor {k} is out of range: {what}, between {lo} and {hi}"
            )));
        }
    }
    Ok(())
}

/// The shock flags that set a setting of every shock of a kind (the file's included), and
/// the checks that need the whole scenario: a flag for a shock the run does not have, a spike
/// without a schedule, a slow-db on a load with no cost to multiply.
fn apply_shock_flags(
    m: &mut RunFlags,
    closed_loop: bool,
    sleep_cost: bool,
) -> Result<(), UsageError> {
    let has = |m: &RunFlags, kind: FaultKind| m.fault.iter().any(|f| f.kind == kind);
    for (set, flag, kind) in [
        (
            m.drop_fraction.is_some(),
            "--drop-fraction",
            FaultKind::DropCache,
        ),
        (m.drop_order.is_some(), "--drop-order", FaultKind::DropCache),
        (
            m.slow_db_factor.is_some(),
            "--slow-db-factor",
            FaultKind::SlowDb,
        ),
        (m.spike_factor.is_some(), "--spike-factor", FaultKind::Spike),
    ] {
        if set && !has(m, kind) {
            return Err(UsageError::new(format!(
                "{flag} sets every {kind} shock, and the run has none: add one (--fault {kind}@AT{}, or a [[fault]] with kind = \"{kind}\")",
                if kind.is_instant() { "" } else { "+FOR" }
            )));
        }
    }
    if let Some(k) = m.slow_db_factor.or(m.spike_factor)
        && !(0.01..=1000.0).contains(&k)
    {
        return Err(UsageError::new(format!(
            "shock factor {k} is out of range (slow-db: 1 to 1000; spike: 0.01 to 100)"
        )));
    }
    let (fraction, order, slow, spike) = (
        m.drop_fraction,
        m.drop_order,
        m.slow_db_factor,
        m.spike_factor,
    );
    for f in &mut m.fault {
        match f.kind {
            FaultKind::DropCache => {
                f.fraction = fraction.or(f.fraction);
                f.order = order.or(f.order);
            }
            FaultKind::SlowDb => f.factor = slow.or(f.factor),
            FaultKind::Spike => f.factor = spike.or(f.factor),
            _ => {}
        }
        check_shock(f, &format!("{} at {}", f.kind, f.at))?;
    }
    if closed_loop && has(m, FaultKind::Spike) {
        return Err(UsageError::new(
            "a spike multiplies the open loop's rate, and --clients runs a closed loop (no rate to multiply): use --rps, or drop the spike",
        ));
    }
    if !sleep_cost && has(m, FaultKind::SlowDb) {
        return Err(UsageError::new(
            "a slow-db shock multiplies pg_sleep's argument, and this run's loads have none (--db-query heavy, --db-sql or a sharded run): use the default --db-query sleep",
        ));
    }
    Ok(())
}

/// Faults on servers the tool did not start need what only the user can give: a way to crash
/// and restart them, or their consent to a pause that stalls every client.
fn check_external_faults(m: &RunFlags) -> Result<(), UsageError> {
    let has = |kind: FaultKind| m.fault.iter().any(|f| f.kind == kind);
    if m.redis_url.is_some() && has(FaultKind::KillRedis) {
        // SHUTDOWN NOSAVE is the one way to crash a server the tool cannot SIGKILL, and it takes
        // every tenant's unsaved data with it: consent first, then a way to bring it back.
        if !m.allow_kill_external {
            return Err(UsageError::new(format!(
                "a kill-redis fault on an external Redis (--redis-url) sends it SHUTDOWN NOSAVE: the server stops without saving, so every client's data not yet persisted is lost, not only this run's. Add --allow-kill-external (allow_kill_external = true in a scenario file) if that is what you want{}, or drop --redis-url to crash a Redis stampede starts itself",
                if m.redis_restart_cmd.is_none() {
                    ", with --redis-restart-cmd to start it again"
                } else {
                    ""
                }
            )));
        }
        if m.redis_restart_cmd.is_none() {
            return Err(UsageError::new(
                "a kill-redis fault on an external Redis (--redis-url) needs --redis-restart-cmd: stampede sends it SHUTDOWN NOSAVE at the fault and runs that shell command to start it again (it only kills and restarts by itself a Redis it started)",
            ));
        }
    }
    if m.redis_url.is_none() && m.redis_restart_cmd.is_some() {
        return Err(UsageError::new(
            "--redis-restart-cmd applies only to an external Redis (--redis-url): the managed Redis is restarted by stampede itself",
        ));
    }
    if m.redis_url.is_some() && has(FaultKind::PauseRedis) && !m.allow_pause_external {
        return Err(UsageError::new(
            "a pause-redis fault on an external Redis (--redis-url) stalls every client of that server, not only this run (CLIENT PAUSE ALL): add --allow-pause-external (allow_pause_external = true in a scenario file) if that is what you want, or drop --redis-url to pause a Redis stampede starts itself",
        ));
    }
    match &m.pg_url {
        Some(_) if has(FaultKind::KillPostgres) => {
            let missing: Vec<&str> = [
                ("--pg-kill-cmd", m.pg_kill_cmd.is_none()),
                ("--pg-restart-cmd", m.pg_restart_cmd.is_none()),
            ]
            .iter()
            .filter(|(_, missing)| *missing)
            .map(|(flag, _)| *flag)
            .collect();
            if !missing.is_empty() {
                return Err(UsageError::new(format!(
                    "a kill-postgres fault on an external Postgres (--pg-url) needs {}: stampede crashes by itself only a Postgres it started (pg_terminate_backend ends sessions, it does not crash the server), so give the shell commands that crash yours (e.g. pg_ctl stop -D DIR -m immediate) and start it again",
                    missing.join(" and ")
                )));
            }
        }
        None if m.pg_kill_cmd.is_some() || m.pg_restart_cmd.is_some() => {
            return Err(UsageError::new(
                "--pg-kill-cmd and --pg-restart-cmd apply only to an external Postgres (--pg-url): the managed Postgres is killed and restarted by stampede itself",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// The breaker's settings when `--breaker` is on; a `--breaker-*` setting without it is a
/// usage error rather than a setting that silently does nothing.
fn breaker(m: &RunFlags) -> Result<Option<BreakerSpec>, UsageError> {
    let d = BreakerSpec::DEFAULT;
    let given = [
        ("breaker_error_rate", m.breaker_error_rate.is_some()),
        ("breaker_latency", m.breaker_latency.is_some()),
        ("breaker_window", m.breaker_window.is_some()),
        ("breaker_cooldown", m.breaker_cooldown.is_some()),
        ("breaker_probes", m.breaker_probes.is_some()),
        ("breaker_min_loads", m.breaker_min_loads.is_some()),
    ];
    if m.breaker != Some(true) {
        if let Some((k, _)) = given.iter().find(|(_, set)| *set) {
            return Err(UsageError::new(format!(
                "--{} is a setting of the circuit breaker, which is off: add --breaker (scenario file: breaker = true)",
                k.replace('_', "-")
            )));
        }
        return Ok(None);
    }
    Ok(Some(BreakerSpec {
        error_rate: m.breaker_error_rate.unwrap_or(d.error_rate),
        latency: m.breaker_latency.unwrap_or(d.latency),
        window: m.breaker_window.unwrap_or(d.window),
        cooldown: m.breaker_cooldown.unwrap_or(d.cooldown),
        probes: m.breaker_probes.unwrap_or(d.probes),
        min_loads: m.breaker_min_loads.unwrap_or(d.min_loads),
    }))
}

/// The rate limit when `--db-rate` is given; `--db-burst` or `--db-rate-scope` without it is
/// a usage error rather than a setting that silently does nothing.
fn db_rate(m: &RunFlags) -> Result<Option<RateSpec>, UsageError> {
    let Some(Rate(rate)) = m.db_rate else {
        for (k, set) in [
            ("db_burst", m.db_burst.is_some()),
            ("db_rate_scope", m.db_rate_scope.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "--{} is a setting of the rate limit, which is off: add --db-rate R (scenario file: db_rate)",
                    k.replace('_', "-")
                )));
            }
        }
        return Ok(None);
    };
    Ok(Some(RateSpec {
        rate,
        burst: m.db_burst.unwrap_or_else(|| RateSpec::default_burst(rate)),
        scope: m.db_rate_scope.unwrap_or_default(),
    }))
}

/// The in-process tier when `--l1` is given (its other settings alone are refused, and so is
/// a tier in front of no cache).
fn l1(m: &RunFlags, strategy: &StrategySpec) -> Result<Option<L1Spec>, UsageError> {
    let Some(entries) = m.l1 else {
        for (k, set) in [
            ("l1_ttl", m.l1_ttl.is_some()),
            ("l1_invalidate", m.l1_invalidate.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "--{} is a setting of the in-process tier, which is off: add --l1 N (scenario file: l1)",
                    k.replace('_', "-")
                )));
            }
        }
        return Ok(None);
    };
    if !strategy.caches() {
        return Err(UsageError::new(
            "--l1 puts an in-process tier in front of the cache, and --strategy no-cache has none: drop --l1 or pick a caching strategy",
        ));
    }
    Ok(Some(L1Spec {
        entries,
        ttl: m.l1_ttl,
        invalidate: m.l1_invalidate.unwrap_or_default(),
    }))
}

/// The re-warm job when `--rewarm-every` is given (`--rewarm-top` alone is refused).
fn rewarm(m: &RunFlags, keys: u64) -> Result<Option<Rewarm>, UsageError> {
    let Some(every) = m.rewarm_every else {
        if m.rewarm_top.is_some() {
            return Err(UsageError::new(
                "--rewarm-top is a setting of the re-warm job, which is off: add --rewarm-every D (scenario file: rewarm_every)",
            ));
        }
        return Ok(None);
    };
    let top = m.rewarm_top.unwrap_or(100);
    if keys > 0 && top > keys {
        return Err(UsageError::new(format!(
            "--rewarm-top {top} is more than --keys {keys}: re-warm at most every key"
        )));
    }
    Ok(Some(Rewarm { every, top }))
}

/// The fail-safe when `--fail-safe` is given or the strategy's library preset sets one;
/// `--fail-safe-throttle` or `--soft-timeout` without it is refused (a soft timeout answers
/// with the kept value, and without the fail-safe none is kept).
fn fail_safe(
    m: &RunFlags,
    strategy: &StrategySpec,
    ttl: Dur,
) -> Result<Option<FailSafe>, UsageError> {
    let lib = strategy.library_defaults();
    let max = m
        .fail_safe
        .or_else(|| lib.and_then(|l| l.fail_safe_ttls).map(|n| Dur(ttl.0 * n)));
    let Some(max) = max else {
        for (k, set) in [
            ("fail_safe_throttle", m.fail_safe_throttle.is_some()),
            ("soft_timeout", m.soft_timeout.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "--{} is a setting of the fail-safe, which is off under --strategy {strategy}: add --fail-safe D (scenario file: fail_safe), the time entries are kept past expiry to be served when a load fails",
                    k.replace('_', "-")
                )));
            }
        }
        return Ok(None);
    };
    let throttle = m.fail_safe_throttle.unwrap_or(Dur(Duration::from_secs(
        lib.and_then(|l| l.fail_safe_throttle_s).unwrap_or(30),
    )));
    let soft_timeout = m.soft_timeout.or_else(|| {
        lib.and_then(|l| l.soft_timeout_ms)
            .map(|ms| Dur(Duration::from_millis(ms)))
    });
    Ok(Some(FailSafe {
        max,
        throttle,
        soft_timeout,
    }))
}

/// Build the run's scenario from an optional file and the command-line flags.
pub fn resolve(file: Option<&PathBuf>, flags: RunFlags) -> Result<Scenario, UsageError> {
    let (sc, unused) = resolve_one(file, flags)?;
    match unused {
        Some(u) => Err(u.error),
        None => Ok(sc),
    }
}

/// A setting given that the scenario's strategy does not use (`--lease-ttl` without the
/// lease coordination): refused rather than silently ignored.
pub struct Unused {
    /// The setting, as a flag.
    pub flag: &'static str,
    /// The error for a run of this one strategy.
    pub error: UsageError,
}

/// [`resolve`] for one strategy of a comparison: the scenario, and the setting given that this
/// strategy does not use, which `compare` refuses only when none of its strategies uses it.
pub fn resolve_one(
    file: Option<&PathBuf>,
    flags: RunFlags,
) -> Result<(Scenario, Option<Unused>), UsageError> {
    let mut unused = None;
    let sc = build(file, flags, &mut unused)?;
    Ok((
        sc,
        unused.map(|error| Unused {
            flag: "--lease-ttl",
            error,
        }),
    ))
}

fn build(
    file: Option<&PathBuf>,
    mut flags: RunFlags,
    unused: &mut Option<UsageError>,
) -> Result<Scenario, UsageError> {
    let names = faults_from_flags(&mut flags)?;
    check(&flags, &Src::Flags(&names))?;
    let from_file = match file {
        Some(p) => {
            let f = read_file(p)?;
            check(&f, &Src::File(p))?;
            f
        }
        None => RunFlags::default(),
    };
    let faults_src = match file {
        Some(p) if flags.fault.is_empty() => Src::File(p),
        _ => Src::Flags(&names),
    };
    let mut m = merge(flags, from_file);
    // A sweep axis on a fault's key lands on the merged list, whoever wrote the fault.
    for set in &m.fault_keys {
        set.apply(&mut m.fault).map_err(UsageError::new)?;
    }
    super::trace::workload_from(&mut m)?;

    let strategy = StrategySpec::parse(m.strategy.as_deref().unwrap_or("cache-aside"))
        .map_err(UsageError::new)?;
    let trace = super::trace::settings(&m)?;
    let load = match (m.rps, m.clients) {
        // The trace's own mean rate: the schedule is the trace's.
        _ if trace.is_some() => LoadShape::Open {
            rps: trace
                .as_ref()
                .map_or(0.0, |t| t.found.requests as f64 / t.found.run_s),
            arrival: Arrival::Constant,
        },
        (_, Some(c)) => LoadShape::Closed { clients: c },
        (Some(Rate(r)), None) => LoadShape::Open {
            rps: r,
            arrival: m.arrival.unwrap_or(Arrival::Constant),
        },
        (None, None) => LoadShape::Open {
            rps: 10_000.0,
            arrival: m.arrival.unwrap_or(Arrival::Constant),
        },
    };
    let own_load = own_load(&m)?;
    let (tls, redis_tls) = tls_settings(&m)?;
    let cluster = super::cluster::cluster_settings(&m)?;
    // A migrate-slot fault's `slot` is folded into the run's one slot, which the migration
    // reads: `slot=12` and `--slot 12` make the same scenario.
    for f in &mut m.fault {
        f.slot = None;
    }
    // Under --db-sql the keys are the user's: --keys only caps them (0: all).
    let keys = match &own_load {
        _ if trace.is_some() => trace.as_ref().map_or(0, |t| t.found.distinct_keys),
        Some(_) => m.keys.unwrap_or(0),
        None => m.keys.unwrap_or(10_000),
    };
    let warm = m.warm.unwrap_or(0);
    if warm > keys && own_load.is_none() {
        return Err(UsageError::new(format!(
            "--warm {warm} is more than --keys {keys}: warm at most every key"
        )));
    }
    let ttl = m.ttl.unwrap_or(Dur(Duration::from_secs(3)));
    let fail_safe = fail_safe(&m, &strategy, ttl)?;
    let eager_refresh = m.eager_refresh.or_else(|| {
        strategy
            .library_defaults()
            .and_then(|l| l.eager_refresh)
            .map(Percent)
    });
    if !strategy.caches() && (fail_safe.is_some() || eager_refresh.is_some()) {
        return Err(UsageError::new(
            "--fail-safe and --eager-refresh keep or refresh cached entries, and --strategy no-cache caches nothing: drop them, or choose a strategy that caches",
        ));
    }
    let lock_timeout_policy = m.lock_timeout_policy.unwrap_or(LockTimeoutPolicy::Load);
    if lock_timeout_policy == LockTimeoutPolicy::Stale
        && !strategy.serves_stale()
        && fail_safe.is_none()
    {
        return Err(UsageError::new(format!(
            "--lock-timeout-policy stale needs a value kept past expiry (there is none under {}): use --strategy swr+mutex, add --fail-safe D, or --lock-timeout-policy load|error",
            strategy
        )));
    }
    let jitter = m.jitter.unwrap_or(Percent(strategy.default_jitter()));
    let duration = match &trace {
        Some(t) => super::trace::duration(t, m.warmup),
        None => m.duration.unwrap_or(Dur(Duration::from_secs(10))),
    };
    let sleep_cost = own_load.is_none() && m.db_query.unwrap_or(DbQuery::Sleep) == DbQuery::Sleep;
    apply_shock_flags(&mut m, matches!(load, LoadShape::Closed { .. }), sleep_cost)?;
    schedule::check(&mut m.fault, duration, |i, f| fault_name(&faults_src, i, f))
        .map_err(UsageError)?;
    check_external_faults(&m)?;
    if trace.is_some() && m.fault.iter().any(|f| f.kind == FaultKind::Spike) {
        return Err(UsageError::new(
            "a spike multiplies the synthetic schedule's rate, and a trace's times are its own: replay a busier stretch (--trace-skip), or all of it faster (--speed)",
        ));
    }
    let (value_size, value_size_dist) = super::memory::value_sizes(&m)?;
    let payload = (keys as f64 * value_size as f64) as u64;
    if own_load.is_none() && payload > MAX_DATA_BYTES {
        return Err(UsageError::new(format!(
            "--keys {keys} × --value-size {value_size} is {} GiB of payload, more than {} GiB: the seeded table and a full cache must fit the machine; fewer keys or smaller values",
            payload >> 30,
            MAX_DATA_BYTES >> 30
        )));
    }
    let memory = super::memory::limit(&m)?;
    let (instances, db_pool) = (m.instances.unwrap_or(2), m.db_pool.unwrap_or(16));
    if u64::from(instances) * u64::from(db_pool) > u64::from(MAX_DB_CONNECTIONS) {
        return Err(UsageError::new(format!(
            "--instances {instances} × --db-pool {db_pool} = {} database connections, more than {MAX_DB_CONNECTIONS}: each is a Postgres backend process; use fewer instances or a smaller pool",
            u64::from(instances) * u64::from(db_pool)
        )));
    }
    let breaker = breaker(&m)?;
    let db_rate = db_rate(&m)?;
    let rewarm = rewarm(&m, keys)?;
    let l1 = l1(&m, &strategy)?;
    let db_query = m.db_query.unwrap_or(DbQuery::Sleep);
    let zipf = m.zipf.unwrap_or(1.0);
    let writes = m.write_rps.filter(|r| r.0 > 0.0).map(|r| WriteLoad {
        rps: r.0,
        zipf: m.write_zipf.unwrap_or(zipf),
    });
    // A replay of every op writes what the trace writes, at its times: the rate is its mean.
    let writes = match &trace {
        Some(t)
            if t.ops == crate::replay::TraceOps::All && t.found.writes + t.found.deletes > 0 =>
        {
            Some(WriteLoad {
                rps: (t.found.writes + t.found.deletes) as f64 / t.found.run_s,
                zipf,
            })
        }
        _ => writes,
    };
    if writes.is_none() {
        for (key, set) in [
            ("write_zipf", m.write_zipf.is_some()),
            ("invalidate", m.invalidate.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "--{} is a setting of the writes, and there are none: add --write-rps (scenario file: write_rps)",
                    key.replace('_', "-")
                )));
            }
        }
    }
    if writes.is_some() && own_load.is_some() {
        // Writes UPDATE the seeded items; under --db-sql the table is the user's and the tool
        // changes nothing in their database.
        return Err(UsageError::new(
            "--write-rps writes to the table stampede seeds, and with --db-sql there is none: stampede changes nothing in your database. Drop --write-rps, or drop --db-sql to measure writes on the seeded table",
        ));
    }
    let invalidate = match (&writes, &m.invalidate) {
        (None, _) => None,
        (Some(_), None) => Some(Invalidate::Delete),
        (Some(_), Some(i)) => Some(invalidation(i).map_err(UsageError::new)?),
    };
    let lease_ttl = strategy
        .coordination
        .lease()
        .then(|| m.lease_ttl.unwrap_or(Dur(Duration::from_secs(2))));
    if m.lease_ttl.is_some() && lease_ttl.is_none() {
        *unused = Some(UsageError::new(format!(
            "--lease-ttl is a setting of the lease coordination, and --strategy {strategy} has none: add lease to the strategy (--strategy lease, swr+lease, xfetch+lease), or drop --lease-ttl (lease_ttl in a scenario file)"
        )));
    }
    if db_query == DbQuery::Heavy && m.db_cost.is_some() {
        return Err(UsageError::new(
            "--db-cost sets the pg_sleep of --db-query sleep; under --db-query heavy a load costs what its aggregate costs on this server: drop --db-cost (or db_cost in the file)",
        ));
    }

    let (client, goodput_within, recovery) = survival_settings(&m)?;
    let thresholds = m
        .thresholds
        .clone()
        .unwrap_or_default()
        .overridden_by(&m.threshold);
    if thresholds
        .iter()
        .any(|(t, _)| t == crate::metric::Metric::RecoveryBack)
    {
        verdict_possible(&m.fault, duration, &recovery).map_err(|why| {
            UsageError::new(format!(
                "threshold recovery_back_ms_max needs a recovery verdict, and {why}"
            ))
        })?;
    }
    Ok(Scenario {
        scenario_file: file.map(|p| p.display().to_string()),
        strategy,
        load,
        duration,
        warmup: m.warmup.unwrap_or(Dur(Duration::ZERO)),
        keys,
        zipf,
        seed: m.seed.unwrap_or(42),
        value_size,
        value_size_dist,
        memory,
        ttl,
        db_cost: m.db_cost.unwrap_or(Dur(Duration::from_millis(10))),
        db_pool,
        // A crash must turn loads into errors quickly, never into a hang: with a Postgres
        // fault and no deadline of the user's, loads get one.
        db_timeout: m.db_timeout.or(m
            .fault
            .iter()
            .any(|f| f.kind == FaultKind::KillPostgres)
            .then_some(PG_FAULT_DB_TIMEOUT)),
        instances,
        redis_conns: m.redis_conns.unwrap_or(1),
        max_inflight: m.max_inflight.unwrap_or(2048),
        backlog: m.backlog.unwrap_or(0),
        // A steady start under --db-sql would run the user's query once per key on their
        // server before the run: only when asked.
        start: m.start.unwrap_or(if own_load.is_some() {
            Start::Cold
        } else {
            Start::Steady
        }),
        warm,
        redis_url: m.redis_url,
        pg_url: m.pg_url,
        redis_timeout: m.redis_timeout.unwrap_or(Dur(Duration::from_millis(100))),
        interval: m.interval.unwrap_or(Dur(Duration::from_millis(100))),
        beta: m.beta.unwrap_or(1.0),
        // laravel-flexible's `[$fresh, $stale]`: stale as long again as fresh.
        stale: m.stale.unwrap_or(
            if strategy.library_defaults().is_some_and(|l| l.stale_is_ttl) {
                ttl
            } else {
                Dur(Duration::from_secs(10))
            },
        ),
        lock_ttl: m.lock_ttl.unwrap_or(Dur(Duration::from_secs(2))),
        lock_poll: m.lock_poll.unwrap_or(Dur(Duration::from_millis(50))),
        lock_wait: m.lock_wait.unwrap_or(Dur(Duration::from_secs(2))),
        lock_timeout_policy,
        jitter,
        missing_ratio: m.missing_ratio.unwrap_or(Percent(0.0)),
        negative_ttl: m.negative_ttl,
        db_query,
        db_limit: m.db_limit,
        breaker,
        db_rate,
        rewarm,
        l1,
        fail_safe,
        eager_refresh,
        faults: m.fault,
        redis_restart_cmd: m.redis_restart_cmd,
        allow_pause_external: m.allow_pause_external,
        allow_kill_external: m.allow_kill_external,
        pg_kill_cmd: m.pg_kill_cmd,
        pg_restart_cmd: m.pg_restart_cmd,
        thresholds,
        writes,
        invalidate,
        lease_ttl,
        tls,
        redis_tls,
        cluster,
        own_load,
        target: None,
        client,
        goodput_within,
        recovery,
        trace,
    })
}

/// Whether a run with these faults can have a verdict: a shock, a baseline before it, and
/// `--observe` after it. Err says why not.
pub fn verdict_possible(
    faults: &[FaultSpec],
    duration: Dur,
    c: &RecoveryCriteria,
) -> Result<(), String> {
    let (Some(first), Some(end)) = (
        faults.iter().map(|f| f.at.0).min(),
        faults.iter().map(|f| f.ends_at()).max(),
    ) else {
        return Err("the run has no shock: add one (--fault drop-cache@AT, --fault kill-redis@AT+FOR, --fault slow-db@AT+FOR, --fault spike@AT+FOR, …)".to_string());
    };
    if first < c.baseline_window.0 {
        return Err(format!(
            "the first shock at {} leaves no baseline of {} before it: strike later or shorten --baseline-window",
            Dur(first),
            c.baseline_window
        ));
    }
    let left = duration.0.saturating_sub(end);
    if left < c.observe.0 {
        return Err(format!(
            "the window leaves {} after the last shock ends at {}, less than --observe {}: lengthen --duration to at least {}, or shorten --observe",
            Dur(left),
            Dur(end),
            c.observe,
            Dur(end + c.observe.0)
        ));
    }
    Ok(())
}

/// The client's timeout and retries, goodput's deadline and the recovery criterion.
fn survival_settings(m: &RunFlags) -> Result<(Option<Client>, Dur, RecoveryCriteria), UsageError> {
    let retries = m.retries.unwrap_or(0);
    if retries > 100 {
        return Err(UsageError::new(format!(
            "--retries {retries}: at most 100 retries of one request"
        )));
    }
    if retries == 0 && (m.retry_backoff.is_some() || m.retry_jitter.is_some()) {
        return Err(UsageError::new(
            "--retry-backoff and --retry-jitter shape the retries, and there are none: add --retries N",
        ));
    }
    if m.request_timeout.is_some_and(|d| d.0.is_zero()) {
        return Err(UsageError::new(
            "--request-timeout must be longer than 0 (leave it out for a client that waits)",
        ));
    }
    let client = (m.request_timeout.is_some() || retries > 0).then(|| Client {
        timeout: m.request_timeout,
        retries,
        backoff: m.retry_backoff.unwrap_or(Dur(Duration::from_millis(100))),
        jitter: m.retry_jitter.unwrap_or(Percent(0.0)),
    });
    let within = m
        .goodput_within
        .or(m.request_timeout)
        .unwrap_or(Dur(super::survival::DEFAULT_GOODPUT_WITHIN));
    if within.0.is_zero() {
        return Err(UsageError::new("--goodput-within must be longer than 0"));
    }
    let d = RecoveryCriteria::default();
    let recovery = RecoveryCriteria {
        baseline_window: m.baseline_window.unwrap_or(d.baseline_window),
        goodput: m.recovery_goodput.unwrap_or(d.goodput),
        hit_points: m.recovery_hit_points.unwrap_or(d.hit_points),
        settle: m.settle.unwrap_or(d.settle),
        observe: m.observe.unwrap_or(d.observe),
    };
    if !(0.0..=100.0).contains(&recovery.hit_points) {
        return Err(UsageError::new(format!(
            "--recovery-hit-points {}: points of hit rate, between 0 and 100",
            recovery.hit_points
        )));
    }
    for (d, flag) in [
        (recovery.baseline_window, "--baseline-window"),
        (recovery.settle, "--settle"),
    ] {
        if d.0 < Duration::from_secs(1) {
            return Err(UsageError::new(format!(
                "{flag} {d}: the verdict reads whole 1 s windows, so at least 1s"
            )));
        }
    }
    Ok((client, within, recovery))
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
