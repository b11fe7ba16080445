//! The rate limit on loads (`--db-rate R --db-burst B`): a token bucket of B tokens refilled at
//! R per second, kept as GCRA (the generic cell rate algorithm): one number, the theoretical
//! arrival time (TAT) of the next load, instead of a token count and a refill clock. A load is
//! let through when the TAT is at most (B − 1)/R ahead of now, and pushes it 1/R further; so
//! after an idle spell B loads go at once, then one every 1/R.
//!
//! Per instance the TAT is one atomic (a compare-and-swap, no lock). Under
//! `--db-rate-scope global` it is one Redis key of the run's namespace, read and pushed in one
//! Lua call on Redis's own clock ([`GCRA_LUA`]), so every instance (and every shard) shares one
//! bucket of R. When that call fails (Redis down, or slower than `--redis-timeout`) the
//! instance limits itself to R / instances on its own bucket for [`FALLBACK_HOLD`] before it
//! asks Redis again, and the time any instance spent so is logged on the board.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// Where the bucket lives.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    ValueEnum,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RateScope {
    /// One bucket of R per app instance: the database sees up to R × instances.
    #[default]
    Instance,
    /// One bucket of R for the whole run, in Redis.
    Global,
}

impl RateScope {
    pub fn name(self) -> &'static str {
        match self {
            RateScope::Instance => "instance",
            RateScope::Global => "global",
        }
    }
}

/// The rate limit as the scenario holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateSpec {
    /// Loads per second let through (per instance, or in all under the global scope).
    pub rate: f64,
    /// Loads let through at once after an idle spell (the bucket's size).
    pub burst: u32,
    pub scope: RateScope,
}

impl RateSpec {
    /// The burst when `--db-burst` is not given: a tenth of a second's worth (one timeline
    /// bucket at the default interval), at least 1.
    pub fn default_burst(rate: f64) -> u32 {
        ((rate / 10.0).ceil() as u32).max(1)
    }

    /// In words, for the summary.
    pub fn describe(&self, instances: u32) -> String {
        match self.scope {
            RateScope::Instance => format!(
                "db-rate {}/s burst {} per instance ({}/s in all)",
                self.rate,
                self.burst,
                self.rate * f64::from(instances)
            ),
            RateScope::Global => format!(
                "db-rate {}/s burst {} global (in Redis; R/{instances} per instance while it is unreachable)",
                self.rate, self.burst
            ),
        }
    }

    /// The bucket an instance keeps on its own: the whole limit per instance, a share of it
    /// while the global one is unreachable.
    fn local(&self, instances: u32) -> Gcra {
        match self.scope {
            RateScope::Instance => Gcra::new(self.rate, self.burst),
            RateScope::Global => {
                let n = instances.max(1);
                Gcra::new(self.rate / f64::from(n), self.burst.div_ceil(n).max(1))
            }
        }
    }

    /// The global bucket's arguments to [`GCRA_LUA`]: the emission interval and the
    /// tolerance, µs.
    fn lua_args(&self) -> (u64, u64) {
        let t = (1e6 / self.rate).round().max(1.0) as u64;
        (t, t * u64::from(self.burst.max(1) - 1))
    }
}

/// GCRA in one Redis call, on the server's clock (`TIME`), so that instances whose clocks
/// differ share one schedule. KEYS[1]: the TAT, µs; ARGV[1]: the emission interval 1/R, µs;
/// ARGV[2]: the tolerance (B − 1)/R, µs. Returns 1 when the load may go (the TAT pushed), 0
/// when refused. The key expires once the bucket is full again, so an idle run leaves nothing.
pub const GCRA_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tau then return 0 end
tat = tat + step
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1)
return 1
"#;

/// How long an instance whose global check failed limits itself before it asks Redis again:
/// every load would otherwise wait `--redis-timeout` on a dead Redis first.
pub const FALLBACK_HOLD: Duration = Duration::from_millis(500);

