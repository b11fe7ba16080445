//! A strategy is three orthogonal choices (docs/design.md): freshness (when a value is loaded
//! again), coordination (who loads it) and TTL jitter. The CLI's six names are presets of
//! these, and `+` composes them; `no-cache` (every request loads, nothing is kept) is the
//! freshness that composes with nothing, the baseline a cache is measured against. This module parses and names them (their JSON Schema is in
//! [`schema`]); the request path that applies them lives in [`crate::instance`].

pub mod adopt;
pub mod envelope;
pub mod failsafe;
pub mod freshness;
pub mod invalidate;
pub mod lock;
pub mod policy;
pub mod reference;
pub mod schema;
pub mod single_flight;
pub mod write_back;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use reference::{AtOnce, RefApp, Reference};

/// When a cached value is loaded again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Freshness {
    /// Load on miss; the entry lives for the TTL.
    Expire,
    /// Probabilistic early recompute (Vattani et al., VLDB 2015).
    Xfetch,
    /// Soft expiry: serve stale within a window and refresh in the background.
    Swr,
    /// Both (`xfetch+swr`): before the soft expiry a reader may be drawn to recompute early, in
    /// the request, as xfetch; between soft and hard expiry the stale value is served and one
    /// refresh runs behind it, as swr.
    #[serde(rename = "xfetch+swr")]
    XfetchSwr,
    /// No cache: every request loads from the database, Redis is neither read nor written.
    /// The baseline of the break-even hit rate (docs/strategies.md).
    NoCache,
}

impl Freshness {
    /// Whether a reader may be drawn to recompute early (xfetch's draw).
    pub fn early(self) -> bool {
        matches!(self, Freshness::Xfetch | Freshness::XfetchSwr)
    }

    /// Whether entries live a stale window past their soft expiry (swr's).
    pub fn windowed(self) -> bool {
        matches!(self, Freshness::Swr | Freshness::XfetchSwr)
    }
}

/// What a reader does with an entry found inside its stale window (swr's freshness: past its
/// soft expiry, before its hard one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleRead {
    /// Serve it and refresh it behind the request (stale-while-revalidate).
    RefreshBehind,
    /// Write it back with its expiry pushed by the window (a separate SET), then recompute it
    /// in the request; readers after the push are served the old value as fresh (Rails'
    /// `race_condition_ttl`).
    ExtendAndRecompute,
}

/// Who performs a load when one is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coordination {
    /// Every request that needs the value loads it.
    None,
    /// One load per key per app instance; others in that instance await it.
    SingleFlight,
    /// One load per key across instances, through a Redis lock.
    Mutex,
    /// Coalesce in-process first, then take the Redis lock across instances.
    MutexSingleFlight,
    /// One lease token per key across instances (memcache's leases, Nishtala et al., NSDI
    /// 2013): the holder loads and its SET must present the token; a write's delete
    /// invalidates the token, so the holder's late, stale SET is refused.
    Lease,
}

impl Coordination {
    pub fn single_flight(self) -> bool {
        matches!(
            self,
            Coordination::SingleFlight | Coordination::MutexSingleFlight
        )
    }
    pub fn mutex(self) -> bool {
        matches!(self, Coordination::Mutex | Coordination::MutexSingleFlight)
    }
    pub fn lease(self) -> bool {
        self == Coordination::Lease
    }
    /// Whether a claim is a token in Redis (the mutex's lock or a lease), waited for across
    /// instances.
    pub fn redis_token(self) -> bool {
        self.mutex() || self.lease()
    }
}

/// A parsed `--strategy`: one freshness, one coordination, whether the jitter preset was
/// named (its ±10% applies unless `--jitter` says otherwise), and the library whose
/// semantics it reproduces when a library preset was named. Two more choices are fixed by
/// the library presets only (every composed strategy has the defaults of [`StrategySpec::of`]):
/// what a stale read does, and who coordinates a background refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategySpec {
    pub freshness: Freshness,
    pub coordination: Coordination,
    /// Who performs a background refresh (swr's, an eager refresh); a token in Redis, if
    /// any, is a lock.
    pub refresh: Coordination,
    /// What a read inside swr's stale window does.
    pub stale_read: StaleRead,
    pub jitter_preset: bool,
    pub library: Option<Library>,
}

