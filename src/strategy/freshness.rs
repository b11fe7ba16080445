//! Freshness policies: how an entry read from Redis is judged (fresh, stale, due for an early
//! recompute) and how the TTLs of an entry being written are stamped, jitter included.

use super::envelope::Meta;
use super::{Freshness, StaleRead};

/// What the freshness policy says about an entry that was found in Redis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Serve it.
    Fresh,
    /// SWR: past its soft expiry but inside the stale window; what the read does with it is
    /// [`Policy::stale_read`] (serve it and refresh behind, or extend it and recompute).
    Stale,
    /// XFetch: still valid, but this reader was drawn to recompute it early; `lead_ms` is how
    /// long before the hard expiry the recompute starts.
    Recompute { lead_ms: f64 },
    /// Eager refresh (`--eager-refresh P`): fresh, and it has lived P of its TTL: serve it and
    /// refresh it behind the request (once per key per instance, as swr's refresh).
    RefreshAhead,
    /// Past its hard expiry (past the stale window under swr). It must be loaded again; the
    /// value is kept in Redis for `grace_ms` only so that it can be served when the load
    /// fails (`--fail-safe`) or a wait for it runs out (`--lock-timeout-policy stale`).
    Expired,
}

/// How the expiry a reader judges an entry by is written into the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryStamp {
    /// To the millisecond, as computed.
    Exact,
    /// Rounded down to the wall clock's second (after adding 0.1 s), as Symfony Cache 5.4's
    /// `AbstractAdapter` packs it (`(int) (0.1 + $expiry - METADATA_EXPIRY_OFFSET)`): its
    /// readers see an entry expire up to 0.9 s before Redis drops it, and draw early
    /// recomputes against that. Redis still keeps the entry for its whole TTL.
    WholeSeconds,
}

impl ExpiryStamp {
    /// The expiry written for one that falls at `exact_ms` (wall clock, ms since the epoch).
    pub fn of(self, exact_ms: u64) -> u64 {
        match self {
            ExpiryStamp::Exact => exact_ms,
            ExpiryStamp::WholeSeconds => (exact_ms + 100) / 1000 * 1000,
        }
    }
}

/// The freshness choice with its parameters, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub kind: Freshness,
    pub ttl_ms: u64,
    pub stale_ms: u64,
    /// What a read inside the stale window does.
    pub stale_read: StaleRead,
    pub beta: f64,
    /// Fraction of the TTL by which each write is spread, uniformly in ±jitter.
    pub jitter: f64,
    pub negative_ttl_ms: Option<u64>,
    /// How long an entry stays in Redis past its hard expiry, as a last-resort stale value:
    /// the longer of `--fail-safe` and, under `--lock-timeout-policy stale`, the lock's lease
    /// (0 without either). The one mechanism that keeps entries past expiry.
    pub grace_ms: u64,
    /// `--eager-refresh P`: refresh once an entry has lived this fraction of its TTL.
    pub eager: Option<f64>,
    /// How the expiries it judges by are written (a library preset's; exact otherwise).
    pub expiry: ExpiryStamp,
}

impl Policy {
    /// Whether entries are kept at all: under `no-cache` nothing is read from Redis or
    /// written back to it, and every request loads.
    pub fn caches(&self) -> bool {
        self.kind != Freshness::NoCache
    }

    /// Judge an entry read at `now_ms`; `u` is uniform in (0, 1] (only XFetch draws on it).
    pub fn judge(&self, meta: &Meta, now_ms: f64, u: f64) -> Verdict {
        if meta.negative {
            return Verdict::Fresh;
        }
        // Kept past its hard expiry (the grace): expired whatever the freshness. Without a
        // grace Redis drops the key at its hard expiry, and the freshness alone judges it.
        if self.grace_ms > 0 && now_ms >= meta.hard_expiry_ms as f64 {
            return Verdict::Expired;
        }
        match self.kind {
            // Nothing is read under no-cache; an entry found anyway (left by another run in
            // the namespace) is not this strategy's to serve.
            Freshness::NoCache => Verdict::Expired,
            Freshness::Expire => self.fresh(meta, now_ms),
            Freshness::Xfetch => self.draw(meta, meta.hard_expiry_ms as f64, now_ms, u),
            // XFetch's draw against the soft expiry, then swr's window.
            Freshness::XfetchSwr => {
                if now_ms < meta.soft_expiry_ms as f64 {
                    self.draw(meta, meta.soft_expiry_ms as f64, now_ms, u)
                } else if now_ms < meta.hard_expiry_ms as f64 {
                    Verdict::Stale
                } else {
                    Verdict::Expired
                }
            }
            Freshness::Swr => {
                if now_ms < meta.soft_expiry_ms as f64 {
                    self.fresh(meta, now_ms)
                } else if now_ms < meta.hard_expiry_ms as f64 {
                    Verdict::Stale
                } else {
                    Verdict::Expired
                }
            }
        }
    }

