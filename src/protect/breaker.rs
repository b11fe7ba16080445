//! The circuit breaker on one instance's loads, as a pure state machine: the time is passed
//! in (ms on any monotonic clock) and every load's result is handed back, so every transition
//! is decided here and tested exactly. The request path's shell is [`super::Guard`].
//!
//! - **Closed**: loads go through; their results fill a rolling window of `window_ms` (in
//!   [`SLICES`] slices). Once it holds at least `min_loads` loads, the breaker opens when the
//!   share of failed loads reaches `error_rate`, or their mean latency reaches `latency_us`.
//! - **Open**: every load is refused, for `cooldown_ms`.
//! - **Half-open**: the first request after the cooldown moves it here; `probes` loads go
//!   through, the rest are refused. It closes when every probe succeeded within the latency
//!   bound, and opens again at the first that did not.
//!
//! A load admitted in one state and finished in another is not counted: each admission is
//! stamped with the epoch (one per state entered) it belongs to.

use serde::{Deserialize, Serialize};

/// The window is kept as this many slices; the oldest is dropped as a new one starts, so the
/// figures cover between `(SLICES - 1) / SLICES` of the window and all of it.
pub const SLICES: usize = 10;

/// The breaker's bounds, in the units the machine counts in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Share of failed loads (0 < r ≤ 1) at which it opens.
    pub error_rate: f64,
    /// Mean load latency (µs) at which it opens; a probe this slow fails.
    pub latency_us: u64,
    pub window_ms: u64,
    pub cooldown_ms: u64,
    /// Loads let through while half-open.
    pub probes: u32,
    /// Loads the window must hold before it can open the breaker.
    pub min_loads: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Closed,
    Open,
    HalfOpen,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
        }
    }
}

/// Why the breaker changed state, with the figures that decided it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// `errors` of the window's `loads` failed: at least the bound.
    ErrorRate { errors: u32, loads: u32 },
    /// The window's loads took `mean_us` on average: at least the bound.
    Latency { mean_us: u64, loads: u32 },
    /// The cooldown ran out.
    CooledDown,
    /// Every probe succeeded within the latency bound.
    ProbesSucceeded,
    /// A probe failed (`error`), or succeeded but took at least the latency bound.
    ProbeFailed { error: bool, latency_us: u64 },
}

impl Reason {
    /// The reason in words, with its figures and the bound it met.
    pub fn describe(&self, s: &Settings) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        match *self {
            Reason::ErrorRate { errors, loads } => format!(
                "{errors} of {loads} loads failed in the last {} ms ({:.0}% ≥ {:.0}%)",
                s.window_ms,
                f64::from(errors) * 100.0 / f64::from(loads.max(1)),
                s.error_rate * 100.0
            ),
            Reason::Latency { mean_us, loads } => format!(
                "mean latency of {loads} loads in the last {} ms was {:.1} ms (≥ {:.1} ms)",
                s.window_ms,
                ms(mean_us),
                ms(s.latency_us)
            ),
            Reason::CooledDown => format!("cooldown of {} ms over: probing", s.cooldown_ms),
            Reason::ProbesSucceeded => format!("{} probe loads succeeded", s.probes),
            Reason::ProbeFailed {
                error: true,
                latency_us,
            } => format!("a probe load failed after {:.1} ms", ms(latency_us)),
            Reason::ProbeFailed {
                error: false,
                latency_us,
            } => format!(
                "a probe load took {:.1} ms (≥ {:.1} ms)",
                ms(latency_us),
                ms(s.latency_us)
            ),
        }
    }
}

/// A change of state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    pub from: State,
    pub to: State,
    pub reason: Reason,
}

/// The right to run one load, to be handed back with its result ([`Breaker::record`]) or
/// when it was given up ([`Breaker::abandon`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    epoch: u32,
    probe: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Slice {
    loads: u32,
    errors: u32,
    latency_us: u64,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    s: Settings,
    state: State,
    /// Bumped at every transition: tickets of an earlier state are not counted.
    epoch: u32,
    slices: [Slice; SLICES],
    /// Number of the newest slice (`now_ms / slice_ms`).
    head: u64,
    opened_at_ms: u64,
    probes_out: u32,
    probes_ok: u32,
}

