//! The managed cluster against real redis-server nodes: it forms, a killed primary's replica
//! is promoted and the killed node rejoins as its replica, a planned failover swaps roles, a
//! slot migration moves its keys while clients meet ASK, TLS holds between the nodes, and no
//! node or dir outlives the cluster, even when the process holding it is SIGKILLed.

use std::io::BufRead;
use std::time::{Duration, Instant};

use super::*;
use crate::cluster::*;
use crate::servers::test_support::pid_alive;

/// A promotion must come within this many node timeouts: failure detection (1×), the
/// majority's agreement, the election delay (0.5–1.5×) and the vote, with room for a busy
/// machine.
const PROMOTION_BOUND: u32 = 10;

async fn cluster_client(c: &ManagedCluster) -> redis::cluster_async::ClusterConnection {
    let mut builder = redis::cluster::ClusterClientBuilder::new(c.node_urls());
    if let Some(certs) = c.certs() {
        builder = builder.certs(redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(&certs.ca).expect("read CA")),
        });
    }
    builder
        .build()
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connection")
}

async fn view(c: &ManagedCluster, i: usize) -> Vec<ClusterNode> {
    cluster_nodes(&c.node_urls()[i], c.redis_tls())
        .await
        .expect("CLUSTER NODES")
}

fn url_of(c: &ManagedCluster, node: &ClusterNode) -> String {
    node_url(&c.node_urls()[0], &node.addr)
}

/// Keys in many slots: SET through the cluster client, GET back.
async fn set_get_spread(con: &mut redis::cluster_async::ClusterConnection, n: usize) {
    for i in 0..n {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query_async(con)
            .await
            .expect("SET");
    }
    for i in 0..n {
        let v: usize = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query_async(con)
            .await
            .expect("GET");
        assert_eq!(v, i);
    }
}

