//! `trace-stats` and `mrc` on traces drawn here from known laws: the fitted Zipf exponent is
//! the one drawn from, the exact curve is what an LRU simulated directly hits, SHARDS stays
//! within the error docs/traces.md states, and (when the libcachesim Python package is
//! installed) the curve matches libCacheSim's LRU. No servers.

use crate::common;

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use common::stampede;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};
use serde_json::Value;

/// `stampede ARGS`, exit 0, stdout as JSON.
fn json(args: &[&str]) -> Value {
    let out = stampede().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "stampede {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `n` key ranks (1 = most popular) drawn from Zipf(`s`) over `keys`.
fn zipf_ranks(keys: u64, s: f64, n: usize, seed: u64) -> Vec<u64> {
    let z = Zipf::new(keys as f64, s).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| z.sample(&mut rng) as u64).collect()
}

/// A csv trace of `ranks`, 10 000 requests per second, values of 100 + rank mod 50 bytes.
fn csv_trace(dir: &Path, name: &str, ranks: &[u64]) -> PathBuf {
    let mut s = String::from("timestamp,key,value_size\n");
    for (i, r) in ranks.iter().enumerate() {
        let _ = writeln!(s, "{},k{r},{}", i as f64 / 10_000.0, 100 + r % 50);
    }
    let p = dir.join(name);
    std::fs::write(&p, s).unwrap();
    p
}

/// The fitted exponent is within this of the one drawn from, at 10k keys and 200k requests:
/// measured 0.9 → 0.902 and 1.2 → 1.195 (docs/traces.md); ranking keys by their observed
/// counts reorders the noisy tail, which the fit sees.
const ZIPF_ERROR: f64 = 0.02;

#[test]
fn trace_stats_recovers_the_zipf_exponent_drawn_from() {
    let dir = tempfile::tempdir().unwrap();
    for (s, seed) in [(0.9, 1), (1.2, 2)] {
        let ranks = zipf_ranks(10_000, s, 200_000, seed);
        let p = csv_trace(dir.path(), &format!("z{s}.csv"), &ranks);
        let j = json(&["trace-stats", p.to_str().unwrap(), "--json"]);
        assert_eq!(j["requests"], 200_000);
        assert_eq!(j["format"], "csv");
        let distinct: std::collections::HashSet<_> = ranks.iter().collect();
        assert_eq!(j["distinct_keys"], distinct.len() as u64);
        let fit = j["zipf_exponent"].as_f64().unwrap();
        println!("zipf {s}: fitted {fit:.4}, KS {}", j["zipf_ks_distance"]);
        assert!((fit - s).abs() < ZIPF_ERROR, "drawn from {s}, fitted {fit}");
        assert!((j["duration_s"].as_f64().unwrap() - 19.9999).abs() < 1e-6);
        assert_eq!(j["rate_per_s"]["median"], 10_000);
        assert_eq!(j["ops"]["read_share"], 1.0);
        assert_eq!(j["sha256"].as_str().unwrap().len(), 64);
    }
}

