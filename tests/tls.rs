//! Running against servers set up as in production: TLS to both servers (the managed ones
//! started with `--tls`, and external ones with a CA given), certificates that do not verify,
//! a Redis ACL user without a command the strategy needs, and the team's own query with a
//! read-only role on a table of theirs (nothing created in that database).

mod common;

use common::*;
use stampede::servers::{ManagedPostgres, ManagedRedis, postgres::PgStartOptions};

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// `--tls`: both managed servers speak TLS with certificates made for the run, verified
/// against the run's CA, and the figures are those of a normal run.
#[test]
fn a_run_over_tls_to_both_managed_servers_verifies_the_ca() {
    let r = run_ok(&[
        "--tls",
        "--rps",
        "1000",
        "--duration",
        "2s",
        "--keys",
        "500",
        "--db-cost",
        "2ms",
    ]);
    assert_eq!(r.json["servers"]["tls"], true, "{}", r.json["servers"]);
    let redis_url = r.json["servers"]["redis_url"].as_str().unwrap();
    let pg_url = r.json["servers"]["pg_url"].as_str().unwrap();
    assert!(redis_url.starts_with("rediss://"), "{redis_url}");
    assert!(pg_url.contains("sslmode=verify-full"), "{pg_url}");
    assert!(pg_url.contains("sslrootcert="), "{pg_url}");
    r.assert_counts_add_up();
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    assert_eq!(r.u("/redis/errors"), 0);
    assert!(r.u("/db/calls") > 0);
    assert_eq!(r.u("/db/calls_server"), r.u("/db/calls"));
    assert_servers_gone(&r.json);
}