/// One token bucket as GCRA, on the board's clock (ns).
#[derive(Debug)]
struct Gcra {
    /// The emission interval 1/R, ns.
    step_ns: u64,
    /// How far ahead of now the TAT may be for a load to go: (B − 1)/R, ns.
    tau_ns: u64,
    tat_ns: AtomicU64,
}

impl Gcra {
    fn new(rate: f64, burst: u32) -> Gcra {
        let step_ns = (1e9 / rate).round().clamp(1.0, u64::MAX as f64 / 4.0) as u64;
        Gcra {
            step_ns,
            tau_ns: step_ns.saturating_mul(u64::from(burst.max(1) - 1)),
            tat_ns: AtomicU64::new(0),
        }
    }

    /// Whether a load may go at `now_ns`; if so it is counted.
    #[inline]
    fn take(&self, now_ns: u64) -> bool {
        self.tat_ns
            .fetch_update(Relaxed, Relaxed, |tat| {
                let tat = tat.max(now_ns);
                (tat - now_ns <= self.tau_ns).then(|| tat + self.step_ns)
            })
            .is_ok()
    }
}

/// One instance's rate limit.
#[derive(Debug)]
pub struct Limiter {
    spec: RateSpec,
    /// The whole bucket (per instance), or the fallback share (global).
    local: Gcra,
    /// Global scope: while the board's clock (ns) is before this, Redis is not asked (0: ask).
    hold_until_ns: AtomicU64,
    /// `--db-rate-scope global`: the arguments of the Lua call.
    lua: (u64, u64),
}

/// What the request path asks Redis for a global limit: the emission interval and tolerance
/// (µs) to pass to [`GCRA_LUA`].
#[derive(Debug, Clone, Copy)]
pub struct GlobalAsk {
    pub step_us: u64,
    pub tau_us: u64,
}

/// How a load's rate check is to be decided.
pub(super) enum Check {
    /// Decided here: go, or refused.
    Decided(bool),
    /// Ask Redis (the global bucket): the normal case, or the first ask after a fallback.
    Global,
}

impl Limiter {
    pub fn new(spec: RateSpec, instances: u32) -> Limiter {
        Limiter {
            local: spec.local(instances),
            hold_until_ns: AtomicU64::new(0),
            lua: spec.lua_args(),
            spec,
        }
    }

    pub fn ask(&self) -> GlobalAsk {
        GlobalAsk {
            step_us: self.lua.0,
            tau_us: self.lua.1,
        }
    }

    pub(super) fn check(&self, now_ns: u64) -> Check {
        if self.spec.scope == RateScope::Instance {
            return Check::Decided(self.local.take(now_ns));
        }
        let hold = self.hold_until_ns.load(Relaxed);
        if hold == 0 {
            return Check::Global;
        }
        // On the fallback: one load asks Redis again once the hold is over, the others
        // limit themselves meanwhile.
        if now_ns >= hold
            && self
                .hold_until_ns
                .compare_exchange(
                    hold,
                    now_ns + FALLBACK_HOLD.as_nanos() as u64,
                    Relaxed,
                    Relaxed,
                )
                .is_ok()
        {
            return Check::Global;
        }
        Check::Decided(self.local.take(now_ns))
    }

    /// Redis answered the global check (`went` or not). True when this ends a fallback.
    pub(super) fn answered(&self) -> bool {
        self.hold_until_ns.swap(0, Relaxed) != 0
    }

    /// Redis did not answer: limit on the local share. True when this starts a fallback.
    pub(super) fn unreachable(&self, now_ns: u64) -> (bool, bool) {
        let until = now_ns + FALLBACK_HOLD.as_nanos() as u64;
        let was = self.hold_until_ns.swap(until.max(1), Relaxed);
        (was == 0, self.local.take(now_ns))
    }
}

