//! The real library beside each library preset, for `stampede conform`: the reference app that
//! runs it (`examples/libraries/<dir>`, started by its `run.sh`) and how the preset's settings
//! become that app's environment, or why the library cannot be run here. Each library's is
//! declared in its row of [`super::LIBRARIES`]; a new row names its app and writes one `env`
//! function here.

use crate::values::{Dur, Percent};

/// The preset's resolved settings an app's environment is written from (conform reads them
/// off the preset's scenario).
pub struct Settings {
    pub ttl: Dur,
    pub stale: Dur,
    pub beta: f64,
    pub eager_refresh: Option<Percent>,
}

/// What `conform` runs beside a preset.
pub enum Reference {
    /// A reference app of the library.
    App(RefApp),
    /// No app: why the library cannot be installed or run here.
    Missing(&'static str),
}

/// A reference app: `examples/libraries/<dir>/run.sh`, which reads what `--app-cmd` passes
/// (PORT, INSTANCE, DB_POOL, CACHE_TTL_MS, …) and the library's own settings from `env`.
pub struct RefApp {
    /// Its directory under `examples/libraries`.
    pub dir: &'static str,
    /// The library and version measured, as its README pins it.
    pub measured: &'static str,
    /// The preset's settings in the app's own variables (the TTL and the pool go in
    /// CACHE_TTL_MS and DB_POOL for every app).
    pub env: fn(&Settings) -> Vec<(String, String)>,
    /// Where the app cannot take a setting as the preset has it, said beside the figures.
    pub caveats: fn(&Settings) -> Vec<String>,
    /// Whether its answers say when they were stale (else stale answers are `unknown` on the
    /// library's side).
    pub tells_stale: bool,
    /// How many requests one process serves at once.
    pub at_once: AtOnce,
}

/// How many requests one process of a reference app serves at once: what decides how many of
/// a cold miss's readers can reach the library at the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtOnce {
    /// DB_POOL, by the server named (puma's threads, php-fpm's workers); the rest queue in
    /// front of the app, as they do in production behind that server.
    DbPool(&'static str),
    /// Every request in flight (an event loop, a thread per connection), as the built-in app.
    Every,
}

fn ms(d: std::time::Duration) -> String {
    d.as_millis().to_string()
}

fn pair(k: &str, v: String) -> (String, String) {
    (k.to_string(), v)
}

/// Symfony's `get($key, $cb, $beta)`: β as the preset's, its flock on.
pub fn symfony_env(sc: &Settings) -> Vec<(String, String)> {
    vec![
        pair("SYMFONY_BETA", format!("{}", sc.beta)),
        pair("SYMFONY_LOCK", "1".into()),
    ]
}

pub fn symfony_caveats(sc: &Settings) -> Vec<String> {
    let mut out = vec![
        "Symfony Cache 5.4 is measured (Debian 12), beside its preset symfony-5.4: it writes the expiry its readers judge by in whole seconds, rounded down, so they recompute up to 0.9 s early; 6.1 and later (the symfony preset) write it exactly".to_string(),
        "Symfony's lock is an flock on the host: each instance has lock files of its own, as separate hosts would, so the library loads once per instance".to_string(),
    ];
    if sc.ttl.0.subsec_millis() != 0 {
        out.push(format!(
            "Symfony's Redis lifetimes are whole seconds: the app's TTL is {} s where the preset's is {}",
            sc.ttl.0.as_millis().div_ceil(1000),
            sc.ttl
        ));
    }
    out
}

/// ActiveSupport's `fetch(expires_in:, race_condition_ttl:)`: the race TTL is the preset's
/// stale window.
pub fn rails_env(sc: &Settings) -> Vec<(String, String)> {
    vec![pair("RAILS_RACE_TTL_MS", ms(sc.stale.0))]
}

pub fn rails_caveats(sc: &Settings) -> Vec<String> {
    let mut out =
        vec!["ActiveSupport 6.1 is measured (Debian 12); the preset names Rails 7".to_string()];
    let s = sc.stale.0.as_millis();
    if s > 0 && !s.is_multiple_of(1000) {
        out.push(format!(
            "ActiveSupport 6.1 takes race_condition_ttl in whole seconds (to_i): the app's is {} s where the preset's stale window is {}",
            s / 1000,
            sc.stale
        ));
    }
    out
}

/// Caffeine's `refreshAfterWrite` at the preset's eager-refresh share of the TTL.
pub fn caffeine_env(sc: &Settings) -> Vec<(String, String)> {
    let refresh = sc
        .eager_refresh
        .map_or(0, |p| (sc.ttl.0.as_millis() as f64 * p.0).round() as u64);
    vec![pair("CAFFEINE_REFRESH_MS", refresh.to_string())]
}

pub fn caffeine_caveats(_: &Settings) -> Vec<String> {
    vec![
        "Caffeine is in-process: the app keeps its entries in its own memory (no Redis), one cache per instance, and a drop-cache cannot reach them; so does the preset, in each built-in instance".to_string(),
        "Caffeine 2.6.2 is measured (Debian 12); the current line is 3.x, with the same refreshAfterWrite".to_string(),
    ]
}

/// bentocache's `getOrSet` with its grace (the entry's whole life in Redis) the TTL and the
/// preset's stale window after it, its lock in memory as the library has it.
pub fn bentocache_env(sc: &Settings) -> Vec<(String, String)> {
    vec![pair("BENTO_GRACE_MS", ms(sc.ttl.0 + sc.stale.0))]
}

/// dogpile.cache's region: `expiration_time` the TTL (CACHE_TTL_MS), Redis keeping the value
/// for the stale window past it, with `distributed_lock`.
pub fn dogpile_env(sc: &Settings) -> Vec<(String, String)> {
    vec![
        pair("DOGPILE_REDIS_EXPIRATION_MS", ms(sc.ttl.0 + sc.stale.0)),
        pair("DOGPILE_DISTRIBUTED_LOCK", "1".into()),
    ]
}

pub fn no_caveats(_: &Settings) -> Vec<String> {
    Vec::new()
}
