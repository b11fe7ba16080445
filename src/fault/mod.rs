//! The faults a scenario asks for, as the user wrote them, checked before any server starts:
//! flags paired in order, every outage inside the measured window, no two outages of one
//! server overlapping (outages of different servers may). Running them is [`crate::fault::chaos`]'s
//! job. A fault is written one way on the command line, `--fault KIND@AT[+FOR][,KEY=VALUE…]`,
//! read by the same deserializer as a `[[fault]]` table ([`grammar`]); each kind says here
//! which keys it takes ([`FaultKind::keys`]), so a new kind needs nothing of the CLI.

pub mod chaos;
mod criteria;
mod grammar;
mod net;
pub mod report;

pub use crate::cluster::SlotChoice;
pub use criteria::{RecoveryCriteria, verdict_possible};
pub use grammar::{axis_key, parse, spell, with_key};
pub use net::{InstanceSet, NetServer};

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::{Dur, Percent, Size};

/// The kinds of fault a run can inject.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Redis crashes (SIGKILL) and comes back empty after `down_for`.
    #[default]
    KillRedis,
    /// Postgres crashes (SIGKILL of its whole process group) and comes back after `down_for`
    /// on the same data dir, through crash recovery.
    KillPostgres,
    /// Redis stalls (`CLIENT PAUSE <down_for> ALL`): connections stay open, commands hang.
    PauseRedis,
    /// A share of the run's cached entries is removed at once (UNLINK), as a flush at peak or
    /// a failover to an empty replica would; the servers stay up.
    DropCache,
    /// Every load costs `factor` times its cost for `down_for` (pg_sleep's argument multiplied):
    /// a vacuum, a failover or a noisy neighbour.
    SlowDb,
    /// The offered rate is multiplied by `factor` for `down_for` (open loop only).
    Spike,
    /// Redis Cluster: a planned CLUSTER FAILOVER on a replica of the chosen primary
    /// (`--redis-node`); instant (it returns once the replica has taken over).
    Failover,
    /// Redis Cluster: a slot (the hottest key's, or `--slot`) moves to another primary while
    /// traffic runs, so requests meet ASK redirects; instant (it returns once the slot moved).
    MigrateSlot,
    /// The app instance holding the most Redis locks (or leases) dies mid-load: its loads
    /// never finish or release, its requests in flight fail, later ones go to the others; with
    /// `down_for` it comes back after it as a fresh instance.
    HolderCrash,
    /// The network to a server holds every byte (`server=`, `instance=`): connections stay
    /// open, new ones are accepted and hang, nothing is answered until it heals, when the held
    /// bytes are delivered.
    Partition,
    /// Every connection to a server is reset (RST), and each new one as it comes, for FOR.
    Reset,
    /// The round trip to a server grows by `add` (or to `factor` times the configured one).
    Latency,
    /// Each direction to a server carries at most `rate` bytes a second.
    Bandwidth,
    /// A connection closed by either end stays half-open for `delay` before the other end
    /// learns of it (a middlebox holding the FIN).
    SlowClose,
}

/// Which entries a cache drop removes first.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum DropOrder {
    /// The most popular keys first: the cheapest way to hurt.
    #[default]
    Hottest,
    /// A seeded random share of the keys.
    Random,
}

impl DropOrder {
    pub fn name(self) -> &'static str {
        match self {
            DropOrder::Hottest => "hottest",
            DropOrder::Random => "random",
        }
    }
}

/// The server a fault strikes: outages of one server must not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    Redis,
    Postgres,
    /// The run's cached entries (drop-cache): the servers stay up.
    Entries,
    /// What a load costs (slow-db).
    LoadCost,
    /// The offered rate (spike).
    Traffic,
    /// An app instance (holder-crash).
    Instance,
    /// The network between the instances and the servers (partition, reset, latency,
    /// bandwidth).
    Network,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "Redis",
            Server::Postgres => "Postgres",
            Server::Entries => "the cache's entries",
            Server::LoadCost => "the load cost",
            Server::Traffic => "the offered rate",
            Server::Instance => "an app instance",
            Server::Network => "the network",
        }
    }
}

