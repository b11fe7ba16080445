//! The faults and shocks of a run: `--fault` in the fault grammar, and the older per-kind shorthands.

use crate::fault::FaultSpec;
use crate::values::valid::*;
use crate::values::{Dur, Percent};

/// The long help of `--fault`: the grammar and every kind with its keys.
const FAULT_HELP: &str = "A fault: KIND@AT[+FOR][,KEY=VALUE…], repeatable; AT counts from the start of the measured window, FOR is how long it lasts. The same keys as a scenario file's [[fault]] table, read by the same code; any fault given on the command line (this flag or a shorthand) replaces the file's faults.

Kinds: kill-redis@AT+FOR, kill-postgres@AT+FOR, pause-redis@AT+FOR, drop-cache@AT (keys fraction, order), slow-db@AT+FOR (key factor), spike@AT+FOR (key factor), failover@AT and migrate-slot@AT (key slot) on a Redis Cluster, holder-crash@AT[+FOR] (the instance holding the most locks dies mid-load; with +FOR a fresh one replaces it; mutex and lease coordinations). E.g. --fault kill-redis@3s+2s, --fault drop-cache@4s,fraction=100%,order=hottest, --fault slow-db@5s+3s,factor=4, --fault spike@5s+2s,factor=3, --fault migrate-slot@2s,slot=hottest. The per-kind flags of earlier versions (--kill-redis-at T --redis-down-for D, --drop-cache-at T, --drop-fraction P, …) still work as shorthands for the same faults; they are left out of the help, and docs/faults.md lists them.";

