//! The flags of the trace commands, `trace-stats` and `mrc` (docs/traces.md).

use std::path::PathBuf;

use clap::Args;

use crate::trace::mrc::Sizes;
use crate::trace::{Columns, Format};
use crate::values::{Dur, Rate};

/// How a trace file is read.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Trace")]
pub struct TraceFlags {
    /// twitter, meta, csv, jsonl or monitor [default: detected]
    ///
    /// Detected from the first line when not given: MONITOR's timestamp and [db client],
    /// a JSON object, Meta's header (key, op, op_count or op_time), any other header with a
    /// key column (csv), or Twitter's seven headerless columns.
    #[arg(long, value_enum, value_name = "FORMAT", hide_possible_values = true)]
    pub trace_format: Option<Format>,

    /// csv/jsonl column names, e.g. timestamp=ts,key=k
    ///
    /// The fields are timestamp (seconds), key, value_size, op and ttl; unnamed ones keep
    /// their own names.
    #[arg(long, value_name = "FIELD=COL,…")]
    pub trace_columns: Option<Columns>,
}

#[derive(Debug, Args)]
pub struct TraceStatsCmd {
    /// The trace file (plain, .gz or .zst)
    #[arg(value_name = "FILE", help_heading = "Arguments")]
    pub file: PathBuf,

    #[command(flatten)]
    pub trace: TraceFlags,

    /// Print the figures as JSON on stdout
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MrcCmd {
    /// The trace to draw the curve of (else the workload's)
    ///
    /// Without it the curve is that of the synthetic workload the flags below describe: the
    /// key sequence a `run` with the same flags draws.
    #[arg(long, value_name = "FILE", help_heading = "Trace")]
    pub trace: Option<PathBuf>,

    #[command(flatten)]
    pub trace_flags: TraceFlags,

    #[command(flatten)]
    pub workload: MrcWorkload,

    /// Cache sizes in objects, e.g. 10,100,1k [default: log-spaced]
    ///
    /// Suffixes k, m and g multiply by 10^3, 10^6 and 10^9. By default: 1, 2, 5, 10, 20, 50, …
    /// up to the distinct keys (from 1/rate up under sampling).
    #[arg(long, value_name = "N,…", help_heading = "Curve")]
    pub sizes: Option<Sizes>,

    /// SHARDS sampling rate in (0, 1]; 1 = exact [default: auto]
    ///
    /// By default the curve is exact up to 10 M requests and sampled at 0.01 past that when
    /// the sample holds 10 000 keys or more (a million distinct keys).
    #[arg(long, value_name = "R", help_heading = "Curve")]
    pub sampling_rate: Option<f64>,

    /// Print the curve as JSON on stdout
    #[arg(long, help_heading = "Output")]
    pub json: bool,
}

/// `mrc`'s synthetic workload: `run`'s flags of the same names, with `run`'s defaults; none of
/// them goes with a trace, which is its own workload.
#[derive(Debug, Args)]
#[command(next_help_heading = "Workload")]
#[group(conflicts_with = "trace")]
pub struct MrcWorkload {
    /// Distinct item ids, as for run [default: 10000]
    #[arg(long, value_name = "N")]
    pub keys: Option<u64>,

    /// Zipf exponent of key popularity, as for run [default: 1.0]
    #[arg(long, value_name = "S")]
    pub zipf: Option<f64>,

    /// Requests per second, as for run [default: 10000]
    #[arg(long, value_name = "RATE")]
    pub rps: Option<Rate>,

    /// How long the run lasts, as for run [default: 10s]
    ///
    /// The curve is over rps × duration requests.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<Dur>,

    /// Seed of the key sequence, as for run [default: 42]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Bytes of payload per item, as for run [default: 1024]
    #[arg(long, value_name = "BYTES")]
    pub value_size: Option<u32>,
}
