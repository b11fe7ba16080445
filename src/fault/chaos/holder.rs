//! The holder-crash fault's lane: at AT (or the first moment after it that an instance holds a
//! Redis lock or lease, waiting up to [`HOLDER_WAIT`]) the instance holding the most dies
//! where it stands; the tool reads from Redis which of its tokens are still there and for how
//! long (the keys it left blocked), then watches the requests of the other instances that wait
//! on them until the last lease has run out and their waits have ended. With `+FOR` a fresh
//! instance takes the dead one's place after FOR.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::{Record, STAMPEDE_WINDOW, ms_since};
use crate::cache::Admin;
use crate::fault::FaultSpec;
use crate::fault::report::HolderCrash;
use crate::instance::Instance;
use crate::instance::crash::Board;
use crate::metrics::Gauges;

/// How long the fault waits at AT for an instance to hold a lock before it gives up.
pub const HOLDER_WAIT: Duration = Duration::from_secs(2);
/// How often it looks meanwhile.
const LOOK_EVERY: Duration = Duration::from_millis(1);
/// Past the last blocked lease and `--lock-wait`: the waits that began while a key was blocked
/// have ended by then.
const SETTLE_MARGIN: Duration = Duration::from_millis(200);

/// What the fault strikes: the run's built-in instances, the board their waits are noted on,
/// and the tool's own Redis connection, which reads the dead holder's tokens.
pub struct HolderSide {
    pub instances: Vec<Arc<Instance>>,
    pub board: Arc<Board>,
    pub admin: Admin,
    /// `--lock-wait`: how long a wait that began on a blocked key may last.
    pub lock_wait: Duration,
}

/// Strike the holder-crashes in order; what each did.
pub(super) async fn lane(
    faults: Vec<FaultSpec>,
    side: Option<HolderSide>,
    shared: Gauges,
    window: watch::Receiver<Option<Instant>>,
    duration: Duration,
    stop: CancellationToken,
) -> Vec<Record> {
    let mut records = Vec::new();
    let Some(side) = side else {
        return records;
    };
    let Some(clock) = Clock::open(&faults, window, duration, stop).await else {
        return records;
    };
    let start = clock.start;
    let calls = || shared.loads.calls.load(Relaxed);
    for (nth, spec) in faults.iter().enumerate() {
        let due = clock.due(spec);
        if !clock.sleep_until(due).await {
            break;
        }
        // The next holder-crash (or the end of the window) cuts this one's watch short.
        let next = clock.next(&faults, nth);
        let Some((pos, held)) = holder(&side.instances, next.min(due + HOLDER_WAIT)).await else {
            records.push(no_holder(spec, ms_since(due, start)));
            continue;
        };
        let inst = &side.instances[pos];
        let (calls0, cut0) = (calls(), inst.requests_cut());
        inst.crash();
        let struck = Instant::now();
        let (blocked, unread) = blocked_keys(&side.admin, &held, struck).await;
        side.board.block(struck, &blocked);
        let blocked_max = blocked.iter().map(|b| b.1).max().unwrap_or_default();
        let mut r = Record {
            kind: spec.kind,
            injected: true,
            kill_ms: ms_since(struck, start),
            note: (unread > 0).then(|| {
                format!("{unread} of the dead holder's locks could not be read from Redis")
            }),
            ..Record::default()
        };
        let back = (!spec.down_for.0.is_zero()).then(|| struck + spec.down_for.0);
        // The DB calls while the keys were blocked: until the last lease ran out.
        let unblocked = struck + blocked_max;
        let settled = unblocked + side.lock_wait + SETTLE_MARGIN;
        // What happens after the crash, in time order: the last lease runs out (the DB calls
        // while the keys were blocked are read then), the waits that began meanwhile end, and
        // with +FOR the fresh instance comes back and its first second is counted.
        let mut events = vec![(unblocked, Event::Unblocked), (settled, Event::Settled)];
        if let Some(back) = back {
            events.push((back, Event::Back));
            events.push((back + STAMPEDE_WINDOW, Event::BackSecond));
        }
        events.sort_by_key(|e| e.0);
        let (mut during, mut back_calls) = (None, None);
        for (t, event) in events {
            if !clock.sleep_until(t.min(next)).await {
                break;
            }
            match event {
                Event::Unblocked => during = Some(calls() - calls0),
                Event::Settled => {}
                Event::Back if t <= next => {
                    inst.revive();
                    back_calls = Some((Instant::now(), calls()));
                    r.restart_ms = Some(ms_since(Instant::now(), start));
                }
                Event::BackSecond => {
                    if let Some((at, c0)) = back_calls {
                        r.recovery_stampede = calls() - c0;
                        r.recovery_window_ms = ms_since(Instant::now(), at);
                    }
                }
                Event::Back => {}
            }
            if t > next {
                break;
            }
        }
        r.db_calls_during = during.unwrap_or_else(|| calls() - calls0);
        if back.is_some() && back_calls.is_none() {
            r.note = Some("cut short: the run ended before the instance came back".into());
        }
        let w = side.board.waiters();
        r.holder = Some(HolderCrash {
            instance: pos,
            waited_for_holder_ms: ms_since(struck, due),
            locks_held: held.len() as u64,
            keys_blocked: blocked.len() as u64,
            blocked_ms_max: blocked_max.as_millis() as u64,
            retaken_ms_max: w.retaken_ms_max,
            requests_cut: inst.requests_cut() - cut0,
            waiters: w.requests,
            waited_ms_max: w.waited_ms_max,
            waiters_got: w.got.iter().map(|&(o, n)| (o.to_string(), n)).collect(),
        });
        records.push(r);
    }
    records
}