impl FaultKind {
    pub const ALL: [FaultKind; 14] = [
        FaultKind::KillRedis,
        FaultKind::KillPostgres,
        FaultKind::PauseRedis,
        FaultKind::DropCache,
        FaultKind::SlowDb,
        FaultKind::Spike,
        FaultKind::Failover,
        FaultKind::MigrateSlot,
        FaultKind::HolderCrash,
        FaultKind::Partition,
        FaultKind::Reset,
        FaultKind::Latency,
        FaultKind::Bandwidth,
        FaultKind::SlowClose,
    ];

    /// Whether a fault of this kind is among `faults`.
    pub fn among(self, faults: &[FaultSpec]) -> bool {
        faults.iter().any(|f| f.kind == self)
    }

    /// A fault of the network between the instances and a server, made by the proxy.
    pub fn is_network(self) -> bool {
        self.server() == Server::Network
    }

    /// Over when it is done: no `down_for`.
    pub fn is_instant(self) -> bool {
        matches!(
            self,
            FaultKind::DropCache | FaultKind::Failover | FaultKind::MigrateSlot
        )
    }

    /// `+FOR` may be left out: the fault then lasts to the end of the run (a crashed instance
    /// that never comes back).
    pub fn for_optional(self) -> bool {
        self == FaultKind::HolderCrash
    }

    /// Only on a Redis Cluster.
    pub fn needs_cluster(self) -> bool {
        matches!(self, FaultKind::Failover | FaultKind::MigrateSlot)
    }

    /// A shock on the workload (the cache's content, the load cost, the rate) rather than an
    /// outage of a server.
    pub fn is_shock(self) -> bool {
        matches!(
            self,
            FaultKind::DropCache | FaultKind::SlowDb | FaultKind::Spike
        )
    }