#[test]
fn trace_stats_text_and_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("trace.csv");
    std::fs::write(&p, "timestamp,key,value_size\n1,a,3\n2,b,4\n3,c,x7\n").unwrap();
    let out = stampede()
        .args(["trace-stats", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trace.csv line 4, field value_size: \"x7\" is not a number"),
        "{err}"
    );
    std::fs::write(&p, "timestamp,key,value_size\n1,a,3\n2,b,4\n").unwrap();
    let out = stampede()
        .args(["trace-stats", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in ["requests", "zipf exponent", "working set", "value size"] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
}

/// Hits of an LRU of `cap` objects on `keys`, simulated directly.
fn brute_lru(keys: &[u64], cap: usize) -> u64 {
    let mut lru: VecDeque<u64> = VecDeque::new();
    let mut hits = 0;
    for &k in keys {
        if let Some(i) = lru.iter().position(|&x| x == k) {
            hits += 1;
            lru.remove(i);
        } else if lru.len() == cap {
            lru.pop_back();
        }
        lru.push_front(k);
    }
    hits
}

fn curve(j: &Value) -> Vec<(u64, f64)> {
    j["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["objects"].as_u64().unwrap(),
                p["hit_rate"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn mrc_exact_curve_is_a_brute_force_lru_at_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = zipf_ranks(300, 0.8, 20_000, 3);
    let p = csv_trace(dir.path(), "small.csv", &ranks);
    let sizes: Vec<String> = (1..=310).map(|n| n.to_string()).collect();
    let j = json(&[
        "mrc",
        "--trace",
        p.to_str().unwrap(),
        "--sizes",
        &sizes.join(","),
        "--json",
    ]);
    assert_eq!(j["requests"], 20_000);
    assert_eq!(j["sampling_rate"], 1.0);
    let c = curve(&j);
    assert_eq!(c.len(), 310);
    for (n, h) in c {
        let want = brute_lru(&ranks, n as usize) as f64 / ranks.len() as f64;
        assert!((h - want).abs() < 1e-12, "size {n}: mrc {h}, LRU {want}");
    }
}

#[test]
fn report_draws_an_mrc_document_as_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = zipf_ranks(300, 0.8, 5_000, 4);
    let p = csv_trace(dir.path(), "t.csv", &ranks);
    let out = stampede()
        .args(["mrc", "--trace", p.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = dir.path().join("mrc.json");
    std::fs::write(&doc, &out.stdout).unwrap();
    let page = dir.path().join("mrc.html");
    let o = stampede()
        .arg("report")
        .arg(&doc)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&page).unwrap();
    // Against objects and against bytes, and every point in the table.
    assert_eq!(page.matches("<svg").count(), 2, "{page}");
    for (n, h) in curve(&j) {
        let row = format!("<tr><td>{n}</td>");
        assert!(page.contains(&row), "{row}");
        assert!(page.contains(&format!("<td>{:.2}%</td>", h * 100.0)));
    }
    // Without --html there is nothing to print but the table mrc prints: said so.
    let o = stampede().arg("report").arg(&doc).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--html"));
}

/// SHARDS at 1% on 2M requests over 200k keys (Zipf 0.9): the mean and the largest absolute
/// error of its hit rates against the exact curve's, over its default sizes (10/rate objects
/// up). Measured over seeds 1-4: mean 0.019-0.027, largest 0.08-0.11, at the smallest size
/// (docs/traces.md).
const SHARDS_MEAN_ERROR: f64 = 0.035;
const SHARDS_MAX_ERROR: f64 = 0.13;

#[test]
fn shards_at_one_percent_stays_within_its_stated_error() {
    let base = [
        "mrc",
        "--keys",
        "200000",
        "--zipf",
        "0.9",
        "--rps",
        "200k",
        "--duration",
        "10s",
        "--json",
    ];
    let exact = json(&[&base[..], &["--sampling-rate", "1"]].concat());
    let sampled = json(&[&base[..], &["--sampling-rate", "0.01"]].concat());
    assert_eq!(exact["requests"], 2_000_000);
    assert!((sampled["sampling_rate"].as_f64().unwrap() - 0.01).abs() < 1e-4);
    let sizes: Vec<String> = curve(&sampled).iter().map(|p| p.0.to_string()).collect();
    let exact = json(
        &[
            &base[..],
            &["--sampling-rate", "1", "--sizes", &sizes.join(",")],
        ]
        .concat(),
    );
    let (e, s) = (curve(&exact), curve(&sampled));
    assert_eq!(e.len(), s.len());
    let errs: Vec<f64> = e.iter().zip(&s).map(|(a, b)| (a.1 - b.1).abs()).collect();
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    let max = errs.iter().cloned().fold(0.0, f64::max);
    println!(
        "SHARDS 1%: mean abs error {mean:.4}, max {max:.4} over {} sizes",
        errs.len()
    );
    assert!(
        mean < SHARDS_MEAN_ERROR,
        "mean abs error {mean}: {e:?} vs {s:?}"
    );
    assert!(
        max < SHARDS_MAX_ERROR,
        "max abs error {max}: {e:?} vs {s:?}"
    );
    let k = sampled["distinct_keys"].as_f64().unwrap() / exact["distinct_keys"].as_f64().unwrap();
    assert!(
        (k - 1.0).abs() < 0.1,
        "distinct keys estimated at {k}× the true count"
    );
}

/// The Python interpreter with libcachesim: $LIBCACHESIM_PYTHON, else the venv under target/.
fn libcachesim_python() -> Result<PathBuf, String> {
    let p = std::env::var_os("LIBCACHESIM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/libcachesim-venv/bin/python")
        });
    let ok = std::process::Command::new(&p)
        .args(["-c", "import libcachesim"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(p)
    } else {
        Err(format!(
            "no libcachesim at {} (python3 -m venv target/libcachesim-venv && target/libcachesim-venv/bin/pip install libcachesim, or set LIBCACHESIM_PYTHON)",
            p.display()
        ))
    }
}

#[test]
fn mrc_matches_libcachesim_lru() {
    let python = match libcachesim_python() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let ranks = zipf_ranks(50_000, 0.8, 500_000, 4);
    let csv = csv_trace(dir.path(), "big.csv", &ranks);
    let txt = dir.path().join("big.txt");
    let ids: String = ranks.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&txt, ids).unwrap();
    let j = json(&["mrc", "--trace", csv.to_str().unwrap(), "--json"]);
    let ours = curve(&j);
    let sizes: Vec<String> = ours.iter().map(|p| p.0.to_string()).collect();
    // Objects of size 1 (a plain-text trace's), so a cache of n bytes holds n objects.
    let script = format!(
        "import libcachesim as l\nfor n in [{}]:\n    r = l.TraceReader(trace={:?}, trace_type=l.TraceType.PLAIN_TXT_TRACE)\n    print(n, 1 - l.LRU(cache_size=n).process_trace(r)[0])\n",
        sizes.join(","),
        txt.to_str().unwrap()
    );
    let out = std::process::Command::new(&python)
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let theirs: Vec<(u64, f64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (n, h) = l.split_once(' ').unwrap();
            (n.parse().unwrap(), h.parse().unwrap())
        })
        .collect();
    assert_eq!(theirs.len(), ours.len());
    for ((n, h), (m, g)) in ours.iter().zip(&theirs) {
        assert_eq!(n, m);
        println!("{n:>8} objects: ours {h:.6}, libCacheSim {g:.6}");
        assert!((h - g).abs() < 1e-6, "size {n}: ours {h}, libCacheSim {g}");
    }
}
