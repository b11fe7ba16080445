//! Defence in depth for the database, per app instance, in front of every load: a bulkhead
//! (`--db-limit`: at most N loads in flight; one more is refused, never queued), a circuit
//! breaker (`--breaker`: refuse loads while the database is failing or slow, probe it after a
//! cooldown) and a rate limit (`--db-rate`: at most R loads a second, B at once, per instance
//! or for the whole run). A refused load sends nothing to Postgres; the request path serves
//! the stale value it holds, if any, else the request fails fast with outcome `rejected`.
//!
//! The breaker's rules are the pure state machine of [`breaker`], the rate limit's the GCRA of
//! [`rate`]; this is their thin shell on the request path: an atomic for the bulkhead and the
//! per-instance bucket, a short mutex per instance for the breaker (never held across an
//! await), one Redis call for the global bucket, and the run-wide [`Board`] where transitions
//! and fallbacks are logged.

pub mod breaker;
pub mod rate;

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
    /// `--db-rate`: the bucket had no token left.
    Rate,
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
    /// When instances limited their own loads because the global rate limit was unreachable.
    pub rate_fallbacks: rate::Fallbacks,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
            not_closed: AtomicU32::new(0),
            went_open: AtomicBool::new(false),
            rate_fallbacks: rate::Fallbacks::default(),
        }
    }
}

impl Board {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
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
    rate: Option<rate::Limiter>,
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
            rate: None,
        }
    }

    /// With the rate limit of `--db-rate` (`instances`: how many share a global one).
    pub fn with_rate(mut self, spec: Option<&rate::RateSpec>, instances: u32) -> Guard {
        self.rate = spec.map(|s| rate::Limiter::new(*s, instances));
        self
    }

    /// Whether a load may start now: the bulkhead, the breaker, then the rate limit, which
    /// goes last so that a token is spent only on a load that will run. `global` asks the
    /// run's bucket in Redis (its GCRA arguments given): Some(went), or None when Redis could
    /// not answer in time. It is called only under `--db-rate-scope global`.
    #[inline]
    pub async fn admit<'a, F>(
        &'a self,
        board: &'a Board,
        global: impl FnOnce(rate::GlobalAsk) -> F,
    ) -> Result<Permit<'a>, Refused>
    where
        F: Future<Output = Option<bool>>,
    {
        let permit = self.admit_local(board)?;
        let Some(r) = &self.rate else {
            return Ok(permit);
        };
        let went = match r.check(board.now_ns()) {
            rate::Check::Decided(went) => went,
            rate::Check::Global => match global(r.ask()).await {
                Some(went) => {
                    if r.answered() {
                        board.rate_fallbacks.ended(Instant::now());
                    }
                    went
                }
                None => {
                    let (started, went) = r.unreachable(board.now_ns());
                    if started {
                        board.rate_fallbacks.started(Instant::now());
                    }
                    went
                }
            },
        };
        // Dropping `permit` frees the bulkhead's place and gives the breaker's ticket back.
        if went { Ok(permit) } else { Err(Refused::Rate) }
    }

    /// The bulkhead and the breaker.
    fn admit_local<'a>(&'a self, board: &'a Board) -> Result<Permit<'a>, Refused> {
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
        let a = g.admit_local(&board).expect("1 of 2");
        let b = g.admit_local(&board).expect("2 of 2");
        assert_eq!(g.admit_local(&board).err(), Some(Refused::Limit));
        a.finish(false, Duration::from_millis(1));
        let c = g.admit_local(&board).expect("a place was freed");
        drop((b, c));
        assert_eq!(g.in_flight.load(Relaxed), 0);
        let open = Guard::new(0, None, None);
        let many: Vec<_> = (0..100)
            .map(|_| open.admit_local(&board).unwrap())
            .collect();
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
            g.admit_local(&board)
                .unwrap()
                .finish(true, Duration::from_millis(5));
        }
        assert!(board.take_bucket_open(), "opened");
        // Cooldown 0: the next admission half-opens it and is the probe; the one after is
        // refused (one probe), and frees its bulkhead place.
        let probe = g.admit_local(&board).expect("probe");
        assert_eq!(g.admit_local(&board).err(), Some(Refused::Breaker));
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
        g.admit_local(&board)
            .unwrap()
            .finish(true, Duration::from_millis(1));
        let probe = g.admit_local(&board).expect("probe");
        assert!(g.admit_local(&board).is_err());
        drop(probe);
        assert!(
            g.admit_local(&board).is_ok(),
            "the probe's place is free again"
        );
    }

    /// The rate limit is checked after the bulkhead and the breaker, and a refusal frees what
    /// they gave; under the global scope a Redis that does not answer puts the instance on
    /// its share, logged on the board until Redis answers again.
    #[tokio::test]
    async fn the_rate_limit_refuses_past_its_burst_and_falls_back_when_redis_is_unreachable() {
        use rate::{RateScope, RateSpec};
        let board = Board::default();
        let never = |_| async { unreachable!("a per-instance limit never asks Redis") };
        let spec = RateSpec {
            rate: 1.0,
            burst: 3,
            scope: RateScope::Instance,
        };
        let g = Guard::new(0, Some(10), None).with_rate(Some(&spec), 2);
        for _ in 0..3 {
            drop(g.admit(&board, never).await.expect("within the burst"));
        }
        assert_eq!(g.admit(&board, never).await.err(), Some(Refused::Rate));
        assert_eq!(
            g.in_flight.load(Relaxed),
            0,
            "a refusal frees the bulkhead's place"
        );
        let global = RateSpec {
            scope: RateScope::Global,
            ..spec
        };
        let g = Guard::new(1, None, None).with_rate(Some(&global), 3);
        let asked = std::cell::Cell::new(0);
        let redis = |went: Option<bool>| {
            let asked = &asked;
            move |_| {
                asked.set(asked.get() + 1);
                async move { went }
            }
        };
        assert!(g.admit(&board, redis(Some(true))).await.is_ok());
        assert_eq!(
            g.admit(&board, redis(Some(false))).await.err(),
            Some(Refused::Rate)
        );
        // Redis down: the share is 1/3 per second, burst 1: this load goes, the next not, and
        // Redis is not asked again during the hold.
        assert!(g.admit(&board, redis(None)).await.is_ok());
        assert_eq!(
            g.admit(&board, redis(Some(true))).await.err(),
            Some(Refused::Rate)
        );
        assert_eq!(asked.get(), 3);
        let t = Instant::now() + Duration::from_secs(1);
        assert!(board.rate_fallbacks.time_within(board.origin, t) > Duration::ZERO);
    }
}