fn assert_gone(pids: &[u32], dirs: &[std::path::PathBuf]) {
    for pid in pids {
        assert!(!pid_alive(*pid), "node {pid} alive after drop");
    }
    for d in dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

#[tokio::test]
async fn forms_promotes_on_kill_and_rejoins() {
    let started = Instant::now();
    let mut c = ManagedCluster::start(ClusterShape::default(), false)
        .await
        .expect("3:1 cluster forms");
    eprintln!("3:1 cluster formed in {:?}", started.elapsed());
    assert_eq!(c.pids().len(), 6);
    assert!(c.url().starts_with("redis+cluster://127.0.0.1:"));
    assert_eq!(c.url().matches("127.0.0.1:").count(), 6);

    let nodes = view(&c, 3).await;
    let primaries: Vec<&ClusterNode> = nodes.iter().filter(|n| n.role == Role::Primary).collect();
    assert_eq!(primaries.len(), 3);
    assert_eq!(primaries.iter().map(|n| n.slot_count()).sum::<u32>(), 16384);
    for p in &primaries {
        let replicas = nodes
            .iter()
            .filter(|r| r.primary_id.as_deref() == Some(p.id.as_str()))
            .count();
        assert_eq!(replicas, 1, "{} has one replica", p.addr);
    }
    // Every bus on its own port, none at port + 10000.
    for n in &c.nodes {
        let bus = n.bus_port().expect("bus port");
        assert_ne!(bus, n.port());
    }

    let mut con = cluster_client(&c).await;
    set_get_spread(&mut con, 50).await;

    // Kill the primary serving slot 0; its replica must take over.
    let victim = primaries
        .iter()
        .find(|n| n.serves(0))
        .map(|n| (*n).clone())
        .expect("slot 0 served");
    let witness = primaries
        .iter()
        .find(|n| !n.serves(0))
        .map(|n| url_of(&c, n))
        .expect("another primary");
    let port = victim.port().expect("port");
    // A key the witness serves: what do its clients see while another primary is down?
    let witness_key = (0..)
        .map(|i| format!("w{i}"))
        .find(|k| {
            let slot = key_slot(k.as_bytes());
            primaries
                .iter()
                .any(|n| n.serves(slot) && url_of(&c, n) == witness)
        })
        .expect("a key of the witness");
    let probe = tokio::spawn({
        let (url, key) = (witness.clone(), witness_key.clone());
        async move {
            let client = redis::Client::open(url).expect("client");
            let mut con = client
                .get_multiplexed_async_connection()
                .await
                .expect("con");
            let (mut ok, mut down, mut first, mut last) = (0u32, 0u32, None, None);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(6) {
                let r: redis::RedisResult<Option<String>> =
                    redis::cmd("GET").arg(&key).query_async(&mut con).await;
                match r {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        assert_eq!(e.code(), Some("CLUSTERDOWN"), "{e}");
                        down += 1;
                        first.get_or_insert(t0.elapsed());
                        last = Some(t0.elapsed());
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ok, down, first, last)
        }
    });
    c.kill(port).expect("kill");
    let bound = ManagedCluster::node_timeout() * PROMOTION_BOUND;
    let promotion = wait_promotion(&witness, c.redis_tls(), &victim, bound)
        .await
        .expect("replica promoted");
    eprintln!(
        "promotion after a primary's SIGKILL: {:?} (node timeout {:?})",
        promotion.took,
        ManagedCluster::node_timeout()
    );
    let (ok, down, first, last) = probe.await.expect("probe");
    eprintln!(
        "a surviving primary's own key meanwhile: {ok} GETs answered, {down} refused with \
         CLUSTERDOWN, from {first:?} to {last:?} after the kill"
    );
    assert!(promotion.primary.serves(0));
    assert!(promotion.took >= ManagedCluster::node_timeout() / 2);
    // Data replicated before the kill is served by the promoted replica.
    let mut con = cluster_client(&c).await;
    set_get_spread(&mut con, 50).await;

    // Restart the killed node: it comes back as a replica of the promoted one.
    let started = Instant::now();
    c.restart(port).await.expect("restart");
    let restarted = started.elapsed();
    let me = c
        .wait_joined(port, Duration::from_secs(20))
        .await
        .expect("rejoins");
    eprintln!(
        "killed primary restarted in {restarted:?}, then rejoined as a synced replica in {:?}",
        started.elapsed() - restarted
    );
    assert_eq!(me.role, Role::Replica);
    assert_eq!(
        me.primary_id.as_deref(),
        Some(promotion.primary.id.as_str())
    );
    assert_eq!(me.id, victim.id, "same node id, from its nodes.conf");

    let (pids, dirs) = (c.pids(), c.dirs());
    drop(c);
    assert_gone(&pids, &dirs);
}

#[tokio::test]
async fn failover_swaps_roles_and_migration_meets_ask() {
    let c = ManagedCluster::start(ClusterShape::default(), false)
        .await
        .expect("cluster forms");
    let tls = c.redis_tls().clone();

    // Planned failover: the replica of the primary serving slot 0 takes over.
    let nodes = view(&c, 0).await;
    let primary = nodes.iter().find(|n| n.serves(0)).expect("slot 0").clone();
    let replica = nodes
        .iter()
        .find(|n| n.primary_id.as_deref() == Some(primary.id.as_str()))
        .expect("its replica")
        .clone();
    let took = failover(&url_of(&c, &replica), &tls, Duration::from_secs(10))
        .await
        .expect("failover");
    eprintln!("planned CLUSTER FAILOVER took {took:?}");
    // The failover is over once the replica serves as a primary; the old primary learns it
    // from the new one's next message, a moment later: its own view is read until it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let old = loop {
        let after = cluster_nodes(&url_of(&c, &primary), &tls)
            .await
            .expect("view");
        let old = after
            .iter()
            .find(|n| n.id == primary.id)
            .expect("old primary")
            .clone();
        if old.role == Role::Replica || std::time::Instant::now() >= deadline {
            break old;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(old.role, Role::Replica, "roles swapped");
    assert_eq!(old.primary_id.as_deref(), Some(replica.id.as_str()));

    // Migration of a slot holding 40 keys, slowly, while clients read them.
    let keys: Vec<String> = (0..40).map(|i| format!("{{hot}}:{i}")).collect();
    let slot = key_slot(keys[0].as_bytes());
    let mut con = cluster_client(&c).await;
    for k in &keys {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg(k)
            .query_async(&mut con)
            .await
            .expect("SET");
    }
    let nodes = view(&c, 0).await;
    let source = nodes
        .iter()
        .find(|n| n.role == Role::Primary && n.serves(slot))
        .expect("owner")
        .clone();
    let target = nodes
        .iter()
        .find(|n| n.role == Role::Primary && !n.serves(slot))
        .expect("another primary")
        .clone();
    let (source_url, target_url) = (url_of(&c, &source), url_of(&c, &target));
    let before = node_stats(&source_url, &tls).await.expect("stats");
    let options = MigrateOptions {
        batch: 2,
        step_pause: Duration::from_millis(50),
        ..MigrateOptions::default()
    };
    let migration = tokio::spawn({
        let (s, t, tls) = (source_url.clone(), target_url.clone(), tls.clone());
        async move { migrate_slot(slot, &s, &t, &tls, options).await }
    });

    // Meanwhile: GETs of every key through the cluster client (each must find its value),
    // and GETs straight to the source, which answers ASK for keys already moved.
    let client = crate::tls::redis_client(&source_url, &tls).expect("client");
    let mut direct = client
        .get_multiplexed_async_connection()
        .await
        .expect("source");
    let (mut reads, mut asked) = (0u64, 0u64);
    while !migration.is_finished() {
        for k in &keys {
            let v: String = redis::cmd("GET")
                .arg(k)
                .query_async(&mut con)
                .await
                .expect("GET via cluster");
            assert_eq!(&v, k);
            reads += 1;
            let r: redis::RedisResult<Option<String>> =
                redis::cmd("GET").arg(k).query_async(&mut direct).await;
            match r {
                Ok(_) => {}
                Err(e) if e.code() == Some("ASK") => asked += 1,
                // The migration ended during this round.
                Err(e) => assert_eq!(e.code(), Some("MOVED"), "{e}"),
            }
        }
    }
    let report = migration.await.expect("join").expect("migration");
    eprintln!(
        "migrated slot {slot}: {} keys in {} batches, {:?}; {reads} reads through the cluster \
         client meanwhile, {asked} direct GETs answered ASK",
        report.keys, report.batches, report.took
    );
    assert_eq!(report.keys, 40);
    let after = node_stats(&source_url, &tls).await.expect("stats");
    assert!(
        asked > 0 && after.ask > before.ask,
        "ASK counted: {after:?}"
    );
    // The keys live on the target now, and every node says so.
    let tv = cluster_nodes(&target_url, &tls).await.expect("view");
    assert!(tv.iter().find(|n| n.myself).expect("me").serves(slot));
    let count: u64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query_async(
            &mut crate::tls::redis_client(&target_url, &tls)
                .expect("client")
                .get_multiplexed_async_connection()
                .await
                .expect("target"),
        )
        .await
        .expect("COUNTKEYSINSLOT");
    assert_eq!(count, 40);
    for k in &keys {
        let v: String = redis::cmd("GET")
            .arg(k)
            .query_async(&mut con)
            .await
            .expect("GET after");
        assert_eq!(&v, k);
    }
    // The source now answers MOVED for the slot.
    let r: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg(&keys[0])
        .query_async(&mut direct)
        .await;
    assert_eq!(r.expect_err("moved").code(), Some("MOVED"));
    assert!(node_stats(&source_url, &tls).await.expect("stats").moved > before.moved);

    // A primary back before its node timeout ran out is not replaced: it comes back as the
    // primary of its slots, empty, and its replica follows it into emptiness.
    let mut c = c;
    let port = target.port().expect("port");
    let started = Instant::now();
    c.kill(port).expect("kill");
    c.restart(port).await.expect("restart");
    let me = c
        .wait_joined(port, Duration::from_secs(20))
        .await
        .expect("rejoins");
    eprintln!(
        "primary killed and restarted at once: ok again after {:?}, as {:?}",
        started.elapsed(),
        me.role
    );
    assert_eq!(me.role, Role::Primary);
    assert!(me.serves(slot));
    let v: Option<String> = redis::cmd("GET")
        .arg(&keys[0])
        .query_async(&mut con)
        .await
        .expect("GET after the restart");
    assert_eq!(v, None, "the restarted primary is empty");
}

#[tokio::test]
async fn tls_cluster_forms_and_serves() {
    let shape: ClusterShape = "3:0".parse().expect("shape");
    let c = ManagedCluster::start(shape, true)
        .await
        .expect("TLS cluster forms");
    assert!(c.url().starts_with("rediss+cluster://"));
    assert!(c.node_urls().iter().all(|u| u.starts_with("rediss://")));
    let mut con = cluster_client(&c).await;
    set_get_spread(&mut con, 20).await;
    // MIGRATE goes over TLS between the nodes too (tls-cluster).
    let slot = key_slot(b"k0");
    let nodes = view(&c, 0).await;
    let source = nodes.iter().find(|n| n.serves(slot)).expect("owner");
    let target = nodes.iter().find(|n| !n.serves(slot)).expect("another");
    let report = migrate_slot(
        slot,
        &url_of(&c, source),
        &url_of(&c, target),
        c.redis_tls(),
        MigrateOptions::default(),
    )
    .await
    .expect("migration over TLS");
    assert_eq!(report.keys, 1);
    let v: usize = redis::cmd("GET")
        .arg("k0")
        .query_async(&mut con)
        .await
        .expect("GET k0");
    assert_eq!(v, 0);
    // No plain port: a client without TLS gets nowhere.
    let plain = c.node_urls()[0].replacen("rediss://", "redis://", 1);
    assert!(cluster_state(&plain, &RedisTls::default()).await.is_err());
    let (pids, dirs) = (c.pids(), c.dirs());
    drop(c);
    assert_gone(&pids, &dirs);
}

/// A cluster whose nodes want a user and a password (as an external one may): the topology
/// functions log in with the URL's credentials, MIGRATE passes them on (AUTH2), and the
/// other primaries are reached with them too.
#[tokio::test]
async fn migration_with_acl_users() {
    let c = ManagedCluster::start("3:0".parse().expect("shape"), false)
        .await
        .expect("cluster forms");
    let mut con = cluster_client(&c).await;
    set_get_spread(&mut con, 10).await;
    for url in c.node_urls() {
        let client = redis::Client::open(url.as_str()).expect("client");
        let mut n = client
            .get_multiplexed_async_connection()
            .await
            .expect("node");
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "mover", "on", ">s3cret", "~*", "&*", "+@all"][..])
            .query_async(&mut n)
            .await
            .expect("ACL SETUSER mover");
        // From now on nobody gets in without a password.
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "default", "resetpass", ">other"][..])
            .query_async(&mut n)
            .await
            .expect("ACL SETUSER default");
    }
    let with_user = |u: &str| u.replacen("redis://", "redis://mover:s3cret@", 1);
    let urls: Vec<String> = c.node_urls().iter().map(|u| with_user(u)).collect();
    let tls = RedisTls::default();
    assert!(
        cluster_nodes(&c.node_urls()[0], &tls).await.is_err(),
        "no password, no answer"
    );
    let slot = key_slot(b"k1");
    let view = cluster_nodes(&urls[0], &tls)
        .await
        .expect("view with the user");
    let source = view.iter().find(|n| n.serves(slot)).expect("owner");
    let target = view.iter().find(|n| !n.serves(slot)).expect("another");
    let report = migrate_slot(
        slot,
        &node_url(&urls[0], &source.addr),
        &node_url(&urls[0], &target.addr),
        &tls,
        MigrateOptions::default(),
    )
    .await
    .expect("migration with AUTH2");
    assert_eq!(report.keys, 1);
    // Every node, the third primary included, knows the new owner.
    for url in &urls {
        let v = cluster_nodes(url, &tls).await.expect("view");
        let owner = v.iter().find(|n| n.serves(slot)).expect("owner");
        assert_eq!(owner.id, target.id, "seen from {url}");
    }
    let stats = node_stats(&node_url(&urls[0], &target.addr), &tls)
        .await
        .expect("stats with the user");
    assert!(stats.total_commands_processed > 0);
}