settings! {
    #[command(next_help_heading = "Faults")]
    pub struct FaultFlags / FaultResolved {

        /// Faults (`[[fault]]` tables: kind, at, down_for and the kind's own keys); on the command line `--fault KIND@AT[+FOR][,KEY=VALUE…]`, and any fault given there replaces them all
        #[arg(
            long = "fault",
            value_name = "KIND@AT[+FOR],…",
            value_parser = crate::fault::parse,
            help = "A fault, e.g. kill-redis@3s+2s or drop-cache@4s,fraction=50%",
            long_help = FAULT_HELP,
        )]
        #[serde(default)]
        pub fault: Vec<FaultSpec> => flags;

        /// A sweep axis on a fault's key (`--axis drop-cache.fraction=…`): set on the one fault of
        /// its kind once the file's faults and the flags' are merged.
        #[arg(skip)]
        #[serde(skip)]
        pub fault_keys: Vec<crate::fault::KeySet> => flags;

        /// Crash Redis (SIGKILL) at T into the measured window.
        ///
        /// Crash Redis (SIGKILL) this long after the measured window starts; repeatable, paired in
        /// order with --redis-down-for (scenario file: [[fault]] with kind = "kill-redis", at,
        /// down_for).
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub kill_redis_at: Vec<Dur> => folded;

        /// How long Redis stays down after --kill-redis-at.
        ///
        /// How long Redis stays down after the matching --kill-redis-at before a new, empty one
        /// starts on the same port.
        #[arg(hide = true, long, value_name = "DURATION")]
        #[serde(skip)]
        pub redis_down_for: Vec<Dur> => folded;

        /// Crash Postgres at T into the measured window.
        ///
        /// Crash Postgres this long after the measured window starts: SIGKILL of the managed
        /// server's whole process group, then a restart on the same port and data dir (crash
        /// recovery runs); repeatable, paired in order with --postgres-down-for (scenario file:
        /// [[fault]] with kind = "kill-postgres"). Loads fail fast meanwhile: without --db-timeout a
        /// Postgres fault sets it to 1s.
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub kill_postgres_at: Vec<Dur> => folded;

        /// How long Postgres stays down after --kill-postgres-at.
        ///
        /// How long Postgres stays down after the matching --kill-postgres-at before it starts
        /// again.
        #[arg(hide = true, long, value_name = "DURATION")]
        #[serde(skip)]
        pub postgres_down_for: Vec<Dur> => folded;

        /// Stall Redis at T into the measured window (CLIENT PAUSE ALL).
        ///
        /// Stall Redis this long after the measured window starts (CLIENT PAUSE ALL: connections
        /// stay open, every command hangs until its --redis-timeout); repeatable, paired in order
        /// with --pause-for (scenario file: [[fault]] with kind = "pause-redis").
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub pause_redis_at: Vec<Dur> => folded;

        /// How long Redis stays paused after --pause-redis-at.
        ///
        /// How long Redis stays paused after the matching --pause-redis-at.
        #[arg(hide = true, long, value_name = "DURATION")]
        #[serde(skip)]
        pub pause_for: Vec<Dur> => folded;

        /// Run without the scenario file's faults and shocks (a control run).
        ///
        /// Drops every [[fault]] of the scenario file, so the same workload runs undisturbed: the
        /// control that tells a metastable failure from plain overload.
        #[arg(long)]
        #[serde(skip)]
        pub no_shocks: bool => flags;

        /// Shock: remove a share of the run's cached entries at T.
        ///
        /// Remove a share (--drop-fraction, of --drop-order) of the run's cached entries this long
        /// after the measured window starts, with UNLINK: only entries, never the run's heartbeat,
        /// locks, lease tokens or version markers; repeatable (scenario file: [[fault]] with kind =
        /// "drop-cache", at, fraction, order).
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub drop_cache_at: Vec<Dur> => folded;

        /// Share of the entries a cache drop removes [default: 100%]
        ///
        /// Applies to every drop-cache shock, the scenario file's included.
        #[arg(hide = true, long, value_name = "P")]
        #[serde(skip)]
        pub drop_fraction: Option<Percent> => flags;

        /// Drop order: hottest or random [default: hottest]
        ///
        /// hottest: the most popular keys first (the cheapest way to hurt). random: a seeded random
        /// share of the keys.
        #[arg(hide = true, long, value_name = "ORDER")]
        #[serde(skip)]
        pub drop_order: Option<crate::fault::DropOrder> => flags;

        /// Shock: every load costs --slow-db-factor times more from T.
        ///
        /// From this long after the measured window starts, every load costs --slow-db-factor
        /// times its cost (the server really works longer: pg_sleep's argument is multiplied) for
        /// the matching --slow-db-for; repeatable (scenario file: [[fault]] with kind = "slow-db",
        /// at, for, factor). Needs --db-query sleep.
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub slow_db_at: Vec<Dur> => folded;

        /// How long loads stay slow after --slow-db-at.
        #[arg(hide = true, long, value_name = "DURATION")]
        #[serde(skip)]
        pub slow_db_for: Vec<Dur> => folded;

        /// Slow-db: how many times its cost a load costs [default: 4]
        ///
        /// Applies to every slow-db shock, the scenario file's included.
        #[arg(hide = true, long, value_name = "K")]
        #[serde(skip)]
        pub slow_db_factor: Option<f64> => flags;

        /// Shock: the offered rate is multiplied by --spike-factor from T.
        ///
        /// From this long after the measured window starts, the open loop offers --spike-factor
        /// times the rate for the matching --spike-for (the schedule stays exact and seeded);
        /// repeatable (scenario file: [[fault]] with kind = "spike", at, for, factor). Open loop
        /// only.
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub spike_at: Vec<Dur> => folded;

        /// How long the rate stays multiplied after --spike-at.
        #[arg(hide = true, long, value_name = "DURATION")]
        #[serde(skip)]
        pub spike_for: Vec<Dur> => folded;

        /// Spike: how many times the rate is offered [default: 2]
        ///
        /// Applies to every spike, the scenario file's included.
        #[arg(hide = true, long, value_name = "K")]
        #[serde(skip)]
        pub spike_factor: Option<f64> => flags;

        /// External Redis: shell command that restarts it after a fault.
        ///
        /// External Redis (--redis-url) only: shell command (run with sh -c) that starts it again
        /// after a fault's SHUTDOWN NOSAVE.
        #[arg(hide_short_help = true, long, value_name = "CMD")]
        pub redis_restart_cmd: Option<String> => or, check command("starts your Redis again");

        /// External Redis: allow a pause-redis fault on it.
        ///
        /// External Redis (--redis-url) only: allow a pause-redis fault, which stalls every client of
        /// that server, not only this run.
        #[arg(hide_short_help = true, long)]
        #[serde(default)]
        pub allow_pause_external: bool => any;

        /// External Redis: allow a kill-redis fault on it (SHUTDOWN NOSAVE).
        ///
        /// External Redis (--redis-url) only: allow a kill-redis fault, which sends that server
        /// SHUTDOWN NOSAVE: it stops without saving, so every client's data not yet persisted is
        /// lost, not only this run's.
        #[arg(hide_short_help = true, long)]
        #[serde(default)]
        pub allow_kill_external: bool => any;

        /// External Postgres: shell command that crashes it at a fault.
        ///
        /// External Postgres (--pg-url) only: shell command (run with sh -c) that crashes it at a
        /// kill-postgres fault, e.g. `pg_ctl stop -D DIR -m immediate` (stampede cannot crash a
        /// server it did not start; pg_terminate_backend only ends sessions).
        #[arg(hide_short_help = true, long, value_name = "CMD")]
        pub pg_kill_cmd: Option<String> => or, check command("crashes your Postgres");

        /// External Postgres: shell command that starts it again.
        ///
        /// External Postgres (--pg-url) only: shell command (run with sh -c) that starts it again
        /// after the fault's down time.
        #[arg(hide_short_help = true, long, value_name = "CMD")]
        pub pg_restart_cmd: Option<String> => or, check command("starts your Postgres again");

        /// Cluster fault: a planned CLUSTER FAILOVER at T.
        ///
        /// This long after the measured window starts, the replica of --redis-node's primary takes
        /// over (CLUSTER FAILOVER, a coordinated hand-over without data loss); repeatable (scenario
        /// file: [[fault]] with kind = "failover").
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub failover_at: Vec<Dur> => folded;

        /// Cluster fault: move a slot to another primary at T.
        ///
        /// This long after the measured window starts, the slot of the hottest key (or --slot) moves
        /// to another primary (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE), so requests meet
        /// ASK redirects while it moves; repeatable (scenario file: [[fault]] with kind =
        /// "migrate-slot").
        #[arg(hide = true, long, value_name = "T")]
        #[serde(skip)]
        pub migrate_slot_at: Vec<Dur> => folded;
    }
}
