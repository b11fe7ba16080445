//! Real access traces, read and analysed: the published cache-trace formats (Twitter's, Meta's
//! CacheLib KV replay, a generic CSV or JSON-lines, `redis-cli MONITOR` output), gzip or zstd
//! compressed or not, read as a stream of [`Record`]s; the figures `trace-stats` prints
//! ([`analysis`]); the LRU miss-ratio curve `mrc` draws ([`mrc`]); and a trace replayed as a
//! run's traffic (`run --trace`, [`replay`]). Resolving the trace flags is
//! `scenario/trace.rs`, running `trace-stats` and `mrc` `session/traces.rs`.
//!
//! A leaf: nothing here knows about servers or runs. The reader parses one line at a time into
//! one reused buffer and splits it on bytes, so a line costs no allocation, and a bad line is
//! an error naming the file, the line and the field rather than a silently shorter trace.

pub mod analysis;
mod json;
pub mod mrc;
mod parse;
pub mod replay;
pub mod shape;
pub mod spec;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::str::FromStr;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// What a request did to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Get,
    Set,
    Delete,
    /// Anything else the trace holds (another command, a `MONITOR` banner): counted as
    /// skipped, never a request.
    Other,
}

/// One line of a trace. `key` borrows the reader's line buffer, so it lives until the next
/// call to [`Reader::next_record`].
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// Seconds (any epoch); `None` when the format has no time (Meta's v1 layout).
    pub time_s: Option<f64>,
    pub key: &'a [u8],
    pub value_size: Option<u32>,
    pub op: Op,
    /// `None` when the line gives no TTL or a TTL of 0 (no expiry).
    pub ttl_s: Option<u32>,
    /// How many requests the line stands for (Meta's `op_count`; 1 elsewhere).
    pub count: u32,
}

/// The trace formats read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Twitter's cache traces: `timestamp,key,key_size,value_size,client_id,op,ttl`, no header.
    Twitter,
    /// Meta's CacheLib KV replay CSV (v1 `key,op,size,op_count,…` or v2 `op_time,key,…`).
    Meta,
    /// CSV with a header naming `timestamp` and `key` (and `value_size`, `op`, `ttl`).
    Csv,
    /// One JSON object per line with the same fields as csv.
    Jsonl,
    /// `redis-cli MONITOR` output.
    Monitor,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Twitter => "twitter",
            Format::Meta => "meta",
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Monitor => "monitor",
        }
    }
}

/// A trace that could not be read: the file, and where the line and field are known, them.
#[derive(Debug)]
pub struct TraceError {
    pub file: String,
    /// 0 when the error is not about one line (the file could not be opened).
    pub line: u64,
    pub field: Option<String>,
    pub message: String,
}

impl TraceError {
    fn new(file: &str, line: u64, field: Option<&str>, message: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_string(),
            line,
            field: field.map(str::to_string),
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, " line {}", self.line)?;
        }
        if let Some(field) = &self.field {
            write!(f, ", field {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TraceError {}

/// The logical fields of a csv or jsonl trace, each under the name the trace gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub timestamp: String,
    pub key: String,
    pub value_size: String,
    pub op: String,
    pub ttl: String,
}

impl Default for Columns {
    fn default() -> Columns {
        Columns {
            timestamp: "timestamp".into(),
            key: "key".into(),
            value_size: "value_size".into(),
            op: "op".into(),
            ttl: "ttl".into(),
        }
    }
}

impl FromStr for Columns {
    type Err = String;

    /// `timestamp=ts,key=k,value_size=bytes,op=cmd,ttl=expiry`: any subset, the rest keep
    /// their own names.
    fn from_str(s: &str) -> Result<Columns, String> {
        let mut c = Columns::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, name) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not FIELD=COLUMN (e.g. timestamp=ts,key=k)"))?;
            let name = name.trim().to_string();
            if name.is_empty() {
                return Err(format!("{field} names no column"));
            }
            match field.trim() {
                "timestamp" => c.timestamp = name,
                "key" => c.key = name,
                "value_size" => c.value_size = name,
                "op" => c.op = name,
                "ttl" => c.ttl = name,
                other => {
                    return Err(format!(
                        "unknown field {other:?}: the fields are timestamp, key, value_size, op, ttl"
                    ));
                }
            }
        }
        Ok(c)
    }
}

/// Where each field sits in a line of a format with columns (0-based), found from the header.
#[derive(Debug, Clone, Default)]
struct Layout {
    time: Option<usize>,
    key: usize,
    size: Option<usize>,
    op: Option<usize>,
    ttl: Option<usize>,
    count: Option<usize>,
    /// Fields a line must have at least.
    min_fields: usize,
}

/// Reads a trace one record at a time.
pub struct Reader {
    src: Box<dyn BufRead + Send>,
    file: String,
    format: Format,
    layout: Layout,
    columns: Columns,
    /// The current line, reused: no allocation per line.
    buf: Vec<u8>,
    /// A key that needed unescaping (a quoted CSV field, MONITOR's `\xNN`), reused.
    key_buf: Vec<u8>,
    /// Field boundaries of the current line, reused.
    fields: Vec<(usize, usize)>,
    line: u64,
    /// The first line was read to detect the format and is a record still to parse.
    pending: bool,
}