/// A popular library's caching semantics, as a named preset of the orthogonal choices
/// (docs/strategies.md says what each is made of and which version it follows): its row of
/// [`LIBRARIES`], where everything about it is declared.
#[derive(Clone, Copy)]
pub struct Library(&'static LibraryDecl);

impl PartialEq for Library {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Library {}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.preset)
    }
}

/// One library, declared once: its preset (`--strategy laravel-flexible`) as a freshness and a
/// coordination like any strategy, plus who coordinates a background refresh, what a stale
/// read does and the settings it fixes (`--stale`, `--fail-safe`, `--soft-timeout`,
/// `--eager-refresh`, which a flag still overrides); its name for `advise --for` (`laravel`)
/// and in sentences (`Laravel`); and how a recommendation is written in its own code
/// ([`adopt`]), with what it cannot express.
pub struct LibraryDecl {
    pub preset: &'static str,
    /// `advise --for`'s name; the rows of one library's versions share it, and `--for` takes
    /// the first (they render the same code).
    pub for_name: &'static str,
    pub title: &'static str,
    pub freshness: Freshness,
    /// Who loads on a miss.
    pub coordination: Coordination,
    /// Who performs a background refresh (swr's, an eager refresh).
    pub refresh: Coordination,
    /// Whether a refresher that takes the key's lock reads the entry again first and skips
    /// when a newer one is there, as Laravel's flexible() checks the created time; dogpile.cache
    /// regenerates an expired value as soon as it takes the lock (lock.py's `_enter_create`
    /// re-reads only when there was no value), so a reader that read the old value just before
    /// the last refresh wrote the new one, and takes the lock just after it was released,
    /// loads again. Only a refresh under a lock (`refresh: Mutex`) is concerned.
    pub refresh_rechecks: bool,
    /// What a read inside swr's stale window does.
    pub stale_read: StaleRead,
    pub defaults: LibraryDefaults,
    /// How it writes the expiry its reads judge by (Symfony's whole seconds).
    pub expiry: freshness::ExpiryStamp,
    pub render: fn(&adopt::Terms) -> adopt::Rendered,
    /// The real library `conform` runs beside the preset, or why there is none here.
    pub reference: reference::Reference,
    /// What its own locks coordinate across instances: what `--for` compares with what the
    /// recommendation needs, so a protection the library lacks is said, not dropped.
    pub across: adopt::Across,
    /// Where it keeps its entries: Redis, or each instance's own memory.
    pub store: EntryStore,
}

/// Where a library keeps its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryStore {
    /// In Redis, one copy shared by every instance.
    Redis,
    /// In each instance's memory (Caffeine's `LoadingCache`): one cache per process, loaded
    /// once per instance per expiry, and out of reach of a drop of the Redis keys or an
    /// outage of Redis.
    Process,
}

