//! The network between the app and its servers (`--net-rtt`): the tool's proxy on loopback
//! delays what the requests send and receive by the round trip, while the servers still count
//! every command and statement (the tool's own connections bypass it). Real servers.

use crate::common;

use common::run_ok;

/// One run of cache-aside on a cached key space: nearly every request one Redis GET.
fn hits(extra: &[&str]) -> common::Run {
    let mut args = vec![
        "--keys",
        "200",
        "--rps",
        "300",
        "--duration",
        "2s",
        "--ttl",
        "30s",
        "--warm",
        "200",
    ];
    args.extend_from_slice(extra);
    run_ok(&args)
}

#[test]
fn a_round_trip_is_what_the_requests_see_and_the_servers_still_count_everything() {
    crate::common::light_turns();
    let plain = hits(&[]);
    let rtt = hits(&["--net-rtt", "2ms"]);
    for r in [&plain, &rtt] {
        r.assert_counts_add_up();
        // Through the proxy as directly: the servers' counts are the tool's.
        assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"), "{}", r.stdout());
        assert_eq!(r.u("/redis/keyspace_hits"), r.u("/outcomes/hit"));
        assert_eq!(r.u("/redis/keyspace_misses"), r.u("/outcomes/miss"));
        assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    }
    assert_eq!(rtt.json["scenario"]["redis_rtt"], "2ms");
    assert_eq!(rtt.json["scenario"]["pg_rtt"], "2ms");
    assert!(plain.json["scenario"].get("redis_rtt").is_none());
    // A hit is one Redis round trip: its p50 rises by the 2 ms added (a loaded 2-core machine
    // adds its scheduling to both; the bounds catch a missing or doubled delay).
    let (p0, p1) = (plain.f("/latency_ms/p50"), rtt.f("/latency_ms/p50"));
    assert!(
        p1 - p0 >= 1.8 && p1 - p0 <= 4.0,
        "p50 {p0:.3} ms on loopback, {p1:.3} ms with a 2 ms round trip"
    );
}

#[test]
fn what_the_proxy_cannot_stand_between_is_refused() {
    for (args, needle) in [
        (
            &["--net-rtt", "1ms", "--redis-cluster"][..],
            "Redis Cluster",
        ),
        (&["--net-rtt", "1ms", "--tls"][..], "TLS"),
        (&["--net-rtt", "1ms±2ms"][..], "jitter"),
    ] {
        let out = common::stampede()
            .arg("run")
            .args(args)
            .output()
            .expect("run stampede");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// The `instances[]` entry of instance `i`.
fn instance(r: &common::Run, i: u64) -> &serde_json::Value {
    r.json["instances"]
        .as_array()
        .and_then(|v| v.iter().find(|e| e["instance"] == i))
        .unwrap_or_else(|| panic!("no instances[] entry {i}: {}", r.json))
}

#[test]
fn a_partition_of_one_instance_holds_its_requests_to_the_deadline_and_leaves_the_other_alone() {
    crate::common::light_turns();
    let r = run_ok(&[
        "--keys",
        "200",
        "--rps",
        "300",
        "--duration",
        "4s",
        "--ttl",
        "30s",
        "--warm",
        "200",
        "--check-values",
        "--fault",
        "partition@1s+1500ms,server=redis,instance=0",
    ]);
    r.assert_counts_add_up();
    let f = &r.json["faults"][0];
    let net = &f["net"];
    assert_eq!(f["kind"], "partition", "{f}");
    assert_eq!(net["instances"], serde_json::json!([0]), "{f}");
    // Held, not refused: no connection was reset or reopened, the commands waited their
    // whole 100 ms deadline (fail open: the requests loaded instead, none failed).
    assert_eq!(net["resets"], 0, "{f}");
    assert_eq!(net["reconnects"], 0, "{f}");
    assert!(net["redis_deadlines_waited"].as_u64().unwrap() > 50, "{f}");
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    // Healed: the held replies were delivered, each to its own request (values checked).
    assert!(f["recovered_ms"].as_u64().is_some_and(|ms| ms < 500), "{f}");
    assert_eq!(r.u("/redis/value_mismatches"), 0);
    // The struck instance's requests took up to two deadlines (GET, then the write-back's
    // SET) plus a load; the other's stayed at loopback's.
    let (cut, other) = (instance(&r, 0), instance(&r, 1));
    let p99 = |i: &serde_json::Value| i["p99_ms"].as_f64().unwrap();
    assert!(
        p99(cut) >= 100.0 && p99(cut) <= 200.0 + 10.0 + 150.0,
        "{cut}"
    );
    assert!(p99(other) < 50.0, "{other}");
    assert_eq!(other["hits"], other["requests"], "{other}");
    assert!(cut["hits"].as_u64() < cut["requests"].as_u64(), "{cut}");
    // The servers still referee: every DB call the tool counted, Postgres counted.
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));
}

