//! The readers of every format, detection, compression, errors, the Zipf fit and the stack
//! distances against a brute-force LRU.

use std::io::Write;
use std::path::PathBuf;

use super::analysis::{analyse, zipf_mle};
use super::mrc::{Mrc, StackDistances, default_sizes, exact_curve};
use super::*;

/// A file named `name` holding `bytes`, in a directory that lives as long as the guard.
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

/// Every record of a trace, owned.
fn all(path: &Path, format: Option<Format>, columns: Option<&Columns>) -> (Format, Vec<Owned>) {
    let mut r = Reader::open(path, format, columns).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(Owned::from(&rec));
    }
    (r.format(), out)
}

#[derive(Debug, PartialEq)]
struct Owned {
    t: Option<f64>,
    key: Vec<u8>,
    size: Option<u32>,
    op: Op,
    ttl: Option<u32>,
    count: u32,
}

impl From<&Record<'_>> for Owned {
    fn from(r: &Record) -> Owned {
        Owned {
            t: r.time_s,
            key: r.key.to_vec(),
            size: r.value_size,
            op: r.op,
            ttl: r.ttl_s,
            count: r.count,
        }
    }
}

fn rec(
    t: Option<f64>,
    key: &str,
    size: Option<u32>,
    op: Op,
    ttl: Option<u32>,
    count: u32,
) -> Owned {
    Owned {
        t,
        key: key.as_bytes().to_vec(),
        size,
        op,
        ttl,
        count,
    }
}

const TWITTER: &str =
    "0,k1,2,100,1,get,0\n0,k2,2,200,3,set,3600\n1,a,b,3,50,1,delete,0\n2,k1,2,100,1,gets,0\n";

#[test]
fn twitter_is_detected_and_its_ops_and_comma_keys_are_read() {
    let (_d, p) = file("t.csv", TWITTER.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Twitter);
    assert_eq!(
        recs,
        vec![
            rec(Some(0.0), "k1", Some(100), Op::Get, None, 1),
            rec(Some(0.0), "k2", Some(200), Op::Set, Some(3600), 1),
            rec(Some(1.0), "a,b", Some(50), Op::Delete, None, 1),
            rec(Some(2.0), "k1", Some(100), Op::Get, None, 1),
        ]
    );
}

#[test]
fn meta_v2_and_v1_headers_are_found_by_name() {
    let v2 = "op_time,key,key_size,op,op_count,size,cache_hits,ttl\n1650000000,abc,3,GET,4,512,3,0\n1650000001,abd,3,SET_LEASE,1,64,0,60\n1650000001,abe,3,DELETE,1,0,0,0\n1650000002,abf,3,UNKNOWN,1,0,0,0\n";
    let (_d, p) = file("kv.csv", v2.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Meta);
    assert_eq!(
        recs[0],
        rec(Some(1.65e9), "abc", Some(512), Op::Get, None, 4)
    );
    assert_eq!(recs[1].op, Op::Set);
    assert_eq!(recs[1].ttl, Some(60));
    assert_eq!(recs[2].op, Op::Delete);
    assert_eq!(recs[3].op, Op::Other);

    let v1 = "key,op,size,op_count,key_size\nxyz,GET_LEASE,100,7,3\n";
    let (_d, p) = file("kv1.csv", v1.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Meta);
    assert_eq!(recs, vec![rec(None, "xyz", Some(100), Op::Get, None, 7)]);
}

