//! The axes of a sweep: `--axis NAME=VALUES`, where NAME is any numeric flag of `run` and
//! VALUES a list or a range, and each point's run flags: the sweep's own with each NAME set to
//! its VALUE through the settings' typed setter, so any run flag is an axis with no code of
//! its own.
//! NAME may also be a fault's key, `KIND.KEY` (`drop-cache.fraction`, `spike.at`): the key of
//! the run's one fault of that kind, with the unit [`FaultKind::keys`] gives it.

use crate::cli::RunFlags;
use crate::error::UsageError;
use crate::fault::{KeySet, KeyUnit};
pub use crate::values::points::trim;
use crate::values::points::{self, Kind, Point};

/// One axis: the flag (`db-pool`), its name in sweep.json (`db_pool`), its points.
#[derive(Debug, Clone)]
pub struct Axis {
    pub flag: String,
    pub name: String,
    /// The unit of the points' numbers: `req/s`, `share`, `ms` or empty.
    pub unit: &'static str,
    pub points: Vec<Point>,
}

/// The kind of values an axis on a fault's key (`drop-cache.fraction`) takes.
fn fault_key_kind(name: &str) -> Result<Kind, UsageError> {
    let said = |e: String| UsageError::new(format!("--axis {name}: {e}"));
    match crate::fault::axis_key(name).map_err(said)?.1 {
        KeyUnit::Duration => Ok(Kind::Dur),
        KeyUnit::Share => Ok(Kind::Percent),
        KeyUnit::Number => Ok(Kind::Float),
        KeyUnit::Word | KeyUnit::Instances => Err(said(
            "not numeric (an axis is a number, a share or a duration): compare its values with `stampede compare`, or run them one by one".into(),
        )),
    }
}

/// The axis `flag` of values of `kind`, from a list or a range.
fn points(kind: Kind, flag: String, values: &str) -> Result<Axis, UsageError> {
    Ok(Axis {
        points: points::list(kind, &flag, values)?,
        name: flag.replace('-', "_"),
        unit: kind.unit(),
        flag,
    })
}

/// Parse `--axis NAME=VALUES`.
pub fn parse(spec: &str) -> Result<Axis, UsageError> {
    let (name, values) = spec.split_once('=').ok_or_else(|| {
        UsageError::new(format!(
            "--axis {spec}: expected NAME=VALUES such as rps=1000,2000 or rps=1k..16k:x2"
        ))
    })?;
    if name.contains('.') {
        let name = name.trim();
        return points(fault_key_kind(name)?, name.to_string(), values);
    }
    let flag = name.trim().replace('_', "-");
    // The strategy is a setting, but the sweep's are named by --strategies.
    let Some(item) = RunFlags::item(&flag.replace('-', "_")).filter(|_| flag != "strategy") else {
        let strategy = " (the strategies are --strategies, each run at every point)";
        let hint = if flag == "strategy" { strategy } else { "" };
        return Err(UsageError::new(format!(
            "--axis {flag}: not a flag of `stampede run`{hint}; an axis is a numeric run flag such as rps, ttl, keys, db-pool or db-cost"
        )));
    };
    let Some(kind) = crate::values::text::kind(item) else {
        return Err(UsageError::new(format!(
            "--axis {flag}: --{flag} is not numeric (an axis is a number, a rate, a percentage, a duration or a size): compare its values with `stampede compare`, or run them one by one"
        )));
    };
    points(kind, flag, values)
}

