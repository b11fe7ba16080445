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
use std::sync::{Arc, Mutex, OnceLock};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::trace::{Columns, Format, Op, Reader};
use crate::workload::{DIGEST_DRAWS, fnv_step};

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

/// One request of the replay's schedule.
#[derive(Debug, Clone, Copy)]
pub struct Due {
    /// Nanoseconds from the start of the traffic.
    pub off_ns: u64,
    pub id: u64,
    /// The TTL the trace gave a SET, s (0: none given).
    pub ttl_s: u32,
}

impl Due {
    /// The TTL the trace gave this write, if any.
    pub fn ttl_ms(&self) -> Option<u64> {
        (self.ttl_s > 0).then(|| u64::from(self.ttl_s) * 1000)
    }
}

/// Requests per batch sent to the run, and the most trace time one batch may span (so a
/// sparse stream — the writes of a read-mostly trace — is never held back waiting to fill).
const BATCH: usize = 2048;
const BATCH_SPAN_NS: u64 = 100_000_000;
/// Batches buffered ahead of the run, per stream.
const AHEAD: usize = 64;

/// The schedule of one stream (the reads, or the writes), read ahead by the replay thread.
pub struct Feed {
    rx: tokio::sync::mpsc::Receiver<Vec<Due>>,
    cur: std::vec::IntoIter<Due>,
    /// The request [`Feed::peek`] looked at and [`Feed::take`] has not taken yet.
    head: Option<Due>,
    failed: Arc<Mutex<Option<String>>>,
    /// Fingerprint of the first ids taken, like the workload's key digest.
    digest: u64,
    taken: u64,
}

impl Feed {
    fn new(rx: tokio::sync::mpsc::Receiver<Vec<Due>>, failed: Arc<Mutex<Option<String>>>) -> Feed {
        Feed {
            rx,
            cur: Vec::new().into_iter(),
            head: None,
            failed,
            digest: FNV_OFFSET,
            taken: 0,
        }
    }

    /// The next request without taking it, or None at the end of the trace.
    #[inline]
    pub async fn peek(&mut self) -> Option<Due> {
        if self.head.is_none() {
            self.head = loop {
                if let Some(d) = self.cur.next() {
                    break Some(d);
                }
                self.cur = self.rx.recv().await?.into_iter();
            };
        }
        self.head
    }

    /// Take the request [`Feed::peek`] gave.
    #[inline]
    pub fn take(&mut self) -> Option<Due> {
        let d = self.head.take()?;
        if self.taken < DIGEST_DRAWS {
            self.taken += 1;
            self.digest = fnv_step(self.digest, d.id);
        }
        Some(d)
    }

    /// The next request, taken, or None at the end of the trace.
    #[inline]
    pub async fn next(&mut self) -> Option<Due> {
        self.peek().await?;
        self.take()
    }

    /// Fingerprint of the first ids taken and how many it covers.
    pub fn digest(&self) -> (u64, u64) {
        (self.digest, self.taken)
    }

    /// Why the replay stopped short, if it did (the trace could not be read again).
    pub fn failure(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }
}

/// The reads' feed, and the writes' under `--trace-ops all`.
pub struct Feeds {
    pub reads: Feed,
    pub writes: Option<Feed>,
}

/// Walk the reads the replay sends, in order: `f(run seconds from the start, item id, its
/// size)` (the sequence an exact LRU model of the replay runs over).
pub fn each_read(
    spec: &TraceSpec,
    default_size: u32,
    mut f: impl FnMut(f64, u64, u32),
) -> Result<(), String> {
    let index = spec.index(default_size)?;
    let mut walk = Requests::open(&spec.options(default_size))?;
    let speed = if spec.retime_rps.is_some() {
        1.0
    } else {
        spec.speed
    };
    walk.each(|r| {
        if r.sent
            && r.op == Op::Get
            && let Some(&id) = index.ids.get(r.key)
        {
            let size = index
                .sizes
                .get(id as usize - 1)
                .copied()
                .unwrap_or(default_size);
            f(r.t / speed, u64::from(id), size);
        }
        true
    })
}

