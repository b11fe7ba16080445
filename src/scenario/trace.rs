//! The trace flags resolved: `--trace` and its settings (what may go with a replay and what the
//! trace decides: the rate, the duration, the keys; the first pass over it, done here so a
//! malformed trace is a usage error before any server starts), `--workload-from`, and what
//! `trace-stats` and `mrc` read (a trace, or the synthetic workload `run` would draw with the
//! same flags, whose defaults are `run`'s own declared ones).

use std::path::Path;
use std::time::Duration;

use crate::cli::{MrcCmd, RunFlags, TraceFlags, TraceStatsCmd};
use crate::error::UsageError;
use crate::trace::replay::{self, Spread, TraceOps, TraceSpec};
use crate::trace::shape::Payload;
use crate::trace::spec::{Mrc, Source, TraceFile, Workload};
use crate::values::Dur;

/// The replay's spec after its first pass, or None without `--trace` (then its settings are
/// refused, never silently ignored).
pub(super) fn settings(m: &RunFlags) -> Result<Option<TraceSpec>, UsageError> {
    // Its settings without it, and what it decides: [`super::needs`].
    let Some(path) = &m.traces.trace else {
        return Ok(None);
    };
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
    let speed = m.traces.resolved().speed();
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
        default_size: m.data.resolved().value_size() as u32,
    };
    let spec = replay::load(&opts).map_err(UsageError::new)?;
    let warmup = m.load.warmup.map_or(0.0, |d| d.0.as_secs_f64());
    if warmup >= spec.found.run_s {
        return Err(UsageError::new(format!(
            "--warmup {} is the whole replay ({:.3} s of run time) or more: nothing would be measured",
            m.load.resolved().warmup(),
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
    let w = crate::trace::shape::read(&text)
        .map_err(|e| UsageError::new(format!("--workload-from {shown}: {e}")))?;
    m.data.keys.get_or_insert(w.keys);
    m.data.zipf.get_or_insert(w.zipf);
    m.load.rps.get_or_insert(crate::values::Rate(w.read_rps));
    if m.writes.write_rps.is_none() && m.load.clients.is_none() && w.write_rps >= 1.0 {
        m.writes.write_rps = Some(crate::values::Rate(w.write_rps));
    }
    if m.data.value_size.is_none() && m.data.value_size_dist.is_none() {
        match w.payload {
            Some(Payload::Dist(d)) => m.data.value_size_dist = Some(d),
            Some(Payload::Fixed(n)) => m.data.value_size = Some(n),
            None => {}
        }
    }
    if m.data.ttl.is_none() {
        m.data.ttl = w.ttl.map(Dur);
    }
    Ok(())
}

/// The trace file of `trace-stats` or `mrc`, read as its flags say.
fn trace_file(path: &Path, flags: &TraceFlags) -> TraceFile {
    TraceFile {
        path: path.to_path_buf(),
        format: flags.trace_format,
        columns: flags.trace_columns.clone(),
    }
}

/// `trace-stats`: the trace and whether to print JSON.
pub fn for_trace_stats(cmd: &TraceStatsCmd) -> (TraceFile, bool) {
    (trace_file(&cmd.file, &cmd.trace), cmd.json)
}

/// `mrc`: the trace, or `run`'s workload with the given flags over `run`'s defaults.
pub fn for_mrc(cmd: &MrcCmd) -> Result<Mrc, UsageError> {
    if let Some(r) = cmd.sampling_rate
        && (r.is_nan() || r <= 0.0 || r > 1.0)
    {
        return Err(UsageError::new(format!(
            "--sampling-rate {r}: a rate in (0, 1]"
        )));
    }
    let source = match &cmd.trace {
        Some(path) => Source::Trace(trace_file(path, &cmd.trace_flags)),
        None => {
            let mut f = RunFlags::default();
            f.data.keys = cmd.workload.keys;
            f.data.zipf = cmd.workload.zipf;
            f.data.seed = cmd.workload.seed;
            f.data.value_size = cmd.workload.value_size.map(|v| v as usize);
            f.load.duration = cmd.workload.duration;
            let (data, load) = (f.data.resolved(), f.load.resolved());
            let (keys, zipf) = (data.keys(), data.zipf());
            if keys == 0 || zipf.is_nan() || zipf <= 0.0 {
                return Err(UsageError::new(
                    "--keys must be at least 1 and --zipf above 0",
                ));
            }
            let rps = cmd.workload.rps.map_or(super::shape::DEFAULT_RPS, |r| r.0);
            Source::Workload(Workload {
                keys,
                zipf,
                requests: (rps * load.duration().0.as_secs_f64()).round() as u64,
                seed: data.seed(),
                value_size: data.value_size() as u32,
            })
        }
    };
    Ok(Mrc {
        source,
        sampling_rate: cmd.sampling_rate,
        sizes: cmd.sizes.as_ref().map(|s| s.0.clone()),
        json: cmd.json,
    })
}