/// Not a test on its own: the process the SIGKILL test kills. It prints its cluster's pids
/// and dirs and waits to be killed.
#[tokio::test]
#[ignore = "run by sigkill_of_the_holder_leaves_nothing"]
async fn holder() {
    if std::env::var_os("STAMPEDE_CLUSTER_HOLDER").is_none() {
        return;
    }
    let c = ManagedCluster::start("3:0".parse().expect("shape"), false)
        .await
        .expect("cluster forms");
    let pids: Vec<String> = c.pids().iter().map(u32::to_string).collect();
    println!("HOLDER pids {}", pids.join(" "));
    let dirs: Vec<String> = c.dirs().iter().map(|d| d.display().to_string()).collect();
    println!("HOLDER dirs {}", dirs.join(" "));
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// A process and its start time, so a reused pid is never taken for it.
fn start_time(pid: u32) -> Option<(u64, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(19)?.parse().ok()?, f.first()?.chars().next()?))
}

/// Kills what the holder left, if the test fails: only redis-server processes running from
/// this test's own temp dir.
struct Leftovers(Vec<u32>, std::path::PathBuf);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let ours = std::fs::read_link(format!("/proc/{pid}/cwd"))
                .is_ok_and(|cwd| cwd.starts_with(&self.1));
            if ours {
                // SAFETY: kill(2) on a server this test's child started, checked just above.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigkill_of_the_holder_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("private TMPDIR");
    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "cluster::managed::tests::holder",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STAMPEDE_CLUSTER_HOLDER", "1")
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn holder");
    let mut child = KillOnDrop(child);
    let out = child.0.stdout.take().expect("stdout");
    let (mut pids, mut dirs) = (Vec::<u32>::new(), Vec::<std::path::PathBuf>::new());
    for line in std::io::BufReader::new(out).lines() {
        let line = line.expect("read holder");
        // libtest prints the test's name on the same line first.
        let line = line.find("HOLDER ").map_or("", |at| &line[at..]);
        if let Some(p) = line.strip_prefix("HOLDER pids ") {
            pids = p.split(' ').map(|p| p.parse().expect("pid")).collect();
        } else if let Some(d) = line.strip_prefix("HOLDER dirs ") {
            dirs = d.split(' ').map(Into::into).collect();
            break;
        }
    }
    assert_eq!(pids.len(), 3, "holder printed its nodes");
    let _leftovers = Leftovers(pids.clone(), tmp.path().to_owned());
    let starts: Vec<_> = pids
        .iter()
        .map(|&p| start_time(p).expect("node runs").0)
        .collect();
    assert!(dirs.iter().all(|d| d.starts_with(tmp.path()) && d.exists()));

    child.0.kill().expect("SIGKILL the holder");
    let _ = child.0.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    let alive = |i: usize| {
        start_time(pids[i]).is_some_and(|(start, state)| start == starts[i] && state != 'Z')
    };
    while Instant::now() < deadline
        && ((0..pids.len()).any(alive) || dirs.iter().any(|d| d.exists()))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, pid) in pids.iter().enumerate() {
        assert!(!alive(i), "node {pid} outlived the SIGKILLed holder by 5 s");
    }
    for d in &dirs {
        assert!(
            !d.exists(),
            "{} outlived the SIGKILLed holder by 5 s",
            d.display()
        );
    }
}

