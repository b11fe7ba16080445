//! `stampede cleanup`: remove what dead runs left on external servers — Redis namespaces with
//! no live heartbeat, Postgres schemas whose heartbeat is stale. A live run renews both every
//! second. Redis is reached with the same TLS flags as `run` (`--redis-ca`, `--redis-cert`,
//! `--redis-key`, `--redis-insecure`), Postgres with the URL's sslmode.

use anyhow::Result;

use crate::cli::CleanupCmd;
use crate::error::UsageError;
use crate::redact;
use crate::tls::RedisTls;

/// Remove the dead runs' leftovers that `cmd` names the servers of, saying what went.
pub async fn cleanup(cmd: &CleanupCmd) -> Result<()> {
    if cmd.redis_url.is_none() && cmd.pg_url.is_none() {
        return Err(UsageError::new(
            "cleanup needs --redis-url and/or --pg-url: the servers whose leftovers to remove (a managed server's are removed by the next run)",
        )
        .into());
    }
    let tls = RedisTls {
        ca: cmd.redis_ca.clone(),
        cert: cmd.redis_cert.clone(),
        key: cmd.redis_key.clone(),
        insecure: cmd.redis_insecure.unwrap_or(false),
    };
    if !tls.is_empty() && cmd.redis_url.is_none() {
        return Err(UsageError::new(
            "--redis-ca, --redis-cert, --redis-key and --redis-insecure are for the Redis to clean: give it with --redis-url rediss://…",
        )
        .into());
    }
    tls.check(cmd.redis_url.as_deref())?;
    if let Some(url) = &cmd.redis_url {
        let admin = crate::cache::Admin::open(url, &tls, std::sync::Arc::from("stampede:")).await?;
        let dead = admin.dead_namespaces().await?;
        for ns in &dead {
            let n = admin.for_namespace(ns).remove_namespace().await?;
            println!(
                "removed {n} keys of the dead run {ns}* from {}",
                redact::url(url)
            );
        }
        if dead.is_empty() {
            println!("no dead run's keys in {}", redact::url(url));
        }
    }
    if let Some(url) = &cmd.pg_url {
        let dead = crate::origin::dead_schemas(url, cmd.older_than.0).await?;
        for s in &dead {
            crate::origin::drop_schema(url, s).await?;
            println!(
                "dropped the dead run's schema {s} from {}",
                redact::url(url)
            );
        }
        if dead.is_empty() {
            println!("no dead run's schema in {}", redact::url(url));
        }
    }
    Ok(())
}
