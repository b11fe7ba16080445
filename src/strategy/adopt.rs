//! What a library preset looks like in the library's own code (`advise --for`): each
//! library's rendering of a recommended strategy and its settings, or what the library cannot
//! express. Each is named in its library's row of [`super::LIBRARIES`].

use std::fmt::Write as _;

use super::{Coordination, Freshness, StrategySpec};

/// What a library's rendering reads: the recommended strategy and the settings its run resolved
/// (seconds for durations).
pub struct Terms<'a> {
    /// The recommendation as `advise` labels it (`swr stale=30s`).
    pub label: &'a str,
    pub spec: StrategySpec,
    pub ttl: f64,
    pub stale: f64,
    pub lock_ttl: f64,
    pub lock_wait: f64,
    pub beta: f64,
    /// The share of its TTL after which a read refreshes an entry (`--eager-refresh`), if set.
    pub eager_refresh: Option<f64>,
    /// " (add ±J random jitter …)" for the jitter preset, else empty.
    pub jitter_note: String,
}

/// A library's configuration, or the reason it cannot express the recommendation.
pub type Rendered = Result<String, String>;

impl Terms<'_> {
    fn no(&self, library: &str, what: &str) -> Rendered {
        Err(format!("{library} cannot express {}: {what}", self.label))
    }
}

/// Seconds as a library's call takes them: `10`, `0.25`.
pub fn fmt_s(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

pub fn laravel(cx: &Terms) -> Rendered {
    let (ttl, stale, lock_ttl, lock_wait) = (cx.ttl, cx.stale, cx.lock_ttl, cx.lock_wait);
    let jitter_note = &cx.jitter_note;
    Ok(match (cx.spec.freshness, cx.spec.coordination) {
        (Freshness::Swr, c) => format!(
            "Cache::flexible('key', [{}, {}], fn () => load());  // fresh {}s, then served stale up to {}s while one request refreshes it{}",
            fmt_s(ttl),
            fmt_s(ttl + stale),
            fmt_s(ttl),
            fmt_s(ttl + stale),
            if c.mutex() {
                "; flexible() already takes a lock for the refresh"
            } else {
                ""
            }
        ),
        (Freshness::Expire, Coordination::Mutex | Coordination::MutexSingleFlight) => format!(
            "Cache::lock('key:lock', {})->block({}, fn () => Cache::remember('key', {}, fn () => load()));  // lock TTL {}s, wait up to {}s{jitter_note}",
            fmt_s(lock_ttl),
            fmt_s(lock_wait),
            fmt_s(ttl),
            fmt_s(lock_ttl),
            fmt_s(lock_wait)
        ),
        (Freshness::Expire, Coordination::None) => format!(
            "Cache::remember('key', {}, fn () => load());{jitter_note}",
            fmt_s(ttl)
        ),
        (Freshness::Xfetch, _) => {
            return cx.no(
                "Laravel",
                "it has no probabilistic early expiry (XFetch); Cache::flexible is its stale-while-revalidate",
            );
        }
        _ => {
            return cx.no(
                "Laravel",
                "PHP workers share no memory, so there is no in-process single-flight; Cache::lock is its distributed lock",
            );
        }
    })
}

pub fn rails(cx: &Terms) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    let jitter_note = &cx.jitter_note;
    Ok(match (cx.spec.freshness, cx.spec.coordination) {
        (Freshness::Swr, _) => format!(
            "Rails.cache.fetch(key, expires_in: {}.seconds, race_condition_ttl: {}.seconds) {{ load }}  # the first reader past expiry pushes it back {}s and recomputes; the others get the old value",
            fmt_s(ttl),
            fmt_s(stale),
            fmt_s(stale)
        ),
        (Freshness::Expire, Coordination::None) => format!(
            "Rails.cache.fetch(key, expires_in: {}.seconds) {{ load }}{jitter_note}",
            fmt_s(ttl)
        ),
        _ => {
            return cx.no(
                "Rails",
                "Rails.cache has no lock, single-flight or probabilistic early expiry; race_condition_ttl is its only stampede protection",
            );
        }
    })
}