/// The libraries, in the order docs/strategies.md lists their presets.
pub static LIBRARIES: [LibraryDecl; 9] = [
    // Laravel 11's `Cache::flexible`: swr; a refresh under a lock, a miss under none;
    // `[$fresh, $stale]`: the docs' examples stale for as long again as fresh.
    LibraryDecl {
        preset: "laravel-flexible",
        for_name: "laravel",
        title: "Laravel",
        freshness: Freshness::Swr,
        coordination: Coordination::None,
        refresh: Coordination::Mutex,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults {
            stale_is_ttl: true,
            ..LibraryDefaults::NONE
        },
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::laravel,
        reference: Reference::Missing(
            "Laravel 11's Cache::flexible comes with the Laravel framework from Composer (Packagist), which is not installed here; Debian 12 packages no Laravel",
        ),
        across: adopt::Across {
            reach: adopt::Reach::Distributed,
            how: "its Cache::lock and flexible()'s refresh lock are atomic locks in Redis (a miss under flexible() takes none)",
        },
        store: EntryStore::Redis,
    },
    // ActiveSupport's `fetch(race_condition_ttl:)`: swr's window, but a stale read pushes the
    // expiry back and recomputes; no lock.
    LibraryDecl {
        preset: "rails-race-ttl",
        for_name: "rails",
        title: "Rails",
        freshness: Freshness::Swr,
        coordination: Coordination::None,
        refresh: Coordination::None,
        refresh_rechecks: true,
        stale_read: StaleRead::ExtendAndRecompute,
        defaults: LibraryDefaults::NONE,
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::rails,
        reference: Reference::App(RefApp {
            dir: "rails",
            measured: "ActiveSupport 6.1.7.10 RedisCacheStore (Debian 12), puma 5.6.5",
            env: reference::rails_env,
            caveats: reference::rails_caveats,
            tells_stale: false,
            at_once: AtOnce::DbPool("puma's threads"),
        }),
        across: adopt::Across {
            reach: adopt::Reach::None,
            how: "Rails.cache takes no lock",
        },
        store: EntryStore::Redis,
    },
    // Symfony Cache's `get($key, $cb, beta: 1.0)` (6.1 and later, 7 included): xfetch with its
    // machine-local lock, judged against the expiry it stores exactly.
    LibraryDecl {
        preset: "symfony",
        for_name: "symfony",
        title: "Symfony",
        freshness: Freshness::Xfetch,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults::NONE,
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::symfony,
        reference: Reference::Missing(
            "Symfony Cache 6.1 and later (7 included) come from Composer (Packagist), which is not used here; Debian 12 packages Symfony Cache 5.4, which `conform --library symfony` runs beside its own preset, symfony-5.4 (the same mechanism, with the expiry written in whole seconds as 5.4 writes it)",
        ),
        across: adopt::Across {
            reach: adopt::Reach::Host,
            how: "its LockRegistry is an flock, local to one host",
        },
        store: EntryStore::Redis,
    },
    // Symfony Cache 5.4 (Debian 12's): the same, but its AbstractAdapter packs the expiry its
    // readers judge by in whole seconds, rounded down (6.1 stores it exactly).
    LibraryDecl {
        preset: "symfony-5.4",
        for_name: "symfony",
        title: "Symfony 5.4",
        freshness: Freshness::Xfetch,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults::NONE,
        expiry: freshness::ExpiryStamp::WholeSeconds,
        render: adopt::symfony,
        reference: Reference::App(RefApp {
            dir: "symfony",
            measured: "Symfony Cache 5.4.53 (Debian 12 php-symfony-cache), phpredis 5.3.7, php-fpm 8.2",
            env: reference::symfony_env,
            caveats: reference::symfony_caveats,
            tells_stale: false,
            at_once: AtOnce::DbPool("php-fpm's workers"),
        }),
        across: adopt::Across {
            reach: adopt::Reach::Host,
            how: "its LockRegistry is an flock, local to one host",
        },
        store: EntryStore::Redis,
    },
    // Caffeine's `refreshAfterWrite(0.8 × TTL)` loading cache: eager refresh, single-flight.
    LibraryDecl {
        preset: "caffeine-refresh",
        for_name: "caffeine",
        title: "Caffeine",
        freshness: Freshness::Expire,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults {
            eager_refresh: Some(0.8),
            ..LibraryDefaults::NONE
        },
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::caffeine,
        reference: Reference::App(RefApp {
            dir: "caffeine",
            measured: "Caffeine 2.6.2 (Debian 12 libcaffeine-java), OpenJDK 17",
            env: reference::caffeine_env,
            caveats: reference::caffeine_caveats,
            tells_stale: false,
            at_once: AtOnce::Every,
        }),
        across: adopt::Across {
            reach: adopt::Reach::Process,
            how: "a LoadingCache computes a key once per JVM, and shares nothing across JVMs",
        },
        store: EntryStore::Process,
    },
    // Spring's `@Cacheable(sync = true)`: single-flight per instance on a miss.
    LibraryDecl {
        preset: "spring-sync",
        for_name: "spring",
        title: "Spring",
        freshness: Freshness::Expire,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults::NONE,
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::spring,
        reference: Reference::Missing(
            "Spring's @Cacheable(sync = true) needs a Spring application built from Maven Central, which is not used here; Debian 12's Spring jars make no working app of it",
        ),
        across: adopt::Across {
            reach: adopt::Reach::Process,
            how: "@Cacheable(sync = true) synchronises a miss in one JVM",
        },
        store: EntryStore::Redis,
    },
    // FusionCache with its production options: fail-safe, soft timeout, eager refresh.
    LibraryDecl {
        preset: "fusion",
        for_name: "fusioncache",
        title: "FusionCache",
        freshness: Freshness::Expire,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults {
            fail_safe_ttls: Some(10),
            fail_safe_throttle_s: Some(30),
            soft_timeout_ms: Some(100),
            eager_refresh: Some(0.9),
            ..LibraryDefaults::NONE
        },
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::fusioncache,
        reference: Reference::Missing(
            "FusionCache is a .NET library (NuGet), and no .NET SDK is installed here",
        ),
        across: adopt::Across {
            reach: adopt::Reach::Process,
            how: "its stampede protection is per node (its distributed locker is optional and off here)",
        },
        store: EntryStore::Redis,
    },
    // bentocache 1.6's `getOrSet` with `grace` and the soft `timeout` 0 (its default): an
    // in-memory lock per key and process on a miss; a graced read served at once while one
    // factory per process refreshes behind it. `--stale` is the grace past the TTL.
    LibraryDecl {
        preset: "bentocache",
        for_name: "bentocache",
        title: "bentocache",
        freshness: Freshness::Swr,
        coordination: Coordination::SingleFlight,
        refresh: Coordination::SingleFlight,
        refresh_rechecks: true,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults::NONE,
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::bentocache,
        reference: Reference::App(RefApp {
            dir: "bentocache",
            measured: "bentocache 1.6.1 (npm), ioredis, Node.js 20",
            env: reference::bentocache_env,
            caveats: reference::no_caveats,
            tells_stale: false,
            at_once: AtOnce::Every,
        }),
        across: adopt::Across {
            reach: adopt::Reach::Process,
            how: "its getOrSet lock is in memory, one per process (its bus only invalidates L1s)",
        },
        store: EntryStore::Redis,
    },
    // dogpile.cache 1.5's Redis backend with `distributed_lock`: a Redis lock on a miss and
    // on an expiry (where the others get the old value, and the one that takes it reloads
    // without looking again); Redis keeps the value as long again as `expiration_time` (the
    // reference app's `redis_expiration_time`).
    LibraryDecl {
        preset: "dogpile",
        for_name: "dogpile",
        title: "dogpile.cache",
        freshness: Freshness::Swr,
        coordination: Coordination::Mutex,
        refresh: Coordination::Mutex,
        refresh_rechecks: false,
        stale_read: StaleRead::RefreshBehind,
        defaults: LibraryDefaults {
            stale_is_ttl: true,
            ..LibraryDefaults::NONE
        },
        expiry: freshness::ExpiryStamp::Exact,
        render: adopt::dogpile,
        reference: Reference::App(RefApp {
            dir: "dogpile",
            measured: "dogpile.cache 1.5.0 (PyPI), redis-py, Python 3",
            env: reference::dogpile_env,
            caveats: reference::no_caveats,
            tells_stale: false,
            at_once: AtOnce::Every,
        }),
        across: adopt::Across {
            reach: adopt::Reach::Distributed,
            how: "with distributed_lock its lock is a Redis lock, one for every instance",
        },
        store: EntryStore::Redis,
    },
];

