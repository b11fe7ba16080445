//! An app instance that dies holding locks (the `holder-crash` fault): which Redis locks and
//! leases each instance holds ([`Holdings`]), the switch that kills it — its requests in flight
//! end as errors, its loads never finish, so what it holds is never released — and brings a
//! fresh one back ([`Switch`]), and the run's [`Board`] of the keys its death left blocked and
//! the requests of the other instances that waited on them.
//!
//! None of this exists in a run without the fault: the request path then checks one `Option`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Instance, Served};
use crate::metrics::Outcome;

/// The Redis tokens an instance holds: token → (the key's id, whether it is a lease).
#[derive(Default)]
pub struct Holdings {
    held: Mutex<HashMap<u64, (u64, bool)>>,
}

impl Holdings {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (u64, bool)>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A token taken: held until the returned guard is dropped (released, or dropped with a
    /// request that was cut off — which only a crash does, after it read what was held).
    pub(super) fn hold(&self, token: u64, id: u64, lease: bool) -> Held<'_> {
        self.table().insert(token, (id, lease));
        Held {
            holdings: self,
            token,
        }
    }

    /// How many tokens are held.
    pub fn count(&self) -> usize {
        self.table().len()
    }

    /// What is held: (id, token, lease).
    pub fn snapshot(&self) -> Vec<(u64, u64, bool)> {
        self.table()
            .iter()
            .map(|(&token, &(id, lease))| (id, token, lease))
            .collect()
    }
}

/// One token held, forgotten when dropped.
pub struct Held<'a> {
    holdings: &'a Holdings,
    token: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.holdings.table().remove(&self.token);
    }
}

/// An instance's life: down or up, and the token its requests die with.
#[derive(Default)]
pub struct Switch {
    down: AtomicBool,
    life: Mutex<CancellationToken>,
    /// Requests in flight on the instance (or queued to it) that its crash cut off.
    cut: AtomicU64,
}

