//! The faults a scenario asks for, as the user wrote them, checked before any server starts:
//! flags paired in order, every outage inside the measured window, none overlapping. Running
//! them is [`crate::chaos`]'s job.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::Dur;

/// The kinds of fault a run can inject.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Redis crashes (SIGKILL) and comes back empty after `down_for`.
    #[default]
    KillRedis,
}

impl FaultKind {
    /// The name written in scenario files and results: `kill-redis`.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillRedis => "kill-redis",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One `[[fault]]` table of a scenario file; on the command line the same fault is
/// `--kill-redis-at AT --redis-down-for DOWN_FOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// When the fault strikes, measured from the start of the measured window (after warm-up).
    pub at: Dur,
    /// How long Redis stays down before a new, empty one is started.
    pub down_for: Dur,
}

/// Pair `--kill-redis-at` with `--redis-down-for` in the order given.
pub fn pair(at: &[Dur], down: &[Dur]) -> Result<Vec<FaultSpec>, String> {
    match (at.len(), down.len()) {
        (0, 0) => return Ok(Vec::new()),
        (_, 0) => {
            return Err(
                "--kill-redis-at needs --redis-down-for (how long Redis stays down before it starts again)"
                    .to_string(),
            );
        }
        (0, _) => {
            return Err(
                "--redis-down-for needs --kill-redis-at (when, after the measured window starts, Redis is killed)"
                    .to_string(),
            );
        }
        (a, d) if a != d => {
            return Err(format!(
                "--kill-redis-at given {a} times but --redis-down-for {d} times: they are paired in order, one down time per kill"
            ));
        }
        _ => {}
    }
    Ok(at
        .iter()
        .zip(down)
        .map(|(&at, &down_for)| FaultSpec {
            kind: FaultKind::KillRedis,
            at,
            down_for,
        })
        .collect())
}

/// Faults must strike inside the measured window, each Redis must be back before the window
/// ends (so the recovery is measured and an external Redis is never left down), and two
/// outages must not overlap. Sorts `faults` by `at`; `name` names a fault (by its position as
/// written) in an error.
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
    named.sort_by_key(|(_, f)| f.at);
    let mut free_from = Duration::ZERO;
    for (name, f) in &named {
        let back = f.at.0 + f.down_for.0;
        if back > duration.0 {
            return Err(format!(
                "{name}: Redis would still be down when the run ends ({} + {} > duration {duration}); fault times count from the start of the measured window: move the fault earlier, shorten down_for or lengthen --duration",
                f.at, f.down_for
            ));
        }
        if f.at.0 < free_from {
            return Err(format!(
                "{name}: starts at {} while Redis is still down from an earlier fault (back at {}): outages must not overlap",
                f.at,
                Dur(free_from)
            ));
        }
        free_from = back;
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
        let mut f = pair(&[dur("6s"), dur("1s")], &[dur("2s"), dur("3s")]).unwrap();
        check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap();
        let got: Vec<(Dur, Dur)> = f.iter().map(|f| (f.at, f.down_for)).collect();
        assert_eq!(got, vec![(dur("1s"), dur("3s")), (dur("6s"), dur("2s"))]);
        assert!(f.iter().all(|f| f.kind == FaultKind::KillRedis));
        // Back exactly at the end, and one fault starting as the previous one ends, are fine.
        let mut f = pair(&[dur("0s"), dur("2s")], &[dur("2s"), dur("8s")]).unwrap();
        check(&mut f, dur("10s"), |i, _| format!("#{i}")).unwrap();
    }

    #[test]
    fn errors_name_the_fault_as_written() {
        let mut f = pair(&[dur("5s"), dur("1s")], &[dur("1s"), dur("9s")]).unwrap();
        let e = check(&mut f, dur("10s"), |i, _| format!("fault #{}", i + 1)).unwrap_err();
        assert!(e.starts_with("fault #1:"), "{e}");
        assert!(e.contains("must not overlap"), "{e}");
    }
}
