//! Runs against servers the user runs (`--redis-url`, `--pg-url`): the tool touches only its
//! own keys and its own schema, removes both afterwards, never flushes, and says so when the
//! server cannot count DB calls itself.

mod common;

use common::*;
use stampede::servers::{ManagedPostgres, ManagedRedis, postgres::PgStartOptions};

async fn redis_keys(url: &str) -> Vec<String> {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap()
}

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

#[tokio::test(flavor = "multi_thread")]
async fn external_servers_keep_their_own_data() {
    let redis = ManagedRedis::start().await.expect("redis");
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
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
    let r = tokio::task::spawn_blocking(move || {
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
        redis_keys(&redis.url()).await,
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
    let redis = ManagedRedis::start().await.expect("redis");
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
    // A fresh database where the extension was never created.
    pg(&pgs.url())
        .await
        .batch_execute("CREATE DATABASE nostats")
        .await
        .unwrap();
    let url = pgs.url().replace("/postgres", "/nostats");
    let ru = redis.url();
    let r = tokio::task::spawn_blocking(move || {
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
    let redis = ManagedRedis::start().await.expect("redis");
    let pgs = ManagedPostgres::start(PgStartOptions {
        max_connections: 20,
    })
    .await
    .expect("postgres");
    let (ru, pu) = (redis.url(), pgs.url());
    let r = tokio::task::spawn_blocking(move || {
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
