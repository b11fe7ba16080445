//! Access-trace files read line by line (placeholder: csv with a header only; the full set of
//! formats lands separately).

use std::fmt;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Twitter,
    Meta,
    Csv,
    Jsonl,
    Monitor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
    Delete,
    Other,
}

pub struct Record<'a> {
    pub time_s: Option<f64>,
    pub key: &'a [u8],
    pub value_size: Option<u32>,
    pub op: Op,
    pub ttl_s: Option<u32>,
    pub count: u32,
}

#[derive(Debug, Clone)]
pub struct Columns(Vec<(String, String)>);

impl FromStr for Columns {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut v = Vec::new();
        for part in s.split(',') {
            let (a, b) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected FIELD=COLUMN"))?;
            v.push((a.trim().to_string(), b.trim().to_string()));
        }
        Ok(Columns(v))
    }
}

#[derive(Debug)]
pub struct TraceError {
    pub file: PathBuf,
    pub line: u64,
    pub what: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} line {}: {}",
            self.file.display(),
            self.line,
            self.what
        )
    }
}

impl std::error::Error for TraceError {}

pub struct Reader {
    path: PathBuf,
    input: Box<dyn BufRead + Send>,
    buf: String,
    line: u64,
    cols: [Option<usize>; 5],
}

impl Reader {
    pub fn open(
        path: &Path,
        _format: Option<Format>,
        _columns: Option<&Columns>,
    ) -> Result<Reader, TraceError> {
        let err = |line, what: String| TraceError {
            file: path.to_path_buf(),
            line,
            what,
        };
        let f = std::fs::File::open(path).map_err(|e| err(0, e.to_string()))?;
        let mut input: Box<dyn BufRead + Send> = Box::new(std::io::BufReader::new(f));
        let mut header = String::new();
        input
            .read_line(&mut header)
            .map_err(|e| err(1, e.to_string()))?;
        let names: Vec<&str> = header.trim_end().split(',').collect();
        let pos = |n: &str| names.iter().position(|c| *c == n);
        let cols = [
            pos("timestamp"),
            pos("key"),
            pos("value_size"),
            pos("op"),
            pos("ttl"),
        ];
        if cols[0].is_none() || cols[1].is_none() {
            return Err(err(1, "the header needs timestamp and key".into()));
        }
        Ok(Reader {
            path: path.to_path_buf(),
            input,
            buf: String::new(),
            line: 1,
            cols,
        })
    }

    pub fn format(&self) -> Format {
        Format::Csv
    }

    pub fn line(&self) -> u64 {
        self.line
    }

    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, TraceError> {
        self.buf.clear();
        self.line += 1;
        let n = self
            .input
            .read_line(&mut self.buf)
            .map_err(|e| TraceError {
                file: self.path.clone(),
                line: self.line,
                what: e.to_string(),
            })?;
        if n == 0 {
            return Ok(None);
        }
        let fields: Vec<&str> = self.buf.trim_end().split(',').collect();
        let get = |i: Option<usize>| i.and_then(|i| fields.get(i).copied());
        let bad = |field: &str, v: &str| TraceError {
            file: self.path.clone(),
            line: self.line,
            what: format!("field {field}: {v:?} is not a number"),
        };
        let t = get(self.cols[0]).unwrap_or("");
        let time_s = Some(t.parse::<f64>().map_err(|_| bad("timestamp", t))?);
        let key = get(self.cols[1]).unwrap_or("").as_bytes();
        let value_size = match get(self.cols[2]) {
            Some(v) if !v.is_empty() => Some(v.parse().map_err(|_| bad("value_size", v))?),
            _ => None,
        };
        let op = match get(self.cols[3]).map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("get") => Op::Get,
            Some("set") => Op::Set,
            Some("delete") => Op::Delete,
            _ => Op::Other,
        };
        let ttl_s = get(self.cols[4]).and_then(|v| v.parse().ok());
        Ok(Some(Record {
            time_s,
            key,
            value_size,
            op,
            ttl_s,
            count: 1,
        }))
    }
}

pub fn fingerprint(path: &Path) -> std::io::Result<(u64, String)> {
    let bytes = std::fs::read(path)?;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in &bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    Ok((bytes.len() as u64, format!("{h:016x}")))
}
