//! The memory lines of the terminal summary: shown when the run had a memory limit or Redis
//! evicted or refused anything, each figure named for what it counts.

use std::fmt::Write as _;

use crate::results::RunResult;
use crate::values::Size;

/// Bytes as a person reads them: `8.0 MiB`, `912 KiB`, `700 B`.
pub(crate) fn bytes(n: u64) -> String {
    let f = n as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.0} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// The `memory` lines, or nothing for a run without a limit in which nothing was evicted
/// or refused.
pub(crate) fn memory(o: &mut String, r: &RunResult) {
    let rd = &r.redis;
    let m = rd.memory.as_ref();
    let limited = m.and_then(|m| m.maxmemory).is_some_and(|n| n > 0);
    let evicted = rd.evicted_keys.unwrap_or(0);
    if !limited && evicted == 0 && rd.oom_errors == 0 {
        return;
    }
    let limit = match m {
        Some(m) => match (m.maxmemory, &m.policy, m.samples) {
            (Some(0), ..) => "no maxmemory".to_string(),
            (Some(n), Some(p), Some(s)) => format!(
                "maxmemory {} {p} (samples {s}, {})",
                Size(n),
                if m.set_by_tool {
                    "set by stampede"
                } else {
                    "the server's own"
                }
            ),
            _ => "maxmemory unknown".to_string(),
        },
        None => "maxmemory unknown".to_string(),
    };
    let _ = writeln!(
        o,
        "  memory    {limit}  evicted keys {} (INFO)  writes refused with OOM {}",
        rd.evicted_keys
            .map_or("unknown".to_string(), |n| n.to_string()),
        rd.oom_errors
    );
    if let Some(m) = m {
        let peak = m.used_memory_peak.map_or("unknown".into(), bytes);
        let end = m.used_memory_end.map_or("unknown".into(), bytes);
        let per_key = |v: Option<f64>| v.map_or("unknown".into(), |b| format!("{b:.0} B"));
        let _ = writeln!(
            o,
            "            used_memory peak {peak}, at end {end}; keys at end {} (the run's entries {})",
            m.keys_at_end.map_or("unknown".into(), |n| n.to_string()),
            m.entries_at_end.map_or("unknown".into(), |n| n.to_string()),
        );
        let _ = writeln!(
            o,
            "            bytes per key: {} by MEMORY USAGE ({} entries sampled), {} by used_memory / keys",
            per_key(m.bytes_per_key_sampled),
            m.sampled_keys,
            per_key(m.used_memory_per_key),
        );
    }
    if let Some(st) = r.start.as_ref().filter(|s| s.left_out_at_limit > 0) {
        let _ = writeln!(
            o,
            "            start state stopped at the limit: {} keys it would have held left out (the most popular written first)",
            st.left_out_at_limit
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::figures::MemoryFigures;

    fn baseline() -> RunResult {
        serde_json::from_str(include_str!("../../results/baseline-ci/cache-aside.json")).unwrap()
    }

    #[test]
    fn no_lines_without_a_limit_or_evictions_and_each_figure_named_with_one() {
        let mut r = baseline();
        let mut o = String::new();
        memory(&mut o, &r);
        assert!(o.is_empty(), "{o}");
        r.redis.oom_errors = 12;
        r.redis.evicted_keys = Some(0);
        r.redis.memory = Some(MemoryFigures {
            maxmemory: Some(8 << 20),
            policy: Some("noeviction".into()),
            samples: Some(5),
            set_by_tool: true,
            used_memory_peak: Some(8 << 20),
            used_memory_end: Some(8 << 20),
            keys_at_end: Some(6700),
            entries_at_end: Some(6698),
            bytes_per_key_sampled: Some(1096.0),
            sampled_keys: 1000,
            used_memory_per_key: Some(1252.0),
            note: None,
        });
        memory(&mut o, &r);
        for s in [
            "maxmemory 8mb noeviction (samples 5, set by stampede)",
            "evicted keys 0 (INFO)",
            "writes refused with OOM 12",
            "used_memory peak 8.0 MiB",
            "keys at end 6700 (the run's entries 6698)",
            "1096 B by MEMORY USAGE (1000 entries sampled), 1252 B by used_memory / keys",
        ] {
            assert!(o.contains(s), "{s} in\n{o}");
        }
    }
}