    /// The keys a fault of this kind takes besides `kind`, `at` and `down_for`, in a `[[fault]]`
    /// table and after `KIND@AT[+FOR],` on the command line alike.
    pub fn keys(self) -> &'static [FaultKey] {
        match self {
            FaultKind::DropCache => &[
                FaultKey {
                    name: "fraction",
                    unit: KeyUnit::Share,
                    what: "the share of the entries removed [default: 100%]",
                },
                FaultKey {
                    name: "order",
                    unit: KeyUnit::Word,
                    what: "which go first: hottest or random [default: hottest]",
                },
            ],
            FaultKind::SlowDb => &[FaultKey {
                name: "factor",
                unit: KeyUnit::Number,
                what: "how many times its cost a load costs, 1 to 1000 [default: 4]",
            }],
            FaultKind::Spike => &[FaultKey {
                name: "factor",
                unit: KeyUnit::Number,
                what: "how many times the rate is offered, 0.01 to 100 [default: 2]",
            }],
            FaultKind::MigrateSlot => &[FaultKey {
                name: "slot",
                unit: KeyUnit::Word,
                what: "the slot moved: hottest or 0 to 16383 [default: hottest, or --slot]",
            }],
            FaultKind::Partition | FaultKind::Reset => &NET_KEYS,
            FaultKind::Latency => &[
                NET_KEYS[0],
                NET_KEYS[1],
                FaultKey {
                    name: "add",
                    unit: KeyUnit::Duration,
                    what: "the round trip added, e.g. 5ms",
                },
                FaultKey {
                    name: "factor",
                    unit: KeyUnit::Number,
                    what: "or: the configured round trip (--net-rtt) multiplied, 1 to 1000",
                },
            ],
            FaultKind::Bandwidth => &[
                NET_KEYS[0],
                NET_KEYS[1],
                FaultKey {
                    name: "rate",
                    unit: KeyUnit::Word,
                    what: "bytes a second each way, e.g. 1mb or 100k (required)",
                },
            ],
            FaultKind::SlowClose => &[
                NET_KEYS[0],
                NET_KEYS[1],
                FaultKey {
                    name: "delay",
                    unit: KeyUnit::Duration,
                    what: "how long a close is held before the other end sees it, e.g. 2s (required)",
                },
            ],
            FaultKind::KillRedis
            | FaultKind::KillPostgres
            | FaultKind::PauseRedis
            | FaultKind::Failover
            | FaultKind::HolderCrash => &[],
        }
    }

    /// The name written in scenario files and results: `kill-redis`.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "kill-redis",
            FaultKind::KillPostgres => "kill-postgres",
            FaultKind::PauseRedis => "pause-redis",
            FaultKind::DropCache => "drop-cache",
            FaultKind::SlowDb => "slow-db",
            FaultKind::Spike => "spike",
            FaultKind::Failover => "failover",
            FaultKind::MigrateSlot => "migrate-slot",
            FaultKind::HolderCrash => "holder-crash",
            FaultKind::Partition => "partition",
            FaultKind::Reset => "reset",
            FaultKind::Latency => "latency",
            FaultKind::Bandwidth => "bandwidth",
            FaultKind::SlowClose => "slow-close",
        }
    }

    /// The server this fault strikes.
    pub fn server(self) -> Server {
        match self {
            FaultKind::KillRedis
            | FaultKind::PauseRedis
            | FaultKind::Failover
            | FaultKind::MigrateSlot => Server::Redis,
            FaultKind::KillPostgres => Server::Postgres,
            FaultKind::DropCache => Server::Entries,
            FaultKind::SlowDb => Server::LoadCost,
            FaultKind::Spike => Server::Traffic,
            FaultKind::HolderCrash => Server::Instance,
            FaultKind::Partition
            | FaultKind::Reset
            | FaultKind::Latency
            | FaultKind::Bandwidth
            | FaultKind::SlowClose => Server::Network,
        }
    }

    /// The command-line flags of this kind: when it strikes, and for how long.
    pub fn flags(self) -> (&'static str, &'static str) {
        match self {
            FaultKind::KillRedis => ("--kill-redis-at", "--redis-down-for"),
            FaultKind::KillPostgres => ("--kill-postgres-at", "--postgres-down-for"),
            FaultKind::PauseRedis => ("--pause-redis-at", "--pause-for"),
            FaultKind::DropCache => ("--drop-cache-at", ""),
            FaultKind::SlowDb => ("--slow-db-at", "--slow-db-for"),
            FaultKind::Spike => ("--spike-at", "--spike-for"),
            FaultKind::Failover => ("--failover-at", ""),
            FaultKind::MigrateSlot => ("--migrate-slot-at", ""),
            // No shorthand: `--fault holder-crash@AT[+FOR]` only.
            FaultKind::HolderCrash => ("--fault holder-crash@AT", "+FOR"),
            FaultKind::Partition => ("--fault partition@AT", "+FOR"),
            FaultKind::Reset => ("--fault reset@AT", "+FOR"),
            FaultKind::Latency => ("--fault latency@AT", "+FOR"),
            FaultKind::Bandwidth => ("--fault bandwidth@AT", "+FOR"),
            FaultKind::SlowClose => ("--fault slow-close@AT", "+FOR"),
        }
    }

    /// What happens at `at`, in words for an error message.
    fn what(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "Redis is killed",
            FaultKind::KillPostgres => "Postgres is killed",
            FaultKind::PauseRedis => "Redis is paused",
            FaultKind::DropCache => "the cache is dropped",
            FaultKind::SlowDb => "loads slow down",
            FaultKind::Spike => "the rate spikes",
            FaultKind::Failover => "a replica takes over its primary",
            FaultKind::MigrateSlot => "a slot moves to another primary",
            FaultKind::HolderCrash => "the app instance holding the most locks dies",
            FaultKind::Partition => "the network to the server holds every byte",
            FaultKind::Reset => "every connection to the server is reset",
            FaultKind::Latency => "the round trip to the server grows",
            FaultKind::Bandwidth => "the network to the server slows to a rate",
            FaultKind::SlowClose => "closing connections to the server stay half-open",
        }
    }

    /// What `down_for` is, in words for an error message.
    fn lasts(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "how long Redis stays down before it starts again",
            FaultKind::KillPostgres => "how long Postgres stays down before it starts again",
            FaultKind::PauseRedis => "how long Redis stays paused",
            FaultKind::DropCache => "nothing: a drop is instant",
            FaultKind::SlowDb => "how long loads stay slow",
            FaultKind::Spike => "how long the rate stays multiplied",
            FaultKind::Failover => "nothing: a failover is over once the replica took over",
            FaultKind::MigrateSlot => "nothing: a migration is over once the slot moved",
            FaultKind::HolderCrash => {
                "how long the crashed instance stays gone before a fresh one takes its place (without +FOR, to the end of the run)"
            }
            FaultKind::Partition => "how long the partition lasts before it heals",
            FaultKind::Reset => "how long connections are reset",
            FaultKind::Latency => "how long the round trip stays longer",
            FaultKind::Bandwidth => "how long the rate is limited",
            FaultKind::SlowClose => "how long closes are held",
        }
    }
}

