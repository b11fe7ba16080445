//! The second pass over a trace, during the run: its timestamps turned into the open loop's
//! schedule on a thread of its own, streamed through a bounded channel in batches.

use crate::trace::Op;
use crate::workload::{DIGEST_DRAWS, fnv_step};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::sync::{Arc, Mutex};

use super::*;

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