#[test]
fn csv_columns_are_named_by_the_header_or_the_mapping() {
    let t = "key,timestamp,op,value_size\n\"q,1\",0.5,GET,10\n\"say \"\"hi\"\"\",1.25,put,\n";
    let (_d, p) = file("c.csv", t.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Csv);
    assert_eq!(
        recs,
        vec![
            rec(Some(0.5), "q,1", Some(10), Op::Get, None, 1),
            rec(Some(1.25), "say \"hi\"", None, Op::Set, None, 1),
        ]
    );
    let t = "ts,k,bytes\n3,x,9\n";
    let (_d, p) = file("m.csv", t.as_bytes());
    let cols: Columns = "timestamp=ts, key=k,value_size=bytes".parse().unwrap();
    let (f, recs) = all(&p, None, Some(&cols));
    assert_eq!(f, Format::Csv);
    assert_eq!(recs, vec![rec(Some(3.0), "x", Some(9), Op::Get, None, 1)]);
    // Without the mapping the header lacks timestamp: the error says how to name it.
    let e = Reader::open(&p, Some(Format::Csv), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("field timestamp") && e.contains("--trace-columns"),
        "{e}"
    );
    assert!("time=ts".parse::<Columns>().is_err());
    assert!("timestamp".parse::<Columns>().is_err());
}

#[test]
fn jsonl_borrows_plain_keys_and_unescapes_others() {
    let t = "{\"timestamp\": 1.5, \"key\": \"a\", \"op\": \"set\", \"value_size\": 12, \"ttl\": 30, \"x\": [1]}\n{\"key\": \"b\\\"c\", \"timestamp\": 2}\n{\"key\": 77, \"timestamp\": 3, \"op\": \"delete\"}\n";
    let (_d, p) = file("t.jsonl", t.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Jsonl);
    assert_eq!(
        recs,
        vec![
            rec(Some(1.5), "a", Some(12), Op::Set, Some(30), 1),
            rec(Some(2.0), "b\"c", None, Op::Get, None, 1),
            rec(Some(3.0), "77", None, Op::Delete, None, 1),
        ]
    );
    let (_d, p) = file(
        "bad.jsonl",
        b"{\"timestamp\": 1, \"key\": \"a\"}\n{\"timestamp\": \"x\", \"key\": \"a\"}\n",
    );
    let mut r = Reader::open(&p, None, None).unwrap();
    assert!(r.next_record().unwrap().is_some());
    let e = r.next_record().err().unwrap().to_string();
    assert!(e.contains("bad.jsonl line 2, field timestamp"), "{e}");
}

#[test]
fn monitor_reads_gets_sets_deletes_and_skips_the_rest() {
    let t = concat!(
        "OK\n",
        "1339518083.107412 [0 127.0.0.1:60866] \"GET\" \"user:1\"\n",
        "1339518083.2 [0 [::1]:6379] \"SET\" \"k\\x41\\\"\" \"va\\\\l\" \"EX\" \"10\"\n",
        "1339518084.0 [0 lua] \"setex\" \"s\" \"20\" \"abc\"\n",
        "1339518084.5 [1 unix:/tmp/r.sock] \"PSETEX\" \"p\" \"1500\" \"ab\"\n",
        "1339518085 [0 127.0.0.1:1] \"DEL\" \"user:1\" \"other\"\n",
        "1339518086.0 [0 127.0.0.1:1] \"PING\"\n",
    );
    let (_d, p) = file("mon.log", t.as_bytes());
    let (f, recs) = all(&p, None, None);
    assert_eq!(f, Format::Monitor);
    assert_eq!(recs[0].op, Op::Other);
    assert_eq!(
        recs[1],
        rec(Some(1339518083.107412), "user:1", None, Op::Get, None, 1)
    );
    assert_eq!(
        recs[2],
        rec(Some(1339518083.2), "kA\"", Some(4), Op::Set, Some(10), 1)
    );
    assert_eq!(
        recs[3],
        rec(Some(1339518084.0), "s", Some(3), Op::Set, Some(20), 1)
    );
    assert_eq!(recs[4].ttl, Some(2));
    assert_eq!(recs[5].op, Op::Delete);
    assert_eq!(recs[6].op, Op::Other);
    let (_d, p) = file("bad.log", b"1.0 [0 x:1] \"GET\" \"unterminated\n");
    let e = Reader::open(&p, None, None)
        .unwrap()
        .next_record()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("bad.log line 1, field arguments"), "{e}");
}