    /// XFetch's draw for a value that expires at `expiry`: recompute early, or fresh.
    fn draw(&self, meta: &Meta, expiry: f64, now_ms: f64, u: f64) -> Verdict {
        if self.beta <= 0.0 {
            return self.fresh(meta, now_ms);
        }
        let delta_ms = f64::from(meta.delta_us) / 1000.0;
        // -ln(u) >= 0, so the reader "sees" a time pushed forward by a random multiple of the
        // recompute cost: expensive values are refreshed further ahead.
        if now_ms - delta_ms * self.beta * u.ln() >= expiry {
            Verdict::Recompute {
                lead_ms: (expiry - now_ms).max(0.0),
            }
        } else {
            self.fresh(meta, now_ms)
        }
    }

    /// A value within its TTL: fresh, or due for an eager refresh once it has lived
    /// `--eager-refresh` of its TTL (the time from its computation to its soft expiry).
    fn fresh(&self, meta: &Meta, now_ms: f64) -> Verdict {
        match self.eager {
            Some(p) => {
                let born = meta.computed_at_ms as f64;
                let ttl = meta.soft_expiry_ms.saturating_sub(meta.computed_at_ms) as f64;
                if now_ms >= born + p * ttl {
                    Verdict::RefreshAhead
                } else {
                    Verdict::Fresh
                }
            }
            None => Verdict::Fresh,
        }
    }

    /// Whether entries live a window past their TTL (swr's).
    fn windowed(&self) -> bool {
        self.kind.windowed()
    }

    /// [`StaleRead::ExtendAndRecompute`]'s push-back of an entry found stale at `now_ms`: the
    /// same value, fresh for the window (`--stale`) more, kept the window after that (Rails
    /// writes it with twice its race TTL), so that readers after the push serve it while its
    /// first reader recomputes.
    pub fn extend(&self, meta: &Meta, now_ms: u64) -> (Meta, u64) {
        let soft = now_ms + self.stale_ms;
        let pushed = Meta {
            soft_expiry_ms: soft,
            hard_expiry_ms: soft + self.stale_ms,
            ..*meta
        };
        (pushed, 2 * self.stale_ms + self.grace_ms)
    }

    /// The header and PX (ms) for a value computed at `now_ms` by a load of `delta_us`;
    /// `u` is uniform in [0, 1) and spreads the TTL by the jitter.
    pub fn stamp(&self, now_ms: u64, delta_us: u32, version: u64, u: f64) -> (Meta, u64) {
        let spread = 1.0 + self.jitter * (2.0 * u - 1.0);
        let ttl = ((self.ttl_ms as f64) * spread).round().max(1.0) as u64;
        let soft = now_ms + ttl;
        let (hard, px) = if self.windowed() {
            (soft + self.stale_ms, ttl + self.stale_ms + self.grace_ms)
        } else {
            (soft, ttl + self.grace_ms)
        };
        let meta = Meta {
            computed_at_ms: now_ms,
            delta_us,
            soft_expiry_ms: self.expiry.of(soft),
            hard_expiry_ms: self.expiry.of(hard),
            version,
            negative: false,
        };
        (meta, px)
    }

    /// How long a written entry stays in Redis before it is dropped (its TTL, plus the stale
    /// window under swr): the life the steady state of the cache is drawn from.
    pub fn life_ms(&self) -> u64 {
        if self.windowed() {
            self.ttl_ms + self.stale_ms
        } else {
            self.ttl_ms
        }
    }

    /// The header and PX for a value found in the cache at the start of a run: written
    /// `life_ms - remaining_ms` ago by an entry that lives `life_ms` (see [`Policy::life_ms`];
    /// already jittered), by a load of `delta_us` (the configured DB cost: no real load has
    /// been timed yet). Under swr an entry may be found already past its soft expiry.
    pub fn stamp_at(
        &self,
        now_ms: u64,
        life_ms: u64,
        remaining_ms: u64,
        delta_us: u32,
        version: u64,
    ) -> (Meta, u64) {
        let remaining = remaining_ms.clamp(1, life_ms.max(1));
        let hard = now_ms + remaining;
        let soft = if self.windowed() {
            hard.saturating_sub(self.stale_ms)
        } else {
            hard
        };
        let px = remaining + self.grace_ms;
        let meta = Meta {
            computed_at_ms: now_ms.saturating_sub(life_ms - remaining),
            delta_us,
            soft_expiry_ms: self.expiry.of(soft),
            hard_expiry_ms: self.expiry.of(hard),
            version,
            negative: false,
        };
        (meta, px)
    }