impl Switch {
    fn life(&self) -> CancellationToken {
        self.life.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The keys a crash left blocked and the requests that waited on them, for the fault's entry.
#[derive(Default)]
pub struct Board {
    blocked: Mutex<Option<Blocked>>,
    waiters: AtomicU64,
    waited_us_max: AtomicU64,
    got: [AtomicU64; Outcome::COUNT],
}

/// The last crash: when, each blocked key's id with when its lease runs out, and when another
/// loader first took each one's token again.
struct Blocked {
    at: Instant,
    until: HashMap<u64, Instant>,
    retaken: HashMap<u64, Instant>,
}

/// What the requests that waited on a crash's blocked keys did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Waiters {
    pub requests: u64,
    pub waited_ms_max: u64,
    /// Outcome name → requests.
    pub got: Vec<(&'static str, u64)>,
    /// From the crash until another loader took a blocked key's token, the longest over the
    /// keys taken again, ms (None: none was).
    pub retaken_ms_max: Option<u64>,
}

impl Board {
    /// A crash at `at` left `keys` (id, lease left) blocked: the figures start again.
    pub fn block(&self, at: Instant, keys: &[(u64, Duration)]) {
        let until = keys.iter().map(|&(id, left)| (id, at + left)).collect();
        *self.lock() = Some(Blocked {
            at,
            until,
            retaken: HashMap::new(),
        });
        self.waiters.store(0, Relaxed);
        self.waited_us_max.store(0, Relaxed);
        for g in &self.got {
            g.store(0, Relaxed);
        }
    }

    /// A request waited for the lock of `id` from `began` until `ended` (before any load of
    /// its own) and got `outcome`: counted when `id` was blocked by the crash and the wait
    /// overlapped the blocked time.
    pub(super) fn note_wait(&self, id: u64, began: Instant, ended: Instant, outcome: Outcome) {
        let now = ended;
        {
            let b = self.lock();
            let Some(b) = b.as_ref() else { return };
            match b.until.get(&id) {
                Some(&until) if now >= b.at && began <= until => {}
                _ => return,
            }
        }
        self.waiters.fetch_add(1, Relaxed);
        let us = now.duration_since(began).as_micros() as u64;
        self.waited_us_max.fetch_max(us, Relaxed);
        self.got[outcome as usize].fetch_add(1, Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Blocked>> {
        self.blocked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A loader took the token of `id`: the first time after a crash that blocked it, noted.
    pub(super) fn note_taken(&self, id: u64) {
        let mut b = self.lock();
        if let Some(b) = b.as_mut()
            && b.until.contains_key(&id)
        {
            b.retaken.entry(id).or_insert_with(Instant::now);
        }
    }

    /// The waiters of the last crash so far.
    pub fn waiters(&self) -> Waiters {
        let retaken_ms_max = self.lock().as_ref().and_then(|b| {
            b.retaken
                .values()
                .map(|t| t.duration_since(b.at).as_millis() as u64)
                .max()
        });
        Waiters {
            retaken_ms_max,
            requests: self.waiters.load(Relaxed),
            waited_ms_max: self.waited_us_max.load(Relaxed).div_ceil(1000),
            got: Outcome::ALL
                .iter()
                .map(|&o| (o.name(), self.got[o as usize].load(Relaxed)))
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }
}

impl Instance {
    /// With the holder-crash fault: switches it on (this instance can die) and records its
    /// locks and waits on `board`.
    pub fn mortal(mut self) -> Instance {
        self.crash = Some(Switch::default());
        if let Some(board) = &self.run.crash {
            self.coord.track_holdings(board.clone());
        }
        self
    }

    /// Whether the instance is down (crashed, not yet back): requests go to the others.
    #[inline]
    pub fn is_down(&self) -> bool {
        self.crash.as_ref().is_some_and(|s| s.down.load(Relaxed))
    }

    /// The Redis locks and leases this instance holds now (none when it cannot crash).
    pub fn holdings(&self) -> Option<&Holdings> {
        self.coord.holdings()
    }

    /// Kill the instance: no request is routed to it any more, and every request and
    /// background refresh it runs is dropped where it stands — a load in flight is never
    /// finished, its lock never released or extended, its write-back never made.
    pub fn crash(&self) {
        if let Some(s) = &self.crash {
            s.down.store(true, Relaxed);
            s.life().cancel();
        }
    }

    /// Bring a fresh instance back in the crashed one's place: empty in-process state (the
    /// in-process tier, the fail-safe throttle; its flights and refresh marks went with its
    /// requests), then open to requests. Its Redis connections and DB pool are kept: a real
    /// restart would open new ones, which this does not time.
    pub fn revive(&self) {
        let Some(s) = &self.crash else { return };
        if let Some(l1) = &self.l1 {
            l1.clear();
        }
        self.throttle.clear();
        *s.life.lock().unwrap_or_else(|p| p.into_inner()) = CancellationToken::new();
        s.down.store(false, Relaxed);
    }

    /// Requests its crashes cut off so far.
    pub fn requests_cut(&self) -> u64 {
        self.crash.as_ref().map_or(0, |s| s.cut.load(Relaxed))
    }

    /// The token the instance's work dies with (None when it cannot crash).
    pub(super) fn life(&self) -> Option<CancellationToken> {
        self.crash.as_ref().map(Switch::life)
    }

    /// [`Instance::serve`] on an instance that can crash: cut off (an error, as a reset
    /// connection is to its client) when it dies first.
    pub(super) async fn serve_mortal(self: &std::sync::Arc<Self>, id: u64) -> Served {
        let Some(s) = &self.crash else {
            return self.serve(id).await;
        };
        let life = s.life();
        tokio::select! {
            biased;
            () = life.cancelled() => {
                s.cut.fetch_add(1, Relaxed);
                (Outcome::Error, 0)
            }
            served = self.serve(id) => served,
        }
    }
}