/// A holder-crash that found no instance holding a lock in time.
fn no_holder(spec: &FaultSpec, due_ms: u64) -> Record {
    Record {
        kind: spec.kind,
        kill_ms: due_ms,
        note: Some(format!(
            "not injected: no instance held a lock within {} ms of the fault's time (is the strategy's coordination a mutex or a lease, and do the keys miss?)",
            HOLDER_WAIT.as_millis()
        )),
        ..Record::default()
    }
}

/// Of the dead holder's tokens `held`, those Redis still holds under its token, each with the
/// lease it had left counted from the crash (`struck`); and how many could not be read.
async fn blocked_keys(
    admin: &Admin,
    held: &[(u64, u64, bool)],
    struck: Instant,
) -> (Vec<(u64, Duration)>, usize) {
    let mut blocked = Vec::with_capacity(held.len());
    let mut unread = 0;
    for &(id, token, lease) in held {
        match admin.token_left(lease, id, token).await {
            // Counted from the crash: the read came a little after it.
            Ok(Some(ms)) => blocked.push((id, struck.elapsed() + Duration::from_millis(ms))),
            Ok(None) => {}
            Err(_) => unread += 1,
        }
    }
    (blocked, unread)
}

/// What the lane waits for after a crash.
#[derive(Debug, Clone, Copy)]
enum Event {
    Unblocked,
    Settled,
    Back,
    BackSecond,
}

/// The instance up that holds the most tokens, and what it holds, at the first look that
/// finds one holding any; None when none does before `until`.
async fn holder(
    instances: &[Arc<Instance>],
    until: Instant,
) -> Option<(usize, Vec<(u64, u64, bool)>)> {
    loop {
        let best = instances
            .iter()
            .enumerate()
            .filter(|(_, i)| !i.is_down())
            .filter_map(|(pos, i)| Some((pos, i.holdings()?.count())))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(pos, n)| (n, std::cmp::Reverse(pos)));
        if let Some((pos, _)) = best {
            let held = instances[pos].holdings()?.snapshot();
            if !held.is_empty() {
                return Some((pos, held));
            }
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
