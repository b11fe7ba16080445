//! The faults of a scenario resolved: the flags' fault list (`--fault` and the shorthands)
//! named as written, each fault's own keys checked, the shock flags applied to every shock of
//! their kind, the faults on servers the tool did not start, and whether a recovery verdict is
//! possible.

use std::time::Duration;

use super::LoadShape;
use super::shape::{Shape, Src};
use crate::cli::RunFlags;
use crate::error::{Problems, UsageError};
use crate::fault::{self as schedule, FaultKind, FaultSpec};
use crate::values::Dur;

/// `--db-timeout` when a kill-postgres fault is scheduled and none is given: long enough for
/// a healthy 10 ms load on a busy machine, short enough that a request held up by the crash
/// ends within a few seconds (`docs/faults.md`).
pub const PG_FAULT_DB_TIMEOUT: Dur = Dur(Duration::from_secs(1));

/// The merged fault list checked against the rest of the scenario: the shock flags applied,
/// the schedule inside the window, the faults on servers the tool did not start, and no spike
/// on a trace's own times.
pub(super) fn resolve(m: &mut RunFlags, src: &Src, shape: &Shape, p: &mut Problems) {
    let sleep_cost =
        shape.own_load.is_none() && m.db.resolved().db_query() == crate::origin::DbQuery::Sleep;
    let closed_loop = matches!(shape.load, LoadShape::Closed { .. });
    p.take(apply_shock_flags(m, closed_loop, sleep_cost));
    p.take(
        schedule::check(&mut m.faults.fault, shape.duration, |i, f| {
            fault_name(src, i, f)
        })
        .map_err(UsageError),
    );
    p.take(check_external_faults(m));
    if shape.trace.is_some() && FaultKind::Spike.among(&m.faults.fault) {
        p.push(
            "a spike multiplies the synthetic schedule's rate, and a trace's times are its own: replay a busier stretch (--trace-skip), or all of it faster (--speed)",
        );
    }
    if FaultKind::HolderCrash.among(&m.faults.fault) {
        holder_crash(m, shape, p);
    }
    if m.faults.fault.iter().any(|f| f.kind.is_network()) {
        network(m, p);
    }
    // A migrate-slot fault's `slot` is folded into the run's one slot, which the migration
    // reads: `slot=12` and `--slot 12` make the same scenario.
    for f in &mut m.faults.fault {
        f.slot = None;
    }
}

/// A holder-crash needs a lock to kill the holder of, and an instance to send its requests to.
fn holder_crash(m: &RunFlags, shape: &Shape, p: &mut Problems) {
    let s = &shape.strategy;
    if !s.coordination.redis_token() && !s.refresh.redis_token() {
        p.push(format!(
            "holder-crash kills an app instance holding Redis locks, and --strategy {} takes none: use a coordination that does (mutex, mutex+single-flight, lease, or a strategy or preset built on them, e.g. xfetch+mutex, swr+lease, laravel-flexible)",
            m.cache.strategy.as_deref().unwrap_or("cache-aside")
        ));
    }
    let instances = m.load.resolved().instances();
    if instances < 2 {
        p.push(format!(
            "holder-crash sends the crashed instance's requests to the others, and --instances {instances} leaves none: run 2 or more"
        ));
    }
}

/// Network faults strike instances that exist, and a latency `factor` multiplies a round trip
/// that is configured.
fn network(m: &RunFlags, p: &mut Problems) {
    let instances = m.load.resolved().instances() as usize;
    let s = &m.servers;
    for f in m.faults.fault.iter().filter(|f| f.kind.is_network()) {
        if let Some(i) = f.instance.and_then(|set| set.max())
            && i >= instances
        {
            p.push(format!(
                "--fault {}: instance={i}, and the run has {instances} instance{} (numbered from 0): name one below {instances}, or run more (--instances)",
                schedule::spell(f),
                if instances == 1 { "" } else { "s" }
            ));
        }
        let on = f.server.unwrap_or_default();
        let rtt_missing = (on.redis() && s.redis_rtt.or(s.net_rtt).is_none())
            || (on.postgres() && s.pg_rtt.or(s.net_rtt).is_none());
        if f.kind == FaultKind::Latency && f.factor.is_some() && rtt_missing {
            p.push(format!(
                "--fault {}: factor= multiplies the configured round trip, and server={} has none: set --net-rtt (or --redis-rtt/--pg-rtt), or write add=D",
                schedule::spell(f),
                on.name()
            ));
        }
    }
}

/// The loads' deadline: the user's, else, with a Postgres crash or partition scheduled, one
/// that turns loads into errors quickly instead of a hang.
pub(super) fn db_timeout(m: &RunFlags) -> Option<Dur> {
    m.db.db_timeout.or(m
        .faults
        .fault
        .iter()
        .any(|f| {
            f.kind == FaultKind::KillPostgres
                || (f.kind == FaultKind::Partition && f.server.unwrap_or_default().postgres())
        })
        .then_some(PG_FAULT_DB_TIMEOUT))
}

