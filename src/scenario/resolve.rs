//! Turns a scenario file plus command-line flags into one validated [`Scenario`]: flags win
//! over the file, the file over the defaults, and every check that can fail before a server
//! starts fails here, naming the file, the key and what is allowed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::servers::{own_load, tls_settings};
use super::{Client, FailSafe, LoadShape, RecoveryCriteria, Rewarm, Scenario, WriteLoad};

/// Most payload a run may seed (keys × value size): it is stored twice, in Postgres and Redis.
const MAX_DATA_BYTES: u64 = 8 << 30;
use crate::cli::{MAX_DB_CONNECTIONS, RunFlags};
use crate::error::{Problems, UsageError};
use crate::fault::{self as schedule, FaultKind, FaultSpec};
use crate::l1::L1Spec;
use crate::origin::DbQuery;
use crate::protect::BreakerSpec;
use crate::protect::rate::RateSpec;
use crate::strategy::StrategySpec;
use crate::strategy::invalidate::Invalidate;
use crate::strategy::invalidate::invalidation;
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
/// unknown key are usage errors naming the file. The settings' groups share the file's one
/// table, which serde cannot check for unknown keys across groups, so the keys are checked here
/// against the file's schema (made from the same declarations) before the groups read it.
pub fn read_file(path: &Path) -> Result<RunFlags, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError::new(format!("cannot read scenario file {}: {e}", path.display()))
    })?;
    let said = |e: &dyn std::fmt::Display| {
        UsageError::new(format!(
            "scenario file {}: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| said(&e))?;
    let known = RunFlags::file_keys();
    if let Some(key) = table.keys().find(|k| !known.contains(k)) {
        let line = text
            .lines()
            .position(|l| {
                l.trim_start()
                    .strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
            .map_or(String::new(), |i| format!(" (line {})", i + 1));
        return Err(said(&format!(
            "unknown field `{key}`{line}; the keys are the run flags with `_` for `-`: {}",
            known.join(", ")
        )));
    }
    RunFlags::from_toml(&text).map_err(|e| said(&e))
}

impl Src<'_> {
    /// A declared check's finding about `key`, said after its name.
    fn said(&self, key: &str, what: &str) -> String {
        if what.starts_with(':') {
            format!("{}{what}", self.name(key))
        } else {
            format!("{} {what}", self.name(key))
        }
    }
}

/// Checks that need only one source's values: each setting's declared checks, then the
/// faults' own settings.
fn check(f: &RunFlags, src: &Src, problems: &mut Problems) {
    f.check(&mut |key, what| problems.push(src.said(key, &what)));
    if matches!(src, Src::File(_)) && f.load.rps.is_some() && f.load.clients.is_some() {
        problems.push(format!(
            "{} and {} both set: choose open loop (rps) or closed loop (clients)",
            src.name("rps"),
            src.name("clients")
        ));
    }
    for (i, fault) in f.faults.fault.iter().enumerate() {
        problems.take(check_shock(fault, &fault_name(src, i, fault)));
        if fault.down_for.0.is_zero() && !fault.kind.is_instant() {
            problems.push(format!(
                "{}: down_for must be longer than 0",
                fault_name(src, i, fault)
            ));
        }
    }
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
            &flags.faults.kill_redis_at,
            &flags.faults.redis_down_for,
        ),
        (
            FaultKind::KillPostgres,
            &flags.faults.kill_postgres_at,
            &flags.faults.postgres_down_for,
        ),
        (
            FaultKind::PauseRedis,
            &flags.faults.pause_redis_at,
            &flags.faults.pause_for,
        ),
    ] {
        faults.extend(schedule::pair(kind, at, down).map_err(UsageError)?);
    }
    for (kind, at, down) in [
        (
            FaultKind::SlowDb,
            &flags.faults.slow_db_at,
            &flags.faults.slow_db_for,
        ),
        (
            FaultKind::Spike,
            &flags.faults.spike_at,
            &flags.faults.spike_for,
        ),
    ] {
        faults.extend(schedule::pair(kind, at, down).map_err(UsageError)?);
    }
    // A drop, a failover and a slot migration are instant: no duration flag to pair with.
    for (kind, at) in [
        (FaultKind::Failover, &flags.faults.failover_at),
        (FaultKind::MigrateSlot, &flags.faults.migrate_slot_at),
    ] {
        faults.extend(
            at.iter()
                .map(|&at| FaultSpec::new(kind, at, Dur(Duration::ZERO))),
        );
    }
    faults.extend(
        flags
            .faults
            .drop_cache_at
            .iter()
            .map(|&at| FaultSpec::new(FaultKind::DropCache, at, Dur(Duration::ZERO))),
    );
    let mut names: Vec<String> = flags
        .faults
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
    flags.faults.fault.extend(faults);
    if flags.faults.no_shocks && !flags.faults.fault.is_empty() {
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
    let has = |m: &RunFlags, kind: FaultKind| m.faults.fault.iter().any(|f| f.kind == kind);
    for (set, flag, kind) in [
        (
            m.faults.drop_fraction.is_some(),
            "--drop-fraction",
            FaultKind::DropCache,
        ),
        (
            m.faults.drop_order.is_some(),
            "--drop-order",
            FaultKind::DropCache,
        ),
        (
            m.faults.slow_db_factor.is_some(),
            "--slow-db-factor",
            FaultKind::SlowDb,
        ),
        (
            m.faults.spike_factor.is_some(),
            "--spike-factor",
            FaultKind::Spike,
        ),
    ] {
        if set && !has(m, kind) {
            return Err(UsageError::new(format!(
                "{flag} sets every {kind} shock, and the run has none: add one (--fault {kind}@AT{}, or a [[fault]] with kind = \"{kind}\")",
                if kind.is_instant() { "" } else { "+FOR" }
            )));
        }
    }
    if let Some(k) = m.faults.slow_db_factor.or(m.faults.spike_factor)
        && !(0.01..=1000.0).contains(&k)
    {
        return Err(UsageError::new(format!(
            "shock factor {k} is out of range (slow-db: 1 to 1000; spike: 0.01 to 100)"
        )));
    }
    let (fraction, order, slow, spike) = (
        m.faults.drop_fraction,
        m.faults.drop_order,
        m.faults.slow_db_factor,
        m.faults.spike_factor,
    );
    for f in &mut m.faults.fault {
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
    let has = |kind: FaultKind| m.faults.fault.iter().any(|f| f.kind == kind);
    if m.servers.redis_url.is_some() && has(FaultKind::KillRedis) {
        // SHUTDOWN NOSAVE is the one way to crash a server the tool cannot SIGKILL, and it takes
        // every tenant's unsaved data with it: consent first, then a way to bring it back.
        if !m.faults.allow_kill_external {
            return Err(UsageError::new(format!(
                "a kill-redis fault on an external Redis (--redis-url) sends it SHUTDOWN NOSAVE: the server stops without saving, so every client's data not yet persisted is lost, not only this run's. Add --allow-kill-external (allow_kill_external = true in a scenario file) if that is what you want{}, or drop --redis-url to crash a Redis stampede starts itself",
                if m.faults.redis_restart_cmd.is_none() {
                    ", with --redis-restart-cmd to start it again"
                } else {
                    ""
                }
            )));
        }
        if m.faults.redis_restart_cmd.is_none() {
            return Err(UsageError::new(
                "a kill-redis fault on an external Redis (--redis-url) needs --redis-restart-cmd: stampede sends it SHUTDOWN NOSAVE at the fault and runs that shell command to start it again (it only kills and restarts by itself a Redis it started)",
            ));
        }
    }
    if m.servers.redis_url.is_none() && m.faults.redis_restart_cmd.is_some() {
        return Err(UsageError::new(
            "--redis-restart-cmd applies only to an external Redis (--redis-url): the managed Redis is restarted by stampede itself",
        ));
    }
    if m.servers.redis_url.is_some() && has(FaultKind::PauseRedis) && !m.faults.allow_pause_external
    {
        return Err(UsageError::new(
            "a pause-redis fault on an external Redis (--redis-url) stalls every client of that server, not only this run (CLIENT PAUSE ALL): add --allow-pause-external (allow_pause_external = true in a scenario file) if that is what you want, or drop --redis-url to pause a Redis stampede starts itself",
        ));
    }
    match &m.servers.pg_url {
        Some(_) if has(FaultKind::KillPostgres) => {
            let missing: Vec<&str> = [
                ("--pg-kill-cmd", m.faults.pg_kill_cmd.is_none()),
                ("--pg-restart-cmd", m.faults.pg_restart_cmd.is_none()),
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
        None if m.faults.pg_kill_cmd.is_some() || m.faults.pg_restart_cmd.is_some() => {
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
        ("breaker_error_rate", m.protect.breaker_error_rate.is_some()),
        ("breaker_latency", m.protect.breaker_latency.is_some()),
        ("breaker_window", m.protect.breaker_window.is_some()),
        ("breaker_cooldown", m.protect.breaker_cooldown.is_some()),
        ("breaker_probes", m.protect.breaker_probes.is_some()),
        ("breaker_min_loads", m.protect.breaker_min_loads.is_some()),
    ];
    if m.protect.breaker != Some(true) {
        if let Some((k, _)) = given.iter().find(|(_, set)| *set) {
            return Err(UsageError::new(format!(
                "--{} is a setting of the circuit breaker, which is off: add --breaker (scenario file: breaker = true)",
                k.replace('_', "-")
            )));
        }
        return Ok(None);
    }
    Ok(Some(BreakerSpec {
        error_rate: m.protect.breaker_error_rate.unwrap_or(d.error_rate),
        latency: m.protect.breaker_latency.unwrap_or(d.latency),
        window: m.protect.breaker_window.unwrap_or(d.window),
        cooldown: m.protect.breaker_cooldown.unwrap_or(d.cooldown),
        probes: m.protect.breaker_probes.unwrap_or(d.probes),
        min_loads: m.protect.breaker_min_loads.unwrap_or(d.min_loads),
    }))
}

/// The rate limit when `--db-rate` is given; `--db-burst` or `--db-rate-scope` without it is
/// a usage error rather than a setting that silently does nothing.
fn db_rate(m: &RunFlags) -> Result<Option<RateSpec>, UsageError> {
    let Some(Rate(rate)) = m.protect.db_rate else {
        for (k, set) in [
            ("db_burst", m.protect.db_burst.is_some()),
            ("db_rate_scope", m.protect.db_rate_scope.is_some()),
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
        burst: m
            .protect
            .db_burst
            .unwrap_or_else(|| RateSpec::default_burst(rate)),
        scope: m.protect.db_rate_scope.unwrap_or_default(),
    }))
}

/// The in-process tier when `--l1` is given (its other settings alone are refused, and so is
/// a tier in front of no cache).
fn l1(m: &RunFlags, strategy: &StrategySpec) -> Result<Option<L1Spec>, UsageError> {
    let Some(entries) = m.cache.l1 else {
        for (k, set) in [
            ("l1_ttl", m.cache.l1_ttl.is_some()),
            ("l1_invalidate", m.cache.l1_invalidate.is_some()),
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
        ttl: m.cache.l1_ttl,
        invalidate: m.cache.l1_invalidate.unwrap_or_default(),
    }))
}

/// The re-warm job when `--rewarm-every` is given (`--rewarm-top` alone is refused).
fn rewarm(m: &RunFlags, keys: u64) -> Result<Option<Rewarm>, UsageError> {
    let Some(every) = m.cache.rewarm_every else {
        if m.cache.rewarm_top.is_some() {
            return Err(UsageError::new(
                "--rewarm-top is a setting of the re-warm job, which is off: add --rewarm-every D (scenario file: rewarm_every)",
            ));
        }
        return Ok(None);
    };
    let top = m.cache.rewarm_top.unwrap_or(100);
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
        .cache
        .fail_safe
        .or_else(|| lib.and_then(|l| l.fail_safe_ttls).map(|n| Dur(ttl.0 * n)));
    let Some(max) = max else {
        for (k, set) in [
            ("fail_safe_throttle", m.cache.fail_safe_throttle.is_some()),
            ("soft_timeout", m.cache.soft_timeout.is_some()),
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
    let throttle = m
        .cache
        .fail_safe_throttle
        .unwrap_or(Dur(Duration::from_secs(
            lib.and_then(|l| l.fail_safe_throttle_s).unwrap_or(30),
        )));
    let soft_timeout = m.cache.soft_timeout.or_else(|| {
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

/// The scenario file and the flags, each checked on its own, then merged: every problem of a
/// setting's own value is said at once, before the checks between settings (which would only
/// repeat them).
fn build(
    file: Option<&PathBuf>,
    mut flags: RunFlags,
    unused: &mut Option<UsageError>,
) -> Result<Scenario, UsageError> {
    let names = faults_from_flags(&mut flags)?;
    let mut p = Problems::default();
    check(&flags, &Src::Flags(&names), &mut p);
    let from_file = match file {
        Some(path) => {
            let f = read_file(path)?;
            check(&f, &Src::File(path), &mut p);
            f
        }
        None => RunFlags::default(),
    };
    p.into_result()?;
    let faults_src = match file {
        Some(path) if flags.faults.fault.is_empty() => Src::File(path),
        _ => Src::Flags(&names),
    };
    let mut m = flags.merge(from_file);
    // A sweep axis on a fault's key lands on the merged list, whoever wrote the fault.
    for set in &m.faults.fault_keys {
        set.apply(&mut m.faults.fault).map_err(UsageError::new)?;
    }
    super::trace::workload_from(&mut m)?;
    let mut p = Problems::default();
    let sc = assemble(file, m, &faults_src, &mut p, unused);
    p.into_result()?;
    sc.ok_or_else(|| UsageError::new("the scenario could not be resolved"))
}

/// The workload's shape, resolved before the checks that depend on it.
struct Shape {
    strategy: StrategySpec,
    trace: Option<crate::replay::TraceSpec>,
    load: LoadShape,
    own_load: Option<super::OwnLoad>,
    keys: u64,
    duration: Dur,
}

/// The strategy, the trace, the load, the keys and the window.
fn shape(m: &RunFlags, p: &mut Problems) -> Option<Shape> {
    let strategy = p.take(
        StrategySpec::parse(m.cache.strategy.as_deref().unwrap_or("cache-aside"))
            .map_err(UsageError::new),
    )?;
    let trace = p.take(super::trace::settings(m))?;
    let arrival = m.load.arrival.unwrap_or(Arrival::Constant);
    let load = match (&trace, m.load.rps, m.load.clients) {
        // The trace's own mean rate: the schedule is the trace's.
        (Some(t), _, _) => LoadShape::Open {
            rps: t.found.requests as f64 / t.found.run_s,
            arrival: Arrival::Constant,
        },
        (None, _, Some(c)) => LoadShape::Closed { clients: c },
        (None, Some(Rate(r)), None) => LoadShape::Open { rps: r, arrival },
        (None, None, None) => LoadShape::Open {
            rps: 10_000.0,
            arrival,
        },
    };
    let own_load = p.take(own_load(m))?;
    // Under --db-sql the keys are the user's: --keys only caps them (0: all).
    let keys = match (&trace, &own_load) {
        (Some(t), _) => t.found.distinct_keys,
        (None, Some(_)) => m.data.keys.unwrap_or(0),
        (None, None) => m.data.resolved().keys(),
    };
    let duration = match &trace {
        Some(t) => super::trace::duration(t, m.load.warmup),
        None => m.load.resolved().duration(),
    };
    Some(Shape {
        strategy,
        trace,
        load,
        own_load,
        keys,
        duration,
    })
}

/// The checks between settings, each problem noted, and the scenario they leave.
fn assemble(
    file: Option<&PathBuf>,
    mut m: RunFlags,
    faults_src: &Src,
    p: &mut Problems,
    unused: &mut Option<UsageError>,
) -> Option<Scenario> {
    let Shape {
        strategy,
        trace,
        load,
        own_load,
        keys,
        duration,
    } = shape(&m, p)?;
    let tls = p.take(tls_settings(&m));
    let cluster = p.take(super::cluster::cluster_settings(&m));
    // A migrate-slot fault's `slot` is folded into the run's one slot, which the migration
    // reads: `slot=12` and `--slot 12` make the same scenario.
    for f in &mut m.faults.fault {
        f.slot = None;
    }
    let warm = m.data.resolved().warm();
    if warm > keys && own_load.is_none() {
        p.push(format!(
            "--warm {warm} is more than --keys {keys}: warm at most every key"
        ));
    }
    let ttl = m.data.resolved().ttl();
    let cache = p.take(cache_policy(&m, &strategy, ttl, unused));
    let sleep_cost =
        own_load.is_none() && m.db.db_query.unwrap_or(DbQuery::Sleep) == DbQuery::Sleep;
    p.take(apply_shock_flags(
        &mut m,
        matches!(load, LoadShape::Closed { .. }),
        sleep_cost,
    ));
    p.take(
        schedule::check(&mut m.faults.fault, duration, |i, f| {
            fault_name(faults_src, i, f)
        })
        .map_err(UsageError),
    );
    p.take(check_external_faults(&m));
    if trace.is_some() && m.faults.fault.iter().any(|f| f.kind == FaultKind::Spike) {
        p.push(
            "a spike multiplies the synthetic schedule's rate, and a trace's times are its own: replay a busier stretch (--trace-skip), or all of it faster (--speed)",
        );
    }
    let sizes = p.take(super::memory::value_sizes(&m));
    if let Some((value_size, _)) = sizes {
        let payload = (keys as f64 * value_size as f64) as u64;
        if own_load.is_none() && payload > MAX_DATA_BYTES {
            p.push(format!(
                "--keys {keys} × --value-size {value_size} is {} GiB of payload, more than {} GiB: the seeded table and a full cache must fit the machine; fewer keys or smaller values",
                payload >> 30,
                MAX_DATA_BYTES >> 30
            ));
        }
    }
    let memory = p.take(super::memory::limit(&m));
    let (instances, db_pool) = (m.load.resolved().instances(), m.db.resolved().db_pool());
    if u64::from(instances) * u64::from(db_pool) > u64::from(MAX_DB_CONNECTIONS) {
        p.push(format!(
            "--instances {instances} × --db-pool {db_pool} = {} database connections, more than {MAX_DB_CONNECTIONS}: each is a Postgres backend process; use fewer instances or a smaller pool",
            u64::from(instances) * u64::from(db_pool)
        ));
    }
    let protect = p.take(protections(&m, &strategy, keys));
    let zipf = m.data.resolved().zipf();
    let writes = p.take(writes(&m, trace.as_ref(), own_load.is_some(), zipf));
    let db_query = m.db.db_query.unwrap_or(DbQuery::Sleep);
    if db_query == DbQuery::Heavy && m.db.db_cost.is_some() {
        p.push(
            "--db-cost sets the pg_sleep of --db-query sleep; under --db-query heavy a load costs what its aggregate costs on this server: drop --db-cost (or db_cost in the file)",
        );
    }
    let survival = p.take(survival_settings(&m));
    let thresholds = m
        .report
        .thresholds
        .clone()
        .unwrap_or_default()
        .overridden_by(&m.report.threshold);
    if let Some((_, _, recovery)) = &survival
        && thresholds
            .iter()
            .any(|(t, _)| t == crate::metric::Metric::RecoveryBack)
        && let Err(why) = verdict_possible(&m.faults.fault, duration, recovery)
    {
        p.push(format!(
            "threshold recovery_back_ms_max needs a recovery verdict, and {why}"
        ));
    }
    let ((tls, redis_tls), cluster, cache, (value_size, value_size_dist), memory) =
        (tls?, cluster?, cache?, sizes?, memory?);
    let (protect, (writes, invalidate), (client, goodput_within, recovery)) =
        (protect?, writes?, survival?);
    Some(Scenario {
        scenario_file: file.map(|p| p.display().to_string()),
        load,
        duration,
        warmup: m.load.resolved().warmup(),
        keys,
        zipf,
        seed: m.data.resolved().seed(),
        value_size,
        value_size_dist,
        memory,
        ttl,
        db_cost: m.db.resolved().db_cost(),
        db_pool,
        // A crash must turn loads into errors quickly, never into a hang: with a Postgres
        // fault and no deadline of the user's, loads get one.
        db_timeout: m.db.db_timeout.or(m
            .faults
            .fault
            .iter()
            .any(|f| f.kind == FaultKind::KillPostgres)
            .then_some(PG_FAULT_DB_TIMEOUT)),
        instances,
        redis_conns: m.servers.resolved().redis_conns(),
        max_inflight: m.load.resolved().max_inflight(),
        backlog: m.load.resolved().backlog(),
        // A steady start under --db-sql would run the user's query once per key on their
        // server before the run: only when asked.
        start: m.data.start.unwrap_or(if own_load.is_some() {
            Start::Cold
        } else {
            Start::Steady
        }),
        warm,
        redis_timeout: m.servers.resolved().redis_timeout(),
        interval: m.report.resolved().interval(),
        beta: m.cache.resolved().beta(),
        // laravel-flexible's `[$fresh, $stale]`: stale as long again as fresh.
        stale: m.cache.stale.unwrap_or(
            if strategy.library_defaults().is_some_and(|l| l.stale_is_ttl) {
                ttl
            } else {
                Dur::secs(10)
            },
        ),
        lock_ttl: m.cache.resolved().lock_ttl(),
        lock_poll: m.cache.resolved().lock_poll(),
        lock_wait: m.cache.resolved().lock_wait(),
        lock_timeout_policy: cache.lock_timeout_policy,
        jitter: m.cache.jitter.unwrap_or(Percent(strategy.default_jitter())),
        missing_ratio: m.data.resolved().missing_ratio(),
        negative_ttl: m.data.negative_ttl,
        db_query,
        db_limit: m.protect.db_limit,
        breaker: protect.breaker,
        db_rate: protect.db_rate,
        rewarm: protect.rewarm,
        l1: protect.l1,
        fail_safe: cache.fail_safe,
        eager_refresh: cache.eager_refresh,
        lease_ttl: cache.lease_ttl,
        strategy,
        redis_url: m.servers.redis_url,
        pg_url: m.servers.pg_url,
        faults: m.faults.fault,
        redis_restart_cmd: m.faults.redis_restart_cmd,
        allow_pause_external: m.faults.allow_pause_external,
        allow_kill_external: m.faults.allow_kill_external,
        pg_kill_cmd: m.faults.pg_kill_cmd,
        pg_restart_cmd: m.faults.pg_restart_cmd,
        thresholds,
        writes,
        invalidate,
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

/// What the strategy keeps and refreshes: the fail-safe, eager refresh, the lock's timeout
/// policy and the lease.
struct CachePolicy {
    fail_safe: Option<FailSafe>,
    eager_refresh: Option<Percent>,
    lock_timeout_policy: LockTimeoutPolicy,
    lease_ttl: Option<Dur>,
}

fn cache_policy(
    m: &RunFlags,
    strategy: &StrategySpec,
    ttl: Dur,
    unused: &mut Option<UsageError>,
) -> Result<CachePolicy, UsageError> {
    let fail_safe = fail_safe(m, strategy, ttl)?;
    let eager_refresh = m.cache.eager_refresh.or_else(|| {
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
    let lock_timeout_policy = m
        .cache
        .lock_timeout_policy
        .unwrap_or(LockTimeoutPolicy::Load);
    if lock_timeout_policy == LockTimeoutPolicy::Stale
        && !strategy.serves_stale()
        && fail_safe.is_none()
    {
        return Err(UsageError::new(format!(
            "--lock-timeout-policy stale needs a value kept past expiry (there is none under {strategy}): use --strategy swr+mutex, add --fail-safe D, or --lock-timeout-policy load|error"
        )));
    }
    let lease_ttl = strategy
        .coordination
        .lease()
        .then(|| m.cache.resolved().lease_ttl());
    if m.cache.lease_ttl.is_some() && lease_ttl.is_none() {
        *unused = Some(UsageError::new(format!(
            "--lease-ttl is a setting of the lease coordination, and --strategy {strategy} has none: add lease to the strategy (--strategy lease, swr+lease, xfetch+lease), or drop --lease-ttl (lease_ttl in a scenario file)"
        )));
    }
    Ok(CachePolicy {
        fail_safe,
        eager_refresh,
        lock_timeout_policy,
        lease_ttl,
    })
}

/// The protections in front of the database, each on only when asked.
struct Protections {
    breaker: Option<BreakerSpec>,
    db_rate: Option<RateSpec>,
    rewarm: Option<Rewarm>,
    l1: Option<L1Spec>,
}

fn protections(
    m: &RunFlags,
    strategy: &StrategySpec,
    keys: u64,
) -> Result<Protections, UsageError> {
    Ok(Protections {
        breaker: breaker(m)?,
        db_rate: db_rate(m)?,
        rewarm: rewarm(m, keys)?,
        l1: l1(m, strategy)?,
    })
}

/// The writes and their invalidation: the flags', or a trace's when it replays every op.
fn writes(
    m: &RunFlags,
    trace: Option<&crate::replay::TraceSpec>,
    own_load: bool,
    zipf: f64,
) -> Result<(Option<WriteLoad>, Option<Invalidate>), UsageError> {
    let writes = match trace {
        // A replay of every op writes what the trace writes, at its times: the rate is its mean.
        Some(t)
            if t.ops == crate::replay::TraceOps::All && t.found.writes + t.found.deletes > 0 =>
        {
            Some(WriteLoad {
                rps: (t.found.writes + t.found.deletes) as f64 / t.found.run_s,
                zipf,
            })
        }
        _ => m.writes.write_rps.filter(|r| r.0 > 0.0).map(|r| WriteLoad {
            rps: r.0,
            zipf: m.writes.write_zipf.unwrap_or(zipf),
        }),
    };
    if writes.is_none() {
        for (key, set) in [
            ("write_zipf", m.writes.write_zipf.is_some()),
            ("invalidate", m.writes.invalidate.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "--{} is a setting of the writes, and there are none: add --write-rps (scenario file: write_rps)",
                    key.replace('_', "-")
                )));
            }
        }
    }
    if writes.is_some() && own_load {
        // Writes UPDATE the seeded items; under --db-sql the table is the user's and the tool
        // changes nothing in their database.
        return Err(UsageError::new(
            "--write-rps writes to the table stampede seeds, and with --db-sql there is none: stampede changes nothing in your database. Drop --write-rps, or drop --db-sql to measure writes on the seeded table",
        ));
    }
    let invalidate = match (&writes, &m.writes.invalidate) {
        (None, _) => None,
        (Some(_), None) => Some(Invalidate::Delete),
        (Some(_), Some(i)) => Some(invalidation(i).map_err(UsageError::new)?),
    };
    Ok((writes, invalidate))
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
    let retries = m.client.retries.unwrap_or(0);
    if retries > 100 {
        return Err(UsageError::new(format!(
            "--retries {retries}: at most 100 retries of one request"
        )));
    }
    if retries == 0 && (m.client.retry_backoff.is_some() || m.client.retry_jitter.is_some()) {
        return Err(UsageError::new(
            "--retry-backoff and --retry-jitter shape the retries, and there are none: add --retries N",
        ));
    }
    if m.client.request_timeout.is_some_and(|d| d.0.is_zero()) {
        return Err(UsageError::new(
            "--request-timeout must be longer than 0 (leave it out for a client that waits)",
        ));
    }
    let client = (m.client.request_timeout.is_some() || retries > 0).then(|| Client {
        timeout: m.client.request_timeout,
        retries,
        backoff: m
            .client
            .retry_backoff
            .unwrap_or(Dur(Duration::from_millis(100))),
        jitter: m.client.retry_jitter.unwrap_or(Percent(0.0)),
    });
    let within = m
        .client
        .goodput_within
        .or(m.client.request_timeout)
        .unwrap_or(Dur(super::survival::DEFAULT_GOODPUT_WITHIN));
    if within.0.is_zero() {
        return Err(UsageError::new("--goodput-within must be longer than 0"));
    }
    let d = RecoveryCriteria::default();
    let recovery = RecoveryCriteria {
        baseline_window: m.recovery.baseline_window.unwrap_or(d.baseline_window),
        goodput: m.recovery.recovery_goodput.unwrap_or(d.goodput),
        hit_points: m.recovery.recovery_hit_points.unwrap_or(d.hit_points),
        settle: m.recovery.settle.unwrap_or(d.settle),
        observe: m.recovery.observe.unwrap_or(d.observe),
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