/// Another CA than the one that signed the servers' certificates: exit 3, naming the
/// certificate problem, the name checked and the CA file; likewise for Postgres; and a
/// redis:// URL to a TLS-only server says the server wants TLS.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_ca_or_no_tls_is_refused_with_the_reason() {
    let redis = ManagedRedis::start_with(true).await.expect("redis");
    let pgs = ManagedPostgres::start_with(PgStartOptions::default(), true)
        .await
        .expect("postgres");
    let other = tempfile::tempdir().unwrap();
    let wrong = stampede::tls::generate_run_certs(other.path()).unwrap().ca;
    let wrong = wrong.display().to_string();
    let right_ca = redis.certs().unwrap().ca.display().to_string();
    let (ru, pu) = (redis.url(), pgs.url());

    // The right CA and a client certificate signed by it: the run goes through, over TLS.
    let certs = redis.certs().unwrap().clone();
    let (ru2, pu2) = (ru.clone(), pu.clone());
    let r = tokio::task::spawn_blocking(move || {
        let path = |p: &std::path::Path| p.display().to_string();
        run(&[
            "--redis-url",
            &ru2,
            "--redis-ca",
            &path(&certs.ca),
            "--redis-cert",
            &path(&certs.client_cert),
            "--redis-key",
            &path(&certs.client_key),
            "--pg-url",
            &pu2,
            "--duration",
            "1s",
            "--rps",
            "300",
            "--keys",
            "100",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.json["servers"]["tls"], true);

    let (ru2, pu2, w) = (ru.clone(), pu.clone(), wrong.clone());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--redis-url",
            &ru2,
            "--redis-ca",
            &w,
            "--pg-url",
            &pu2,
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    let e = r.stderr();
    assert!(e.contains("does not verify"), "{e}");
    assert!(e.contains("invalid peer certificate: UnknownIssuer"), "{e}");
    assert!(e.contains("for the name 127.0.0.1"), "{e}");
    assert!(e.contains(&wrong), "{e}");

    // Postgres: the right Redis CA, the wrong sslrootcert.
    let bad_pg = pu.replace(&pgs.certs().unwrap().ca.display().to_string(), &wrong);
    let (ru2, c) = (ru.clone(), right_ca.clone());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--redis-url",
            &ru2,
            "--redis-ca",
            &c,
            "--pg-url",
            &bad_pg,
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    let e = r.stderr();
    assert!(e.contains("TLS certificate of Postgres"), "{e}");
    assert!(e.contains("does not verify for the name 127.0.0.1"), "{e}");
    assert!(e.contains(&wrong), "{e}");

    // Postgres without TLS where the server accepts TCP over TLS only.
    let plain_pg = format!(
        "postgres://stampede@127.0.0.1:{}/postgres?sslmode=disable",
        pgs.port()
    );
    let (ru2, c) = (ru.clone(), right_ca.clone());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--redis-url",
            &ru2,
            "--redis-ca",
            &c,
            "--pg-url",
            &plain_pg,
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(r.stderr().contains("it wants TLS"), "{}", r.stderr());

    // Redis without TLS on a TLS-only port.
    let plain = format!("redis://127.0.0.1:{}/", redis.port());
    let pu2 = pu.clone();
    let r = tokio::task::spawn_blocking(move || {
        run(&["--redis-url", &plain, "--pg-url", &pu2, "--duration", "1s"])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(
        r.stderr().contains("wants TLS and the URL has none"),
        "{}",
        r.stderr()
    );
}

/// An ACL user that may not run EVALSHA (the mutex releases its lock with a script): the run
/// stops before traffic, naming the command, and the password is never printed.
#[tokio::test(flavor = "multi_thread")]
async fn an_acl_user_without_evalsha_gets_a_clear_error_under_mutex() {
    let redis = ManagedRedis::start().await.expect("redis");
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "app",
            "on",
            ">s3cret-pw",
            "~*",
            "+@all",
            "-evalsha",
        ])
        .query_async(&mut c)
        .await
        .unwrap();
    let port = redis.port();
    let acl_url = format!("redis://app:s3cret-pw@127.0.0.1:{port}/");
    let pu = pgs.url();
    let (u, p) = (acl_url.clone(), pu.clone());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--strategy",
            "mutex",
            "--redis-url",
            &u,
            "--pg-url",
            &p,
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    let e = r.stderr();
    assert!(e.contains("may not run EVALSHA"), "{e}");
    assert!(e.contains("--strategy mutex"), "{e}");
    assert!(!e.contains("s3cret-pw"), "password printed: {e}");

    // The same user is enough for cache-aside, and the password is redacted in the result.
    let (u, p) = (acl_url.clone(), pu.clone());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--redis-url",
            &u,
            "--pg-url",
            &p,
            "--duration",
            "1s",
            "--rps",
            "500",
            "--keys",
            "100",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(!r.json.to_string().contains("s3cret-pw"));
    assert!(!r.stderr().contains("s3cret-pw"));
}

/// `--db-sql` with a read-only role on a table the test creates: the loads are that query,
/// the server counts exactly the calls the tool counts, and the database's catalog is the
/// same after the run as before it.
#[tokio::test(flavor = "multi_thread")]
async fn db_sql_with_a_read_only_role_creates_nothing() {
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
    let admin = pg(&pgs.url()).await;
    admin
        .batch_execute(
            "CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL);
             INSERT INTO products SELECT g, 'product ' || g, g * 1.5 FROM generate_series(1, 300) g;
             CREATE ROLE reader LOGIN;
             GRANT SELECT ON products TO reader;",
        )
        .await
        .unwrap();
    let catalog = "SELECT (SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_class), \
                   (SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_namespace), \
                   (SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_proc)";
    let before = admin.query_one(catalog, &[]).await.unwrap();
    let before: (String, String, String) = (before.get(0), before.get(1), before.get(2));

    let ro = format!("postgres://reader@127.0.0.1:{}/postgres", pgs.port());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--pg-url",
            &ro,
            "--db-sql",
            "SELECT name, price FROM products WHERE id = $1",
            "--keys-sql",
            "SELECT id FROM products ORDER BY id",
            "--rps",
            "1000",
            "--duration",
            "2s",
            "--ttl",
            "500ms",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 0, "{}", r.stderr());
    r.assert_counts_add_up();
    assert_eq!(r.u("/scenario/keys"), 300);
    assert_eq!(r.json["scenario"]["start"], "cold");
    assert_eq!(r.u("/requests/errors"), 0, "{}", r.stderr());
    let calls = r.u("/db/calls");
    // Cold start with a 500 ms TTL over 300 keys: every key's first request misses.
    assert!(calls >= 100, "{calls}");
    assert_eq!(r.u("/db/calls_server"), calls);
    assert_eq!(r.u("/outcomes/miss"), calls);

    let after = admin.query_one(catalog, &[]).await.unwrap();
    let after: (String, String, String) = (after.get(0), after.get(1), after.get(2));
    assert_eq!(before, after, "the run created or dropped something");

    // A query that does not take exactly one parameter is refused, naming the count.
    let ro = format!("postgres://reader@127.0.0.1:{}/postgres", pgs.port());
    let r = tokio::task::spawn_blocking(move || {
        run(&[
            "--pg-url",
            &ro,
            "--db-sql",
            "SELECT name FROM products WHERE id = $1 AND price > $2",
            "--keys-sql",
            "SELECT id FROM products",
            "--duration",
            "1s",
        ])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("exactly one parameter") && r.stderr().contains("takes 2"),
        "{}",
        r.stderr()
    );
}

/// `--keys-sql` and `--db-sql` run in read-only transactions, so "creates nothing" is the
/// server's to enforce, even for a role that may write: a query that writes is refused with
/// exit 2 and the reason, and the database is as it was.
#[tokio::test(flavor = "multi_thread")]
async fn keys_sql_and_db_sql_that_write_are_refused_by_the_server() {
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
    let admin = pg(&pgs.url()).await;
    admin
        .batch_execute(
            "CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
             INSERT INTO products SELECT g, 'product ' || g FROM generate_series(1, 50) g;
             CREATE SEQUENCE hits;",
        )
        .await
        .unwrap();
    // The server's own superuser: it could write anything, the transaction may not.
    let url = pgs.url();
    let cases = [
        (
            "SELECT name FROM products WHERE id = $1",
            "INSERT INTO products VALUES (1000, 'planted') RETURNING id",
            "--keys-sql",
        ),
        (
            "SELECT name FROM products WHERE id = $1",
            "CREATE TABLE planted (id int); SELECT id FROM products",
            "--keys-sql",
        ),
        (
            "SELECT nextval('hits') AS n WHERE $1::int > 0",
            "SELECT id FROM products ORDER BY id",
            "--db-sql",
        ),
    ];
    for (db_sql, keys_sql, flag) in cases {
        let u = url.clone();
        let r = tokio::task::spawn_blocking(move || {
            run(&[
                "--pg-url",
                &u,
                "--db-sql",
                db_sql,
                "--keys-sql",
                keys_sql,
                "--rps",
                "100",
                "--duration",
                "1s",
            ])
        })
        .await
        .unwrap();
        assert_eq!(r.code(), 2, "{keys_sql} / {db_sql}: {}", r.stderr());
        let err = r.stderr();
        assert!(
            err.contains(flag) && err.contains("read-only transaction"),
            "{flag}: {err}"
        );
        assert!(err.contains("must only read"), "{err}");
    }
    let n: i64 = admin
        .query_one("SELECT count(*) FROM products", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 50, "a row was inserted");
    let planted: bool = admin
        .query_one("SELECT to_regclass('planted') IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!planted, "a table was created");
    let called: bool = admin
        .query_one("SELECT is_called FROM hits", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!called, "the sequence was advanced");
}

/// A redis-server this test starts itself (cluster mode is not something the tool starts),
/// killed and reaped when dropped, also when the test fails.
struct OwnRedis {
    child: std::process::Child,
    /// Its working dir, removed with it.
    _dir: tempfile::TempDir,
    port: u16,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cluster_node() -> OwnRedis {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    let node = OwnRedis {
        child,
        _dir: dir,
        port,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "cluster node did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    node
}

/// Redis Cluster is not supported: pointed at a cluster node, the run stops before traffic
/// and says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_node_is_refused_with_that_message() {
    let node = cluster_node();
    let pgs = ManagedPostgres::start(PgStartOptions::default())
        .await
        .expect("postgres");
    let (ru, pu) = (format!("redis://127.0.0.1:{}/", node.port), pgs.url());
    let r = tokio::task::spawn_blocking(move || {
        run(&["--redis-url", &ru, "--pg-url", &pu, "--duration", "1s"])
    })
    .await
    .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(
        r.stderr().contains("Redis Cluster is not supported yet"),
        "{}",
        r.stderr()
    );
    drop(node);
}