impl Library {
    /// Its row of [`LIBRARIES`].
    pub fn decl(self) -> &'static LibraryDecl {
        self.0
    }

    /// Every library, in the order of [`LIBRARIES`].
    pub fn all() -> impl Iterator<Item = Library> {
        LIBRARIES.iter().map(Library)
    }

    /// The preset's name: `laravel-flexible`.
    pub fn name(self) -> &'static str {
        self.0.preset
    }

    /// The library `advise --for NAME` names (`laravel`): the first row of that name, the
    /// current version where a library has a row per version (`symfony`, `symfony-5.4`).
    pub fn for_name(name: &str) -> Option<Library> {
        Library::all().find(|l| l.0.for_name == name)
    }

    /// The library whose preset is `name` (`laravel-flexible`).
    pub fn preset(name: &str) -> Option<Library> {
        Library::all().find(|l| l.0.preset == name)
    }

    /// The preset as a composition of the strategy's choices.
    fn spec(self) -> StrategySpec {
        let d = self.0;
        StrategySpec {
            refresh: d.refresh,
            stale_read: d.stale_read,
            library: Some(self),
            ..StrategySpec::of(d.freshness, d.coordination, false)
        }
    }

    /// The settings the library fixes, used where the flag is not given.
    pub fn defaults(self) -> LibraryDefaults {
        self.0.defaults
    }
}