impl Breaker {
    pub fn new(s: Settings) -> Breaker {
        Breaker {
            s,
            state: State::Closed,
            epoch: 0,
            slices: [Slice::default(); SLICES],
            head: 0,
            opened_at_ms: 0,
            probes_out: 0,
            probes_ok: 0,
        }
    }

    #[cfg(test)]
    pub fn state(&self) -> State {
        self.state
    }

    pub fn settings(&self) -> &Settings {
        &self.s
    }

    fn slice_ms(&self) -> u64 {
        (self.s.window_ms / SLICES as u64).max(1)
    }

    fn enter(&mut self, to: State, now_ms: u64, reason: Reason) -> Transition {
        let from = self.state;
        self.state = to;
        self.epoch = self.epoch.wrapping_add(1);
        match to {
            State::Open => self.opened_at_ms = now_ms,
            State::HalfOpen => {
                self.probes_out = 0;
                self.probes_ok = 0;
            }
            State::Closed => {
                self.slices = [Slice::default(); SLICES];
                self.head = now_ms / self.slice_ms();
            }
        }
        Transition { from, to, reason }
    }

    /// A load is about to start at `now_ms`: a ticket to run it, or None to refuse it; and the
    /// transition this caused (open → half-open once the cooldown is over).
    pub fn admit(&mut self, now_ms: u64) -> (Option<Ticket>, Option<Transition>) {
        let mut moved = None;
        if self.state == State::Open {
            if now_ms < self.opened_at_ms.saturating_add(self.s.cooldown_ms) {
                return (None, None);
            }
            moved = Some(self.enter(State::HalfOpen, now_ms, Reason::CooledDown));
        }
        let ticket = match self.state {
            State::Closed => Some(Ticket {
                epoch: self.epoch,
                probe: false,
            }),
            State::HalfOpen if self.probes_out < self.s.probes => {
                self.probes_out += 1;
                Some(Ticket {
                    epoch: self.epoch,
                    probe: true,
                })
            }
            _ => None,
        };
        (ticket, moved)
    }

    /// The load of `ticket` ended at `now_ms` after `latency_us`, failed or not.
    pub fn record(
        &mut self,
        now_ms: u64,
        ticket: Ticket,
        failed: bool,
        latency_us: u64,
    ) -> Option<Transition> {
        if ticket.epoch != self.epoch {
            return None;
        }
        match (self.state, ticket.probe) {
            (State::Closed, false) => {
                self.count(now_ms, failed, latency_us);
                let reason = self.verdict()?;
                Some(self.enter(State::Open, now_ms, reason))
            }
            (State::HalfOpen, true) => {
                if failed || latency_us >= self.s.latency_us {
                    let reason = Reason::ProbeFailed {
                        error: failed,
                        latency_us,
                    };
                    return Some(self.enter(State::Open, now_ms, reason));
                }
                self.probes_ok += 1;
                (self.probes_ok >= self.s.probes)
                    .then(|| self.enter(State::Closed, now_ms, Reason::ProbesSucceeded))
            }
            _ => None,
        }
    }

    /// The load of `ticket` was given up before it ended (its request was cancelled): nothing
    /// is known of the database, so a probe's place goes to the next request.
    pub fn abandon(&mut self, ticket: Ticket) {
        if ticket.epoch == self.epoch && ticket.probe && self.state == State::HalfOpen {
            self.probes_out = self.probes_out.saturating_sub(1);
        }
    }

    /// Add one load to the window's slice of `now_ms`, dropping the slices that fell out.
    fn count(&mut self, now_ms: u64, failed: bool, latency_us: u64) {
        let n = now_ms / self.slice_ms();
        if n > self.head {
            let gone = (n - self.head).min(SLICES as u64);
            for k in 1..=gone {
                self.slices[((self.head + k) % SLICES as u64) as usize] = Slice::default();
            }
            self.head = n;
        }
        // A load that ended a moment earlier but is counted late goes into the newest slice.
        let s = &mut self.slices[(self.head % SLICES as u64) as usize];
        s.loads += 1;
        s.errors += u32::from(failed);
        s.latency_us = s.latency_us.saturating_add(latency_us);
    }