/// When instances limited themselves because the global bucket was unreachable: the spells
/// during which at least one instance did, on the board's clock. Touched only as a fallback
/// starts or ends (rare), never per load.
#[derive(Debug, Default)]
pub struct Fallbacks {
    inner: Mutex<FallbackLog>,
}

#[derive(Debug, Default)]
struct FallbackLog {
    /// Instances on the fallback now.
    now: u32,
    /// When the current spell began (meaningful while `now > 0`).
    since: Option<Instant>,
    spells: Vec<(Instant, Instant)>,
}

impl Fallbacks {
    pub(super) fn started(&self, at: Instant) {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if l.now == 0 {
            l.since = Some(at);
        }
        l.now += 1;
    }

    pub(super) fn ended(&self, at: Instant) {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        l.now = l.now.saturating_sub(1);
        if l.now == 0
            && let Some(s) = l.since.take()
        {
            l.spells.push((s, at));
        }
    }

    /// How long at least one instance was on the fallback within `[from, to)` (a spell still
    /// going counts up to `to`).
    pub fn time_within(&self, from: Instant, to: Instant) -> Duration {
        let l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let open = l.since.filter(|_| l.now > 0).map(|s| (s, to));
        l.spells
            .iter()
            .copied()
            .chain(open)
            .map(|(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_bucket_lets_its_burst_through_then_one_per_interval() {
        // 100/s, burst 5: one every 10 ms after the first 5.
        let g = Gcra::new(100.0, 5);
        let t0 = 1_000 * MS;
        assert_eq!((0..10).filter(|_| g.take(t0)).count(), 5);
        assert!(!g.take(t0 + 9 * MS), "the next token is due at 10 ms");
        assert!(g.take(t0 + 10 * MS));
        assert!(!g.take(t0 + 10 * MS));
        // Over any second, at most rate + burst.
        let g = Gcra::new(100.0, 5);
        let went = (0..100_000u64)
            .filter(|i| g.take(t0 + i * MS / 100))
            .count();
        assert!((100..=105).contains(&went), "{went} in 1 s");
        // After an idle spell the bucket is full again, never fuller.
        let later = t0 + 60_000 * MS;
        assert_eq!((0..20).filter(|_| g.take(later)).count(), 5);
    }

    #[test]
    fn burst_one_is_a_plain_interval() {
        let g = Gcra::new(1000.0, 1);
        assert!(g.take(0));
        assert!(!g.take(MS / 2));
        assert!(g.take(MS));
    }

    #[test]
    fn the_global_scope_falls_back_to_its_share_and_asks_again_after_the_hold() {
        let spec = RateSpec {
            rate: 200.0,
            burst: 20,
            scope: RateScope::Global,
        };
        let l = Limiter::new(spec, 4);
        assert_eq!(l.ask().step_us, 5000);
        assert_eq!(l.ask().tau_us, 5000 * 19);
        assert!(matches!(l.check(0), Check::Global));
        let (started, _) = l.unreachable(0);
        assert!(started);
        // The share: 50/s, burst 5; 4 of which one went with the failed call.
        let went = (0..10)
            .filter(|_| matches!(l.check(1), Check::Decided(true)))
            .count();
        assert_eq!(went, 4);
        let hold = FALLBACK_HOLD.as_nanos() as u64;
        assert!(matches!(l.check(hold), Check::Global));
        assert!(
            matches!(l.check(hold), Check::Decided(_)),
            "one probe at a time"
        );
        assert!(l.answered(), "the probe's answer ends the fallback");
        assert!(!l.answered());
        assert!(matches!(l.check(hold + 1), Check::Global));
    }

    #[test]
    fn fallback_time_counts_spells_of_any_instance_clipped_to_the_window() {
        let f = Fallbacks::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        f.started(at(100));
        f.started(at(150));
        f.ended(at(200));
        f.ended(at(300));
        f.started(at(500));
        assert_eq!(f.time_within(at(0), at(1000)), Duration::from_millis(700));
        assert_eq!(f.time_within(at(250), at(600)), Duration::from_millis(150));
    }
}