/// What a library preset sets when the flag is not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LibraryDefaults {
    /// `--stale` defaults to `--ttl` (Laravel's `[$fresh, $stale]` as its docs show it).
    pub stale_is_ttl: bool,
    /// `--fail-safe` as a multiple of `--ttl`.
    pub fail_safe_ttls: Option<u32>,
    /// `--fail-safe-throttle`, seconds.
    pub fail_safe_throttle_s: Option<u64>,
    /// `--soft-timeout`, ms.
    pub soft_timeout_ms: Option<u64>,
    /// `--eager-refresh`, a fraction of the TTL.
    pub eager_refresh: Option<f64>,
}

impl LibraryDefaults {
    /// A library that fixes none of them.
    pub const NONE: LibraryDefaults = LibraryDefaults {
        stale_is_ttl: false,
        fail_safe_ttls: None,
        fail_safe_throttle_s: None,
        soft_timeout_ms: None,
        eager_refresh: None,
    };
}

/// The presets (docs/design.md), in the order `compare --strategies all` runs them.
pub const PRESETS: [&str; 6] = [
    "cache-aside",
    "mutex",
    "single-flight",
    "xfetch",
    "swr",
    "jitter",
];

/// The name of the strategy without a cache, which composes with nothing.
pub const NO_CACHE: &str = "no-cache";

const VALID_FORMS: &str = "valid: no-cache (alone), a library preset (alone: laravel-flexible, rails-race-ttl, symfony, caffeine-refresh, spring-sync, fusion, bentocache, dogpile), cache-aside, mutex, single-flight, xfetch, swr, jitter, lease, or `+` \
    joining at most one freshness (cache-aside, xfetch, swr, or xfetch+swr: both) with mutex \
    and/or single-flight, or with lease, and/or jitter, e.g. swr+mutex, xfetch+single-flight, \
    mutex+single-flight, swr+lease, xfetch+swr+mutex";

/// A strategy's own setting that `advise` searches, as declared with the setting (`search` in
/// the run settings): the values it tries besides the default, which strategies use it, and
/// when it can matter at all.
#[derive(Debug, Clone, Copy)]
pub struct Knob {
    /// The setting's key: `lock_wait` (its flag is `--lock-wait`).
    pub key: &'static str,
    /// The values tried besides its default, in `sweep --axis`'s syntax (`"250ms,1s"`).
    pub values: &'static str,
    pub uses: fn(&StrategySpec) -> bool,
    /// Searched only when the scenario has a fault: a setting that acts when loads or Redis
    /// fail (fail-safe) cannot differ from its default otherwise.
    pub needs_fault: bool,
    /// Another knob this one needs, set with it at its first value (the L1's TTL needs an L1).
    pub with: Option<&'static str>,
}