/// Start the second pass: a thread reads the trace again and sends its schedule ahead of the
/// run. It ends at the end of the trace or when the run drops the feeds.
pub fn spawn(spec: &TraceSpec, default_size: u32, seed: u64) -> Result<Feeds, String> {
    let index = spec.index(default_size)?;
    let mut walk = Requests::open(&spec.options(default_size))?;
    let failed = Arc::new(Mutex::new(None));
    let (rtx, rrx) = tokio::sync::mpsc::channel(AHEAD);
    let with_writes = spec.ops == TraceOps::All;
    let (wtx, wrx) = tokio::sync::mpsc::channel(AHEAD);
    let feed = |rx| Feed::new(rx, failed.clone());
    let feeds = Feeds {
        reads: feed(rrx),
        writes: with_writes.then(|| feed(wrx)),
    };
    let speed = if spec.retime_rps.is_some() {
        1.0
    } else {
        spec.speed
    };
    let spread = spec.found.whole_seconds.then_some(spec.spread);
    let fail = failed.clone();
    std::thread::Builder::new()
        .name("stampede-trace".into())
        .spawn(move || {
            let mut out = Out::new(rtx, with_writes.then_some(wtx));
            let mut rng = SmallRng::seed_from_u64(seed);
            // Under whole-second stamps, one second's requests wait here to be placed.
            let mut second: Option<(u64, Vec<Pending>)> = None;
            let r = walk.each(|r| {
                if !r.sent {
                    return true;
                }
                let Some(&id) = index.ids.get(r.key) else {
                    return true;
                };
                let write = r.op != Op::Get;
                let ttl = if r.op == Op::Set { r.ttl_s } else { 0 };
                match spread {
                    None => {
                        let off = (r.t / speed * 1e9) as u64;
                        out.push(off, u64::from(id), write, ttl)
                    }
                    Some(how) => {
                        let s = r.t as u64;
                        let ok = match &second {
                            // A stamp that runs backwards joins the second being placed.
                            Some((cur, _)) if s <= *cur => true,
                            Some(_) => {
                                let (cur, reqs) = second.take().unwrap_or_default();
                                place(cur, &reqs, how, speed, &mut rng, &mut out)
                            }
                            None => true,
                        };
                        second.get_or_insert_with(|| (s, Vec::new())).1.push((
                            u64::from(id),
                            write,
                            ttl,
                        ));
                        ok
                    }
                }
            });
            if let (Some(how), Some((cur, reqs))) = (spread, second.take()) {
                place(cur, &reqs, how, speed, &mut rng, &mut out);
            }
            out.flush_all();
            if let Err(e) = r
                && let Ok(mut f) = fail.lock()
            {
                *f = Some(e);
            }
        })
        .map_err(|e| format!("starting the trace reader thread: {e}"))?;
    Ok(feeds)
}

/// A request of the second being placed: its id, whether it is a write, its TTL (s).
type Pending = (u64, bool, u32);

/// Place one whole second's requests over that second of run time.
fn place(
    sec: u64,
    reqs: &[Pending],
    how: Spread,
    speed: f64,
    rng: &mut SmallRng,
    out: &mut Out,
) -> bool {
    let n = reqs.len();
    let at = |frac: f64| ((sec as f64 + frac) / speed * 1e9) as u64;
    match how {
        Spread::Even => reqs
            .iter()
            .enumerate()
            .all(|(k, &(id, w, ttl))| out.push(at(k as f64 / n as f64), id, w, ttl)),
        Spread::Random => {
            let mut fr: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
            fr.sort_by(f64::total_cmp);
            reqs.iter()
                .zip(fr)
                .all(|(&(id, w, ttl), f)| out.push(at(f), id, w, ttl))
        }
    }
}

/// The replay thread's two outgoing streams and their batches in the making.
struct Out {
    reads: Stream,
    writes: Option<Stream>,
    /// The offset of the last request: offsets never run backwards (a stamp out of order
    /// goes out at the latest time so far).
    last: u64,
}

struct Stream {
    tx: tokio::sync::mpsc::Sender<Vec<Due>>,
    batch: Vec<Due>,
}

impl Stream {
    fn new(tx: tokio::sync::mpsc::Sender<Vec<Due>>) -> Stream {
        Stream {
            tx,
            batch: Vec::with_capacity(BATCH),
        }
    }

    /// Send the batch when it is full or spans too long; false once the run stopped reading.
    fn push(&mut self, d: Due) -> bool {
        if let Some(first) = self.batch.first()
            && (self.batch.len() >= BATCH || d.off_ns - first.off_ns >= BATCH_SPAN_NS)
            && !self.flush()
        {
            return false;
        }
        self.batch.push(d);
        true
    }

    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let b = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.tx.blocking_send(b).is_ok()
    }
}

impl Out {
    fn new(
        reads: tokio::sync::mpsc::Sender<Vec<Due>>,
        writes: Option<tokio::sync::mpsc::Sender<Vec<Due>>>,
    ) -> Out {
        Out {
            reads: Stream::new(reads),
            writes: writes.map(Stream::new),
            last: 0,
        }
    }

    fn push(&mut self, off: u64, id: u64, write: bool, ttl_s: u32) -> bool {
        self.last = self.last.max(off);
        let d = Due {
            off_ns: self.last,
            id,
            ttl_s,
        };
        // A sparse stream's batch goes out once the other stream has moved past its span.
        if let Some(w) = &mut self.writes
            && let Some(first) = w.batch.first()
            && d.off_ns - first.off_ns >= BATCH_SPAN_NS
            && !w.flush()
        {
            return false;
        }
        if let Some(first) = self.reads.batch.first()
            && d.off_ns - first.off_ns >= BATCH_SPAN_NS
            && !self.reads.flush()
        {
            return false;
        }
        match (&mut self.writes, write) {
            (Some(w), true) => w.push(d),
            _ => self.reads.push(d),
        }
    }

