//! The scenario of one invocation of `run` or `prepare`: the file and flags resolved, the app
//! under test joined, and every check between the scenario and how it is run (a sharded run,
//! `--repeat`, `--metrics-listen`, `--out`) made before anything starts, so that the commands
//! below resolution only run what it returns.

use std::time::Duration;

use crate::cli::{CleanupCmd, PrepareCmd, RunCmd, ShardFlags};
use crate::error::{Problems, UsageError};
use crate::fault::FaultKind;
use crate::metric::Metric;
use crate::scenario::{self, Scenario};
use crate::shard::{INDEX_ENV, Plan, ShardSpec, derived_run_id, sanitize_run_id};
use crate::tls::RedisTls;
use crate::values::Dur;

/// The scenario of `run` and, for a shard of a sharded run, its plan; or one error listing
/// every problem found.
pub fn for_run(cmd: &RunCmd) -> Result<(Scenario, Option<Plan>), UsageError> {
    let sc = scenario::target::with_target(
        scenario::resolve(cmd.setup.scenario.as_ref(), cmd.setup.flags())?,
        &cmd.setup.flags,
        &cmd.target,
    )?;
    let mut p = Problems::default();
    // The shard's index first: without it nothing else about the shard can be said.
    let plan = p.take(shard_plan(&sc, &cmd.shard)).flatten();
    p.take(refuse_boundary(&sc));
    let shards = cmd.shard.shard.map(|s| s.count).or(cmd.shard.shards);
    if let Some(count) = shards {
        sharded(&sc, count, &mut p);
        if cmd.trials.repeat > 1 {
            p.push(
                "--repeat runs trials one after another in one process; a sharded run is one trial: run the shards again for another",
            );
        }
    } else if cmd.shard.run_id.is_some() || cmd.shard.start_at.is_some() {
        p.push("--run-id and --start-at belong to a sharded run: give --shard I/N or --shards N");
    }
    if cmd.trials.repeat > 1 {
        if cmd.metrics.metrics_listen.is_some() {
            p.push(
                "--metrics-listen exports one run's figures: it cannot be combined with --repeat",
            );
        }
        if let Some(path) = &cmd.output.out
            && path.extension().is_some_and(|x| x == "json")
        {
            p.push(format!(
                "--out {} looks like a file, but with --repeat it is a directory that gets <strategy>/trial-N.json and summary.json: give a directory",
                path.display()
            ));
        }
    }
    p.into_result()?;
    Ok((sc, plan))
}

/// The plan of a sharded run from its flags, or None for a 1-process run; `--shards N` takes
/// its index from the environment (a Kubernetes Indexed Job's).
fn shard_plan(sc: &Scenario, f: &ShardFlags) -> Result<Option<Plan>, UsageError> {
    let spec = match (f.shard, f.shards) {
        (Some(s), _) => s,
        (None, Some(n)) => ShardSpec::from_index_env(n, std::env::var(INDEX_ENV).ok().as_deref())
            .map_err(UsageError)?,
        (None, None) => return Ok(None),
    };
    plan(sc, f, spec).map(Some)
}

/// Shard `spec`'s plan: the flags' waits, else their defaults.
fn plan(sc: &Scenario, f: &ShardFlags, spec: ShardSpec) -> Result<Plan, UsageError> {
    let or = |d: Option<Dur>, secs| d.map_or(Duration::from_secs(secs), |d| d.0);
    Ok(Plan {
        spec,
        run_id: run_id(sc, f, spec.count)?,
        start_at: f.start_at,
        start_delay: or(f.start_delay, 5),
        start_timeout: or(f.start_timeout, 60),
        end_timeout: or(f.end_timeout, 60),
    })
}

/// `--run-id`, or one derived from the scenario and the shard count, so that shards started
/// with the same command line meet without agreeing on a name first.
fn run_id(sc: &Scenario, f: &ShardFlags, count: u32) -> Result<String, UsageError> {
    if let Some(id) = &f.run_id {
        return sanitize_run_id(id).map_err(UsageError);
    }
    let text = serde_json::to_string(sc)
        .map_err(|e| UsageError::new(format!("encoding the scenario for its run id: {e}")))?;
    Ok(derived_run_id(&text, count))
}

/// The scenario of `prepare` and the plan of the run it sets up (as its shard 0).
pub fn for_prepare(cmd: &PrepareCmd) -> Result<(Scenario, Plan), UsageError> {
    let sc = scenario::resolve(cmd.setup.scenario.as_ref(), cmd.setup.flags())?;
    let Some(count) = cmd.shard.shards.or(cmd.shard.shard.map(|s| s.count)) else {
        return Err(UsageError::new(
            "prepare needs --shards N: how many shards the run it sets up has",
        ));
    };
    let mut p = Problems::default();
    sharded(&sc, count, &mut p);
    p.into_result()?;
    // Prepare sets the run up and waits for no shard.
    let plan = Plan {
        start_timeout: Duration::ZERO,
        end_timeout: Duration::ZERO,
        ..plan(
            &sc,
            &cmd.shard,
            ShardSpec::new(0, count).map_err(UsageError)?,
        )?
    };
    Ok((sc, plan))
}

