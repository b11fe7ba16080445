//! What `trace-stats` and `mrc` are asked to read, resolved from their flags in
//! `scenario/trace.rs`: a trace file and how to read it, or the synthetic workload `run` would
//! draw, and the curve's settings.

use std::path::PathBuf;

use super::{Columns, Format};

/// A trace file and how to read it.
pub struct TraceFile {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub columns: Option<Columns>,
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