#[test]
fn shapes_parse_and_refuse_with_the_flag_named() {
    let s: ClusterShape = "3".parse().expect("3");
    assert_eq!((s.primaries, s.replicas), (3, 1), "one replica by default");
    assert_eq!(s.nodes(), 6);
    let s: ClusterShape = " 5:2 ".parse().expect("5:2");
    assert_eq!((s.primaries, s.replicas, s.nodes()), (5, 2, 15));
    assert_eq!(s.to_string(), "5:2");
    assert_eq!("3:0".parse::<ClusterShape>().expect("3:0").nodes(), 3);
    assert_eq!(ClusterShape::default().to_string(), "3:1");
    for (bad, why) in [
        ("2", "at least 3 primaries"),
        ("2:1", "at least 3 primaries"),
        ("11:2", "too many nodes"),
        ("30:0", ""),
        ("x", "P is not a whole number"),
        ("3:", "R is not a whole number"),
        ("3:-1", "R is not a whole number"),
        ("", "P is not a whole number"),
    ] {
        let r = bad.parse::<ClusterShape>();
        if bad == "30:0" {
            assert!(r.is_ok(), "30 nodes is the most, and allowed");
            continue;
        }
        let msg = r.expect_err(bad).to_string();
        assert!(
            msg.contains("--redis-cluster") && msg.contains(why),
            "{msg}"
        );
        assert!(msg.contains("P or P:R"), "{msg}");
    }
    // As a scenario file writes it.
    let s: ClusterShape = serde_json::from_str("\"4:1\"").expect("from a string");
    assert_eq!(serde_json::to_string(&s).expect("to"), "\"4:1\"");
    assert!(serde_json::from_str::<ClusterShape>("\"1:1\"").is_err());
}