impl Knob {
    /// `--lock-wait`'s name without dashes: how `--vary` and the labels name it.
    pub fn flag(&self) -> String {
        self.key.replace('_', "-")
    }

    /// The values tried besides the default.
    pub fn values(&self) -> Vec<String> {
        self.values.split(',').map(str::to_string).collect()
    }
}

impl StrategySpec {
    /// The strategies of a list: `all` for the presets, else comma-separated names, each
    /// parsed and canonical, none twice. Err reads after the flag's name.
    pub fn parse_list(list: &str) -> Result<Vec<String>, String> {
        let names: Vec<&str> = if list.trim() == "all" {
            PRESETS.to_vec()
        } else {
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        };
        if names.is_empty() {
            return Err(
                " is empty: give a comma-separated list such as cache-aside,mutex, or all".into(),
            );
        }
        let mut canonical: Vec<String> = Vec::with_capacity(names.len());
        for n in names {
            let c = StrategySpec::parse(n)
                .map_err(|e| format!(": {e}"))?
                .to_string();
            if canonical.contains(&c) {
                return Err(format!(" names {c} twice: each strategy runs once"));
            }
            canonical.push(c);
        }
        Ok(canonical)
    }

    /// A composed strategy: a refresh coordinated as a miss is, a stale read refreshed behind.
    pub fn of(freshness: Freshness, coordination: Coordination, jitter_preset: bool) -> Self {
        StrategySpec {
            freshness,
            coordination,
            refresh: coordination,
            stale_read: StaleRead::RefreshBehind,
            jitter_preset,
            library: None,
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        let mut freshness: Option<(Freshness, &str)> = None;
        let (mut mutex, mut sf, mut jitter, mut lease) = (false, false, false, false);
        if s.trim().is_empty() {
            return Err(format!("empty strategy ({VALID_FORMS})"));
        }
        if s.trim() == NO_CACHE {
            return Ok(StrategySpec::of(
                Freshness::NoCache,
                Coordination::None,
                false,
            ));
        }
        if let Some(l) = Library::preset(s.trim()) {
            return Ok(l.spec());
        }
        if let Some(name) = LIBRARIES
            .iter()
            .map(|d| d.preset)
            .find(|n| s.split('+').any(|p| p.trim() == *n))
        {
            return Err(format!(
                "'{s}' combines the library preset {name} with another part: a library preset is a whole strategy (docs/strategies.md lists what it is made of); name it alone, and tune it with its flags (--stale, --fail-safe, --soft-timeout, --eager-refresh) ({VALID_FORMS})"
            ));
        }
        if s.split('+').any(|p| p.trim() == NO_CACHE) {
            let with = match s.split('+').map(str::trim).find(|p| *p != NO_CACHE) {
                Some(other) => format!("combines no-cache with {other}"),
                None => "names no-cache twice".to_string(),
            };
            return Err(format!(
                "'{s}' {with}: no-cache composes with nothing (without a cache there is nothing to coordinate, refresh or jitter); use --strategy no-cache alone ({VALID_FORMS})"
            ));
        }
        for part in s.split('+').map(str::trim) {
            let f = match part {
                "cache-aside" | "expire" => Some(Freshness::Expire),
                "xfetch" => Some(Freshness::Xfetch),
                "swr" => Some(Freshness::Swr),
                "mutex" | "single-flight" | "jitter" | "lease" => None,
                other => return Err(format!("unknown strategy '{other}' ({VALID_FORMS})")),
            };
            let dup = match (part, f) {
                (_, Some(f)) => {
                    if let Some((prev_f, prev)) = freshness {
                        // XFetch before the soft expiry, swr's window after it: the one pair
                        // of freshness policies that acts on different moments of a value.
                        let both = matches!(
                            (prev_f, f),
                            (Freshness::Xfetch, Freshness::Swr)
                                | (Freshness::Swr, Freshness::Xfetch)
                        );
                        if !both {
                            return Err(format!(
                                "'{s}' combines two freshness policies ({prev} and {part}); a value has one way of going stale, choose one — only xfetch+swr combine ({VALID_FORMS})"
                            ));
                        }
                        freshness = Some((Freshness::XfetchSwr, "xfetch+swr"));
                    } else {
                        freshness = Some((f, part));
                    }
                    false
                }
                ("mutex", _) => std::mem::replace(&mut mutex, true),
                ("single-flight", _) => std::mem::replace(&mut sf, true),
                ("lease", _) => std::mem::replace(&mut lease, true),
                _ => std::mem::replace(&mut jitter, true),
            };
            if dup {
                return Err(format!("'{s}' names {part} twice ({VALID_FORMS})"));
            }
        }
        if lease && (mutex || sf) {
            return Err(format!(
                "'{s}' combines lease with {}: a lease already makes one load per key across instances, choose one coordination ({VALID_FORMS})",
                if mutex { "mutex" } else { "single-flight" }
            ));
        }
        let coordination = match (mutex, sf) {
            _ if lease => Coordination::Lease,
            (false, false) => Coordination::None,
            (false, true) => Coordination::SingleFlight,
            (true, false) => Coordination::Mutex,
            (true, true) => Coordination::MutexSingleFlight,
        };
        Ok(StrategySpec::of(
            freshness.map_or(Freshness::Expire, |(f, _)| f),
            coordination,
            jitter,
        ))
    }

    /// What the named library preset sets where a flag does not, if one was named.
    pub fn library_defaults(&self) -> Option<LibraryDefaults> {
        self.library.map(Library::defaults)
    }
    /// Plain cache-aside or in-process coordination: where an in-process tier is tried (the
    /// two-level cache; with a distributed coordination its lock or lease already guards Redis).
    pub fn plain_or_in_process(&self) -> bool {
        self.freshness == Freshness::Expire
            && matches!(
                self.coordination,
                Coordination::None | Coordination::SingleFlight
            )
            && !self.jitter_preset
    }

    /// Plain cache-aside: expiry, no coordination, no jitter preset.
    pub fn plain(&self) -> bool {
        self.freshness == Freshness::Expire
            && self.coordination == Coordination::None
            && !self.jitter_preset
    }

    /// Whether the strategy keeps values in Redis at all (false for `no-cache` only).
    pub fn caches(&self) -> bool {
        self.freshness != Freshness::NoCache
    }

    /// Whether entries are kept past their expiry by the freshness itself (swr's window,
    /// whatever a stale read does in it), so a stale value can be served without `--fail-safe`.
    pub fn serves_stale(&self) -> bool {
        self.freshness.windowed()
    }

    /// The TTL jitter when `--jitter` is not given: ±10% for the jitter preset, else none.
    pub fn default_jitter(&self) -> f64 {
        if self.jitter_preset { 0.10 } else { 0.0 }
    }
}

impl fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.library {
            return f.write_str(l.name());
        }
        let mut parts: Vec<&str> = Vec::with_capacity(4);
        match self.freshness {
            Freshness::NoCache => return f.write_str(NO_CACHE),
            Freshness::Expire => {}
            Freshness::Xfetch => parts.push("xfetch"),
            Freshness::Swr => parts.push("swr"),
            Freshness::XfetchSwr => parts.extend(["xfetch", "swr"]),
        }
        if self.coordination.mutex() {
            parts.push("mutex");
        }
        if self.coordination.single_flight() {
            parts.push("single-flight");
        }
        if self.coordination.lease() {
            parts.push("lease");
        }
        if self.jitter_preset {
            parts.push("jitter");
        }
        if parts.is_empty() {
            return f.write_str("cache-aside");
        }
        f.write_str(&parts.join("+"))
    }
}