/// The run flags of one point: `base` with each flag set to its value, parsed as `run`
/// parses it.
pub fn flags_at(base: &RunFlags, set: &[(&str, &str)]) -> Result<RunFlags, UsageError> {
    let mut flags = base.clone();
    for (flag, v) in set {
        // A fault's key (`drop-cache.fraction`): set on the merged fault list at resolution.
        if let Some((_, key)) = flag.split_once('.') {
            let (kind, _) = crate::fault::axis_key(flag)
                .map_err(|e| UsageError::new(format!("--axis {flag}: {e}")))?;
            flags.faults.fault_keys.push(KeySet {
                kind,
                key: key.to_string(),
                value: v.to_string(),
            });
            continue;
        }
        flags.set(&flag.replace('-', "_"), v).map_err(|e| {
            UsageError::new(format!(
                "--axis {flag}: invalid value '{v}' for --{flag}: {e}"
            ))
        })?;
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::FaultKind;

    fn numbers(spec: &str) -> Vec<f64> {
        parse(spec)
            .unwrap()
            .points
            .iter()
            .map(|p| p.number)
            .collect()
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(numbers("rps=1k..16k:x2"), vec![1e3, 2e3, 4e3, 8e3, 16e3]);
        assert_eq!(
            numbers("missing-ratio=10%..100%:+30%"),
            vec![0.1, 0.4, 0.7, 1.0]
        );
        assert_eq!(
            numbers("ttl=1s..4s:+1s"),
            vec![1000.0, 2000.0, 3000.0, 4000.0]
        );
        assert_eq!(numbers("db_pool=2,4,8"), vec![2.0, 4.0, 8.0]);
        assert_eq!(numbers("zipf=0.8..1.2:+0.2"), vec![0.8, 1.0, 1.2]);
        let a = parse("drop_fraction=1..2:+1");
        assert!(a.is_err() || a.unwrap().name == "drop_fraction");
        assert_eq!(parse("ttl=1s,2s").unwrap().points[1].text, "2000ms");
        assert_eq!(parse("missing-ratio=0.5").unwrap().points[0].text, "50%");
        let m = parse("maxmemory=4mb,8mb,16mb,32mb").unwrap();
        assert_eq!(m.unit, "bytes");
        let p: Vec<(f64, &str)> = m
            .points
            .iter()
            .map(|p| (p.number, p.text.as_str()))
            .collect();
        assert_eq!(
            p,
            vec![
                (4194304.0, "4mb"),
                (8388608.0, "8mb"),
                (16777216.0, "16mb"),
                (33554432.0, "32mb")
            ]
        );
        assert_eq!(numbers("maxmemory=4mb..16mb:x2").len(), 3);
    }

    #[test]
    fn refusals_name_the_axis() {
        for (spec, word) in [
            ("nope=1,2", "nope"),
            ("strategy=mutex", "strategies"),
            ("arrival=poisson", "not numeric"),
            ("rps=1k..16k", "step"),
            ("rps=16k..1k:x2", "below the start"),
            ("rps=1k..2k:x1", "above 1"),
            ("keys=1.5", "whole number"),
            ("ttl=10", "duration"),
            ("rps", "NAME=VALUES"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(word), "{spec}: {e}");
        }
    }

    #[test]
    fn a_fault_key_is_an_axis() {
        let a = parse("drop-cache.fraction=10%,50%").unwrap();
        assert_eq!(
            (a.flag.as_str(), a.name.as_str()),
            ("drop-cache.fraction", "drop_cache.fraction")
        );
        assert_eq!(a.unit, "share");
        assert_eq!(numbers("drop-cache.fraction=10%,50%"), vec![0.1, 0.5]);
        assert_eq!(numbers("spike.factor=2..8:x2"), vec![2.0, 4.0, 8.0]);
        assert_eq!(
            numbers("kill-redis.for=1s..3s:+1s"),
            vec![1000.0, 2000.0, 3000.0]
        );
        assert_eq!(parse("drop-cache.at=2s").unwrap().unit, "ms");
        // The old spelling of the same axis, through its shorthand flag, still works.
        assert_eq!(numbers("drop-fraction=10%,50%"), vec![0.1, 0.5]);
        for (spec, word) in [
            ("drop-cache.order=hottest", "not numeric"),
            ("drop-cache.for=1s", "not a key of drop-cache"),
            ("drop-cache.factor=2", "at, fraction, order"),
            ("kil-redis.at=1s", "not a fault kind"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(word), "{spec}: {e}");
        }
        let f = flags_at(
            &RunFlags::default(),
            &[("drop-cache.fraction", "10%"), ("rps", "400")],
        )
        .unwrap();
        assert_eq!(f.load.rps.map(|r| r.0), Some(400.0));
        assert_eq!(
            f.faults.fault_keys,
            vec![KeySet {
                kind: FaultKind::DropCache,
                key: "fraction".into(),
                value: "10%".into()
            }]
        );
    }

    #[test]
    fn a_point_sets_its_flag_and_keeps_the_rest() {
        let base = {
            let mut f: RunFlags = RunFlags::default();
            f.data.keys = Some(200);
            f.faults.allow_kill_external = true;
            f
        };
        let f = flags_at(&base, &[("rps", "400"), ("ttl", "2000ms")]).unwrap();
        assert_eq!(f.load.rps.map(|r| r.0), Some(400.0));
        assert_eq!(f.data.ttl.map(|d| d.0.as_millis()), Some(2000));
        assert_eq!(f.data.keys, Some(200));
        assert!(
            f.faults.allow_kill_external,
            "a switch of the sweep survives a point"
        );
        let e = flags_at(&base, &[("db-pool", "-3")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("db-pool"), "{e}");
    }
}