#[test]
fn under_a_partition_a_5s_timeout_costs_two_timeouts_and_node_redis_holds_until_it_heals() {
    crate::common::waiting_turns();
    // The lab's trap: GET waits its 5 s, then the write-back's SET its 5 s.
    let lab = run_ok(&[
        "--keys",
        "20",
        "--rps",
        "10",
        "--duration",
        "13s",
        "--ttl",
        "30s",
        "--warm",
        "20",
        "--instances",
        "1",
        "--redis-timeout",
        "5s",
        "--fault",
        "partition@1s+11s,server=redis",
    ]);
    let max = lab.f("/latency_ms/max");
    assert!((9_500.0..11_500.0).contains(&max), "max {max} ms");
    assert_eq!(lab.json["scenario"]["redis_timeout"], "5s");
    // node-redis: no command timeout, so a request is held for as long as the partition lasts,
    // and none fails or waits for a deadline.
    let node = run_ok(&[
        "--keys",
        "20",
        "--rps",
        "10",
        "--duration",
        "5s",
        "--ttl",
        "30s",
        "--warm",
        "20",
        "--instances",
        "1",
        "--redis-client",
        "node-redis",
        "--fault",
        "partition@1s+3s,server=redis",
    ]);
    let max = node.f("/latency_ms/max");
    assert!((2_500.0..4_500.0).contains(&max), "max {max} ms");
    assert_eq!(node.u("/requests/errors"), 0);
    assert_eq!(node.json["faults"][0]["net"]["redis_deadlines_waited"], 0);
    assert_eq!(node.json["scenario"]["redis_client"], "node-redis");
}

#[test]
fn a_held_close_keeps_the_app_waiting_on_a_dead_redis_until_the_close_arrives() {
    crate::common::light_turns();
    // Redis dies at 2 s while closes are held 1.5 s: the app's connection stays half-open, so
    // its commands wait (the 5 s deadline never passes) until the close arrives, then fail.
    let r = run_ok(&[
        "--keys",
        "20",
        "--rps",
        "50",
        "--duration",
        "5s",
        "--ttl",
        "30s",
        "--warm",
        "20",
        "--instances",
        "1",
        "--redis-timeout",
        "5s",
        "--fault",
        "slow-close@1s+3500ms,server=redis,delay=1500ms",
        "--fault",
        "kill-redis@2s+500ms",
    ]);
    let max = r.f("/latency_ms/max");
    assert!((1_300.0..4_000.0).contains(&max), "max {max} ms");
    let close = r.json["faults"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "slow-close")
        .expect("the slow-close entry");
    assert_eq!(close["net"]["close_delay_ms"], 1500, "{close}");
    // Nothing waited out the 5 s deadline: the close, not the timeout, ended the waits.
    assert_eq!(close["net"]["redis_deadlines_waited"], 0, "{close}");
    assert!(r.u("/redis/errors") > 0, "{}", r.json["redis"]);
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));
}