pub fn symfony(cx: &Terms) -> Rendered {
    let (ttl, beta) = (cx.ttl, cx.beta);
    Ok(match cx.spec.freshness {
        Freshness::Xfetch => format!(
            "$cache->get('key', function (ItemInterface $item) {{ $item->expiresAfter({}); return load(); }}, {beta});  // beta {beta}: probabilistic early expiration; Symfony's lock also lets one process compute",
            fmt_s(ttl)
        ),
        Freshness::Expire => format!(
            "$cache->get('key', function (ItemInterface $item) {{ $item->expiresAfter({}); return load(); }}, 0);  // beta 0: no early expiration; its LockRegistry lets one process per host compute",
            fmt_s(ttl)
        ),
        _ => {
            return cx.no("Symfony", "Symfony Cache has no stale-while-revalidate");
        }
    })
}

pub fn caffeine(cx: &Terms) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    Ok(match (cx.spec.freshness, cx.spec.coordination) {
        (Freshness::Swr, _) => format!(
            "Caffeine.newBuilder().refreshAfterWrite(Duration.ofMillis({:.0})).expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // serves the old value while one refresh runs",
            ttl * 1000.0,
            (ttl + stale) * 1000.0
        ),
        (Freshness::Expire, Coordination::None | Coordination::SingleFlight) => format!(
            "Caffeine.newBuilder().expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // a LoadingCache computes a key once per JVM: single-flight",
            ttl * 1000.0
        ),
        _ => {
            return cx.no(
                "Caffeine",
                "Caffeine is in-process only: no distributed lock or lease across instances, and no probabilistic early expiry",
            );
        }
    })
}

pub fn spring(cx: &Terms) -> Rendered {
    let ttl = cx.ttl;
    Ok(match (cx.spec.freshness, cx.spec.coordination) {
        (Freshness::Expire, c @ (Coordination::SingleFlight | Coordination::None)) => format!(
            "@Cacheable(cacheNames = \"items\", sync = {})  // with the cache's TTL set to {}s in its CacheManager (e.g. RedisCacheConfiguration.entryTtl(Duration.ofSeconds({})))",
            c == Coordination::SingleFlight,
            fmt_s(ttl),
            fmt_s(ttl)
        ),
        _ => {
            return cx.no(
                "Spring",
                "@Cacheable has sync (one loader per JVM) and a TTL, nothing else",
            );
        }
    })
}

pub fn fusioncache(cx: &Terms) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    if cx.spec.freshness == Freshness::Xfetch {
        return cx.no(
            "FusionCache",
            "FusionCache's eager refresh is a fixed threshold, not XFetch's probabilistic one (try --eager-refresh)",
        );
    }
    let mut o = String::new();
    let _ = write!(
        o,
        "new FusionCacheEntryOptions {{ Duration = TimeSpan.FromSeconds({})",
        fmt_s(ttl)
    );
    if cx.spec.freshness == Freshness::Swr {
        let _ = write!(
            o,
            ", IsFailSafeEnabled = true, FailSafeMaxDuration = TimeSpan.FromSeconds({}), FactorySoftTimeout = TimeSpan.FromMilliseconds(100)",
            fmt_s(ttl + stale)
        );
    }
    if let Some(share) = cx.eager_refresh {
        let _ = write!(o, ", EagerRefreshThreshold = {share:.2}f");
    }
    if cx.spec.jitter_preset {
        let _ = write!(
            o,
            ", JitterMaxDuration = TimeSpan.FromSeconds({})",
            fmt_s(ttl * 0.1)
        );
    }
    o.push_str(" }  // its cache stampede protection (one factory per key per node) is always on");
    if cx.spec.coordination.redis_token() {
        o.push_str(
            "; across nodes it has no distributed lock of its own: add one around the factory",
        );
    }
    Ok(o)
}