/// The keys every network fault takes: which server, which instances.
const NET_KEYS: [FaultKey; 2] = [
    FaultKey {
        name: "server",
        unit: KeyUnit::Word,
        what: "whose network: redis, postgres or both [default: both]",
    },
    FaultKey {
        name: "instance",
        unit: KeyUnit::Instances,
        what: "an instance cut off, from 0, repeatable (instance=0,instance=2) [default: every instance]",
    },
];

/// A key of a fault besides `kind`, `at` and `down_for` (see [`FaultKind::keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultKey {
    /// As written in a table and after `KIND@AT[+FOR],`: `fraction`.
    pub name: &'static str,
    /// What its values are, which says whether a sweep can step it.
    pub unit: KeyUnit,
    /// What it sets, with its range and default, for an error that lists the keys.
    pub what: &'static str,
}

/// What a fault key's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUnit {
    /// A duration (`at`, `down_for`).
    Duration,
    /// A share, `10%` or `0.1`.
    Share,
    /// A plain number.
    Number,
    /// A word from a list (or a word or a number): not a sweep axis.
    Word,
    /// Instance numbers, the key repeated for each: not a sweep axis.
    Instances,
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One `[[fault]]` table of a scenario file; on the command line the same fault is
/// `--fault KIND@AT[+FOR][,KEY=VALUE…]` (read into this by [`parse`]), or a pair of shorthand
/// flags such as `--kill-redis-at AT --redis-down-for DOWN_FOR` (see [`FaultKind::flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// When the fault strikes, measured from the start of the measured window (after warm-up).
    pub at: Dur,
    /// How long the server stays down (or paused) before it is back; for slow-db and spike,
    /// how long the shock lasts (`for` is accepted too); none for drop-cache (instant).
    #[serde(default, alias = "for")]
    pub down_for: Dur,
    /// drop-cache: the share of the entries removed (default 100%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Percent>,
    /// drop-cache: which entries go first (default hottest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<DropOrder>,
    /// slow-db: how many times its cost a load costs (default 4); spike: how many times the
    /// rate is offered (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// migrate-slot: the slot moved, `hottest` or 0 to 16383 (default: `--slot`, else the
    /// hottest key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<SlotChoice>,
    /// Network faults: whose network, redis, postgres or both (default both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<NetServer>,
    /// Network faults: the instances struck, from 0 (default every instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceSet>,
    /// latency: the round trip added (or `factor` times the configured one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Dur>,
    /// bandwidth: bytes a second, each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Size>,
    /// slow-close: how long a close is held before the other end sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Dur>,
}

impl FaultSpec {
    /// A fault of `kind` at `at` lasting `down_for`, with the kind's defaults.
    pub fn new(kind: FaultKind, at: Dur, down_for: Dur) -> FaultSpec {
        FaultSpec {
            kind,
            at,
            down_for,
            fraction: None,
            order: None,
            factor: None,
            slot: None,
            server: None,
            instance: None,
            add: None,
            rate: None,
            delay: None,
        }
    }

    /// The share a drop-cache removes.
    pub fn drop_fraction(&self) -> f64 {
        self.fraction.map_or(1.0, |p| p.0)
    }

    /// The factor of a slow-db or spike shock (1 for the other kinds).
    pub fn shock_factor(&self) -> f64 {
        match (self.kind, self.factor) {
            (_, Some(f)) => f,
            (FaultKind::SlowDb, None) => DEFAULT_SLOW_DB_FACTOR,
            (FaultKind::Spike, None) => DEFAULT_SPIKE_FACTOR,
            _ => 1.0,
        }
    }

    /// When the shock is over (its server back, its time up), from the window's start.
    pub fn ends_at(&self) -> Duration {
        self.at.0 + self.down_for.0
    }
}

/// One key of one fault set from outside the fault list (a sweep axis `drop-cache.fraction`):
/// it lands on the one fault of `kind` the run has, after the file's and the flags' faults
/// are merged.
#[derive(Debug, Clone, PartialEq)]
pub struct KeySet {
    pub kind: FaultKind,
    /// `at`, `for` or one of the kind's [`FaultKind::keys`].
    pub key: String,
    pub value: String,
}

