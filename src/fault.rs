//! The faults a scenario asks for, as the user wrote them, checked before any server starts:
//! flags paired in order, every outage inside the measured window, no two outages of one
//! server overlapping (outages of different servers may). Running them is [`crate::chaos`]'s
//! job.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::Dur;

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
}

/// The server a fault strikes: outages of one server must not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    Redis,
    Postgres,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "Redis",
            Server::Postgres => "Postgres",
        }
    }
}

impl FaultKind {
    pub const ALL: [FaultKind; 3] = [
        FaultKind::KillRedis,
        FaultKind::KillPostgres,
        FaultKind::PauseRedis,
    ];

    /// The name written in scenario files and results: `kill-redis`.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "kill-redis",
            FaultKind::KillPostgres => "kill-postgres",
            FaultKind::PauseRedis => "pause-redis",
        }
    }

    /// The server this fault strikes.
    pub fn server(self) -> Server {
        match self {
            FaultKind::KillRedis | FaultKind::PauseRedis => Server::Redis,
            FaultKind::KillPostgres => Server::Postgres,
        }
    }

    /// The command-line flags of this kind: when it strikes, and for how long.
    pub fn flags(self) -> (&'static str, &'static str) {
        match self {
            FaultKind::KillRedis => ("--kill-redis-at", "--redis-down-for"),
            FaultKind::KillPostgres => ("--kill-postgres-at", "--postgres-down-for"),
            FaultKind::PauseRedis => ("--pause-redis-at", "--pause-for"),
        }
    }

    /// What happens at `at`, in words for an error message.
    fn what(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "Redis is killed",
            FaultKind::KillPostgres => "Postgres is killed",
            FaultKind::PauseRedis => "Redis is paused",
        }
    }

    /// What `down_for` is, in words for an error message.
    fn lasts(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "how long Redis stays down before it starts again",
            FaultKind::KillPostgres => "how long Postgres stays down before it starts again",
            FaultKind::PauseRedis => "how long Redis stays paused",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One `[[fault]]` table of a scenario file; on the command line the same fault is a pair of
/// flags, such as `--kill-redis-at AT --redis-down-for DOWN_FOR` (see [`FaultKind::flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// When the fault strikes, measured from the start of the measured window (after warm-up).
    pub at: Dur,
    /// How long the server stays down (or paused) before it is back.
    pub down_for: Dur,
}

/// Pair the `at` flag of `kind` with its duration flag, in the order given.
pub fn pair(kind: FaultKind, at: &[Dur], down: &[Dur]) -> Result<Vec<FaultSpec>, String> {
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
        .map(|(&at, &down_for)| FaultSpec { kind, at, down_for })
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
                if f.kind == FaultKind::PauseRedis {
                    "paused"
                } else {
                    "down"
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
        let spec = |kind, at: &str, down: &str| FaultSpec {
            kind,
            at: dur(at),
            down_for: dur(down),
        };
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
