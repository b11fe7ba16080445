//! `--trace` and its settings: what may go with a replay and what the trace decides (the
//! rate, the duration, the keys), and the first pass over it, done here so a malformed trace
//! is a usage error before any server starts.

use std::time::Duration;

use crate::cli::RunFlags;
use crate::error::UsageError;
use crate::replay::{self, Spread, TraceOps, TraceSpec};
use crate::values::Dur;

/// The replay's spec after its first pass, or None without `--trace` (then its settings are
/// refused, never silently ignored).
pub(super) fn settings(m: &RunFlags) -> Result<Option<TraceSpec>, UsageError> {
    let Some(path) = &m.traces.trace else {
        for (flag, set) in [
            ("--trace-format", m.traces.trace_format.is_some()),
            ("--trace-columns", m.traces.trace_columns.is_some()),
            ("--trace-ops", m.traces.trace_ops.is_some()),
            ("--speed", m.traces.speed.is_some()),
            ("--trace-spread", m.traces.trace_spread.is_some()),
            ("--trace-skip", m.traces.trace_skip.is_some()),
        ] {
            if set {
                return Err(UsageError::new(format!(
                    "{flag} is a setting of a trace replay, and there is none: add --trace FILE"
                )));
            }
        }
        return Ok(None);
    };
    // What the trace decides, or what has no meaning with one.
    for (flag, set, why) in [
        (
            "--clients",
            m.load.clients.is_some(),
            "a trace is replayed at its own times (open loop)",
        ),
        (
            "--keys",
            m.data.keys.is_some(),
            "the trace's distinct keys are the items",
        ),
        (
            "--zipf",
            m.data.zipf.is_some(),
            "the popularity is the trace's own",
        ),
        (
            "--arrival",
            m.load.arrival.is_some(),
            "requests go out at the trace's timestamps",
        ),
        (
            "--missing-ratio",
            m.data.missing_ratio.is_some(),
            "every trace key is an item",
        ),
        (
            "--value-size-dist",
            m.data.value_size_dist.is_some(),
            "each item has the trace's value size for it (--value-size for a key the trace gives none)",
        ),
        (
            "--warm",
            m.data.warm.is_some(),
            "item ids follow first appearance, not popularity; use --start steady (the default) or cold",
        ),
        (
            "--db-sql",
            m.db.db_sql.is_some(),
            "the trace's keys are seeded as the tool's own items",
        ),
        (
            "--keys-sql",
            m.db.keys_sql.is_some(),
            "the trace's keys are seeded as the tool's own items",
        ),
        (
            "--keys-file",
            m.db.keys_file.is_some(),
            "the trace's keys are seeded as the tool's own items",
        ),
    ] {
        if set {
            return Err(UsageError::new(format!(
                "{flag} does not go with --trace: {why}"
            )));
        }
    }
    let ops = m.traces.trace_ops.unwrap_or(TraceOps::Reads);
    if ops == TraceOps::All && m.writes.write_rps.is_some() {
        return Err(UsageError::new(
            "--trace-ops all replays the trace's own SETs and DELETEs as the writes: drop --write-rps (or replay reads only with --trace-ops reads)",
        ));
    }
    if m.traces.speed.is_some() && m.load.rps.is_some() {
        return Err(UsageError::new(
            "--speed scales the trace's own timestamps and --rps replaces them with a constant rate: choose one",
        ));
    }
    let speed = m.traces.speed.unwrap_or(1.0);
    if !(speed.is_finite() && speed > 0.0) {
        return Err(UsageError::new(format!(
            "--speed must be a number more than 0 (got {speed})"
        )));
    }
    let opts = replay::Options {
        path: path.clone(),
        format: m.traces.trace_format,
        columns: m.traces.trace_columns.clone(),
        ops,
        speed,
        spread: m.traces.trace_spread.unwrap_or(Spread::Even),
        skip_s: m.traces.trace_skip.map_or(0.0, |d| d.0.as_secs_f64()),
        slice_s: m.load.duration.map(|d| d.0.as_secs_f64()),
        retime_rps: m.load.rps.map(|r| r.0),
        default_size: m.data.value_size.unwrap_or(1024) as u32,
    };
    let spec = replay::load(&opts).map_err(UsageError::new)?;
    let warmup = m.load.warmup.map_or(0.0, |d| d.0.as_secs_f64());
    if warmup >= spec.found.run_s {
        return Err(UsageError::new(format!(
            "--warmup {} is the whole replay ({:.3} s of run time) or more: nothing would be measured",
            m.load.warmup.unwrap_or(Dur(Duration::ZERO)),
            spec.found.run_s
        )));
    }
    Ok(Some(spec))
}

