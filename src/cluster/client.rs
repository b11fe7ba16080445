//! Redis Cluster on the client side: the `redis+cluster://` URL, one connection type for a
//! single server and a cluster (so the request path is the same code for both), and the
//! cluster's nodes, for what has to reach every one of them (INFO, SCAN) rather than the
//! node that owns a key.

use std::time::Duration;

use anyhow::Result;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::EnvError;
use crate::redact;
use crate::tls::RedisTls;

/// The URL schemes of a cluster: the seed nodes after `//`, comma-separated.
const SCHEMES: [(&str, &str); 2] = [
    ("redis+cluster://", "redis://"),
    ("rediss+cluster://", "rediss://"),
];

/// Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`).
pub fn is_cluster(url: &str) -> bool {
    SCHEMES.iter().any(|(s, _)| url.starts_with(s))
}

/// The seed nodes of a cluster URL as single-server URLs, credentials and TLS kept:
/// `redis+cluster://u:p@a:1,b:2/` gives `redis://u:p@a:1/` and `redis://u:p@b:2/`.
pub fn seed_urls(url: &str) -> Result<Vec<String>> {
    let bad = |why: &str| {
        EnvError(format!(
            "bad Redis Cluster URL {}: {why} (expected redis+cluster://[user:password@]host:port[,host:port…][/])",
            redact::url(url)
        ))
    };
    let (rest, single) = SCHEMES
        .iter()
        .find_map(|(s, single)| url.strip_prefix(s).map(|r| (r, *single)))
        .ok_or_else(|| bad("not a cluster scheme"))?;
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    // Only a fragment (`#insecure`) carries over; a database number means nothing on a cluster.
    let fragment = tail.find('#').map_or("", |i| &tail[i..]);
    let (auth, hosts) = match authority.rsplit_once('@') {
        Some((a, h)) => (format!("{a}@"), h),
        None => (String::new(), authority),
    };
    let seeds: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{single}{auth}{h}/{fragment}"))
        .collect();
    if seeds.is_empty() {
        return Err(bad("no host:port").into());
    }
    Ok(seeds)
}

/// The URL of one node `addr` (`host:port`) of the cluster `url`, with its credentials and TLS.
pub fn node_url(url: &str, addr: &str) -> Result<String> {
    Ok(crate::cluster::node_url(
        &seed_urls(url)?.swap_remove(0),
        addr,
    ))
}

/// The slot of entry `id`'s keys (entry, lock, lease, version marker): their hash tag is the
/// id, whatever the run's namespace.
pub fn entry_slot(id: u64) -> u16 {
    crate::cluster::key_slot(id.to_string().as_bytes())
}

/// One connection to Redis, a single server or a cluster: commands on a cluster go to the
/// node that owns their key, following MOVED and ASK, with the slot map refreshed as redis-rs
/// does. Cloning shares the connection.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Open a cluster connection from the seeds of `url`, giving up after 5 s with an error that
/// names the URL. `replicas`: reads (GET) go to replicas (`--read-from-replicas`).
pub async fn connect(
    url: &str,
    tls: &RedisTls,
    timeout: Duration,
    replicas: bool,
) -> Result<ClusterConnection> {
    let mut seeds = seed_urls(url)?;
    if tls.insecure {
        for s in &mut seeds {
            if s.starts_with("rediss://") && !s.contains('#') {
                s.push_str("#insecure");
            }
        }
    }
    crate::tls::warn_insecure(url, tls);
    let mut b = ClusterClientBuilder::new(seeds)
        .connection_timeout(timeout.max(Duration::from_millis(500)))
        // The caller's deadline (`--redis-timeout`) bounds every command; the library's own
        // retries (MOVED, ASK, a node being failed over) run inside it.
        .retries(16)
        .min_retry_wait(10)
        .max_retry_wait(200);
    if let Some(certs) = crate::tls::redis_certificates(tls)? {
        b = b.certs(certs);
    }
    if replicas {
        b = b.read_routing_strategy(redis::cluster_read_routing::RandomReplicaStrategy);
    }
    let client = b
        .build()
        .map_err(|e| EnvError(format!("bad Redis Cluster URL {}: {e}", redact::url(url))))?;
    match tokio::time::timeout(Duration::from_secs(5), client.get_async_connection()).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(EnvError(format!(
            "cannot connect to the Redis Cluster at {}: {e} (are its nodes running, reachable and in cluster mode?)",
            redact::url(url)
        ))
        .into()),
        Err(_) => Err(EnvError(format!(
            "cannot connect to the Redis Cluster at {}: no answer within 5 s",
            redact::url(url)
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_of_a_cluster_url() {
        assert_eq!(
            seed_urls("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/").unwrap(),
            ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]
        );
        assert_eq!(
            seed_urls("rediss+cluster://u:p@a:1,b:2#insecure").unwrap(),
            ["rediss://u:p@a:1/#insecure", "rediss://u:p@b:2/#insecure"]
        );
        assert!(seed_urls("redis+cluster:///").is_err());
        assert!(seed_urls("redis://a:1/").is_err());
        assert!(is_cluster("rediss+cluster://a:1"));
        assert!(!is_cluster("redis://a:1"));
        assert_eq!(
            node_url("redis+cluster://u:p@a:1,b:2/", "c:3").unwrap(),
            "redis://u:p@c:3/"
        );
    }

    #[test]
    fn an_entrys_keys_share_its_slot() {
        use crate::cluster::key_slot;
        assert_eq!(
            key_slot(b"stampede:ab:lock:{42}"),
            key_slot(b"stampede:ab:{42}")
        );
        assert_eq!(key_slot(b"stampede:ab:ver:{42}"), entry_slot(42));
    }
}
