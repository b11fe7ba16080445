//! `stampede cleanup`: remove what dead runs left on external servers — Redis namespaces with
//! no live heartbeat, Postgres schemas whose heartbeat is stale. A live run renews both every
//! second. Redis is reached with the same TLS flags as `run` (`--redis-ca`, `--redis-cert`,
//! `--redis-key`, `--redis-insecure`), Postgres with the URL's sslmode.

use anyhow::Result;

use crate::redact;
use crate::scenario::invocation::Cleanup;

/// Remove the dead runs' leftovers on the servers `targets` names, saying what went.
pub async fn cleanup(targets: &Cleanup) -> Result<()> {
    let tls = &targets.redis_tls;
    if let Some(url) = &targets.redis_url {
        let admin = crate::cache::Admin::open(url, tls, std::sync::Arc::from("stampede:")).await?;
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
    if let Some(url) = &targets.pg_url {
        let dead = crate::origin::dead_schemas(url, targets.older_than).await?;
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
