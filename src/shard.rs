//! Which part of one experiment a shard runs (`run --shard I/N`, `--shards N` with the index
//! from `JOB_COMPLETION_INDEX`): open-loop request j of the one unsharded schedule belongs to
//! shard j mod N, closed-loop client c to shard c mod N, app instance k to shard k mod N. Every
//! shard walks the whole schedule and key stream and keeps its own requests, so the union of
//! the shards is the 1-process run, schedule and keys. Pure: no I/O.

use std::fmt;

/// The environment variable a Kubernetes Indexed Job sets to the pod's completion index.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Most shards one experiment may be split into.
pub const MAX_SHARDS: u32 = 1024;

/// How this process takes part in a sharded run, resolved from its flags.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: ShardSpec,
    pub run_id: String,
    /// The start instant (Unix ms) the user gave, else shard 0 picks one.
    pub start_at: Option<u64>,
    /// How far ahead of its setup shard 0 puts the start instant.
    pub start_delay: std::time::Duration,
    /// How long a shard waits for the start signal.
    pub start_timeout: std::time::Duration,
    /// How long shard 0 waits for the others at the end.
    pub end_timeout: std::time::Duration,
}

/// Shard `index` of `count` (0-based index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardSpec {
    /// Parse `I/N` (0 ≤ I < N).
    pub fn parse(s: &str) -> Result<ShardSpec, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| {
            format!("--shard {s}: expected I/N, e.g. 0/4 (index I counts from 0)")
        })?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("--shard {s}: the index {i:?} is not a whole number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("--shard {s}: the shard count {n:?} is not a whole number"))?;
        Self::new(index, count).map_err(|e| format!("--shard {s}: {e}"))
    }

    pub fn new(index: u32, count: u32) -> Result<ShardSpec, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "the shard count must be between 1 and {MAX_SHARDS}, not {count}"
            ));
        }
        if index >= count {
            return Err(format!(
                "the shard index {index} must be below the shard count {count} (indexes count from 0)"
            ));
        }
        Ok(ShardSpec { index, count })
    }

    /// `--shards N` with the index read from [`INDEX_ENV`] (`value`: that variable's value).
    pub fn from_index_env(count: u32, value: Option<&str>) -> Result<ShardSpec, String> {
        let v = value.ok_or_else(|| {
            format!(
                "--shards {count} reads this shard's index from {INDEX_ENV}, which is not set: set it (a Kubernetes Indexed Job does) or give --shard I/{count}"
            )
        })?;
        let index: u32 = v.trim().parse().map_err(|_| {
            format!("{INDEX_ENV}={v:?} is not a shard index (a whole number from 0)")
        })?;
        Self::new(index, count).map_err(|e| format!("--shards {count} with {INDEX_ENV}={v}: {e}"))
    }

    /// Whether request (or client, or instance) `j` of the unsharded run is this shard's.
    pub fn owns(&self, j: u64) -> bool {
        j % u64::from(self.count) == u64::from(self.index)
    }

    /// How many of the `n` items numbered `from`, `from + 1`, … are this shard's.
    pub fn owned_in(&self, from: u64, n: u64) -> u64 {
        let c = u64::from(self.count);
        // Items below x that are this shard's: those j < x with j ≡ index (mod count).
        let below = |x: u64| (x + c - 1 - u64::from(self.index)) / c;
        below(from + n) - below(from)
    }

    /// The instances of the unsharded run that this shard runs: k, k + N, … below `instances`.
    pub fn instances(&self, instances: u32) -> Vec<u32> {
        (self.index..instances)
            .step_by(self.count as usize)
            .collect()
    }

    /// The one shard that seeds, warms, fixes the start instant, executes the faults, reads
    /// the server counters for the whole run and removes what the run left.
    pub fn leads(&self) -> bool {
        self.index == 0
    }
}

/// The run id shards started with the same command line agree on without a name given: a
/// hash of their scenario (as JSON) and their count, in the form [`sanitize_run_id`] accepts.
pub fn derived_run_id(scenario: &str, count: u32) -> String {
    let h = scenario
        .bytes()
        .chain(count.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            crate::workload::fnv_step(h, u64::from(b))
        });
    format!("sh{:010x}", h & 0xff_ffff_ffff)
}

/// A run id usable in a schema name and a Redis key: lowercase letters, digits and `_`, at
/// most 40 characters (a Kubernetes Job's uid, say, with its dashes dropped).
pub fn sanitize_run_id(raw: &str) -> Result<String, String> {
    let id: String = raw
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .map(|c| c.to_ascii_lowercase())
        .take(40)
        .collect();
    if id.is_empty() {
        return Err(format!(
            "--run-id {raw:?} has no letter or digit: give one that names this run (every shard of one run gives the same)"
        ));
    }
    Ok(id)
}

/// `--start-at`: RFC 3339 or Unix seconds, as Unix ms.
pub fn parse_start_at(s: &str) -> Result<u64, String> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok((secs * 1000.0).round() as u64);
        }
        return Err(format!("--start-at {s}: Unix seconds must be positive"));
    }
    let t = humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
        format!("--start-at {s}: neither RFC 3339 (2026-12-01T03:00:00Z) nor Unix seconds ({e})")
    })?;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .map_err(|_| format!("--start-at {s}: before 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            ShardSpec::parse("1/4").unwrap(),
            ShardSpec { index: 1, count: 4 }
        );
        assert!(ShardSpec::parse("4/4").unwrap_err().contains("below"));
        assert!(ShardSpec::parse("1").is_err());
        assert!(ShardSpec::parse("a/2").is_err());
        assert!(ShardSpec::parse("0/0").is_err());
        assert_eq!(
            ShardSpec::from_index_env(3, Some("2")).unwrap(),
            ShardSpec { index: 2, count: 3 }
        );
        assert!(
            ShardSpec::from_index_env(3, None)
                .unwrap_err()
                .contains(INDEX_ENV)
        );
        assert!(ShardSpec::from_index_env(3, Some("3")).is_err());
    }

    /// The shards' requests partition the schedule: each request belongs to exactly one.
    #[test]
    fn shards_partition_every_range() {
        for count in 1..6 {
            let shards: Vec<ShardSpec> = (0..count)
                .map(|i| ShardSpec::new(i, count).unwrap())
                .collect();
            for from in 0..12u64 {
                for n in 0..25u64 {
                    let total: u64 = shards.iter().map(|s| s.owned_in(from, n)).sum();
                    assert_eq!(total, n);
                    for s in &shards {
                        let brute = (from..from + n).filter(|&j| s.owns(j)).count() as u64;
                        assert_eq!(s.owned_in(from, n), brute, "{s} from {from} n {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn instances_are_dealt_round_robin() {
        assert_eq!(ShardSpec::new(1, 2).unwrap().instances(4), vec![1, 3]);
        assert_eq!(ShardSpec::new(0, 4).unwrap().instances(4), vec![0]);
        assert!(ShardSpec::new(3, 4).unwrap().instances(2).is_empty());
    }

    #[test]
    fn run_ids_are_safe_names() {
        assert_eq!(
            sanitize_run_id("3F2a-91c0-Job").unwrap(),
            "3f2a91c0job".to_string()
        );
        assert!(sanitize_run_id("--").is_err());
    }
}