#[test]
fn an_unknown_first_line_asks_for_the_format() {
    let (_d, p) = file("x.txt", b"hello world\n");
    let e = Reader::open(&p, None, None).err().unwrap().to_string();
    assert!(e.contains("--trace-format"), "{e}");
}

#[test]
fn a_malformed_line_names_the_file_the_line_and_the_field() {
    let t = "timestamp,key,value_size\n1,a,3\n\n2,b,abc\n";
    let (_d, p) = file("trace.csv", t.as_bytes());
    let mut r = Reader::open(&p, None, None).unwrap();
    assert!(r.next_record().unwrap().is_some());
    let e = r.next_record().err().unwrap();
    let shown = e.to_string();
    assert!(
        shown.ends_with("trace.csv line 4, field value_size: \"abc\" is not a number"),
        "{shown}"
    );
    assert_eq!(e.line, 4);
    let (_d, p) = file(
        "short.csv",
        TWITTER
            .replace("0,k2,2,200,3,set,3600", "0,k2,2")
            .as_bytes(),
    );
    let mut r = Reader::open(&p, None, None).unwrap();
    r.next_record().unwrap();
    let e = r.next_record().err().unwrap().to_string();
    assert!(
        e.contains("short.csv line 2") && e.contains("twitter format needs 7"),
        "{e}"
    );
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A trace long enough that truncating its compressed form cuts a line, not a header.
fn long_twitter() -> String {
    (0..20_000)
        .map(|i| format!("{},key{},4,{},1,get,0\n", i / 100, i % 997, 100 + i % 13))
        .collect()
}

#[test]
fn gzip_and_zstd_read_as_the_plain_file_and_truncation_is_an_error() {
    let plain = long_twitter();
    let (_d0, p0) = file("t.csv", plain.as_bytes());
    let want = all(&p0, None, None).1;
    assert_eq!(want.len(), 20_000);
    let z = zstd::encode_all(plain.as_bytes(), 3).unwrap();
    let g = gz(plain.as_bytes());
    for (name, bytes) in [("t.csv.zst", &z), ("t.csv.gz", &g)] {
        let (_d, p) = file(name, bytes);
        assert_eq!(all(&p, None, None).1, want, "{name}");
        // Cut in the middle: an error, not a shorter trace.
        let (_d, p) = file(name, &bytes[..bytes.len() / 2]);
        let mut r = Reader::open(&p, None, None).unwrap();
        let mut n = 0;
        let err = loop {
            match r.next_record() {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("{name}: a truncated file read as {n} records"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains(name), "{err}");
        // Cut just before the end (the last frame's checksum or the gzip trailer).
        let (_d, p) = file(name, &bytes[..bytes.len() - 3]);
        let mut r = Reader::open(&p, None, None).unwrap();
        let res = loop {
            match r.next_record() {
                Ok(Some(_)) => {}
                other => break other.map(|_| ()),
            }
        };
        assert!(res.is_err(), "{name}: a file 3 bytes short read to its end");
    }
}

#[test]
fn fingerprint_is_size_and_sha256() {
    let (_d, p) = file("abc", b"abc");
    let (n, h) = fingerprint(&p).unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        h,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn zipf_mle_recovers_the_exponent_of_exact_frequencies() {
    for s in [0.6, 0.9, 1.2, 1.5] {
        let counts: Vec<u64> = (1..=5000u64)
            .map(|r| (1e9 * (r as f64).powf(-s)).round() as u64)
            .collect();
        let (fit, ks) = zipf_mle(&counts);
        assert!((fit - s).abs() < 1e-3, "s {s}: fitted {fit}");
        assert!(ks < 1e-3, "s {s}: ks {ks}");
    }
}

#[test]
fn analysis_counts_requests_keys_ops_and_rates() {
    let (_d, p) = file("t.csv", TWITTER.as_bytes());
    let mut r = Reader::open(&p, None, None).unwrap();
    let s = analyse(&mut r).unwrap();
    assert_eq!(s.requests, 4);
    assert_eq!(s.distinct_keys, 3);
    assert_eq!(s.one_hit_wonders, 2);
    assert_eq!(s.ops.get, 2);
    assert_eq!(s.duration_s, Some(2.0));
    let rate = s.rate_per_s.as_ref().unwrap();
    assert_eq!((rate.seconds, rate.max, rate.median), (3, 2, 1));
    assert_eq!(s.working_set_bytes, 100 + 200 + 50);
    // Past the histogram's first range (it grows, never clamps).
    assert_eq!(s.ttl_s.as_ref().map(|t| t.max), Some(3600));
    assert!(s.text().contains("distinct keys"));
}

/// An LRU cache of `cap` objects, simulated directly: its hits on `seq`.
fn brute_lru(seq: &[(u64, Option<bool>)], cap: usize) -> u64 {
    let mut stack: Vec<u64> = Vec::new();
    let mut hits = 0;
    for &(k, del) in seq {
        let at = stack.iter().position(|&x| x == k);
        if del == Some(true) {
            if let Some(i) = at {
                stack.remove(i);
            }
            continue;
        }
        if let Some(i) = at {
            hits += 1;
            stack.remove(i);
        }
        stack.insert(0, k);
        stack.truncate(cap);
    }
    hits
}

/// A random skewed sequence over 300 keys, with about `deletes` of it deletes.
fn skewed(seed: u64, n: usize, deletes: f64) -> Vec<(u64, Option<bool>)> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let k = (rng.random::<f64>().powi(3) * 300.0) as u64;
            (k, (rng.random::<f64>() < deletes).then_some(true))
        })
        .collect()
}

/// The exact curve of `seq` next to a brute-force LRU's hit rate at each size.
fn against_brute(seq: &[(u64, Option<bool>)]) -> Vec<(u64, f64, f64)> {
    let mut m = Mrc::exact();
    for &(k, del) in seq {
        match del {
            Some(true) => m.delete(k),
            _ => m.access(k, Some(10)),
        }
    }
    let requests = seq.iter().filter(|s| s.1.is_none()).count() as f64;
    let c = m.curve(Some(&[1, 2, 3, 5, 10, 50, 100, 299, 300, 400]));
    c.curve
        .iter()
        .map(|p| {
            assert_eq!(p.bytes, p.objects * 10);
            let want = brute_lru(seq, p.objects as usize) as f64 / requests;
            (p.objects, p.hit_rate, want)
        })
        .collect()
}

#[test]
fn stack_distances_match_a_brute_force_lru_at_every_size() {
    // Long enough that the tree is renumbered (compacted) several times.
    for (size, got, want) in against_brute(&skewed(7, 200_000, 0.0)) {
        assert!((got - want).abs() < 1e-12, "size {size}: {got} vs {want}");
    }
    // A delete frees its key's place at every size in the stack model, where an LRU that had
    // already evicted the key gains nothing: close, not exact (docs/traces.md).
    for (size, got, want) in against_brute(&skewed(8, 200_000, 0.02)) {
        assert!((got - want).abs() < 1e-3, "size {size}: {got} vs {want}");
    }
    let e = exact_curve(
        skewed(9, 10_000, 0.0).iter().map(|s| (s.0, 1)),
        Some(&[300]),
    );
    assert!(e.hit_rate(300) > 0.95);
    let _ = StackDistances::new();
}

#[test]
fn default_sizes_are_log_spaced_up_to_the_keys() {
    assert_eq!(default_sizes(120, 1.0), vec![1, 2, 5, 10, 20, 50, 100, 120]);
    assert_eq!(
        default_sizes(100_000, 0.01),
        vec![1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000]
    );
}