    /// The sentinel for an id that does not exist, when negative caching is on.
    pub fn stamp_negative(&self, now_ms: u64, delta_us: u32) -> Option<(Meta, u64)> {
        let ttl = self.negative_ttl_ms?;
        let meta = Meta {
            computed_at_ms: now_ms,
            delta_us,
            soft_expiry_ms: now_ms + ttl,
            hard_expiry_ms: now_ms + ttl,
            version: 0,
            negative: true,
        };
        Some((meta, ttl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(kind: Freshness) -> Policy {
        Policy {
            kind,
            ttl_ms: 1000,
            stale_ms: 500,
            stale_read: StaleRead::RefreshBehind,
            beta: 1.0,
            jitter: 0.0,
            negative_ttl_ms: Some(50),
            grace_ms: 0,
            eager: None,
            expiry: ExpiryStamp::Exact,
        }
    }

    #[test]
    fn whole_second_expiries_are_judged_early_and_kept_their_ttl() {
        let p = Policy {
            expiry: ExpiryStamp::WholeSeconds,
            ttl_ms: 2000,
            ..policy(Freshness::Xfetch)
        };
        // Computed at x.350 s: it expires at (x+2).350, written as (x+2).000. u = 1 draws no
        // lead (ln 1 = 0): only the written expiry decides.
        let (meta, px) = p.stamp(10_350, 1, 1, 0.5);
        assert_eq!((meta.hard_expiry_ms, px), (12_000, 2000));
        assert_eq!(p.judge(&meta, 11_999.0, 1.0), Verdict::Fresh);
        assert!(matches!(
            p.judge(&meta, 12_000.0, 1.0),
            Verdict::Recompute { .. }
        ));
        let exact = Policy {
            expiry: ExpiryStamp::Exact,
            ..p
        };
        assert_eq!(exact.stamp(10_350, 1, 1, 0.5).0.hard_expiry_ms, 12_350);
        // Within 0.1 s of the next second, it rounds up to it (Symfony adds 0.1 first).
        assert_eq!(p.stamp(10_950, 1, 1, 0.5).0.hard_expiry_ms, 13_000);
        assert_eq!(ExpiryStamp::Exact.of(12_345), 12_345);
    }

    #[test]
    fn a_grace_keeps_every_freshness_past_its_expiry_as_expired() {
        for kind in [Freshness::Expire, Freshness::Xfetch, Freshness::Swr] {
            let p = Policy {
                grace_ms: 3000,
                ..policy(kind)
            };
            let (meta, px) = p.stamp(0, 1, 1, 0.5);
            assert_eq!(px, p.life_ms() + 3000, "{kind:?}");
            let hard = meta.hard_expiry_ms as f64;
            assert_ne!(
                p.judge(&meta, hard - 1.0, 1.0),
                Verdict::Expired,
                "{kind:?}"
            );
            assert_eq!(p.judge(&meta, hard, 1.0), Verdict::Expired, "{kind:?}");
            assert_eq!(p.judge(&meta, hard + 2999.0, 1.0), Verdict::Expired);
        }
        let (m, px) = Policy {
            grace_ms: 3000,
            ..policy(Freshness::Expire)
        }
        .stamp_at(10_000, 1000, 400, 1, 1);
        assert_eq!((m.hard_expiry_ms, px), (10_400, 3400));
    }

    #[test]
    fn eager_refresh_is_due_at_its_share_of_the_ttl() {
        let p = Policy {
            eager: Some(0.8),
            ..policy(Freshness::Expire)
        };
        let (meta, _) = p.stamp(10_000, 1, 1, 0.5); // TTL 1000
        assert_eq!(p.judge(&meta, 10_799.0, 0.5), Verdict::Fresh);
        assert_eq!(p.judge(&meta, 10_800.0, 0.5), Verdict::RefreshAhead);
        // Under swr the share is of the fresh part only; the window is swr's.
        let s = Policy {
            eager: Some(0.5),
            ..policy(Freshness::Swr)
        };
        let (meta, _) = s.stamp(0, 1, 1, 0.5);
        assert_eq!(s.judge(&meta, 499.0, 0.5), Verdict::Fresh);
        assert_eq!(s.judge(&meta, 500.0, 0.5), Verdict::RefreshAhead);
        assert_eq!(s.judge(&meta, 1000.0, 0.5), Verdict::Stale);
    }

    #[test]
    fn extend_and_recompute_pushes_a_stale_entry_back_by_the_window() {
        let p = Policy {
            stale_read: StaleRead::ExtendAndRecompute,
            ..policy(Freshness::Swr)
        }; // race TTL 500
        let (meta, px) = p.stamp(0, 1, 1, 0.5);
        assert_eq!(px, 1500);
        assert_eq!(p.judge(&meta, 999.0, 0.5), Verdict::Fresh);
        assert_eq!(p.judge(&meta, 1000.0, 0.5), Verdict::Stale);
        assert_eq!(p.judge(&meta, 1500.0, 0.5), Verdict::Expired);
        let (pushed, px) = p.extend(&meta, 1200);
        assert_eq!(px, 1000, "written with twice the race TTL");
        assert_eq!(pushed.version, meta.version);
        assert_eq!(
            p.judge(&pushed, 1699.0, 0.5),
            Verdict::Fresh,
            "served as fresh"
        );
        assert_eq!(p.judge(&pushed, 1700.0, 0.5), Verdict::Stale);
    }

    #[test]
    fn xfetch_recomputes_early_only_when_drawn() {
        let p = policy(Freshness::Xfetch);
        let (meta, px) = p.stamp(10_000, 100_000, 1, 0.5); // a 100 ms load
        assert_eq!(px, 1000);
        // u = 1: ln(u) = 0, so only at expiry.
        assert_eq!(p.judge(&meta, 10_900.0, 1.0), Verdict::Fresh);
        assert!(matches!(
            p.judge(&meta, 11_000.0, 1.0),
            Verdict::Recompute { .. }
        ));
        // u = e^-2: the reader looks 2 * delta = 200 ms ahead.
        let u = (-2.0f64).exp();
        assert_eq!(p.judge(&meta, 10_799.0, u), Verdict::Fresh);
        match p.judge(&meta, 10_801.0, u) {
            Verdict::Recompute { lead_ms } => assert!((lead_ms - 199.0).abs() < 1e-6),
            v => panic!("{v:?}"),
        }
        let off = Policy { beta: 0.0, ..p };
        assert_eq!(off.judge(&meta, 10_999.0, 1e-9), Verdict::Fresh);
    }

    #[test]
    fn swr_serves_stale_inside_the_window() {
        let p = policy(Freshness::Swr);
        let (meta, px) = p.stamp(0, 1, 1, 0.5);
        assert_eq!(px, 1500);
        assert_eq!(p.judge(&meta, 999.0, 0.5), Verdict::Fresh);
        assert_eq!(p.judge(&meta, 1000.0, 0.5), Verdict::Stale);
        assert_eq!(p.judge(&meta, 1500.0, 0.5), Verdict::Expired);
        let kept = Policy { grace_ms: 200, ..p };
        assert_eq!(
            kept.stamp(0, 1, 1, 0.5).1,
            1700,
            "kept past expiry for the grace"
        );
    }

    #[test]
    fn an_entry_found_at_the_start_expires_when_drawn() {
        let p = policy(Freshness::Swr);
        assert_eq!(p.life_ms(), 1500);
        let (m, px) = p.stamp_at(10_000, 1500, 800, 20_000, 1);
        assert_eq!(
            (m.computed_at_ms, m.soft_expiry_ms, m.hard_expiry_ms),
            (9_300, 10_300, 10_800)
        );
        assert_eq!(px, 800);
        let (m, _) = p.stamp_at(10_000, 1500, 300, 20_000, 1);
        assert_eq!(m.soft_expiry_ms, 9_800, "found already stale");
        assert_eq!(p.judge(&m, 10_000.0, 0.5), Verdict::Stale);
        let p = policy(Freshness::Expire);
        assert_eq!(p.stamp_at(10_000, 1000, 1000, 1, 1).1, 1000);
    }

    #[test]
    fn jitter_spreads_within_bounds() {
        let p = Policy {
            jitter: 0.3,
            ..policy(Freshness::Expire)
        };
        assert_eq!(p.stamp(0, 1, 1, 0.0).1, 700);
        assert_eq!(p.stamp(0, 1, 1, 0.5).1, 1000);
        assert_eq!(p.stamp(0, 1, 1, 0.999_999).1, 1300);
    }

    #[test]
    fn negative_sentinel() {
        let p = policy(Freshness::Expire);
        let (m, px) = p.stamp_negative(5, 1).unwrap();
        assert!(m.negative);
        assert_eq!(px, 50);
        assert!(
            Policy {
                negative_ttl_ms: None,
                ..p
            }
            .stamp_negative(5, 1)
            .is_none()
        );
    }
}
