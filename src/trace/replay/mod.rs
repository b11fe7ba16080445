//! A recorded access trace as the run's traffic (`--trace`): a first pass over the selected
//! slice maps every distinct trace key to an item id (in order of first appearance) with its
//! value size and its request count, and a second pass, on a thread of its own during the
//! run, turns the trace's timestamps into the open loop's schedule. Both passes select the
//! same requests through [`Requests`], so what was counted is what is sent.
//!
//! Memory: the key map is the only state that grows with the trace, about the key's length
//! plus 40 bytes a distinct key (the map entry, its value size and its request count); the
//! schedule streams through a bounded channel (a few MB whatever the trace's length).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::trace::{Columns, Format, Op, Reader};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Which of the trace's operations are replayed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TraceOps {
    /// Reads only: a look-aside trace's SETs and DELETEs are mostly the app's own write-backs
    /// (counted and skipped; a SET still gives its key's value size).
    Reads,
    /// SETs and DELETEs too, as writes (`--invalidate` applies).
    All,
}

/// How the requests of one whole second of a trace with whole-second timestamps are placed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// Evenly over the second, in trace order.
    Even,
    /// At seeded random instants within the second (the count per second kept exactly).
    Random,
}

/// What to replay, and what the first pass found in it. Serialized into the scenario, so a
/// result names its trace (path, byte size, digest) and `check` refuses to compare runs of
/// different traces.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceSpec {
    pub path: PathBuf,
    pub format: Format,
    /// `--trace-columns` as given.
    #[serde(default)]
    pub columns: Option<String>,
    pub ops: TraceOps,
    /// Trace time runs this many times faster (`--speed`).
    pub speed: f64,
    pub spread: Spread,
    /// Trace seconds skipped from its first timestamp (`--trace-skip`).
    pub skip_s: f64,
    /// Trace seconds replayed (`--duration`); null: to the end.
    #[serde(default)]
    pub slice_s: Option<f64>,
    /// `--rps`: re-timed at this constant rate, in trace order (also the spacing of a trace
    /// without timestamps).
    #[serde(default)]
    pub retime_rps: Option<f64>,
    pub bytes: u64,
    pub digest: String,
    /// What the first pass counted in the slice.
    pub found: Found,
    #[serde(skip)]
    #[schemars(skip)]
    index: Arc<OnceLock<Arc<TraceIndex>>>,
}

/// The first pass's counts over the selected slice (requests after `op_count` expansion).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Found {
    /// Requests the run sends: reads, plus writes and deletes under `--trace-ops all`.
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    /// Requests of the slice not sent: other operations, and SETs/DELETEs under `reads`.
    pub skipped: u64,
    pub distinct_keys: u64,
    /// Seconds of run time the replay lasts (the slice's trace time over `--speed`).
    pub run_s: f64,
    /// Whether every timestamp was a whole second (then `spread` places each second's
    /// requests; otherwise they go out at their own instants).
    pub whole_seconds: bool,
    /// Items whose value size came from the trace (the others got `--value-size`).
    pub sized_keys: u64,
    /// The payload bytes of all the items together, as seeded.
    #[serde(default)]
    pub value_bytes: u64,
}

/// The key map of the slice and what each item needs: its size and its request count.
pub struct TraceIndex {
    ids: HashMap<Box<[u8]>, u32>,
    /// Value size of item id i at index i-1.
    pub sizes: Vec<u32>,
    /// Requests the run sends for item id i (index i-1): the steady start's per-key rates.
    pub requests: Vec<u32>,
}

impl std::fmt::Debug for TraceIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceIndex({} keys)", self.sizes.len())
    }
}

impl TraceIndex {
    /// Requests per second of run time for item `id` (1-based).
    pub fn rate(&self, id: u64, run_s: f64) -> f64 {
        let n = self.requests.get(id as usize - 1).copied().unwrap_or(0);
        if run_s > 0.0 {
            f64::from(n) / run_s
        } else {
            0.0
        }
    }
}

/// The settings of a replay, before the first pass.
pub struct Options {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub columns: Option<String>,
    pub ops: TraceOps,
    pub speed: f64,
    pub spread: Spread,
    pub skip_s: f64,
    pub slice_s: Option<f64>,
    pub retime_rps: Option<f64>,
    /// The size of an item the trace gives none for.
    pub default_size: u32,
}

/// One request of the trace, in trace order, after op_count expansion.
struct Req<'a> {
    /// Trace seconds from the replayed slice's start.
    t: f64,
    key: &'a [u8],
    op: Op,
    size: Option<u32>,
    ttl_s: u32,
    /// Whether the run sends it (else counted as skipped).
    sent: bool,
}