/// The measured window of a replay: the replay's run time less the warm-up.
pub(super) fn duration(spec: &TraceSpec, warmup: Option<Dur>) -> Dur {
    let w = warmup.map_or(0.0, |d| d.0.as_secs_f64());
    Dur(Duration::from_secs_f64(spec.found.run_s - w))
}

/// `--workload-from FILE`: the shape `trace-stats --json` wrote, as the defaults of the
/// synthetic workload (flags and the scenario file win). Each field read is checked, and a
/// missing or odd one is named.
pub(super) fn workload_from(m: &mut RunFlags) -> Result<(), UsageError> {
    let Some(path) = m.traces.workload_from.clone() else {
        return Ok(());
    };
    if m.traces.trace.is_some() {
        return Err(UsageError::new(
            "--workload-from synthesizes a workload with a trace's shape and --trace replays the trace itself: choose one",
        ));
    }
    let shown = path.display();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| UsageError::new(format!("--workload-from {shown}: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        UsageError::new(format!(
            "--workload-from {shown}: not JSON ({e}); write it with `stampede trace-stats TRACE --json > {shown}`"
        ))
    })?;
    let num = |ptr: &str| v.pointer(ptr).and_then(serde_json::Value::as_f64);
    let need = |ptr: &str| {
        num(ptr).ok_or_else(|| {
            UsageError::new(format!(
                "--workload-from {shown}: no number at {ptr}; is it `stampede trace-stats --json` output?"
            ))
        })
    };
    let keys = need("/distinct_keys")?;
    let zipf = need("/zipf_exponent")?;
    let rate = num("/rate_per_s/mean").or_else(|| {
        let (n, d) = (num("/requests")?, num("/duration_s")?);
        (d > 0.0).then(|| n / d)
    });
    let Some(rate) = rate.filter(|r| *r > 0.0) else {
        return Err(UsageError::new(format!(
            "--workload-from {shown}: the trace has no rate (no timestamps): give --rps"
        )));
    };
    if keys < 1.0 || !(zipf.is_finite() && zipf > 0.0) {
        return Err(UsageError::new(format!(
            "--workload-from {shown}: distinct_keys {keys} and zipf_exponent {zipf} do not make a workload (at least one key, an exponent above 0)"
        )));
    }
    let reads = num("/ops/read_share").unwrap_or(1.0).clamp(0.0, 1.0);
    m.data.keys.get_or_insert(keys as u64);
    // Rounded as a user would write them (3 digits of exponent, whole requests a second).
    m.data.zipf.get_or_insert((zipf * 1000.0).round() / 1000.0);
    m.load
        .rps
        .get_or_insert(crate::values::Rate((rate * reads).round().max(1.0)));
    let writes = (rate * (1.0 - reads)).round();
    if m.writes.write_rps.is_none() && m.load.clients.is_none() && writes >= 1.0 {
        m.writes.write_rps = Some(crate::values::Rate(writes));
    }
    if m.data.value_size.is_none() && m.data.value_size_dist.is_none() {
        match (num("/value_size/mean"), num("/value_size/p50")) {
            // A lognormal's median is e^mu and its mean e^(mu + sigma²/2): the two give sigma.
            (Some(mean), Some(p50)) if mean > p50 && p50 >= 1.0 => {
                let s2 = 2.0 * (mean / p50).ln();
                let sd = mean * (s2.exp() - 1.0).sqrt();
                m.data.value_size_dist = Some(crate::sizes::SizeDist::LogNormal {
                    mean: crate::values::Size(mean.round() as u64),
                    sd: crate::values::Size(sd.round().max(1.0) as u64),
                });
            }
            (Some(mean), _) if mean >= 1.0 => m.data.value_size = Some(mean.round() as usize),
            _ => {}
        }
    }
    if m.data.ttl.is_none()
        && let Some(t) = num("/ttl_s/p50").filter(|t| *t > 0.0)
    {
        m.data.ttl = Some(Dur(Duration::from_secs_f64(t)));
    }
    Ok(())
}
