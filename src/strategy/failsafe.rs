//! Fail-safe and soft timeout (FusionCache's, docs/strategies.md): what a request may do with
//! an expired value that is still in Redis when its load fails or is slow, and the throttle
//! that keeps a failing key from being tried again on an instance for a while. The entry is
//! kept past its expiry by the freshness policy's grace (`--fail-safe` is its length), the
//! one mechanism that keeps entries; this module only decides when such a value is served.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::envelope::Meta;

/// `--fail-safe`, `--fail-safe-throttle` and `--soft-timeout`, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// How long past its hard expiry an entry may be served when its load fails (0: off).
    pub max_ms: u64,
    /// How long an instance serves the kept value of a key whose load failed without trying
    /// the key again.
    pub throttle_ms: u64,
    /// When a kept value exists and its load takes longer than this, answer with the value and
    /// let the load finish behind the request.
    pub soft_timeout: Option<Duration>,
}

impl Settings {
    pub fn on(&self) -> bool {
        self.max_ms > 0
    }

    /// Whether `meta`, found expired, may be served at `now_ms` when its load fails: it is a
    /// value (not a not-found sentinel) and within `--fail-safe` of its hard expiry.
    pub fn servable(&self, meta: &Meta, now_ms: f64) -> bool {
        self.on() && !meta.negative && now_ms < (meta.hard_expiry_ms + self.max_ms) as f64
    }

    /// The soft timeout for a request holding `meta` at `now_ms`: only a servable value can
    /// answer in place of the load.
    pub fn soft_timeout_for(&self, meta: &Meta, now_ms: f64) -> Option<Duration> {
        self.soft_timeout.filter(|_| self.servable(meta, now_ms))
    }
}

/// The keys of one instance whose load failed recently, each with the unix ms until which it
/// is not tried again. Consulted only for expired entries under `--fail-safe`, never on a hit.
#[derive(Debug, Default)]
pub struct Throttle {
    until: Mutex<HashMap<u64, u64>>,
}

impl Throttle {
    /// Forget every mark (a fresh instance).
    pub fn clear(&self) {
        self.until.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Whether `id` is throttled at `now_ms` (a lapsed mark is dropped).
    pub fn throttled(&self, id: u64, now_ms: u64) -> bool {
        let mut t = self.until.lock().unwrap_or_else(|p| p.into_inner());
        match t.get(&id) {
            Some(&until) if now_ms < until => true,
            Some(_) => {
                t.remove(&id);
                false
            }
            None => false,
        }
    }

    /// A load of `id` failed at `now_ms`: do not try it again for `throttle_ms`.
    pub fn arm(&self, id: u64, now_ms: u64, throttle_ms: u64) {
        if throttle_ms == 0 {
            return;
        }
        self.until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, now_ms + throttle_ms);
    }
}

/// Values kept past their expiry and served when their load fails or is slow.
#[derive(
    Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FailSafe {
    /// How long an entry stays in Redis past its hard expiry, to be served when its load fails.
    pub max: crate::values::Dur,
    /// How long an instance serves a key's kept value without a load after its load failed.
    pub throttle: crate::values::Dur,
    /// When a load of a key whose kept value is held takes longer, the request is answered
    /// with that value and the load goes on behind it; null: never.
    pub soft_timeout: Option<crate::values::Dur>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(hard: u64) -> Meta {
        Meta {
            computed_at_ms: 0,
            delta_us: 1,
            soft_expiry_ms: hard,
            hard_expiry_ms: hard,
            version: 3,
            negative: false,
        }
    }

    #[test]
    fn a_kept_value_is_servable_within_the_fail_safe_only() {
        let s = Settings {
            max_ms: 500,
            throttle_ms: 0,
            soft_timeout: Some(Duration::from_millis(100)),
        };
        let m = meta(1000);
        assert!(s.servable(&m, 1000.0));
        assert!(s.servable(&m, 1499.0));
        assert!(!s.servable(&m, 1500.0), "past D it is not served");
        assert!(
            !s.servable(
                &Meta {
                    negative: true,
                    ..m
                },
                1000.0
            ),
            "a not-found sentinel is no value"
        );
        assert_eq!(
            s.soft_timeout_for(&m, 1200.0),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            s.soft_timeout_for(&m, 1600.0),
            None,
            "nothing to answer with"
        );
        let off = Settings::default();
        assert!(!off.servable(&m, 1000.0));
        assert_eq!(off.soft_timeout_for(&m, 1000.0), None);
    }

    #[test]
    fn the_throttle_holds_a_key_for_its_duration() {
        let t = Throttle::default();
        assert!(!t.throttled(7, 0));
        t.arm(7, 1000, 300);
        assert!(t.throttled(7, 1000));
        assert!(t.throttled(7, 1299));
        assert!(!t.throttled(8, 1100), "other keys are tried");
        assert!(!t.throttled(7, 1300));
        assert!(!t.throttled(7, 1200), "a lapsed mark is gone");
        t.arm(9, 0, 0);
        assert!(!t.throttled(9, 0), "no throttle: tried every time");
    }
}