#[test]
fn network_faults_refuse_what_they_cannot_strike() {
    for (args, needle) in [
        (&["--fault", "partition@1s+1s,instance=5"][..], "instance=5"),
        (&["--fault", "latency@1s+1s,factor=3"][..], "factor="),
        (
            &["--fault", "partition@1s+1s", "--redis-cluster"][..],
            "Redis Cluster",
        ),
        (&["--fault", "bandwidth@1s+1s"][..], "rate="),
    ] {
        let out = common::stampede()
            .arg("run")
            .args(args)
            .output()
            .expect("run stampede");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// The TCP ports a process listens on (IPv4 and IPv6), read from /proc.
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local address, state (0A: LISTEN), inode
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

#[test]
fn ctrl_c_during_a_partition_ends_the_run_and_leaves_no_proxy_listening() {
    crate::common::light_turns();
    // A partition holds the app's connections open with bytes held: the run must still end at
    // Ctrl-C, its proxies' listeners closed and its servers stopped.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let _turn = common::cpu_turn();
    // Killed on drop, so a failed assertion below leaves no run behind.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kill(
        common::stampede()
            .args([
                "run",
                "--keys",
                "50",
                "--rps",
                "50",
                "--duration",
                "30s",
                "--warm",
                "50",
                "--redis-client",
                "node-redis",
                "--fault",
                "partition@1s+25s,server=both",
                "--out",
            ])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    // The proxies listen (one per instance and server) once the run is set up.
    let ports = common::wait_for(
        "the proxies' listeners",
        std::time::Duration::from_secs(60),
        || {
            let p = listening_ports(pid);
            (p.len() >= 4).then_some(p)
        },
    );
    // Into the partition: requests are held in the proxies.
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the run did not end within 20 s of Ctrl-C"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still accepts after the run"
        );
    }
    let j = common::read_json(&out).expect("results written");
    common::assert_servers_gone(&j);
}

/// A Redis partition holds its commands to their deadline: the run printed a break-even
/// of 114.5% ("caching never pays off") from the partition's GETs and SETs. The break-even of
/// a run with a fault is read from the seconds outside it and its observation, and says so:
/// within 2× of the same run without the fault. A window under a fault throughout has none.
#[test]
fn a_partitions_commands_stay_out_of_the_break_even() {
    crate::common::light_turns();
    let base = [
        "--rps",
        "1000",
        "--duration",
        "6s",
        "--redis-rtt",
        "0.5ms",
        "--pg-rtt",
        "0.5ms",
        "--observe",
        "1s",
    ];
    let calm = run_ok(&base);
    let cut = run_ok(&[&base[..], &["--fault", "partition@2s+2s,server=redis"]].concat());
    let h = |r: &common::Run| r.f("/cost/break_even_hit_rate");
    let (a, b) = (h(&calm), h(&cut));
    println!(
        "break-even {a:.3} without the fault, {b:.3} with it: {}",
        cut.json["cost"]
    );
    assert!(calm.json["cost"].get("undisturbed").is_none());
    let from = cut.json["cost"]["undisturbed"].as_str().unwrap();
    // 0-2 s and 5-6 s, less the buckets stamped a moment late across a boundary.
    let secs: f64 = from
        .strip_prefix("the undisturbed ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{from}"));
    assert!((2.5..=3.0).contains(&secs), "{from}");
    assert!(
        from.contains("of the 6.0 s window") && from.contains("the partition from 2.0 s to 4.0 s"),
        "{from}"
    );
    assert!(b <= 2.0 * a && b >= a / 2.0, "{b} vs {a}");
    assert!(cut.json["cost"]["hit_rate"].as_f64().is_some());
    // The herd model says where its figures come from too.
    if let Some(m) = cut.json["db"]["herd_model"].as_object() {
        assert!(m["undisturbed"].as_str().is_some(), "{m:?}");
    }
    let all = run_ok(&[
        "--rps",
        "200",
        "--duration",
        "2s",
        "--observe",
        "1s",
        "--fault",
        "partition@0s+1s,server=redis",
    ]);
    assert!(all.json["cost"]["break_even_hit_rate"].is_null());
    let why = all.json["unknown"]["cost.undisturbed"].as_str().unwrap();
    assert!(
        why.starts_with("every second of the window was under a fault"),
        "{why}"
    );
}
