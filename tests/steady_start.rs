//! The start state is steady for every preset: the first second's DB calls and hit rate lie
//! within the spread of the later seconds' (a start that is the tool's transient, such as
//! every swr key found stale at once, would rank a strategy for the tool's reason), and the
//! timeline's partial last bucket is marked so no chart or verdict reads it as a collapse.

use crate::common;

use common::*;
use serde_json::Value;

/// Per whole second of the timeline (partial buckets left out): (DB calls, hit rate).
fn seconds(r: &Value) -> Vec<(u64, f64)> {
    let buckets: Vec<&Value> = r["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| !b["partial"].as_bool().unwrap_or(false))
        .collect();
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for b in buckets {
        let s = (b["t_ms"].as_u64().unwrap().saturating_sub(1) / 1000) as usize;
        if out.len() <= s {
            out.resize(s + 1, (0, 0, 0));
        }
        let get = |k: &str| b[k].as_u64().unwrap();
        out[s].0 += get("db_calls");
        out[s].1 += get("hits") + get("stale");
        out[s].2 += get("requests");
    }
    out.into_iter()
        .map(|(c, h, n)| (c, h as f64 / n.max(1) as f64))
        .collect()
}

#[test]
fn every_preset_starts_steady_and_the_partial_bucket_is_marked() {
    let dir = tempfile::tempdir().unwrap();
    let _turn = cpu_turn();
    let out = stampede()
        .args(["compare", "--strategies", "all"])
        .args(["--rps", "3000", "--duration", "5s", "--quiet", "--out"])
        .arg(dir.path())
        .output()
        .expect("running stampede compare");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in stampede::strategy::PRESETS {
        let r = read_json(&dir.path().join(format!("{s}.json"))).unwrap();
        let tl = r["timeline"].as_array().unwrap();
        // 100 ms buckets over 5 s, then the drain's, marked partial.
        assert!(
            tl.last().unwrap()["partial"].as_bool() == Some(true),
            "{s}: the drain bucket is not marked partial"
        );
        assert!(
            tl[..tl.len() - 1]
                .iter()
                .all(|b| b.get("partial").is_none()),
            "{s}: a whole bucket marked partial"
        );
        let secs = seconds(&r);
        assert_eq!(secs.len(), 5, "{s}: {secs:?}");
        let later = &secs[1..];
        let (lo, hi) = later
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), (c, _)| (lo.min(*c), hi.max(*c)));
        let (hlo, hhi) = later.iter().fold((1.0f64, 0.0f64), |(lo, hi), (_, h)| {
            (lo.min(*h), hi.max(*h))
        });
        let (c0, h0) = secs[0];
        eprintln!(
            "{s}: first second {c0} DB calls, hit rate {h0:.3}; later {lo}..{hi}, {hlo:.3}..{hhi:.3}"
        );
        // Within the later seconds' spread, widened by 15% (a 5 s run has only 4 of them).
        assert!(
            (c0 as f64) <= hi as f64 * 1.15 && (c0 as f64) >= lo as f64 * 0.85,
            "{s}: first second {c0} DB calls against {lo}..{hi} later: {secs:?}"
        );
        assert!(
            h0 <= hhi + 0.02 && h0 >= hlo - 0.02,
            "{s}: first second hit rate {h0:.3} against {hlo:.3}..{hhi:.3}: {secs:?}"
        );
    }
}