/// Walks the trace's requests of the slice, with their times relative to its start, the same
/// way for both passes.
struct Requests {
    reader: Reader,
    ops: TraceOps,
    skip_s: f64,
    slice_s: Option<f64>,
    /// Constant spacing (re-timed, or a trace without timestamps).
    rate: Option<f64>,
    /// The trace's first timestamp (times count from it).
    first: Option<f64>,
    /// Requests walked so far (the clock of a re-timed trace).
    k: u64,
    path: PathBuf,
    /// The latest request time walked, s from the slice's start.
    last_t: f64,
}

impl Requests {
    fn open(o: &Options) -> Result<Requests, String> {
        let columns = o
            .columns
            .as_deref()
            .map(str::parse::<Columns>)
            .transpose()
            .map_err(|e| format!("--trace-columns: {e}"))?;
        let reader =
            Reader::open(&o.path, o.format, columns.as_ref()).map_err(|e| e.to_string())?;
        Ok(Requests {
            reader,
            ops: o.ops,
            skip_s: o.skip_s,
            slice_s: o.slice_s,
            rate: o.retime_rps,
            first: None,
            k: 0,
            path: o.path.clone(),
            last_t: 0.0,
        })
    }

    /// Call `f` for every request of the slice (sent or skipped); stops early when it returns
    /// false or the slice is over.
    fn each(&mut self, mut f: impl FnMut(Req<'_>) -> bool) -> Result<(), String> {
        let untimed_rate = self.rate;
        loop {
            let rec = match self.reader.next_record().map_err(|e| e.to_string())? {
                Some(r) => r,
                None => return Ok(()),
            };
            let sent = match rec.op {
                Op::Get => true,
                Op::Set | Op::Delete => self.ops == TraceOps::All,
                Op::Other => false,
            };
            // A line that is not a request (MONITOR's banner, another command) may have no
            // time of its own: it is counted where the trace is.
            if !sent && rec.time_s.is_none() && untimed_rate.is_none() {
                let t = self.last_t;
                if !f(Req {
                    t,
                    key: rec.key,
                    op: rec.op,
                    size: None,
                    ttl_s: 0,
                    sent,
                }) {
                    return Ok(());
                }
                continue;
            }
            for _ in 0..rec.count.max(1) {
                let t_abs = match (untimed_rate, rec.time_s) {
                    (Some(r), _) => {
                        // Re-timed: only the requests sent take a slot of the constant rate.
                        let t = self.k as f64 / r;
                        if sent {
                            self.k += 1;
                        }
                        t
                    }
                    (None, Some(t)) => t,
                    (None, None) => {
                        return Err(format!(
                            "{} line {}: this trace has no timestamps: give --rps to space its requests",
                            self.path.display(),
                            self.reader.line()
                        ));
                    }
                };
                let first = *self.first.get_or_insert(t_abs);
                let t = t_abs - first - self.skip_s;
                if t < 0.0 {
                    continue;
                }
                if self.slice_s.is_some_and(|s| t >= s) {
                    return Ok(());
                }
                self.last_t = t;
                let req = Req {
                    t,
                    key: rec.key,
                    op: rec.op,
                    size: rec.value_size.filter(|s| *s > 0),
                    ttl_s: rec.ttl_s.unwrap_or(0),
                    sent,
                };
                if !f(req) {
                    return Ok(());
                }
            }
        }
    }
}

/// The first pass: open, fingerprint and index the slice.
pub fn load(o: &Options) -> Result<TraceSpec, String> {
    let (bytes, digest) = crate::trace::fingerprint(&o.path)
        .map_err(|e| format!("reading the trace {}: {e}", o.path.display()))?;
    let mut walk = Requests::open(o)?;
    let format = walk.reader.format();
    let mut ids: HashMap<Box<[u8]>, u32> = HashMap::new();
    let (mut sizes, mut requests, mut from_set) = (Vec::new(), Vec::<u32>::new(), Vec::new());
    let mut found = Found {
        whole_seconds: true,
        ..Found::default()
    };
    let mut last_t = 0.0f64;
    walk.each(|r| {
        // Not a request (another command, a banner): no item, counted as skipped.
        if r.op == Op::Other {
            found.skipped += 1;
            return true;
        }
        let id = match ids.get(r.key) {
            Some(id) => *id,
            None => {
                let id = sizes.len() as u32 + 1;
                ids.insert(r.key.into(), id);
                sizes.push(0u32);
                requests.push(0u32);
                from_set.push(false);
                id
            }
        } as usize
            - 1;
        // The size: the first SET's, else the first read's that has one.
        if let Some(s) = r.size {
            if r.op == Op::Set && !from_set[id] {
                sizes[id] = s;
                from_set[id] = true;
            } else if sizes[id] == 0 {
                sizes[id] = s;
            }
        }
        if r.sent {
            found.requests += 1;
            requests[id] = requests[id].saturating_add(1);
            match r.op {
                Op::Set => found.writes += 1,
                Op::Delete => found.deletes += 1,
                _ => found.reads += 1,
            }
            if r.t.fract() != 0.0 || o.retime_rps.is_some() {
                found.whole_seconds = false;
            }
            last_t = last_t.max(r.t);
        } else {
            found.skipped += 1;
        }
        true
    })?;
    if found.requests == 0 {
        return Err(format!(
            "the trace {} has no request to replay in the selected slice ({} skipped: {}); check --trace-skip, --duration and --trace-ops",
            o.path.display(),
            found.skipped,
            if o.ops == TraceOps::Reads {
                "other operations, and SETs/DELETEs under --trace-ops reads"
            } else {
                "operations other than GET, SET and DELETE"
            }
        ));
    }
    found.distinct_keys = sizes.len() as u64;
    found.sized_keys = sizes.iter().filter(|s| **s > 0).count() as u64;
    for s in &mut sizes {
        if *s == 0 {
            *s = o.default_size;
        }
    }
    found.value_bytes = sizes.iter().map(|s| u64::from(*s)).sum();
    // The slice lasts to its end when one was asked for (and the trace reaches it), else to
    // just after its last request: the whole last second for whole-second stamps, one mean
    // gap otherwise.
    let natural = match o.retime_rps {
        Some(r) => found.requests as f64 / r,
        None if found.whole_seconds => last_t.floor() + 1.0,
        None => last_t + (last_t / found.requests as f64).max(0.001),
    };
    let span = o.slice_s.map_or(natural, |s| s.min(natural));
    found.run_s = if o.retime_rps.is_some() {
        span
    } else {
        span / o.speed
    };
    let index = TraceIndex {
        ids,
        sizes,
        requests,
    };
    Ok(TraceSpec {
        path: o.path.clone(),
        format,
        columns: o.columns.clone(),
        ops: o.ops,
        speed: o.speed,
        spread: o.spread,
        skip_s: o.skip_s,
        slice_s: o.slice_s,
        retime_rps: o.retime_rps,
        bytes,
        digest,
        found,
        index: Arc::new(OnceLock::from(Arc::new(index))),
    })
}

impl TraceSpec {
    fn options(&self, default_size: u32) -> Options {
        Options {
            path: self.path.clone(),
            format: Some(self.format),
            columns: self.columns.clone(),
            ops: self.ops,
            speed: self.speed,
            spread: self.spread,
            skip_s: self.skip_s,
            slice_s: self.slice_s,
            retime_rps: self.retime_rps,
            default_size,
        }
    }

