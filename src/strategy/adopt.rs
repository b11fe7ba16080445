//! What a library preset looks like in the library's own code (`advise --for`): each
//! library's rendering of a recommended strategy and its settings, or what the library cannot
//! express, and how far its coordination reaches across instances ([`Across`]), so that a
//! rendering never drops a protection silently. Each is named in its library's row of
//! [`super::LIBRARIES`].

use std::fmt::Write as _;

use super::{Coordination, Freshness, StrategySpec};

/// How far a coordination reaches: who is kept from loading a key another caller is
/// loading. Ordered: a wider reach does all a narrower one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reach {
    /// No lock: every caller that misses loads.
    None,
    /// One load per key per process (an in-memory lock, single-flight).
    Process,
    /// One load per key per host (a lock file): one per instance, as instances are hosts here.
    Host,
    /// One load per key across every instance (a lock in Redis, a lease).
    Distributed,
}

impl Reach {
    /// What a strategy needs: a token in Redis, else an in-process flight, else nothing;
    /// for a miss or a background refresh, whichever needs more.
    pub fn needed(spec: &StrategySpec) -> Reach {
        let of = |c: Coordination| {
            if c.redis_token() {
                Reach::Distributed
            } else if c.single_flight() {
                Reach::Process
            } else {
                Reach::None
            }
        };
        of(spec.coordination).max(of(spec.refresh))
    }

    /// "per process", for a sentence.
    pub fn words(self) -> &'static str {
        match self {
            Reach::None => "no lock",
            Reach::Process => "per process",
            Reach::Host => "per host",
            Reach::Distributed => "across instances",
        }
    }
}

/// What a library can coordinate across instances: the widest reach of its own locks, and
/// the lock that gives it, in a sentence (`its LockRegistry is an flock on the host`).
#[derive(Debug, Clone, Copy)]
pub struct Across {
    pub reach: Reach,
    pub how: &'static str,
}

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
    if cx.eager_refresh.is_some() {
        return cx.no("Laravel", "it has no refresh before the expiry (--eager-refresh); Cache::flexible refreshes after it, serving the old value meanwhile");
    }
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
    if cx.eager_refresh.is_some() {
        return cx.no("Rails", "it has no refresh before the expiry (--eager-refresh); race_condition_ttl recomputes after it");
    }
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
    if cx.eager_refresh.is_some() {
        return cx.no("Symfony", "it has no fixed-share refresh before the expiry (--eager-refresh); its early recomputation is XFetch's probabilistic one (β)");
    }
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
    // refreshAfterWrite is Caffeine's eager refresh: a read past it gets the old value while
    // one reload runs per key per JVM. Under swr it is the TTL, with the value kept the stale
    // window after it; an --eager-refresh share moves it before the TTL.
    let refresh_ms = |until: f64| cx.eager_refresh.map_or(until, |p| p * ttl) * 1000.0;
    Ok(match (cx.spec.freshness, cx.spec.coordination) {
        (Freshness::Swr, _) => format!(
            "Caffeine.newBuilder().refreshAfterWrite(Duration.ofMillis({:.0})).expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // serves the old value while one refresh runs",
            refresh_ms(ttl),
            (ttl + stale) * 1000.0
        ),
        (Freshness::Expire, Coordination::None | Coordination::SingleFlight) => {
            match cx.eager_refresh {
                Some(p) => format!(
                    "Caffeine.newBuilder().refreshAfterWrite(Duration.ofMillis({:.0})).expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // reloaded in the background once {:.0}% of the TTL has passed, one reload per key per JVM, the old value served meanwhile",
                    refresh_ms(ttl),
                    ttl * 1000.0,
                    p * 100.0
                ),
                None => format!(
                    "Caffeine.newBuilder().expireAfterWrite(Duration.ofMillis({:.0})).build(key -> load(key));  // a LoadingCache computes a key once per JVM: single-flight",
                    ttl * 1000.0
                ),
            }
        }
        _ => {
            return cx.no(
                "Caffeine",
                "Caffeine is in-process only: no distributed lock or lease across instances, and no probabilistic early expiry",
            );
        }
    })
}

