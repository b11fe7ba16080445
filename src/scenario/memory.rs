//! The settings of the cache's memory: each item's payload size (`--value-size` or
//! `--value-size-dist`) and the managed Redis's limit (`--maxmemory`, `--maxmemory-policy`,
//! `--maxmemory-samples`), checked and resolved after the file and the flags are merged.

use crate::cli::RunFlags;
use crate::error::UsageError;
use crate::memory::{EvictionPolicy, MemoryLimit};
use crate::sizes::SizeDist;

/// The payload size of every item (the distribution's mean, rounded, under
/// `--value-size-dist`) and the distribution, if any.
pub(super) fn value_sizes(m: &RunFlags) -> Result<(usize, Option<SizeDist>), UsageError> {
    match (m.data.value_size, m.data.value_size_dist) {
        (Some(_), Some(_)) => Err(UsageError::new(
            "value_size and value_size_dist are both set: every item has one size or each has its own, not both; keep one",
        )),
        (_, Some(d)) => Ok((d.mean().round() as usize, Some(d))),
        (_, None) => Ok((m.data.resolved().value_size(), None)),
    }
}

/// The managed Redis's memory limit, or none. A limit is a setting of the server the tool
/// starts: on the user's Redis (`--redis-url`) the tool never changes the configuration, so
/// the flags are refused there (its own configuration is read and reported instead).
pub(super) fn limit(m: &RunFlags) -> Result<Option<MemoryLimit>, UsageError> {
    let given = m.given();
    let limits = ["maxmemory", "maxmemory_policy", "maxmemory_samples"];
    if !limits.iter().any(|k| given.contains(k)) {
        return Ok(None);
    };
    // On the user's Redis (--redis-url) they are refused: [`super::needs`].
    // A policy without a limit is Redis's own "no limit" (maxmemory 0) with that policy: it
    // acts once a limit is set, as a sweep along --maxmemory does at each point.
    Ok(Some(MemoryLimit {
        maxmemory: m.memory.maxmemory.unwrap_or_default(),
        policy: m
            .memory
            .maxmemory_policy
            .unwrap_or(EvictionPolicy::Noeviction),
        samples: m.memory.resolved().maxmemory_samples(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Size;

    #[test]
    fn a_limit_needs_maxmemory_and_a_managed_redis() {
        let none = limit(&RunFlags::default()).unwrap();
        assert_eq!(none, None);
        let l = limit(&{
            let mut f: RunFlags = Default::default();
            f.memory.maxmemory = Some(Size(8 << 20));
            f
        })
        .unwrap()
        .unwrap();
        assert_eq!(l.policy, EvictionPolicy::Noeviction);
        assert_eq!(l.samples, 5);
        let l = limit(&{
            let mut f: RunFlags = Default::default();
            f.memory.maxmemory_policy = Some(EvictionPolicy::AllkeysLru);
            f
        })
        .unwrap()
        .unwrap();
        assert_eq!((l.maxmemory.0, l.policy), (0, EvictionPolicy::AllkeysLru));
        // On the user's Redis the limit is refused at resolution (scenario/needs.rs).
        let e = crate::scenario::resolve(None, {
            let mut f: RunFlags = Default::default();
            f.memory.maxmemory = Some(Size(8 << 20));
            f.servers.redis_url = Some("redis://127.0.0.1:1".into());
            f
        })
        .unwrap_err();
        assert!(e.to_string().contains("never changes"), "{e}");
    }

    #[test]
    fn one_size_or_a_distribution() {
        let d: SizeDist = "100..300".parse().unwrap();
        let (v, dist) = value_sizes(&{
            let mut f: RunFlags = Default::default();
            f.data.value_size_dist = Some(d);
            f
        })
        .unwrap();
        assert_eq!((v, dist), (200, Some(d)));
        assert!(
            value_sizes(&{
                let mut f: RunFlags = Default::default();
                f.data.value_size = Some(10);
                f.data.value_size_dist = Some(d);
                f
            })
            .is_err()
        );
    }
}