/// A limit on the boundary rate, which only a sweep's bisection finds, refused on a run or a
/// comparison before anything starts (it could never be measured there).
pub fn refuse_boundary(sc: &Scenario) -> Result<(), UsageError> {
    if sc.thresholds.boundary_rps_min().is_some() {
        return Err(UsageError::new(format!(
            "{}: a run or a comparison has no boundary rate, only `stampede sweep --boundary rps` finds one: drop the threshold here, or sweep",
            crate::thresholds::BOUNDARY_RPS_MIN
        )));
    }
    Ok(())
}

/// What a sharded run of `count` shards needs, and what it cannot do yet.
fn sharded(sc: &Scenario, count: u32, p: &mut Problems) {
    if sc.redis_url.is_none() || sc.pg_url.is_none() {
        p.push(format!(
            "a sharded run needs servers every shard reaches: give --redis-url and --pg-url (missing: {}). Servers the tool starts itself are private to one process, so shards cannot share them",
            [
                sc.redis_url.is_none().then_some("--redis-url"),
                sc.pg_url.is_none().then_some("--pg-url"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        ));
    }
    if sc.instances < count {
        p.push(format!(
            "{count} shards need at least {count} app instances (instance k runs on shard k mod {count}): raise --instances to {count} or more"
        ));
    }
    // A herd spans processes, and each shard counts only its own loads: the merged result's
    // client-side herd figures are unknown by construction, so a limit on them could never
    // hold.
    for (m, _) in sc.thresholds.iter() {
        if matches!(m, Metric::PeakKeyHerd | Metric::RedundantLoads) {
            p.push(format!(
                "{}: a sharded run cannot know {} (each shard counts only its own loads, and a herd spans shards); its merged result has db.ledger_peak_key_herd and db.ledger_redundant_loads from the load ledger instead: drop the threshold, or run in one process",
                m.threshold_name().unwrap_or_default(),
                m.name()
            ));
        }
    }
    p.refuse([
        (
            sc.writes.is_some(),
            "--write-rps: the consistency figures are exact only when one process sees every commit; a sharded run cannot have writes yet (run the writes in one process)",
        ),
        (
            sc.target.is_some(),
            "--target: a sharded run drives the built-in app's instances; an app under test is driven from one process (its DB figures come from the servers either way)",
        ),
        (
            FaultKind::HolderCrash.among(&sc.faults),
            "holder-crash kills the instance holding the most locks among all the run's instances, and a sharded run spreads them over processes that cannot see each other's: run the fault in one process",
        ),
        (
            sc.faults.iter().any(|f| f.kind.is_network()),
            "a network fault numbers the instances of the whole run, and a sharded run spreads them over processes: run the fault in one process",
        ),
        (
            sc.own_load.is_some(),
            "--db-sql: shards count their loads in the load ledger that stampede installs in its own schema, and with --db-sql it creates nothing in your database: run --db-sql in one process",
        ),
    ]);
}

/// The servers `cleanup` clears of dead runs' leftovers.
pub struct Cleanup {
    pub redis_url: Option<String>,
    pub redis_tls: RedisTls,
    pub pg_url: Option<String>,
    /// A schema whose heartbeat is older than this is a dead run's.
    pub older_than: Duration,
}

/// What `cleanup` clears: at least one server, and TLS settings only for a Redis to clean.
pub fn for_cleanup(cmd: &CleanupCmd) -> Result<Cleanup, UsageError> {
    if cmd.redis_url.is_none() && cmd.pg_url.is_none() {
        return Err(UsageError::new(
            "cleanup needs --redis-url and/or --pg-url: the servers whose leftovers to remove (a managed server's are removed by the next run)",
        ));
    }
    let tls = cmd.redis_tls.tls();
    if !tls.is_empty() && cmd.redis_url.is_none() {
        return Err(UsageError::new(
            "--redis-ca, --redis-cert, --redis-key and --redis-insecure are for the Redis to clean: give it with --redis-url rediss://…",
        ));
    }
    tls.check(cmd.redis_url.as_deref())?;
    Ok(Cleanup {
        redis_url: cmd.redis_url.clone(),
        redis_tls: tls,
        pg_url: cmd.pg_url.clone(),
        older_than: cmd.older_than.0,
    })
}