    /// The key map, from the first pass (indexed again when this spec was read back from a
    /// file, as a shard's process does).
    pub fn index(&self, default_size: u32) -> Result<Arc<TraceIndex>, String> {
        if let Some(i) = self.index.get() {
            return Ok(i.clone());
        }
        let again = load(&self.options(default_size))?;
        if again.digest != self.digest {
            return Err(format!(
                "the trace {} changed since the run was set up (digest {} now, {} then)",
                self.path.display(),
                again.digest,
                self.digest
            ));
        }
        let i = again
            .index
            .get()
            .cloned()
            .ok_or("the trace's index is missing")?;
        Ok(self.index.get_or_init(|| i).clone())
    }

    /// One line for the terminal: what is replayed.
    pub fn describe(&self) -> String {
        let f = &self.found;
        let timing = match self.retime_rps {
            Some(r) => format!("re-timed at {r} req/s"),
            None if f.whole_seconds => format!(
                "at its timestamps ×{}, each second's requests spread {}",
                self.speed,
                match self.spread {
                    Spread::Even => "evenly",
                    Spread::Random => "at random",
                }
            ),
            None => format!("at its timestamps ×{}", self.speed),
        };
        format!(
            "trace {} ({}, {} bytes): {} requests ({} reads, {} writes, {} deletes; {} skipped) over {} distinct keys, {timing}, {:.1} s",
            self.path.display(),
            serde_json::to_value(self.format)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            self.bytes,
            f.requests,
            f.reads,
            f.writes,
            f.deletes,
            f.skipped,
            f.distinct_keys,
            f.run_s
        )
    }
}

mod feed;

pub use feed::*;

#[cfg(test)]
mod tests;
