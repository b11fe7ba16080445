//! How a run reaches the servers and what it loads there: the TLS settings for an external
//! Redis, and the user's own query and keys (`--db-sql`), resolved from the flags.

use crate::cache::RedisClient;
use crate::cli::RunFlags;
use crate::error::{Problems, UsageError};
use crate::origin::OwnLoad;
use crate::tls::RedisTls;
use crate::values::Dur;

/// `--tls` and the Redis TLS flags, checked against where the servers are.
pub(super) fn tls_settings(m: &RunFlags) -> Result<(bool, RedisTls), UsageError> {
    let tls = m.servers.tls.unwrap_or(false);
    if tls && m.servers.redis_url.is_some() && m.servers.pg_url.is_some() {
        return Err(UsageError::new(
            "--tls starts the managed servers with TLS, and both servers are given by URL: drop --tls (use rediss:// and sslmode= in the URLs)",
        ));
    }
    let redis_tls = m.redis_tls.tls();
    if !redis_tls.is_empty() && m.servers.redis_url.is_none() {
        return Err(UsageError::new(
            "--redis-ca, --redis-cert, --redis-key and --redis-insecure are for a Redis given with --redis-url (rediss://…); the managed one uses its own certificates under --tls",
        ));
    }
    redis_tls.check(m.servers.redis_url.as_deref())?;
    Ok((tls, redis_tls))
}

/// `--net-rtt`, `--redis-rtt`, `--pg-rtt`: what the proxy between the app and its servers
/// cannot stand between yet.
pub(super) fn net_settings(m: &RunFlags) -> Result<(), UsageError> {
    let s = &m.servers;
    // A network fault needs the proxy as a round trip does.
    let struck = |on: fn(crate::fault::NetServer) -> bool| {
        m.faults
            .fault
            .iter()
            .find(|f| f.kind.is_network() && on(f.server.unwrap_or_default()))
    };
    let (redis_fault, pg_fault) = (
        struck(crate::fault::NetServer::redis),
        struck(crate::fault::NetServer::postgres),
    );
    let (redis, pg) = (
        s.redis_rtt.or(s.net_rtt).is_some() || redis_fault.is_some(),
        s.pg_rtt.or(s.net_rtt).is_some() || pg_fault.is_some(),
    );
    if !redis && !pg {
        return Ok(());
    }
    // The setting that asked for the proxy, for the error: a round trip, else the fault.
    let rtts = [
        ("--net-rtt", s.net_rtt),
        ("--redis-rtt", s.redis_rtt),
        ("--pg-rtt", s.pg_rtt),
    ];
    let flag = match rtts.iter().find(|(_, v)| v.is_some()) {
        Some((f, _)) => f.to_string(),
        None => format!(
            "a {} fault",
            redis_fault.or(pg_fault).map_or("", |f| f.kind.name())
        ),
    };
    let cluster = super::needs::on_cluster(m);
    if redis && cluster {
        return Err(UsageError::new(format!(
            "{flag}: a Redis Cluster's replies and redirects carry its nodes' own addresses, which a proxy in front of one address cannot rewrite: drop it on a cluster (or give --pg-rtt alone)"
        )));
    }
    let redis_tls = s.tls == Some(true)
        || s.redis_url
            .as_deref()
            .is_some_and(|u| u.starts_with("rediss://"));
    let pg_tls = s.tls == Some(true)
        || s.pg_url
            .as_deref()
            .is_some_and(|u| u.contains("sslmode=require") || u.contains("sslmode=verify"));
    if (redis && redis_tls) || (pg && pg_tls) {
        return Err(UsageError::new(format!(
            "{flag}: the proxy between the app and its servers does not carry TLS yet (the certificate names the server's address, not the proxy's): drop {flag}, or TLS"
        )));
    }
    Ok(())
}

/// The app's Redis client: the library asked for (None for the tool's own, the default, so
/// that it is written only when another is asked for), its connections and its deadline, an
/// explicit --redis-conns or --redis-timeout winning over the library's.
pub(super) fn redis_client(m: &RunFlags) -> (Option<RedisClient>, u32, Dur) {
    let client = m
        .servers
        .redis_client
        .filter(|c| *c != RedisClient::Stampede);
    let (s, model) = (&m.servers, client.map(RedisClient::model));
    let conns = s.redis_conns.or(model.map(|c| c.conns));
    let timeout = s.redis_timeout.or(model.map(|c| Dur(c.deadline())));
    (
        client,
        conns.unwrap_or_else(|| s.resolved().redis_conns()),
        timeout.unwrap_or_else(|| s.resolved().redis_timeout()),
    )
}

/// `--db-sql` and its keys, checked against what cannot go with them.
pub(super) fn own_load(m: &RunFlags) -> Result<Option<OwnLoad>, UsageError> {
    // Its keys' settings without it, and what it decides: [`super::needs`].
    let Some(sql) = &m.db.db_sql else {
        return Ok(None);
    };
    let (keys_sql, keys_file) = (m.db.keys_sql.is_some(), m.db.keys_file.is_some());
    let mut p = Problems::default();
    p.refuse([
        (sql.trim().is_empty(), "--db-sql is empty: give the query, with $1 for the key"),
        (
            m.servers.pg_url.is_none(),
            "--db-sql runs your query on your database: give it with --pg-url",
        ),
        (
            !keys_sql && !keys_file,
            "--db-sql needs its keys: --keys-sql 'SELECT id FROM …' (most popular first) or --keys-file FILE",
        ),
        (keys_sql && keys_file, "give --keys-sql or --keys-file, not both"),
        (
            m.data.missing_ratio.is_some_and(|p| p.0 > 0.0),
            "--missing-ratio shapes stampede's own load; with --db-sql a load is your query on your keys: drop --missing-ratio",
        ),
        (
            !m.faults.fault.is_empty(),
            "faults are not supported with --db-sql yet: run your query without faults",
        ),
    ]);
    p.into_result()?;
    Ok(Some(OwnLoad {
        sql: sql.clone(),
        keys_sql: m.db.keys_sql.clone(),
        keys_file: m.db.keys_file.clone(),
    }))
}