    /// Whether the window's figures open the breaker, and why.
    fn verdict(&self) -> Option<Reason> {
        let (mut loads, mut errors, mut latency_us) = (0u32, 0u32, 0u64);
        for s in &self.slices {
            loads += s.loads;
            errors += s.errors;
            latency_us = latency_us.saturating_add(s.latency_us);
        }
        if loads < self.s.min_loads.max(1) {
            return None;
        }
        if f64::from(errors) >= self.s.error_rate * f64::from(loads) {
            return Some(Reason::ErrorRate { errors, loads });
        }
        let mean_us = latency_us / u64::from(loads);
        (mean_us >= self.s.latency_us).then_some(Reason::Latency { mean_us, loads })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            error_rate: 0.5,
            latency_us: 1_000_000,
            window_ms: 1000,
            cooldown_ms: 2000,
            probes: 3,
            min_loads: 4,
        }
    }

    /// Admit one load at `t` and record it.
    fn load(b: &mut Breaker, t: u64, failed: bool, latency_us: u64) -> Option<Transition> {
        let (ticket, moved) = b.admit(t);
        assert_eq!(moved, None);
        b.record(t, ticket.expect("admitted"), failed, latency_us)
    }

    #[test]
    fn opens_on_the_error_rate_once_the_window_holds_enough_loads() {
        let mut b = Breaker::new(settings());
        // Three failures of three: below min_loads, nothing opens.
        for t in [0, 10, 20] {
            assert_eq!(load(&mut b, t, true, 1000), None);
        }
        let tr = load(&mut b, 30, false, 1000).expect("3 of 4 failed");
        assert_eq!((tr.from, tr.to), (State::Closed, State::Open));
        assert_eq!(
            tr.reason,
            Reason::ErrorRate {
                errors: 3,
                loads: 4
            }
        );
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn stays_closed_below_the_error_rate_and_at_exactly_it_opens() {
        let mut b = Breaker::new(settings());
        for (i, failed) in [true, false, false, false, true].into_iter().enumerate() {
            assert_eq!(load(&mut b, i as u64, failed, 1000), None, "load {i}");
        }
        // 3 of 6 = 50%: the bound is reached.
        let tr = load(&mut b, 6, true, 1000).expect("opens at 50%");
        assert_eq!(
            tr.reason,
            Reason::ErrorRate {
                errors: 3,
                loads: 6
            }
        );
    }

    #[test]
    fn opens_on_mean_latency() {
        let mut b = Breaker::new(settings());
        for t in 0..3 {
            assert_eq!(load(&mut b, t, false, 900_000), None);
        }
        // Mean (3 × 0.9 s + 1.3 s) / 4 = 1.0 s: the bound.
        let tr = load(&mut b, 3, false, 1_300_000).expect("opens on latency");
        assert_eq!(
            tr.reason,
            Reason::Latency {
                mean_us: 1_000_000,
                loads: 4
            }
        );
    }

    #[test]
    fn old_slices_leave_the_window() {
        let mut b = Breaker::new(settings());
        // Three failures early on, then successes a full window later: the failures are gone.
        for t in [0, 1, 2] {
            load(&mut b, t, true, 1000);
        }
        for t in [1000, 1001, 1002] {
            assert_eq!(load(&mut b, t, false, 1000), None, "t {t}");
        }
        // But within the window they count: 3 failures + 1 ok at 950 ms opens it.
        let mut b = Breaker::new(settings());
        for t in [0, 1, 2] {
            load(&mut b, t, true, 1000);
        }
        assert!(load(&mut b, 950, false, 1000).is_some());
        // A long silence clears every slice, however long.
        let mut b = Breaker::new(settings());
        for t in [0, 1, 2] {
            load(&mut b, t, true, 1000);
        }
        assert_eq!(load(&mut b, 1_000_000, true, 1000), None);
    }

    #[test]
    fn refuses_while_open_then_half_opens_after_the_cooldown_and_closes_on_good_probes() {
        let mut b = Breaker::new(settings());
        for t in 0..4 {
            load(&mut b, t, true, 1000);
        }
        assert_eq!(b.state(), State::Open);
        let opened = 3;
        assert_eq!(b.admit(opened + 1999), (None, None), "cooldown not over");
        let (p1, moved) = b.admit(opened + 2000);
        let moved = moved.expect("half-opens");
        assert_eq!(
            (moved.from, moved.to, moved.reason),
            (State::Open, State::HalfOpen, Reason::CooledDown)
        );
        let p1 = p1.expect("first probe");
        let (p2, _) = b.admit(opened + 2001);
        let (p3, _) = b.admit(opened + 2002);
        assert_eq!(b.admit(opened + 2003), (None, None), "only 3 probes");
        let t = opened + 2100;
        assert_eq!(b.record(t, p1, false, 5000), None);
        assert_eq!(b.record(t, p2.unwrap(), false, 5000), None);
        let closed = b.record(t, p3.unwrap(), false, 5000).expect("closes");
        assert_eq!(
            (closed.from, closed.to, closed.reason),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded)
        );
        // Closed with a fresh window: the failures that opened it are forgotten.
        for t in [t + 1, t + 2, t + 3] {
            assert_eq!(load(&mut b, t, true, 1000), None);
        }
    }

    #[test]
    fn a_failed_or_slow_probe_opens_it_again_for_a_new_cooldown() {
        for (failed, latency_us) in [(true, 1000), (false, 1_000_000)] {
            let mut b = Breaker::new(settings());
            for t in 0..4 {
                load(&mut b, t, true, 1000);
            }
            let (p1, _) = b.admit(2003);
            let (p2, _) = b.admit(2004);
            assert_eq!(b.record(2010, p1.unwrap(), false, 1000), None);
            let tr = b
                .record(2020, p2.unwrap(), failed, latency_us)
                .expect("re-opens");
            assert_eq!((tr.from, tr.to), (State::HalfOpen, State::Open));
            assert_eq!(
                tr.reason,
                Reason::ProbeFailed {
                    error: failed,
                    latency_us
                }
            );
            assert_eq!(b.admit(2020 + 1999), (None, None), "a new cooldown");
            assert!(b.admit(2020 + 2000).0.is_some());
        }
    }

    #[test]
    fn loads_of_an_earlier_state_are_not_counted() {
        let mut b = Breaker::new(settings());
        let (late, _) = b.admit(0);
        let late = late.unwrap();
        for t in 0..4 {
            load(&mut b, t, true, 1000);
        }
        // Admitted while closed, finished while open: ignored, even failing.
        assert_eq!(b.record(10, late, true, 1000), None);
        let (p, _) = b.admit(2003);
        // Still ignored half-open: it is not a probe.
        assert_eq!(b.record(2004, late, false, 1000), None);
        assert_eq!(b.state(), State::HalfOpen);
        assert!(p.is_some());
    }

    #[test]
    fn an_abandoned_probe_frees_its_place() {
        let mut b = Breaker::new(settings());
        for t in 0..4 {
            load(&mut b, t, true, 1000);
        }
        let probes: Vec<Ticket> = (0..3).map(|i| b.admit(2003 + i).0.unwrap()).collect();
        assert_eq!(b.admit(2010).0, None);
        b.abandon(probes[0]);
        let again = b.admit(2011).0.expect("its place is free");
        assert!(again.probe);
        // A ticket of the closed state abandoned late changes nothing.
        let mut c = Breaker::new(settings());
        let (t, _) = c.admit(0);
        c.abandon(t.unwrap());
        assert_eq!(c.state(), State::Closed);
    }

    #[test]
    fn reasons_read_with_their_figures() {
        let s = settings();
        assert_eq!(
            Reason::ErrorRate {
                errors: 30,
                loads: 40
            }
            .describe(&s),
            "30 of 40 loads failed in the last 1000 ms (75% ≥ 50%)"
        );
        assert_eq!(
            Reason::ProbeFailed {
                error: false,
                latency_us: 1_500_000
            }
            .describe(&s),
            "a probe load took 1500.0 ms (≥ 1000.0 ms)"
        );
    }
}