/// How a fault is named in an error: the flags that made it, or its table in the file.
pub(super) fn fault_name(src: &Src, i: usize, f: &FaultSpec) -> String {
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
pub(super) fn faults_from_flags(flags: &mut RunFlags) -> Result<Vec<String>, UsageError> {
    let f = &flags.faults;
    let none = &Vec::new();
    let mut faults = Vec::new();
    for (kind, at, down) in [
        (FaultKind::KillRedis, &f.kill_redis_at, &f.redis_down_for),
        (
            FaultKind::KillPostgres,
            &f.kill_postgres_at,
            &f.postgres_down_for,
        ),
        (FaultKind::PauseRedis, &f.pause_redis_at, &f.pause_for),
        (FaultKind::SlowDb, &f.slow_db_at, &f.slow_db_for),
        (FaultKind::Spike, &f.spike_at, &f.spike_for),
        (FaultKind::Failover, &f.failover_at, none),
        (FaultKind::MigrateSlot, &f.migrate_slot_at, none),
        (FaultKind::DropCache, &f.drop_cache_at, none),
    ] {
        faults.extend(schedule::pair(kind, at, down).map_err(UsageError)?);
    }
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

/// The shock flags that set a setting of every shock of a kind (the file's included), and
/// the checks that need the whole scenario: a flag for a shock the run does not have, a spike
/// without a schedule, a slow-db on a load with no cost to multiply.
pub(super) fn apply_shock_flags(
    m: &mut RunFlags,
    closed_loop: bool,
    sleep_cost: bool,
) -> Result<(), UsageError> {
    let f = &m.faults;
    for (set, flag, kind) in [
        (
            f.drop_fraction.is_some(),
            "--drop-fraction",
            FaultKind::DropCache,
        ),
        (f.drop_order.is_some(), "--drop-order", FaultKind::DropCache),
        (
            f.slow_db_factor.is_some(),
            "--slow-db-factor",
            FaultKind::SlowDb,
        ),
        (f.spike_factor.is_some(), "--spike-factor", FaultKind::Spike),
    ] {
        if set && !kind.among(&m.faults.fault) {
            return Err(UsageError::new(format!(
                "{flag} sets every {kind} shock, and the run has none: add one (--fault {kind}@AT{}, or a [[fault]] with kind = \"{kind}\")",
                if kind.is_instant() { "" } else { "+FOR" }
            )));
        }
    }
    // Each shock's factor is then checked against its kind's range.
    let (fraction, order) = (f.drop_fraction, f.drop_order);
    let (slow, spike) = (f.slow_db_factor, f.spike_factor);
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
        f.check(&format!("{} at {}", f.kind, f.at))?;
    }
    if closed_loop && FaultKind::Spike.among(&m.faults.fault) {
        return Err(UsageError::new(
            "a spike multiplies the open loop's rate, and --clients runs a closed loop (no rate to multiply): use --rps, or drop the spike",
        ));
    }
    if !sleep_cost && FaultKind::SlowDb.among(&m.faults.fault) {
        return Err(UsageError::new(
            "a slow-db shock multiplies pg_sleep's argument, and this run's loads have none (--db-query heavy, --db-sql or a sharded run): use the default --db-query sleep",
        ));
    }
    Ok(())
}

/// Faults on servers the tool did not start need what only the user can give: a way to crash
/// and restart them, or their consent to a pause that stalls every client.
pub(super) fn check_external_faults(m: &RunFlags) -> Result<(), UsageError> {
    let has = |kind: FaultKind| kind.among(&m.faults.fault);
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
    if m.servers.redis_url.is_some() && has(FaultKind::PauseRedis) && !m.faults.allow_pause_external
    {
        return Err(UsageError::new(
            "a pause-redis fault on an external Redis (--redis-url) stalls every client of that server, not only this run (CLIENT PAUSE ALL): add --allow-pause-external (allow_pause_external = true in a scenario file) if that is what you want, or drop --redis-url to pause a Redis stampede starts itself",
        ));
    }
    let f = &m.faults;
    let missing: Vec<&str> = [
        ("--pg-kill-cmd", &f.pg_kill_cmd),
        ("--pg-restart-cmd", &f.pg_restart_cmd),
    ]
    .iter()
    .filter(|(_, cmd)| cmd.is_none())
    .map(|(flag, _)| *flag)
    .collect();
    if m.servers.pg_url.is_some() && has(FaultKind::KillPostgres) && !missing.is_empty() {
        return Err(UsageError::new(format!(
            "a kill-postgres fault on an external Postgres (--pg-url) needs {}: stampede crashes by itself only a Postgres it started (pg_terminate_backend ends sessions, it does not crash the server), so give the shell commands that crash yours (e.g. pg_ctl stop -D DIR -m immediate) and start it again",
            missing.join(" and ")
        )));
    }
    Ok(())
}
