//! Defence in depth for the database, per app instance, in front of every load: a bulkhead
//! (`--db-limit`: at most N loads in flight; one more is refused, never queued) and a circuit
//! breaker (`--breaker`: refuse loads while the database is failing or slow, probe it after a
//! cooldown). A refused load sends nothing to Postgres; the request path serves the stale
//! value it holds, if any, else the request fails fast with outcome `rejected`.
//!
//! The breaker's rules are the pure state machine of [`breaker`]; this is its thin shell on the
//! request path: an atomic for the bulkhead, a short mutex per instance for the breaker (never
//! held across an await), and the run-wide [`Board`] where transitions are logged.

pub mod breaker;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::values::{Dur, Percent};
use breaker::{Breaker, State, Ticket, Transition};

/// The breaker's settings as the scenario holds them (`--breaker-*`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BreakerSpec {
    /// Share of failed loads over the window that opens it.
    pub error_rate: Percent,
    /// Mean load latency over the window that opens it; a probe this slow fails.
    pub latency: Dur,
    /// How far back the figures that open it reach.
    pub window: Dur,
    /// How long it stays open before probing.
    pub cooldown: Dur,
    /// Loads let through while half-open; all must succeed to close it.
    pub probes: u32,
    /// Loads the window must hold before it can open.
    pub min_loads: u32,
}

impl BreakerSpec {
    pub const DEFAULT: BreakerSpec = BreakerSpec {
        error_rate: Percent(0.5),
        latency: Dur(Duration::from_secs(1)),
        window: Dur(Duration::from_secs(1)),
        cooldown: Dur(Duration::from_secs(2)),
        probes: 3,
        min_loads: 20,
    };

    pub fn settings(&self) -> breaker::Settings {
        breaker::Settings {
            error_rate: self.error_rate.0,
            latency_us: self.latency.0.as_micros().min(u128::from(u64::MAX)) as u64,
            window_ms: self.window.0.as_millis().max(1) as u64,
            cooldown_ms: self.cooldown.0.as_millis() as u64,
            probes: self.probes,
            min_loads: self.min_loads,
        }
    }

    /// In words, for the summary.
    pub fn describe(&self) -> String {
        format!(
            "breaker (opens at {} failed or {} mean latency over {}, min {} loads; cooldown {}, {} probes)",
            self.error_rate, self.latency, self.window, self.min_loads, self.cooldown, self.probes
        )
    }
}

/// Why a load was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `--db-limit` loads of this instance were already in flight.
    Limit,
    /// The instance's breaker is open (or half-open with every probe out).
    Breaker,
}

/// A state change of one instance's breaker.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Instant,
    pub instance: u32,
    pub from: State,
    pub to: State,
    pub reason: String,
}

/// What every instance's protections share: the breakers' clock, their log of transitions,
/// and which of them are not closed, for the timeline.
pub struct Board {
    origin: Instant,
    events: Mutex<Vec<Event>>,
    /// Breakers not closed right now.
    not_closed: AtomicU32,
    /// A breaker was not closed at some moment since the timeline last asked.
    went_open: AtomicBool,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
            not_closed: AtomicU32::new(0),
            went_open: AtomicBool::new(false),
        }
    }
}

impl Board {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn log(&self, instance: u32, t: Transition, settings: &breaker::Settings) {
        match (t.from, t.to) {
            (State::Closed, _) => {
                self.not_closed.fetch_add(1, Relaxed);
                self.went_open.store(true, Relaxed);
            }
            (_, State::Closed) => {
                self.not_closed.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
        let reason = t.reason.describe(settings);
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        // Stamped under the lock, so the log is in time order across instances.
        events.push(Event {
            at: Instant::now(),
            instance,
            from: t.from,
            to: t.to,
            reason,
        });
    }

    /// For one timeline bucket: true when some breaker was open or half-open at any moment
    /// since the last call.
    pub fn take_bucket_open(&self) -> bool {
        let now = self.not_closed.load(Relaxed) > 0;
        self.went_open.swap(now, Relaxed) || now
    }

    /// Every transition so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// One instance's protections.
pub struct Guard {
    instance: u32,
    /// 0: no bulkhead.
    limit: u32,
    in_flight: AtomicU32,
    breaker: Option<Mutex<Breaker>>,
}

/// The right to run one load: hand its result back with [`Permit::finish`]; dropped
/// unfinished (the request was cancelled) it frees its place all the same.
pub struct Permit<'a> {
    guard: &'a Guard,
    board: &'a Board,
    slot: bool,
    ticket: Option<Ticket>,
}

impl Guard {
    pub fn new(instance: u32, limit: Option<u32>, breaker: Option<&BreakerSpec>) -> Guard {
        Guard {
            instance,
            limit: limit.unwrap_or(0),
            in_flight: AtomicU32::new(0),
            breaker: breaker.map(|b| Mutex::new(Breaker::new(b.settings()))),
        }
    }