pub fn spring(cx: &Terms) -> Rendered {
    if cx.eager_refresh.is_some() {
        return cx.no(
            "Spring",
            "@Cacheable has no refresh before the expiry (--eager-refresh)",
        );
    }
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

/// bentocache 1.6's `getOrSet`: `grace` is an entry's whole life in Redis (not a time added
/// to the TTL), and with the soft `timeout` 0, its default, a graced read is answered at once
/// while one factory per process refreshes the key behind it.
pub fn bentocache(cx: &Terms) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    let ms = |s: f64| format!("{:.0}", s * 1000.0);
    let jitter_note = &cx.jitter_note;
    if cx.eager_refresh.is_some() {
        return cx.no(
            "bentocache",
            "it has no eager refresh before the expiry; grace with the soft timeout 0 refreshes after it, serving the old value meanwhile",
        );
    }
    Ok(match cx.spec.freshness {
        Freshness::Swr => format!(
            "await bento.getOrSet({{ key, factory: () => load(key), ttl: {}, grace: {}, timeout: 0 }})  // ms: fresh {}s, then served stale up to {}s after its write (grace is the entry's whole life) while one factory per key per process refreshes it in the background{jitter_note}",
            ms(ttl),
            ms(ttl + stale),
            fmt_s(ttl),
            fmt_s(ttl + stale)
        ),
        Freshness::Expire => format!(
            "await bento.getOrSet({{ key, factory: () => load(key), ttl: {} }})  // ms, no grace: a miss runs one factory per key per process, the others in it wait for its value{jitter_note}",
            ms(ttl)
        ),
        _ => {
            return cx.no(
                "bentocache",
                "it has no probabilistic early expiry (XFetch); grace with the soft timeout 0 is its stale-while-revalidate",
            );
        }
    })
}

/// dogpile.cache 1.5's `get_or_create` on its Redis backend: `expiration_time` is the soft
/// expiry, `redis_expiration_time` (whole seconds) how long Redis keeps the value to be
/// served while one caller reloads it, `distributed_lock` makes the lock a Redis one.
pub fn dogpile(cx: &Terms) -> Rendered {
    let (ttl, stale) = (cx.ttl, cx.stale);
    if cx.eager_refresh.is_some() {
        return cx.no(
            "dogpile.cache",
            "it has no eager refresh before the expiry; past expiration_time one caller reloads while the others get the old value",
        );
    }
    let (kept, expiry) = match cx.spec.freshness {
        Freshness::Swr => (
            ttl + stale,
            format!(
                "past {}s one caller reloads it in its request while the others get the old value, up to {}s",
                fmt_s(ttl),
                fmt_s((ttl + stale).ceil())
            ),
        ),
        Freshness::Expire => (
            ttl,
            "the value leaves Redis at its expiry, so none is served old: the next reader loads under the lock"
                .to_string(),
        ),
        _ => {
            return cx.no(
                "dogpile.cache",
                "it has no probabilistic early expiry (XFetch); its expiration_time with a longer redis_expiration_time is its stale-while-revalidate",
            );
        }
    };
    let distributed = cx.spec.coordination.redis_token() || cx.spec.refresh.redis_token();
    let mut o = format!(
        "region.configure(\"dogpile.cache.redis\", arguments={{\"url\": REDIS_URL, \"redis_expiration_time\": {}, \"distributed_lock\": {}",
        fmt_s(kept.ceil()),
        if distributed { "True" } else { "False" }
    );
    if distributed && cx.lock_ttl > 0.0 {
        let _ = write!(o, ", \"lock_timeout\": {}", fmt_s(cx.lock_ttl));
    }
    let _ = write!(
        o,
        "}}); region.get_or_create(key, lambda: load(key), expiration_time={})  # {}; {expiry}",
        fmt_s(ttl),
        if distributed {
            "a Redis lock: one caller in all instances loads a missing key, the others wait for the lock and read its value"
        } else {
            "a lock per process: one caller per process loads a missing key"
        }
    );
    if kept.fract() != 0.0 {
        o.push_str(" (redis_expiration_time takes whole seconds: rounded up)");
    }
    if cx.spec.coordination.mutex() {
        let _ = write!(
            o,
            "; its waiters wait for the lock without limit, where the recommendation's give up after {}s",
            fmt_s(cx.lock_wait)
        );
    }
    o.push_str(&cx.jitter_note);
    Ok(o)
}
