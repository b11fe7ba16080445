//! Runs against servers the user runs (`--redis-url`, `--pg-url`): the tool touches only its
//! own keys and its own schema, removes both afterwards, never flushes, and says so when the
//! server cannot count DB calls itself.

use crate::common;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn external_servers_keep_their_own_data() {
    let servers = Servers::start(None).await;
    let (redis, pgs) = (&servers.redis, &servers.pg);
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("someone-elses-key")
        .arg("keep me")
        .query_async(&mut c)
        .await
        .unwrap();
    let admin = pg(&pgs.url()).await;
    admin
        .batch_execute("CREATE TABLE public.theirs (x int); INSERT INTO public.theirs VALUES (1)")
        .await
        .unwrap();

    let (ru, pu) = (redis.url(), pgs.url());
    let r = spawn_blocking(move || {
        run_ok(&[
            "--redis-url",
            &ru,
            "--pg-url",
            &pu,
            "--rps",
            "500",
            "--duration",
            "2s",
            "--keys",
            "100",
            "--db-cost",
            "1ms",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.json["servers"]["managed"], false);
    assert!(r.json["servers"]["redis_pid"].is_null());
    assert!(r.u("/db/calls") > 0);
    assert_eq!(r.u("/db/calls"), r.u("/db/calls_server"));

    // Only the other client's key is left: the run removed its own namespace, flushed nothing.
    assert_eq!(
        redis_keys(&redis.url(), "*").await,
        vec!["someone-elses-key".to_string()]
    );
    let schemas: Vec<String> = admin
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'stampede%'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        schemas.is_empty(),
        "the run's schema was left behind: {schemas:?}"
    );
    let n: i64 = admin
        .query_one("SELECT count(*) FROM public.theirs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_pg_stat_statements_the_server_count_is_null_and_explained() {
    let servers = Servers::start(None).await;
    let (redis, pgs) = (&servers.redis, &servers.pg);
    // A fresh database where the extension was never created.
    pg(&pgs.url())
        .await
        .batch_execute("CREATE DATABASE nostats")
        .await
        .unwrap();
    let url = pgs.url().replace("/postgres", "/nostats");
    let ru = redis.url();
    let r = spawn_blocking(move || {
        run_ok(&[
            "--redis-url",
            &ru,
            "--pg-url",
            &url,
            "--rps",
            "200",
            "--duration",
            "1s",
            "--keys",
            "50",
            "--db-cost",
            "1ms",
        ])
    })
    .await
    .unwrap();
    assert!(r.json["db"]["calls_server"].is_null());
    let note = r.json["db"]["calls_server_note"]
        .as_str()
        .expect("a note says why");
    assert!(note.contains("pg_stat_statements"), "{note}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_larger_than_the_server_allows_are_refused_before_anything_is_created() {
    let servers = Servers::start(Some(20)).await;
    let (redis, pgs) = (&servers.redis, &servers.pg);
    let (ru, pu) = (redis.url(), pgs.url());
    let r = spawn_blocking(move || {
        run(&[
            "--redis-url",
            &ru,
            "--pg-url",
            &pu,
            "--instances",
            "2",
            "--db-pool",
            "16",
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("32 database connections"),
        "{}",
        r.stderr()
    );
    // Nothing was created: no schema of the run on the server.
    let admin = pg(&pgs.url()).await;
    let n: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'stampede_%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

/// A run that fails after its schema exists (here: Redis refuses the connection the run opens
/// once the schema is seeded) removes the schema on its way out: the run space is a guard.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_fails_after_seeding_leaves_no_schema() {
    let servers = Servers::start(None).await;
    let pu = servers.pg.url();
    // Nothing listens there: the port was free a moment ago and is not bound again.
    let ru = format!("redis://127.0.0.1:{}", free_port());
    let r = spawn_blocking(move || {
        run(&[
            "--redis-url",
            &ru,
            "--pg-url",
            &pu,
            "--duration",
            "1s",
            "--keys",
            "100",
        ])
    })
    .await
    .unwrap();
    assert_ne!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("cannot connect to Redis"),
        "{}",
        r.stderr()
    );
    let admin = pg(&servers.pg.url()).await;
    let n: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'stampede_%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "the failed run's schema was left behind");
}

/// A run on external servers killed outright (SIGKILL) leaves its keys and schema; `stampede
/// cleanup` removes those once the run's heartbeat is gone, and never a live run's.
#[tokio::test(flavor = "multi_thread")]
async fn cleanup_removes_a_killed_runs_leftovers_and_nothing_of_a_live_run() {
    let servers = Servers::start(None).await;
    let (redis, pgs) = (&servers.redis, &servers.pg);
    let (ru, pu) = (redis.url(), pgs.url());
    let spawn = |secs: &str| {
        stampede()
            .args(["run", "--redis-url", &ru, "--pg-url", &pu, "--rps", "200"])
            // Keys that outlive the wait below (the cache's own TTL would remove them).
            .args([
                "--keys",
                "100",
                "--ttl",
                "1h",
                "--duration",
                secs,
                "--quiet",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut doomed = Kill(spawn("60s"));
    let live = Kill(spawn("60s"));
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    doomed.0.kill().unwrap();
    doomed.0.wait().unwrap();
    let schemas = |pu: String| async move {
        let admin = pg(&pu).await;
        admin
            .query(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stampede\\_%' ORDER BY 1",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<String>>()
    };
    let namespaces = |keys: Vec<String>| {
        let mut v: Vec<String> = keys
            .iter()
            .filter_map(|k| k.split(':').nth(1).map(str::to_string))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(schemas(pu.clone()).await.len(), 2, "both runs' schemas");
    assert_eq!(
        namespaces(redis_keys(&ru, "*").await).len(),
        2,
        "both runs' keys"
    );
    // The killed run's heartbeat lasts 5 s in Redis; its schema's is judged with --older-than.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let o = stampede()
        .args([
            "cleanup",
            "--redis-url",
            &ru,
            "--pg-url",
            &pu,
            "--older-than",
            "5s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("removed") && text.contains("dropped"),
        "{text}"
    );
    assert_eq!(
        schemas(pu.clone()).await.len(),
        1,
        "only the live run's schema is left"
    );
    assert_eq!(
        namespaces(redis_keys(&ru, "*").await).len(),
        1,
        "only the live run's keys"
    );
    drop(live);
}

/// A Postgres that stops answering for longer than the Redis heartbeat's 5 s life: the run
/// renews each heartbeat on its own, so its Redis key never lapses and a `cleanup` meanwhile
/// removes nothing of it; the run says its Postgres heartbeat could not be renewed, and its
/// result has the gaps.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_postgres_does_not_let_cleanup_take_a_live_run_for_dead() {
    let servers = Servers::start(None).await;
    let (ru, pu) = servers.urls();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Cached for the whole run (steady start, 1 h TTL): the stall holds up no request.
    let mut live = Kill(
        stampede()
            .args(["run", "--redis-url", &ru, "--pg-url", &pu, "--rps", "200"])
            .args([
                "--keys",
                "100",
                "--ttl",
                "1h",
                "--duration",
                "20s",
                "--quiet",
            ])
            .arg("--out")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap(),
    );
    // The run's cached items and its heartbeat (its access check's key expires by itself).
    let ns_keys = |ru: String| async move {
        redis_keys(&ru, "stampede:*")
            .await
            .into_iter()
            .filter(|k| k.starts_with("stampede:") && !k.ends_with(":preflight"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while ns_keys(ru.clone()).await < 100 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never cached its keys"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let before = ns_keys(ru.clone()).await;
    {
        let _stalled = Stopped::tree(servers.pg.pid().expect("running"));
        // Longer than the Redis heartbeat lives without a renewal.
        tokio::time::sleep(std::time::Duration::from_secs(7)).await;
        let r2 = ru.clone();
        let (code, text) = spawn_blocking(move || cleanup(&["--redis-url", &r2]))
            .await
            .unwrap();
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("no dead run's keys"), "{text}");
        assert!(
            ns_keys(ru.clone()).await >= before,
            "the live run's keys went"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = live.0.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("could not renew this run's heartbeat in Postgres: no answer within 1.5 s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("heartbeat in Postgres is renewed again, after"),
        "{stderr}"
    );
    assert!(!stderr.contains("heartbeat in Redis"), "{stderr}");
    let json = read_json(&out).expect("the result");
    let hb = &json["servers"]["heartbeat"];
    let gap = |k: &str| hb[k].as_u64().unwrap_or_else(|| panic!("{k} in {hb}"));
    assert!(gap("redis_longest_gap_ms") < 5000, "{hb}");
    assert!(gap("postgres_longest_gap_ms") >= 7000, "{hb}");
    assert!(hb["failed_renewals"].as_u64().unwrap() >= 3, "{hb}");
    let note = hb["note"].as_str().unwrap_or_default();
    assert!(note.contains("the Postgres heartbeat went"), "{hb}");
    assert!(!note.contains("Redis heartbeat"), "{hb}");
    // Nothing of the run is left.
    assert!(ns_keys(ru.clone()).await == 0);
}