/// gzip's and zstd's magic numbers: the content says how a file is compressed, whatever its
/// name.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The file's bytes, decompressed as they are read when they are gzip or zstd.
fn open_stream(path: &Path, file: &str) -> Result<Box<dyn BufRead + Send>, TraceError> {
    let io = |e: std::io::Error| TraceError::new(file, 0, None, format!("cannot read: {e}"));
    let mut raw = BufReader::with_capacity(1 << 16, File::open(path).map_err(io)?);
    let head = raw.fill_buf().map_err(io)?;
    const BUF: usize = 1 << 16;
    if head.starts_with(&GZIP_MAGIC) {
        // Multi: `cat a.gz b.gz` and bgzip's blocks are several members, all of the trace.
        let gz = flate2::bufread::MultiGzDecoder::new(raw);
        Ok(Box::new(BufReader::with_capacity(BUF, gz)))
    } else if head.starts_with(&ZSTD_MAGIC) {
        let zst = zstd::stream::read::Decoder::with_buffer(raw).map_err(io)?;
        Ok(Box::new(BufReader::with_capacity(BUF, zst)))
    } else {
        Ok(Box::new(raw))
    }
}

impl Reader {
    pub fn open(
        path: &Path,
        format: Option<Format>,
        columns: Option<&Columns>,
    ) -> Result<Reader, TraceError> {
        let file = path.display().to_string();
        let src = open_stream(path, &file)?;
        let mut r = Reader {
            src,
            file,
            format: format.unwrap_or(Format::Csv),
            layout: Layout::default(),
            columns: columns.cloned().unwrap_or_default(),
            buf: Vec::with_capacity(256),
            key_buf: Vec::new(),
            fields: Vec::with_capacity(16),
            line: 0,
            pending: false,
        };
        // The first line that is not blank says the format (when not given) and, for the
        // formats with a header, where each field is.
        if !r.read_line()? {
            r.format = format.unwrap_or(Format::Csv);
            return Ok(r);
        }
        let detected = match format {
            Some(f) => f,
            None => parse::detect(&r.buf, columns.is_some()).ok_or_else(|| {
                TraceError::new(
                    &r.file,
                    r.line,
                    None,
                    format!(
                        "cannot tell the trace format from {:?}: give --trace-format (twitter, meta, csv, jsonl or monitor)",
                        String::from_utf8_lossy(&r.buf[..r.buf.len().min(120)])
                    ),
                )
            })?,
        };
        r.format = detected;
        match detected {
            Format::Meta => r.layout = parse::meta_layout(&r.buf, &r.file, r.line)?,
            Format::Csv => {
                r.layout = parse::csv_layout(&r.buf, &r.columns, &r.file, r.line)?;
            }
            Format::Twitter => {
                r.layout = parse::TWITTER;
                r.pending = true;
            }
            Format::Jsonl | Format::Monitor => r.pending = true,
        }
        Ok(r)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The number of the line last read (1-based; blank lines count).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The file as named in errors.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Read the next line that is not blank into `buf`, without its line ending; false at the
    /// end of the file.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        loop {
            self.buf.clear();
            let n = self.src.read_until(b'\n', &mut self.buf).map_err(|e| {
                TraceError::new(
                    &self.file,
                    self.line + 1,
                    None,
                    format!("read error (a truncated or corrupt file?): {e}"),
                )
            })?;
            if n == 0 {
                return Ok(false);
            }
            self.line += 1;
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(true);
            }
        }
    }

    /// Next line's record (borrows an internal line buffer: no allocation per line); None at
    /// the end.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, TraceError> {
        if self.pending {
            self.pending = false;
        } else if !self.read_line()? {
            return Ok(None);
        }
        let ctx = parse::Ctx {
            file: &self.file,
            line: self.line,
        };
        let r = match self.format {
            Format::Twitter | Format::Meta | Format::Csv => parse::columns_line(
                &ctx,
                self.format,
                &self.layout,
                &self.buf,
                &mut self.fields,
                &mut self.key_buf,
            )?,
            Format::Jsonl => json::line(&ctx, &self.columns, &self.buf, &mut self.key_buf)?,
            Format::Monitor => {
                parse::monitor_line(&ctx, &self.buf, &mut self.fields, &mut self.key_buf)?
            }
        };
        Ok(Some(r))
    }
}

/// File size in bytes and a hex digest of its bytes (SHA-256, streamed): what names the exact
/// trace a result came from.
pub fn fingerprint(path: &Path) -> std::io::Result<(u64, String)> {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((n, hex))
}

/// A 64-bit hash of a key's bytes (FNV-1a, then SplitMix64's finalizer so every bit of the
/// result depends on every byte): the key's identity where a trace is too big to intern.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    crate::stats::mix64(h)
}