impl KeySet {
    /// Set the key on the one fault of its kind in `faults`; none or several is an error
    /// naming the axis.
    pub fn apply(&self, faults: &mut [FaultSpec]) -> Result<(), String> {
        let (kind, axis) = (self.kind, format!("--axis {}.{}", self.kind, self.key));
        let mut of_kind = faults.iter_mut().filter(|f| f.kind == kind);
        let (Some(f), None) = (of_kind.next(), of_kind.next()) else {
            let n = faults.iter().filter(|f| f.kind == kind).count();
            return Err(if n == 0 {
                format!(
                    "{axis}: the run has no {kind} fault to set `{}` on: add one (--fault {kind}@AT{}, or a [[fault]] table with kind = \"{kind}\")",
                    self.key,
                    if kind.is_instant() { "" } else { "+FOR" }
                )
            } else {
                format!(
                    "{axis}: the run has {n} {kind} faults, and the axis sets `{}` on one: keep one {kind} fault (a shorthand such as --drop-fraction sets every fault of its kind)",
                    self.key
                )
            });
        };
        *f = with_key(f, &self.key, &self.value).map_err(|e| format!("{axis}: {e}"))?;
        Ok(())
    }
}

/// How many times its cost a load costs during a slow-db shock when no factor is given.
pub const DEFAULT_SLOW_DB_FACTOR: f64 = 4.0;
/// How many times the rate is offered during a spike when no factor is given.
pub const DEFAULT_SPIKE_FACTOR: f64 = 2.0;

/// Pair the `at` flag of `kind` with its duration flag, in the order given; an instant kind
/// has no duration flag.
pub fn pair(kind: FaultKind, at: &[Dur], down: &[Dur]) -> Result<Vec<FaultSpec>, String> {
    if kind.is_instant() {
        return Ok(at
            .iter()
            .map(|&at| FaultSpec::new(kind, at, Dur(Duration::ZERO)))
            .collect());
    }
    let (at_flag, down_flag) = kind.flags();
    match (at.len(), down.len()) {
        (0, 0) => return Ok(Vec::new()),
        (_, 0) => {
            return Err(format!("{at_flag} needs {down_flag} ({})", kind.lasts()));
        }
        (0, _) => {
            return Err(format!(
                "{down_flag} needs {at_flag} (when, after the measured window starts, {})",
                kind.what()
            ));
        }
        (a, d) if a != d => {
            return Err(format!(
                "{at_flag} given {a} times but {down_flag} {d} times: they are paired in order, one duration per fault"
            ));
        }
        _ => {}
    }
    Ok(at
        .iter()
        .zip(down)
        .map(|(&at, &down_for)| FaultSpec::new(kind, at, down_for))
        .collect())
}

