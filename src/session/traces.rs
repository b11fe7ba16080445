//! The work of `trace-stats` and `mrc`: open the trace (or draw the run's key sequence), run
//! the analysis of `crate::trace` over it and render what the command prints.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::error::UsageError;
use crate::stats::{Purpose, derive_seed};
use crate::trace::analysis::{TraceStats, analyse};
use crate::trace::mrc::{
    AUTO_EXACT_LIMIT, AUTO_MIN_SAMPLED_KEYS, AUTO_RATE, Curve, Mrc, trace_curve,
};
use crate::trace::spec::{self as plan, TraceFile, Workload};
use crate::trace::{Reader, TraceError, fingerprint};
use crate::workload::KeySampler;

/// A bad trace is the user's input: exit 2, with the file, line and field.
fn usage(e: TraceError) -> anyhow::Error {
    UsageError::new(e.to_string()).into()
}

fn open(t: &TraceFile) -> Result<Reader> {
    Reader::open(&t.path, t.format, t.columns.as_ref()).map_err(usage)
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
pub fn trace_stats(t: &TraceFile, json: bool) -> Result<String> {
    let mut reader = open(t)?;
    let stats = analyse(&mut reader).map_err(usage)?;
    if json {
        let doc = StatsJson {
            source: source(&t.path)?,
            stats,
        };
        return Ok(serde_json::to_string_pretty(&doc)? + "\n");
    }
    Ok(format!("{}\n{}", t.path.display(), stats.text()))
}

/// The curve of the synthetic workload: the key sequence `run` draws with these settings.
fn workload_curve(w: &Workload, rate: Option<f64>, sizes: Option<&[u64]>) -> Result<Curve> {
    let (keys, requests, bytes) = (w.keys, w.requests, w.value_size);
    let mut sampler = KeySampler::new(keys, w.zipf, derive_seed(w.seed, Purpose::Keys, 0), 0.0)
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
pub fn mrc(m: &plan::Mrc) -> Result<String> {
    let sizes = m.sizes.as_deref();
    let (what, curve) = match &m.source {
        plan::Source::Trace(t) => {
            let mut reader = open(t)?;
            let c = trace_curve(&mut reader, m.sampling_rate, sizes).map_err(usage)?;
            (t.path.display().to_string(), c)
        }
        plan::Source::Workload(w) => (
            "the workload".to_string(),
            workload_curve(w, m.sampling_rate, sizes)?,
        ),
    };
    if m.json {
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
