//! `trace-stats` and `mrc` resolved: the trace to read, or the synthetic workload `run` would
//! draw with the same flags (its defaults are `run`'s own declared ones), and the curve's
//! settings checked.

use std::path::PathBuf;

use crate::cli::{MrcCmd, RunFlags, TraceFlags, TraceStatsCmd};
use crate::error::UsageError;
use crate::trace::{Columns, Format};

/// A trace file and how to read it.
pub struct TraceFile {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub columns: Option<Columns>,
}

impl TraceFile {
    fn new(path: &std::path::Path, flags: &TraceFlags) -> TraceFile {
        TraceFile {
            path: path.to_path_buf(),
            format: flags.trace_format,
            columns: flags.trace_columns.clone(),
        }
    }
}

/// The key sequence `run` draws: keys, popularity, how many requests, the seed, the size.
pub struct Workload {
    pub keys: u64,
    pub zipf: f64,
    pub requests: u64,
    pub seed: u64,
    pub value_size: u32,
}

/// What `mrc` reads: a trace, or the synthetic workload.
pub enum Source {
    Trace(TraceFile),
    Workload(Workload),
}

/// What `mrc` reads, and the curve's settings.
pub struct Mrc {
    pub source: Source,
    pub sampling_rate: Option<f64>,
    pub sizes: Option<Vec<u64>>,
    pub json: bool,
}

/// `trace-stats`: the trace and whether to print JSON.
pub fn for_trace_stats(cmd: &TraceStatsCmd) -> (TraceFile, bool) {
    (TraceFile::new(&cmd.file, &cmd.trace), cmd.json)
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
        Some(path) => Source::Trace(TraceFile::new(path, &cmd.trace_flags)),
        None => {
            let mut f = RunFlags::default();
            f.data.keys = cmd.keys;
            f.data.zipf = cmd.zipf;
            f.data.seed = cmd.seed;
            f.data.value_size = cmd.value_size.map(|v| v as usize);
            f.load.duration = cmd.duration;
            let (data, load) = (f.data.resolved(), f.load.resolved());
            let (keys, zipf) = (data.keys(), data.zipf());
            if keys == 0 || zipf.is_nan() || zipf <= 0.0 {
                return Err(UsageError::new(
                    "--keys must be at least 1 and --zipf above 0",
                ));
            }
            let rps = cmd.rps.map_or(super::resolve::DEFAULT_RPS, |r| r.0);
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