    fn flush_all(&mut self) {
        self.reads.flush();
        if let Some(w) = &mut self.writes {
            w.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(body: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("t.csv");
        std::fs::write(&p, body).expect("write");
        (dir, p)
    }

    fn opts(p: &Path) -> Options {
        Options {
            path: p.to_path_buf(),
            format: None,
            columns: None,
            ops: TraceOps::Reads,
            speed: 1.0,
            spread: Spread::Even,
            skip_s: 0.0,
            slice_s: None,
            retime_rps: None,
            default_size: 100,
        }
    }

    fn drain(spec: &TraceSpec) -> (Vec<Due>, Vec<Due>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut f = spawn(spec, 100, 7).expect("spawn");
            let mut reads = Vec::new();
            while let Some(d) = f.reads.next().await {
                reads.push(d);
            }
            let mut writes = Vec::new();
            if let Some(w) = &mut f.writes {
                while let Some(d) = w.next().await {
                    writes.push(d);
                }
            }
            (reads, writes)
        })
    }

    #[test]
    fn ids_follow_first_appearance_and_sizes_the_first_set() {
        let (_d, p) = write(
            "timestamp,key,value_size,op\n10,b,,get\n10,a,500,set\n10,a,20,get\n11,c,30,get\n11,b,,get\n",
        );
        let spec = load(&opts(&p)).expect("load");
        assert_eq!(spec.found.requests, 4);
        assert_eq!(spec.found.skipped, 1);
        assert_eq!(spec.found.distinct_keys, 3);
        assert!(spec.found.whole_seconds);
        assert_eq!(spec.found.run_s, 2.0);
        let i = spec.index(100).expect("index");
        assert_eq!(i.sizes, vec![100, 500, 30]);
        assert_eq!(i.requests, vec![2, 1, 1]);
        let (reads, writes) = drain(&spec);
        assert!(writes.is_empty());
        let got: Vec<(u64, u64)> = reads.iter().map(|d| (d.off_ns, d.id)).collect();
        assert_eq!(
            got,
            vec![
                (0, 1),
                (500_000_000, 2),
                (1_000_000_000, 3),
                (1_500_000_000, 1)
            ]
        );
    }

    #[test]
    fn all_ops_splits_writes_and_speed_compresses_time() {
        let (_d, p) = write("timestamp,key,op\n0.0,a,get\n0.5,a,set\n1.0,b,delete\n2.0,a,get\n");
        let spec = load(&Options {
            ops: TraceOps::All,
            speed: 2.0,
            ..opts(&p)
        })
        .expect("load");
        assert_eq!(
            (spec.found.reads, spec.found.writes, spec.found.deletes),
            (2, 1, 1)
        );
        assert!(!spec.found.whole_seconds);
        let (reads, writes) = drain(&spec);
        let r: Vec<u64> = reads.iter().map(|d| d.off_ns).collect();
        let w: Vec<u64> = writes.iter().map(|d| d.off_ns).collect();
        assert_eq!(r, vec![0, 1_000_000_000]);
        assert_eq!(w, vec![250_000_000, 500_000_000]);
    }

    #[test]
    fn skip_and_slice_select_trace_time_and_retime_keeps_order() {
        let (_d, p) = write("timestamp,key\n100,a\n101,b\n102,c\n103,d\n");
        let spec = load(&Options {
            skip_s: 1.0,
            slice_s: Some(2.0),
            ..opts(&p)
        })
        .expect("load");
        assert_eq!(spec.found.requests, 2);
        assert_eq!(spec.found.run_s, 2.0);
        let spec = load(&Options {
            retime_rps: Some(10.0),
            ..opts(&p)
        })
        .expect("load");
        let (reads, _) = drain(&spec);
        let got: Vec<(u64, u64)> = reads.iter().map(|d| (d.off_ns, d.id)).collect();
        assert_eq!(
            got,
            vec![(0, 1), (100_000_000, 2), (200_000_000, 3), (300_000_000, 4)]
        );
        assert!((spec.found.run_s - 0.4).abs() < 1e-9);
    }

    #[test]
    fn random_spread_keeps_each_seconds_count() {
        let body: String = std::iter::once("timestamp,key\n".to_string())
            .chain((0..300).map(|i| format!("{},{}\n", i / 100, i % 7)))
            .collect();
        let (_d, p) = write(&body);
        let spec = load(&Options {
            spread: Spread::Random,
            ..opts(&p)
        })
        .expect("load");
        let (reads, _) = drain(&spec);
        for s in 0..3u64 {
            let n = reads
                .iter()
                .filter(|d| d.off_ns / 1_000_000_000 == s)
                .count();
            assert_eq!(n, 100, "second {s}");
        }
        assert!(reads.windows(2).all(|w| w[0].off_ns <= w[1].off_ns));
    }

    #[test]
    fn an_empty_slice_says_why() {
        let (_d, p) = write("timestamp,key,op\n1,a,set\n");
        let e = load(&opts(&p)).expect_err("nothing to replay");
        assert!(e.contains("no request to replay"), "{e}");
    }
}