impl Serialize for StrategySpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StrategySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StrategySpec::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Refresh-ahead on a schedule: the most popular keys re-loaded every `every`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rewarm {
    /// How often the job runs, from the start of the traffic.
    pub every: crate::values::Dur,
    /// How many keys it re-loads: popularity ranks 1..=top.
    pub top: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip() {
        for p in PRESETS {
            assert_eq!(StrategySpec::parse(p).unwrap().to_string(), p);
        }
        for c in [
            "swr+mutex",
            "xfetch+mutex",
            "xfetch+single-flight",
            "mutex+single-flight",
            "lease",
            "swr+lease",
            "xfetch+lease",
            "lease+jitter",
        ] {
            assert_eq!(StrategySpec::parse(c).unwrap().to_string(), c);
        }
        assert_eq!(
            StrategySpec::parse("single-flight+mutex")
                .unwrap()
                .to_string(),
            "mutex+single-flight"
        );
        for l in Library::all() {
            let d = l.decl();
            let p = StrategySpec::parse(d.preset).unwrap();
            assert_eq!((p.to_string(), p.library), (d.preset.to_string(), Some(l)));
            // `--for` names the library, and its first row: one rendering for every version.
            let named = Library::for_name(d.for_name).unwrap();
            assert!(
                std::ptr::fn_addr_eq(named.decl().render, d.render),
                "{}",
                d.preset
            );
        }
        let laravel = StrategySpec::parse("laravel-flexible").unwrap();
        assert_eq!(
            (laravel.coordination, laravel.refresh),
            (Coordination::None, Coordination::Mutex),
            "laravel's misses take no lock, its refreshes do"
        );
        let rails = StrategySpec::parse("rails-race-ttl").unwrap();
        assert_eq!(
            (rails.freshness, rails.stale_read, rails.refresh),
            (
                Freshness::Swr,
                StaleRead::ExtendAndRecompute,
                Coordination::None
            ),
            "rails keeps swr's window, and a stale read extends it and recomputes"
        );
        // bentocache: swr's window (its grace) and an in-process lock on a miss and a refresh;
        // dogpile: the same under a Redis lock, its window as long again as the TTL.
        let bento = StrategySpec::parse("bentocache").unwrap();
        let dogpile = StrategySpec::parse("dogpile").unwrap();
        for (p, c) in [
            (bento, Coordination::SingleFlight),
            (dogpile, Coordination::Mutex),
        ] {
            assert_eq!(
                (p.freshness, p.coordination, p.refresh, p.stale_read),
                (Freshness::Swr, c, c, StaleRead::RefreshBehind),
                "{p}"
            );
        }
        assert!(dogpile.library_defaults().is_some_and(|d| d.stale_is_ttl));
        assert_eq!(bento.library_defaults(), Some(LibraryDefaults::NONE));
        let n = StrategySpec::parse(" no-cache ").unwrap();
        assert_eq!(n.to_string(), "no-cache");
        assert!(!n.caches() && n.coordination == Coordination::None);
        assert_eq!(
            StrategySpec::parse("cache-aside+mutex")
                .unwrap()
                .to_string(),
            "mutex"
        );
    }

    #[test]
    fn nonsense_is_refused_with_the_valid_forms() {
        assert_eq!(
            StrategySpec::parse("swr+mutex+xfetch").unwrap().to_string(),
            "xfetch+swr+mutex",
            "xfetch and swr combine, in either order"
        );
        for bad in [
            "xfetch+swr+xfetch",
            "cache-aside+swr",
            "magic",
            "mutex+mutex",
            "",
            "swr+",
            "lease+mutex",
            "lease+single-flight",
            "lease+lease",
            "no-cache+mutex",
            "cache-aside+no-cache",
            "no-cache+no-cache",
            "no-cache+jitter",
            "fusion+jitter",
            "swr+laravel-flexible",
            "spring-sync+single-flight",
            "dogpile+mutex",
            "bentocache+jitter",
        ] {
            let e = StrategySpec::parse(bad).unwrap_err();
            assert!(e.contains("valid:"), "{bad}: {e}");
        }
    }
}
