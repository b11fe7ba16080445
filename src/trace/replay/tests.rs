//! Tests of the trace replay: the key map, the selection and the schedule.

use super::*;
use std::path::Path;

fn write(body: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join("t.csv");
    std::fs::write(&p, body).expect("write");
    (dir, p)
}

fn opts(p: &Path) -> Options {
    Options {
        path: p.to_path_buf(),
        format: None,
        columns: None,
        ops: TraceOps::Reads,
        speed: 1.0,
        spread: Spread::Even,
        skip_s: 0.0,
        slice_s: None,
        retime_rps: None,
        default_size: 100,
    }
}

fn drain(spec: &TraceSpec) -> (Vec<Due>, Vec<Due>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut f = spawn(spec, 100, 7).expect("spawn");
        let mut reads = Vec::new();
        while let Some(d) = f.reads.next().await {
            reads.push(d);
        }
        let mut writes = Vec::new();
        if let Some(w) = &mut f.writes {
            while let Some(d) = w.next().await {
                writes.push(d);
            }
        }
        (reads, writes)
    })
}

#[test]
fn ids_follow_first_appearance_and_sizes_the_first_set() {
    let (_d, p) = write(
        "timestamp,key,value_size,op\n10,b,,get\n10,a,500,set\n10,a,20,get\n11,c,30,get\n11,b,,get\n",
    );
    let spec = load(&opts(&p)).expect("load");
    assert_eq!(spec.found.requests, 4);
    assert_eq!(spec.found.skipped, 1);
    assert_eq!(spec.found.distinct_keys, 3);
    assert!(spec.found.whole_seconds);
    assert_eq!(spec.found.run_s, 2.0);
    let i = spec.index(100).expect("index");
    assert_eq!(i.sizes, vec![100, 500, 30]);
    assert_eq!(i.requests, vec![2, 1, 1]);
    let (reads, writes) = drain(&spec);
    assert!(writes.is_empty());
    let got: Vec<(u64, u64)> = reads.iter().map(|d| (d.off_ns, d.id)).collect();
    assert_eq!(
        got,
        vec![
            (0, 1),
            (500_000_000, 2),
            (1_000_000_000, 3),
            (1_500_000_000, 1)
        ]
    );
}

#[test]
fn all_ops_splits_writes_and_speed_compresses_time() {
    let (_d, p) = write("timestamp,key,op\n0.0,a,get\n0.5,a,set\n1.0,b,delete\n2.0,a,get\n");
    let spec = load(&Options {
        ops: TraceOps::All,
        speed: 2.0,
        ..opts(&p)
    })
    .expect("load");
    assert_eq!(
        (spec.found.reads, spec.found.writes, spec.found.deletes),
        (2, 1, 1)
    );
    assert!(!spec.found.whole_seconds);
    let (reads, writes) = drain(&spec);
    let r: Vec<u64> = reads.iter().map(|d| d.off_ns).collect();
    let w: Vec<u64> = writes.iter().map(|d| d.off_ns).collect();
    assert_eq!(r, vec![0, 1_000_000_000]);
    assert_eq!(w, vec![250_000_000, 500_000_000]);
}

#[test]
fn skip_and_slice_select_trace_time_and_retime_keeps_order() {
    let (_d, p) = write("timestamp,key\n100,a\n101,b\n102,c\n103,d\n");
    let spec = load(&Options {
        skip_s: 1.0,
        slice_s: Some(2.0),
        ..opts(&p)
    })
    .expect("load");
    assert_eq!(spec.found.requests, 2);
    assert_eq!(spec.found.run_s, 2.0);
    let spec = load(&Options {
        retime_rps: Some(10.0),
        ..opts(&p)
    })
    .expect("load");
    let (reads, _) = drain(&spec);
    let got: Vec<(u64, u64)> = reads.iter().map(|d| (d.off_ns, d.id)).collect();
    assert_eq!(
        got,
        vec![(0, 1), (100_000_000, 2), (200_000_000, 3), (300_000_000, 4)]
    );
    assert!((spec.found.run_s - 0.4).abs() < 1e-9);
}

#[test]
fn random_spread_keeps_each_seconds_count() {
    let body: String = std::iter::once("timestamp,key\n".to_string())
        .chain((0..300).map(|i| format!("{},{}\n", i / 100, i % 7)))
        .collect();
    let (_d, p) = write(&body);
    let spec = load(&Options {
        spread: Spread::Random,
        ..opts(&p)
    })
    .expect("load");
    let (reads, _) = drain(&spec);
    for s in 0..3u64 {
        let n = reads
            .iter()
            .filter(|d| d.off_ns / 1_000_000_000 == s)
            .count();
        assert_eq!(n, 100, "second {s}");
    }
    assert!(reads.windows(2).all(|w| w[0].off_ns <= w[1].off_ns));
}

#[test]
fn an_empty_slice_says_why() {
    let (_d, p) = write("timestamp,key,op\n1,a,set\n");
    let e = load(&opts(&p)).expect_err("nothing to replay");
    assert!(e.contains("no request to replay"), "{e}");
}