/// Faults must strike inside the measured window, each server must be back before the window
/// ends (so the recovery is measured and an external server is never left down or paused),
/// and two outages of one server must not overlap (a Redis pause during a Redis crash, say);
/// outages of different servers may. Sorts `faults` by `at`; `name` names a fault (by its
/// position as written) in an error.
pub fn check(
    faults: &mut [FaultSpec],
    duration: Dur,
    name: impl Fn(usize, &FaultSpec) -> String,
) -> Result<(), String> {
    // Numbering in errors follows the order written, so name them before sorting.
    let mut named: Vec<(String, FaultSpec)> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| (name(i, f), *f))
        .collect();
    named.sort_by_key(|(_, f)| (f.kind.server(), f.at));
    // The server's last outage: which fault, and when the server is back from it.
    let mut busy: Option<(Server, &str, Duration)> = None;
    for (name, f) in &named {
        let server = f.kind.server();
        let back = f.at.0 + f.down_for.0;
        if back > duration.0 {
            return Err(format!(
                "{name}: {} would still be {} when the run ends ({} + {} > duration {duration}); fault times count from the start of the measured window: move the fault earlier, shorten its duration or lengthen --duration",
                server.name(),
                match f.kind {
                    FaultKind::PauseRedis => "paused",
                    FaultKind::SlowDb => "slowed",
                    FaultKind::Spike => "multiplied",
                    k if k.is_network() => "struck by a network fault",
                    _ => "down",
                },
                f.at,
                f.down_for
            ));
        }
        if let Some((s, earlier, until)) = busy
            && s == server
            && f.at.0 < until
        {
            return Err(format!(
                "{name}: starts at {} while {} is still down or paused from {earlier} (back at {}): outages of one server must not overlap",
                f.at,
                server.name(),
                Dur(until)
            ));
        }
        busy = Some((server, name, back));
    }
    faults.sort_by_key(|f| f.at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dur(s: &str) -> Dur {
        s.parse().unwrap()
    }

    #[test]
    fn flags_pair_in_order_and_the_schedule_sorts() {
        let mut f = pair(
            FaultKind::KillRedis,
            &[dur("6s"), dur("1s")],
            &[dur("2s"), dur("3s")],
        )
        .unwrap();
        check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap();
        let got: Vec<(Dur, Dur)> = f.iter().map(|f| (f.at, f.down_for)).collect();
        assert_eq!(got, vec![(dur("1s"), dur("3s")), (dur("6s"), dur("2s"))]);
        assert!(f.iter().all(|f| f.kind == FaultKind::KillRedis));
        // Back exactly at the end, and one fault starting as the previous one ends, are fine.
        let mut f = pair(
            FaultKind::KillRedis,
            &[dur("0s"), dur("2s")],
            &[dur("2s"), dur("8s")],
        )
        .unwrap();
        check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap();
    }

    #[test]
    fn errors_name_the_fault_as_written() {
        let mut f = pair(
            FaultKind::KillRedis,
            &[dur("5s"), dur("1s")],
            &[dur("1s"), dur("9s")],
        )
        .unwrap();
        let e = check(&mut f, dur("10s"), |i, _| format!("fault #{}", i + 1)).unwrap_err();
        assert!(e.starts_with("fault #1:"), "{e}");
        assert!(e.contains("must not overlap"), "{e}");
        assert!(e.contains("from fault #2"), "names the earlier outage: {e}");
    }

    #[test]
    fn each_kind_pairs_its_own_flags() {
        let e = pair(FaultKind::KillPostgres, &[dur("1s")], &[]).unwrap_err();
        assert!(
            e.contains("--kill-postgres-at needs --postgres-down-for"),
            "{e}"
        );
        let e = pair(FaultKind::PauseRedis, &[], &[dur("1s")]).unwrap_err();
        assert!(e.contains("--pause-for needs --pause-redis-at"), "{e}");
        let e = pair(FaultKind::PauseRedis, &[dur("1s")], &[dur("1s"), dur("2s")]).unwrap_err();
        assert!(e.contains("paired in order"), "{e}");
    }

    #[test]
    fn outages_of_one_server_must_not_overlap_but_different_servers_may() {
        let spec = |kind, at: &str, down: &str| FaultSpec::new(kind, dur(at), dur(down));
        // A Redis pause inside a Redis crash: one server, refused.
        let mut f = vec![
            spec(FaultKind::KillRedis, "1s", "3s"),
            spec(FaultKind::PauseRedis, "2s", "1s"),
        ];
        let e = check(&mut f, dur("10s"), |i, f| format!("{} #{i}", f.kind)).unwrap_err();
        assert!(e.starts_with("pause-redis #1:"), "{e}");
        assert!(e.contains("Redis is still down or paused"), "{e}");
        // Two Postgres crashes overlapping: refused.
        let mut f = vec![
            spec(FaultKind::KillPostgres, "1s", "3s"),
            spec(FaultKind::KillPostgres, "3s", "1s"),
        ];
        let e = check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap_err();
        assert!(e.contains("Postgres is still down"), "{e}");
        // A Postgres crash during a Redis pause and a Redis crash: different servers, fine,
        // and the schedule comes back sorted by time.
        let mut f = vec![
            spec(FaultKind::KillRedis, "5s", "1s"),
            spec(FaultKind::KillPostgres, "1s", "5s"),
            spec(FaultKind::PauseRedis, "2s", "2s"),
        ];
        check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap();
        let kinds: Vec<FaultKind> = f.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FaultKind::KillPostgres,
                FaultKind::PauseRedis,
                FaultKind::KillRedis
            ]
        );
        // A pause that would outlast the run.
        let mut f = vec![spec(FaultKind::PauseRedis, "8s", "3s")];
        let e = check(&mut f, dur("10s"), |_, _| "p".into()).unwrap_err();
        assert!(e.contains("Redis would still be paused"), "{e}");
    }
}