    /// Whether a load may start now.
    #[inline]
    pub fn admit<'a>(&'a self, board: &'a Board) -> Result<Permit<'a>, Refused> {
        let mut permit = Permit {
            guard: self,
            board,
            slot: false,
            ticket: None,
        };
        if self.limit > 0 {
            self.in_flight
                .fetch_update(Relaxed, Relaxed, |n| (n < self.limit).then_some(n + 1))
                .map_err(|_| Refused::Limit)?;
            permit.slot = true;
        }
        if let Some(b) = &self.breaker {
            let now = board.now_ms();
            let (ticket, moved) = {
                let mut b = b.lock().unwrap_or_else(|p| p.into_inner());
                let (ticket, moved) = b.admit(now);
                (ticket, moved.map(|t| (t, *b.settings())))
            };
            if let Some((t, s)) = moved {
                board.log(self.instance, t, &s);
            }
            // Dropping `permit` frees the bulkhead's place.
            permit.ticket = Some(ticket.ok_or(Refused::Breaker)?);
        }
        Ok(permit)
    }
}

impl Permit<'_> {
    /// The load ended after `latency`, failed or not.
    pub fn finish(mut self, failed: bool, latency: Duration) {
        if let (Some(ticket), Some(b)) = (self.ticket.take(), &self.guard.breaker) {
            let now = self.board.now_ms();
            let moved = {
                let mut b = b.lock().unwrap_or_else(|p| p.into_inner());
                let latency_us = latency.as_micros().min(u128::from(u64::MAX)) as u64;
                b.record(now, ticket, failed, latency_us)
                    .map(|t| (t, *b.settings()))
            };
            if let Some((t, s)) = moved {
                self.board.log(self.guard.instance, t, &s);
            }
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.slot {
            self.guard.in_flight.fetch_sub(1, Relaxed);
        }
        if let (Some(ticket), Some(b)) = (self.ticket.take(), &self.guard.breaker) {
            b.lock().unwrap_or_else(|p| p.into_inner()).abandon(ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bulkhead_refuses_past_its_limit_and_frees_places_on_drop() {
        let board = Board::default();
        let g = Guard::new(0, Some(2), None);
        let a = g.admit(&board).expect("1 of 2");
        let b = g.admit(&board).expect("2 of 2");
        assert_eq!(g.admit(&board).err(), Some(Refused::Limit));
        a.finish(false, Duration::from_millis(1));
        let c = g.admit(&board).expect("a place was freed");
        drop((b, c));
        assert_eq!(g.in_flight.load(Relaxed), 0);
        let open = Guard::new(0, None, None);
        let many: Vec<_> = (0..100).map(|_| open.admit(&board).unwrap()).collect();
        assert_eq!(many.len(), 100);
    }

    #[test]
    fn breaker_transitions_are_logged_and_marked_on_the_timeline() {
        let board = Board::default();
        let spec = BreakerSpec {
            min_loads: 2,
            cooldown: Dur(Duration::ZERO),
            probes: 1,
            ..BreakerSpec::DEFAULT
        };
        let g = Guard::new(3, Some(10), Some(&spec));
        assert!(!board.take_bucket_open());
        for _ in 0..2 {
            g.admit(&board)
                .unwrap()
                .finish(true, Duration::from_millis(5));
        }
        assert!(board.take_bucket_open(), "opened");
        // Cooldown 0: the next admission half-opens it and is the probe; the one after is
        // refused (one probe), and frees its bulkhead place.
        let probe = g.admit(&board).expect("probe");
        assert_eq!(g.admit(&board).err(), Some(Refused::Breaker));
        assert_eq!(g.in_flight.load(Relaxed), 1);
        assert!(board.take_bucket_open(), "half-open");
        probe.finish(false, Duration::from_millis(5));
        assert!(board.take_bucket_open(), "closed during the bucket");
        assert!(!board.take_bucket_open());
        let ev = board.events();
        let path: Vec<(State, State)> = ev.iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(
            path,
            [
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, State::Closed)
            ]
        );
        assert!(ev.iter().all(|e| e.instance == 3));
        assert!(
            ev[0].reason.contains("2 of 2 loads failed"),
            "{}",
            ev[0].reason
        );
    }

    #[test]
    fn a_cancelled_probe_lets_the_next_request_probe() {
        let board = Board::default();
        let spec = BreakerSpec {
            min_loads: 1,
            cooldown: Dur(Duration::ZERO),
            probes: 1,
            ..BreakerSpec::DEFAULT
        };
        let g = Guard::new(0, None, Some(&spec));
        g.admit(&board)
            .unwrap()
            .finish(true, Duration::from_millis(1));
        let probe = g.admit(&board).expect("probe");
        assert!(g.admit(&board).is_err());
        drop(probe);
        assert!(g.admit(&board).is_ok(), "the probe's place is free again");
    }
}
