//! The work of `trace-stats` and `mrc`: open the trace (or draw the run's key sequence), run
//! the analysis of `crate::trace` over it and render what the command prints.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cli::{MrcCmd, TraceFlags, TraceStatsCmd};
use crate::error::UsageError;
use crate::stats::{Purpose, derive_seed};
use crate::trace::analysis::{TraceStats, analyse};
use crate::trace::mrc::{
    AUTO_EXACT_LIMIT, AUTO_MIN_SAMPLED_KEYS, AUTO_RATE, Curve, Mrc, trace_curve,
};
use crate::trace::{Reader, TraceError, fingerprint};
use crate::workload::KeySampler;

/// A bad trace is the user's input: exit 2, with the file, line and field.
fn usage(e: TraceError) -> anyhow::Error {
    UsageError::new(e.to_string()).into()
}

fn open(path: &Path, flags: &TraceFlags) -> Result<Reader> {
    Reader::open(path, flags.trace_format, flags.trace_columns.as_ref()).map_err(usage)
}

/// The file a figure came from: its name, size and SHA-256.
#[derive(Serialize)]
struct Source {
    file: String,
    file_bytes: u64,
    sha256: String,
}

fn source(path: &Path) -> Result<Source> {
    let (file_bytes, sha256) =
        fingerprint(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Source {
        file: path.display().to_string(),
        file_bytes,
        sha256,
    })
}

#[derive(Serialize)]
struct StatsJson {
    #[serde(flatten)]
    source: Source,
    #[serde(flatten)]
    stats: TraceStats,
}

/// What `trace-stats` prints: the figures as text, or as JSON with `--json`.
pub fn trace_stats(cmd: &TraceStatsCmd) -> Result<String> {
    let mut reader = open(&cmd.file, &cmd.trace)?;
    let stats = analyse(&mut reader).map_err(usage)?;
    if cmd.json {
        let doc = StatsJson {
            source: source(&cmd.file)?,
            stats,
        };
        return Ok(serde_json::to_string_pretty(&doc)? + "\n");
    }
    Ok(format!("{}\n{}", cmd.file.display(), stats.text()))
}

/// The defaults of `run`, which `mrc` draws the same sequence with.
const DEFAULT_KEYS: u64 = 10_000;
const DEFAULT_ZIPF: f64 = 1.0;
const DEFAULT_RPS: f64 = 10_000.0;
const DEFAULT_DURATION_S: f64 = 10.0;
const DEFAULT_SEED: u64 = 42;
const DEFAULT_VALUE_SIZE: u32 = 1024;

/// The curve of the synthetic workload: the key sequence `run` draws with these flags.
fn workload_curve(cmd: &MrcCmd, rate: Option<f64>, sizes: Option<&[u64]>) -> Result<Curve> {
    let keys = cmd.keys.unwrap_or(DEFAULT_KEYS);
    let zipf = cmd.zipf.unwrap_or(DEFAULT_ZIPF);
    if keys == 0 || zipf.is_nan() || zipf <= 0.0 {
        return Err(UsageError::new("--keys must be at least 1 and --zipf above 0").into());
    }
    let rps = cmd.rps.map_or(DEFAULT_RPS, |r| r.0);
    let secs = cmd
        .duration
        .map_or(DEFAULT_DURATION_S, |d| d.0.as_secs_f64());
    let requests = (rps * secs).round() as u64;
    let seed = cmd.seed.unwrap_or(DEFAULT_SEED);
    let bytes = cmd.value_size.unwrap_or(DEFAULT_VALUE_SIZE);
    let mut sampler = KeySampler::new(keys, zipf, derive_seed(seed, Purpose::Keys, 0), 0.0)
        .map_err(UsageError)?;
    // As for a trace: SHARDS by default only where it samples enough keys to be accurate.
    let sampled_keys = keys as f64 * AUTO_RATE;
    let rate = rate.unwrap_or(
        if requests > AUTO_EXACT_LIMIT && sampled_keys >= AUTO_MIN_SAMPLED_KEYS as f64 {
            AUTO_RATE
        } else {
            1.0
        },
    );
    let mut m = Mrc::shards(rate);
    for _ in 0..requests {
        m.access(sampler.next_id(), Some(bytes));
    }
    Ok(m.curve(sizes))
}

/// What `mrc` prints: the curve as a table, or as JSON with `--json`.
pub fn mrc(cmd: &MrcCmd) -> Result<String> {
    if let Some(r) = cmd.sampling_rate
        && (r.is_nan() || r <= 0.0 || r > 1.0)
    {
        return Err(UsageError::new(format!("--sampling-rate {r}: a rate in (0, 1]")).into());
    }
    let sizes = cmd.sizes.as_ref().map(|s| s.0.as_slice());
    let (what, curve) = match &cmd.trace {
        Some(path) => {
            let mut reader = open(path, &cmd.trace_flags)?;
            let c = trace_curve(&mut reader, cmd.sampling_rate, sizes).map_err(usage)?;
            (path.display().to_string(), c)
        }
        None => (
            "the workload".to_string(),
            workload_curve(cmd, cmd.sampling_rate, sizes)?,
        ),
    };
    if cmd.json {
        return Ok(serde_json::to_string_pretty(&curve)? + "\n");
    }
    Ok(table(&what, &curve))
}

fn table(what: &str, c: &Curve) -> String {
    let mut o = String::new();
    let sampling = if c.sampling_rate >= 1.0 {
        "exact".to_string()
    } else {
        format!("SHARDS at rate {:.4}", c.sampling_rate)
    };
    let _ = writeln!(
        o,
        "LRU hit rate of {what}: {} requests, {} distinct keys, {sampling}",
        c.requests, c.distinct_keys
    );
    let _ = writeln!(
        o,
        "bytes = objects × {:.0} B (the mean value size of the distinct keys)",
        c.mean_object_bytes
    );
    if c.sampling_rate < 1.0 {
        let _ = writeln!(
            o,
            "sampled: sizes under {:.0} objects (10/rate) are underestimated or overestimated by up to tens of points",
            10.0 / c.sampling_rate
        );
    }
    let _ = writeln!(o, "{:>14} {:>16} {:>9}", "objects", "bytes", "hit rate");
    for p in &c.curve {
        let _ = writeln!(
            o,
            "{:>14} {:>16} {:>8.2}%",
            p.objects,
            p.bytes,
            p.hit_rate * 100.0
        );
    }
    o
}
