//! Running against servers set up as in production: TLS to both servers (the managed ones
//! started with `--tls`, and external ones with a CA given), certificates that do not verify,
//! every connection of shards, app runs and `cleanup` following the same TLS settings,
//! Postgres's verify-ca and verify-full told apart, warnings where nothing is verified, a
//! Redis ACL user without a command the strategy needs, and the team's own query with a
//! read-only role on a table of theirs (nothing created in that database).

use crate::common;

use common::*;

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
    let Servers { redis, pg: pgs } = Servers::with_tls(true, true).await;
    let other = tempfile::tempdir().unwrap();
    let wrong = stampede::tls::generate_run_certs(other.path()).unwrap().ca;
    let wrong = wrong.display().to_string();
    let right_ca = redis.certs().unwrap().ca.display().to_string();
    let (ru, pu) = (redis.url(), pgs.url());

    // The right CA and a client certificate signed by it: the run goes through, over TLS.
    let certs = redis.certs().unwrap().clone();
    let (ru2, pu2) = (ru.clone(), pu.clone());
    let r = spawn_blocking(move || {
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
    let r = spawn_blocking(move || {
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
    let r = spawn_blocking(move || {
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
    let r = spawn_blocking(move || {
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
    let r =
        spawn_blocking(move || run(&["--redis-url", &plain, "--pg-url", &pu2, "--duration", "1s"]))
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
    let Servers { redis, pg: pgs } = Servers::start(None).await;
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
    let r = spawn_blocking(move || {
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
    let r = spawn_blocking(move || {
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
    let pgs = postgres(false).await;
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
    let r = spawn_blocking(move || {
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
    let r = spawn_blocking(move || {
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
    let pgs = postgres(false).await;
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
        let r = spawn_blocking(move || {
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

fn cluster_node() -> OwnRedis {
    OwnRedis::start(&["--cluster-enabled", "yes"], false)
}

/// A cluster node given as one server (redis://): the run stops before traffic and says how
/// to give the cluster (redis+cluster://), instead of failing key by key with MOVED.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_node_is_refused_with_that_message() {
    let node = cluster_node();
    let pgs = postgres(false).await;
    let (ru, pu) = (format!("redis://127.0.0.1:{}/", node.port), pgs.url());
    let r = spawn_blocking(move || run(&["--redis-url", &ru, "--pg-url", &pu, "--duration", "1s"]))
        .await
        .unwrap();
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(
        r.stderr().contains("is a Redis Cluster node") && r.stderr().contains("redis+cluster://"),
        "{}",
        r.stderr()
    );
    drop(node);
}

/// A redis-server this test starts with TLS only and client certificates required
/// (`tls-auth-clients yes`), on the certificates in `certs`; killed when dropped.
fn tls_redis_requiring_client_certs(certs: &stampede::tls::RunCerts) -> OwnRedis {
    let path = |p: &std::path::Path| p.display().to_string();
    let (cert, key, ca) = (
        path(&certs.server_cert),
        path(&certs.server_key),
        path(&certs.ca),
    );
    OwnRedis::start(
        &[
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "yes",
        ],
        true,
    )
}

/// `stampede ARGS`, whatever the exit code: (code, stdout and stderr).
fn stampede_out(args: &[String]) -> (i32, String) {
    let o = stampede().args(args).output().expect("running stampede");
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Shards, app runs and `cleanup` open their admin Redis connection with the run's
/// `--redis-ca`, client certificate and `--redis-insecure`, as the traffic's connections
/// do: against a Redis that requires a client certificate signed by a private CA, each goes
/// through with the flags, and one without the client certificate is refused by the server.
#[tokio::test(flavor = "multi_thread")]
async fn admin_connections_follow_the_redis_tls_flags() {
    let app = example_app();
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = stampede::tls::generate_run_certs(certs_dir.path()).unwrap();
    let strict = tls_redis_requiring_client_certs(&certs);
    // Client certificates optional, for the app, which speaks TLS without one.
    let Servers { redis, pg: pgs } = Servers::with_tls(true, false).await;
    let path = |p: &std::path::Path| p.display().to_string();
    let strict_url = format!("rediss://127.0.0.1:{}/", strict.port);
    let client = [
        "--redis-cert".to_string(),
        path(&certs.client_cert),
        "--redis-key".to_string(),
        path(&certs.client_key),
    ];
    let ca = ["--redis-ca".to_string(), path(&certs.ca)];
    let insecure = ["--redis-insecure".to_string()];
    let load = owned(&[
        "--rps",
        "200",
        "--keys",
        "50",
        "--duration",
        "1s",
        "--quiet",
    ]);
    let pg_url = pgs.url();

    let cases: Vec<(&str, Vec<String>, i32)> = vec![
        (
            "cleanup with the CA and a client certificate",
            [
                &[
                    "cleanup".to_string(),
                    "--redis-url".into(),
                    strict_url.clone(),
                ][..],
                &ca,
                &client,
            ]
            .concat(),
            0,
        ),
        (
            "cleanup unverified, with a client certificate",
            [
                &[
                    "cleanup".to_string(),
                    "--redis-url".into(),
                    strict_url.clone(),
                ][..],
                &insecure,
                &client,
            ]
            .concat(),
            0,
        ),
        (
            "cleanup of rediss://…#insecure with a client certificate",
            [
                &[
                    "cleanup".to_string(),
                    "--redis-url".into(),
                    format!("{strict_url}#insecure"),
                ][..],
                &client,
            ]
            .concat(),
            0,
        ),
        (
            "cleanup without the client certificate the server requires",
            [
                &[
                    "cleanup".to_string(),
                    "--redis-url".into(),
                    strict_url.clone(),
                ][..],
                &ca,
            ]
            .concat(),
            3,
        ),
        (
            "a shard with the CA and a client certificate",
            [
                &owned(&[
                    "run",
                    "--shard",
                    "0/1",
                    "--start-delay",
                    "100ms",
                    "--redis-url",
                    &strict_url,
                    "--pg-url",
                    &pg_url,
                ])[..],
                &ca,
                &client,
                &load,
            ]
            .concat(),
            0,
        ),
        (
            "a shard unverified, with a client certificate",
            [
                &owned(&[
                    "run",
                    "--shard",
                    "0/1",
                    "--start-delay",
                    "100ms",
                    "--redis-url",
                    &strict_url,
                    "--pg-url",
                    &pg_url,
                ])[..],
                &insecure,
                &client,
                &load,
            ]
            .concat(),
            0,
        ),
    ];
    // The app is given an unverified URL of its own: what is tested is stampede's side.
    let app_cmd = format!(
        "REDIS_URL='rediss://127.0.0.1:{}/#insecure' exec {app}",
        redis.port()
    );
    // The app's output goes into this test's temp dir, removed with it.
    let app_log = certs_dir.path().join("app.log").display().to_string();
    let app_run = |tls: &[String]| {
        [
            &owned(&[
                "run",
                "--app-log",
                &app_log,
                "--target",
                "http://127.0.0.1:{port}/items/{key}",
                "--app-cmd",
                &app_cmd,
                "--redis-url",
                &redis.url(),
                "--pg-url",
                &pg_url,
            ])[..],
            tls,
            &load,
        ]
        .concat()
    };
    let managed_ca = ["--redis-ca".to_string(), path(&redis.certs().unwrap().ca)];
    let cases: Vec<(&str, Vec<String>, i32)> = cases
        .into_iter()
        .chain([
            ("an app run with the CA", app_run(&managed_ca), 0),
            ("an app run unverified", app_run(&insecure), 0),
        ])
        .collect();
    // Every case runs; the failures are reported together, each with its output.
    let mut failed = Vec::new();
    for (what, args, code) in cases {
        let (got, out) = spawn_blocking(move || {
            let _turn = cpu_turn();
            stampede_out(&args)
        })
        .await
        .unwrap();
        let warning = if what.contains("unverified") {
            Some("warning: --redis-insecure: Redis's certificate is not verified")
        } else if what.contains("#insecure") {
            Some("warning: rediss://…#insecure: Redis's certificate is not verified")
        } else {
            None
        };
        let cleaned = !(what.starts_with("cleanup") && code == 0)
            || out.contains("no dead run's keys in rediss://");
        if got != code || warning.is_some_and(|w| !out.contains(w)) || !cleaned {
            failed.push(format!("{what}: exit {got}, expected {code}:\n{out}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    drop((strict, redis, pgs));
}

/// `cleanup` refuses Redis TLS flags it could not use, before connecting.
#[test]
fn cleanup_refuses_tls_flags_without_a_tls_redis() {
    for (args, needle) in [
        (
            vec![
                "cleanup",
                "--pg-url",
                "postgres://u@127.0.0.1:1/db",
                "--redis-ca",
                "ca.pem",
            ],
            "give it with --redis-url rediss://",
        ),
        (
            vec![
                "cleanup",
                "--redis-url",
                "redis://127.0.0.1:1/",
                "--redis-insecure",
            ],
            "use a rediss:// URL",
        ),
        (
            vec![
                "cleanup",
                "--redis-url",
                "rediss://127.0.0.1:1/",
                "--redis-insecure",
                "--redis-ca",
                "ca.pem",
            ],
            "give one of them",
        ),
    ] {
        let (code, out) = stampede_out(&owned(&args));
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(needle), "{args:?}: {out}");
    }
}

/// The app run's own connections to Postgres (the sampler of its statements) use the URL's
/// sslmode as the run's other connections do: on a server that lets stampede's user in over
/// TLS only, verify-full, require and prefer all go through, and the server counted the
/// app's statements. (The example app, which speaks no TLS, has a user of its own allowed
/// over plain TCP.) `require` verifies nothing and says so.
#[tokio::test(flavor = "multi_thread")]
async fn an_app_runs_sampler_connects_with_the_pg_urls_tls() {
    let app = example_app();
    let Servers { redis, pg: pgs } = Servers::with_tls(false, true).await;
    let (admin, _) = stampede::tls::pg_connect(&pgs.url()).await.unwrap();
    std::fs::write(
        pgs.dir().join("pg_hba_tls.conf"),
        "local all all trust\nhostssl all stampede 127.0.0.1/32 trust\nhost all app 127.0.0.1/32 trust\n",
    )
    .unwrap();
    admin
        .batch_execute("CREATE ROLE app LOGIN SUPERUSER; SELECT pg_reload_conf();")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let app_cmd = format!(
        "DATABASE_URL=postgres://app@127.0.0.1:{}/postgres exec {app}",
        pgs.port()
    );
    let ca = pgs.certs().unwrap().ca.display().to_string();
    // The app's output goes into this test's temp dir, removed with it.
    let logs = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    for mode in [
        format!("verify-full&sslrootcert={ca}"),
        "require".to_string(),
        "prefer".to_string(),
    ] {
        let pg_url = format!(
            "postgres://stampede@127.0.0.1:{}/postgres?sslmode={mode}",
            pgs.port()
        );
        let (ru, cmd) = (redis.url(), app_cmd.clone());
        let log = logs.path().join("app.log").display().to_string();
        let r = spawn_blocking(move || {
            run(&[
                "--app-log",
                &log,
                "--target",
                "http://127.0.0.1:{port}/items/{key}",
                "--app-cmd",
                &cmd,
                "--redis-url",
                &ru,
                "--pg-url",
                &pg_url,
                "--rps",
                "200",
                "--keys",
                "50",
                "--duration",
                "1s",
            ])
        })
        .await
        .unwrap();
        let counted = r.json.pointer("/db/calls_server").and_then(|v| v.as_u64());
        let warned = r
            .stderr()
            .contains("warning: sslmode=require without sslrootcert");
        if r.code() != 0 || counted.is_none_or(|c| c == 0) || warned != (mode == "require") {
            failed.push(format!(
                "sslmode={mode}: exit {}, db.calls_server {counted:?}, require warning {warned}:\n{}",
                r.code(),
                r.stderr()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    drop((redis, pgs));
}

/// A CA this test makes, and server certificates it signs (PEM), for a Postgres that serves
/// them.
struct TestCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, name.to_string());
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let pem = p.self_signed(&key).unwrap().pem();
        TestCa {
            pem,
            issuer: rcgen::Issuer::new(p, key),
        }
    }

    /// A server certificate and its key for `names`, valid from January of `years.0` to
    /// January of `years.1`.
    fn leaf(&self, names: &[&str], years: (i32, i32)) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.not_before = rcgen::date_time_ymd(years.0, 1, 1);
        p.not_after = rcgen::date_time_ymd(years.1, 1, 1);
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Postgres's verify-ca checks the chain and verify-full the host name as well: a
/// certificate for another host passes verify-ca and fails verify-full; an expired one and
/// one signed by another CA fail both. The server serves each certificate in turn (written
/// over its own and reloaded); `cleanup --pg-url` connects, exit 0 or 3.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_verify_ca_checks_the_chain_and_verify_full_the_name_too() {
    let pgs = postgres(true).await;
    let served = pgs.certs().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let ours = TestCa::new("the test's CA");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ours.pem).unwrap();
    let stranger = TestCa::new("another CA");
    // require verifies nothing: this connection reloads whatever certificate is served.
    let admin_url = format!(
        "postgres://stampede@127.0.0.1:{}/postgres?sslmode=require",
        pgs.port()
    );
    let valid = (2020, 2100);
    let cases = [
        (
            "this host's",
            ours.leaf(&["127.0.0.1", "localhost"], valid),
            0,
            0,
        ),
        (
            "another host's",
            ours.leaf(&["db.example.internal"], valid),
            0,
            3,
        ),
        ("an expired", ours.leaf(&["127.0.0.1"], (2000, 2001)), 3, 3),
        ("another CA's", stranger.leaf(&["127.0.0.1"], valid), 3, 3),
    ];
    for (what, (cert, key), ca_code, full_code) in cases {
        std::fs::write(&served.server_cert, cert).unwrap();
        std::fs::write(&served.server_key, key).unwrap();
        let (admin, _) = stampede::tls::pg_connect(&admin_url).await.unwrap();
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .unwrap();
        drop(admin);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        for (mode, code) in [("verify-ca", ca_code), ("verify-full", full_code)] {
            let url = format!(
                "postgres://stampede@127.0.0.1:{}/postgres?sslmode={mode}&sslrootcert={}",
                pgs.port(),
                ca_file.display()
            );
            let (got, out) =
                spawn_blocking(move || stampede_out(&owned(&["cleanup", "--pg-url", &url])))
                    .await
                    .unwrap();
            assert_eq!(got, code, "{what} certificate, sslmode={mode}:\n{out}");
            if code == 0 {
                assert!(out.contains("no dead run's schema"), "{out}");
            } else {
                assert!(
                    out.contains("TLS certificate of Postgres"),
                    "{what}, {mode}: {out}"
                );
            }
        }
    }
    drop(pgs);
}
