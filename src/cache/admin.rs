//! The tool's own Redis connection, never used by requests: INFO (the server's keyspace and
//! memory figures), the run's heartbeat and namespace, cache drops, and what a cleanup or a
//! cluster run needs of every node.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::*;
use crate::error::EnvError;
use crate::redact;
use crate::strategy::lock::RELEASE_LUA;
use crate::tls::RedisTls;

/// The key (under a run's namespace) that says the run is alive.
const HEARTBEAT: &str = "heartbeat";
/// How long a heartbeat lasts unless renewed: a run renews it every second, so a run that has
/// not for this long is dead (the tool was killed).
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(5);

/// Server-side figures read from INFO; reading INFO does not touch the keyspace counters.
#[derive(Debug, Clone, Copy, Default)]

pub struct RedisStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Keys evicted to stay under `maxmemory`, since the server started.
    pub evicted_keys: u64,
}

/// The tool's own connection for reading INFO and cleaning up; never used by requests, so its
/// commands do not pollute the keyspace figures.
#[derive(Clone)]
pub struct Admin {
    /// Key commands: on a cluster, routed to the key's node.
    pub(super) conn: Conn,
    pub(super) prefix: Arc<str>,
    /// A cluster's nodes, each on a connection of its own (INFO, SCAN, PING reach every one
    /// of them); empty for a single server.
    pub(super) nodes: Arc<[nodes::Node]>,
}

impl Admin {
    /// Open the admin connection with the run's TLS settings: there is no way to open one
    /// without them, so no part of a run (shards, app runs, cleanup) connects otherwise.
    pub async fn open(url: &str, tls: &RedisTls, prefix: Arc<str>) -> Result<Admin> {
        if is_cluster(url) {
            let conn =
                crate::cluster::client::connect(url, tls, Duration::from_secs(2), false).await?;
            let nodes = nodes::discover(url, tls, &conn).await?;
            return Ok(Admin {
                conn: Conn::Cluster(conn),
                prefix,
                nodes: nodes.into(),
            });
        }
        Ok(Admin {
            conn: Conn::Single(connect(url, tls, Duration::from_secs(2)).await?),
            prefix,
            nodes: Arc::from([]),
        })
    }

    /// Whether this is a cluster's admin.
    pub fn is_cluster(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// INFO `section` of the server; on a cluster, of the first node that answers.
    pub(super) async fn info(&self, section: &str) -> Result<String> {
        if self.is_cluster() {
            return self.any_node_info(section).await;
        }
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("INFO");
        cmd.arg(section);
        tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<String>(&mut c))
            .await
            .context("INFO timed out")?
            .context("INFO failed")
    }

    /// PING with a short deadline: whether Redis answers now.
    pub async fn ping(&self) -> bool {
        if self.is_cluster() {
            return self.every_node_pings().await;
        }
        let mut c = self.conn.clone();
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<String>(&mut c);
        matches!(
            tokio::time::timeout(Duration::from_millis(500), ping).await,
            Ok(Ok(_))
        )
    }

    /// `SHUTDOWN NOSAVE`: stop the server without persisting, as close to a crash as a client
    /// can cause. The server drops the connection instead of answering, so a dropped
    /// connection is success; an error reply (renamed command, missing ACL) is not.
    pub async fn shutdown_nosave(&self) -> Result<()> {
        if self.is_cluster() {
            return Err(EnvError(
                "kill-redis on an external Redis Cluster is not supported: stampede stops one primary of a cluster it manages (--redis-cluster); to test an external cluster's failover, use --failover-at".into(),
            )
            .into());
        }
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("SHUTDOWN");
        cmd.arg("NOSAVE");
        match tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<()>(&mut c)).await {
            Ok(Ok(())) => Ok(()),
            // An error reply has a code; a connection dropped by the stopping server has none.
            Ok(Err(e)) if e.code().is_none() => Ok(()),
            Ok(Err(e)) => Err(anyhow::anyhow!(
                "Redis refused SHUTDOWN NOSAVE: {e} (the fault needs a user allowed to run SHUTDOWN)"
            )),
            Err(_) => Err(anyhow::anyhow!("SHUTDOWN NOSAVE got no answer within 5 s")),
        }
    }

    /// UNLINK the entries of `ids` (the entries only: locks, lease tokens, version markers and
    /// the heartbeat have keys of their own), 1000 keys a command; how many existed.
    pub async fn unlink_entries(&self, ids: &[u64]) -> Result<u64> {
        let mut c = self.conn.clone();
        let mut removed = 0u64;
        for chunk in ids.chunks(1000) {
            let mut cmd = redis::cmd("UNLINK");
            for id in chunk {
                cmd.arg(KeyBuf::new(&self.prefix, "", *id).as_bytes());
            }
            let n: u64 = tokio::time::timeout(Duration::from_secs(5), cmd.query_async(&mut c))
                .await
                .context("UNLINK of the dropped entries got no answer within 5 s")?
                .context("UNLINK of the dropped entries")?;
            removed += n;
        }
        Ok(removed)
    }

    /// How long the lock (`lease` false) or lease token of `id` has left while it still holds
    /// `token`, ms; None when it is gone or someone else's. Read by the tool (not the
    /// instance that took it), so a fault can say how long a dead holder's keys stay blocked.
    pub async fn token_left(&self, lease: bool, id: u64, token: u64) -> Result<Option<u64>> {
        let k = KeyBuf::new(&self.prefix, if lease { LEASE } else { "lock:" }, id);
        let mut c = self.conn.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(k.as_bytes())
            .cmd("PTTL")
            .arg(k.as_bytes());
        let (held, ms): (Option<String>, i64) =
            tokio::time::timeout(Duration::from_secs(5), pipe.query_async(&mut c))
                .await
                .context("GET and PTTL of a lock got no answer within 5 s")?
                .context("GET and PTTL of a lock")?;
        let ours = held.and_then(|v| v.parse::<u64>().ok()) == Some(token);
        Ok((ours && ms > 0).then_some(ms as u64))
    }

    /// `CLIENT PAUSE <ms> ALL`: the server stops running every client's commands for `d`
    /// (connections stay open, commands wait), then resumes by itself. The reply comes before
    /// the pause starts.
    pub async fn pause(&self, d: Duration) -> Result<()> {
        if self.is_cluster() {
            return self.pause_every_node(d).await;
        }
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("PAUSE")
            .arg(d.as_millis().clamp(1, u128::from(u64::MAX)) as u64)
            .arg("ALL");
        match tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<()>(&mut c)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::anyhow!(
                "Redis refused CLIENT PAUSE: {e} (the fault needs Redis 6.2 or later and a user allowed to run CLIENT PAUSE)"
            )),
            Err(_) => Err(anyhow::anyhow!("CLIENT PAUSE got no answer within 5 s")),
        }
    }

    /// Send, once, every command the run's requests will send, on a key of the run's
    /// namespace, so that a user without one (an ACL) or a Redis Cluster node stops the run
    /// here with the command named, instead of every request failing as a miss. `lock`: the
    /// strategy takes the Redis lock (SET NX PX, and EVALSHA to release it).
    pub async fn check_access(&self, url: &str, lock: bool, strategy: &str) -> Result<()> {
        if self.is_cluster() {
            return self.check_cluster_access(url, lock, strategy).await;
        }
        self.check_key_access(url, lock, strategy, "preflight")
            .await
    }

    /// [`Admin::check_access`]'s commands on the key `<prefix><name>` and its lock.
    pub(super) async fn check_key_access(
        &self,
        url: &str,
        lock: bool,
        strategy: &str,
        name: &str,
    ) -> Result<()> {
        if !self.is_cluster()
            && let Ok(info) = self.info("cluster").await
            && info_field(&info, "cluster_enabled") == Some("1")
        {
            return Err(EnvError(cluster_unsupported(url)).into());
        }
        let user = redis_user(url);
        let key = format!("{}{name}", self.prefix);
        let lock_key = format!("{}lock:{name}", self.prefix);
        let mut c = self.conn.clone();
        let fail = |cmd: &str, e: redis::RedisError| -> anyhow::Error {
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) {
                return EnvError(cluster_unsupported(url)).into();
            }
            if e.code() == Some("NOPERM") {
                // Redis names the command it refused; the step's command otherwise.
                let refused = e
                    .detail()
                    .and_then(|d| d.split('\'').nth(1))
                    .map_or_else(|| cmd.to_string(), str::to_uppercase);
                return EnvError(format!(
                    "the Redis user {user} may not run {refused}, which --strategy {strategy} needs ({e}): grant it (ACL SETUSER {user} +{}) or run as a user that has it",
                    refused.to_lowercase()
                ))
                .into();
            }
            EnvError(format!(
                "Redis refused {cmd}, which --strategy {strategy} needs: {e}"
            ))
            .into()
        };
        let deadline = Duration::from_secs(5);
        macro_rules! step {
            ($name:expr, $fut:expr) => {
                match tokio::time::timeout(deadline, $fut).await {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => return Err(fail($name, e)),
                    Err(_) => {
                        return Err(EnvError(format!("{} got no answer within 5 s", $name)).into());
                    }
                }
            };
        }
        let _: Option<Vec<u8>> = step!("GET", redis::cmd("GET").arg(&key).query_async(&mut c));
        let _: () = step!(
            "SET",
            redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("PX")
                .arg(1000)
                .query_async(&mut c)
        );
        if lock {
            let _: Option<String> = step!(
                "SET NX",
                redis::cmd("SET")
                    .arg(&lock_key)
                    .arg(0)
                    .arg("NX")
                    .arg("PX")
                    .arg(1000)
                    .query_async(&mut c)
            );
            let script = redis::Script::new(RELEASE_LUA);
            let mut inv = script.key(&lock_key);
            inv.arg(0);
            let _: i64 = step!("EVALSHA", inv.invoke_async(&mut c));
        }
        Ok(())
    }

    pub async fn version(&self) -> Result<String> {
        let info = self.info("server").await?;
        Ok(info_field(&info, "redis_version")
            .unwrap_or("unknown")
            .to_string())
    }

    /// INFO stats of the server; on a cluster, summed over every node (each must answer).
    pub async fn stats(&self) -> Result<RedisStats> {
        if self.is_cluster() {
            let mut sum = RedisStats::default();
            for n in self.node_stats().await? {
                sum.keyspace_hits += n.keyspace_hits;
                sum.keyspace_misses += n.keyspace_misses;
                sum.evicted_keys += n.evicted_keys;
            }
            return Ok(sum);
        }
        let info = self.info("stats").await?;
        let num = |k| {
            info_field(&info, k)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(RedisStats {
            keyspace_hits: num("keyspace_hits"),
            keyspace_misses: num("keyspace_misses"),
            evicted_keys: num("evicted_keys"),
        })
    }

    /// Write entries directly (cache warming), pipelined, outside the request path:
    /// (id, value, PX in ms).
    pub async fn set_many(&self, entries: &[(u64, Vec<u8>, u64)]) -> Result<()> {
        if self.is_cluster() {
            return self.set_many_on_cluster(entries).await;
        }
        let mut c = self.conn.clone();
        let mut pipe = redis::pipe();
        for (id, value, px) in entries {
            let k = KeyBuf::new(&self.prefix, "", *id);
            pipe.cmd("SET")
                .arg(k.as_bytes())
                .arg(value.as_slice())
                .arg("PX")
                .arg(*px)
                .ignore();
        }
        tokio::time::timeout(Duration::from_secs(30), pipe.query_async::<()>(&mut c))
            .await
            .context("writing warmed entries timed out")?
            .context("writing warmed entries")
    }

    /// The entries of `ids` as stored (None where absent), in one MGET per 1000 keys: the
    /// run's end reads what the cache kept of every written key.
    pub async fn get_many(&self, ids: &[u64]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut c = self.conn.clone();
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(1000) {
            let mut cmd = redis::cmd("MGET");
            for id in chunk {
                cmd.arg(KeyBuf::new(&self.prefix, "", *id).as_bytes());
            }
            let got: Vec<Option<Vec<u8>>> =
                tokio::time::timeout(Duration::from_secs(10), cmd.query_async(&mut c))
                    .await
                    .context("reading the written keys back timed out")?
                    .context("reading the written keys back")?;
            out.extend(got);
        }
        Ok(out)
    }

    /// Say this run is alive: the namespace's heartbeat key, which expires unless renewed
    /// (`stampede cleanup` treats a namespace without one as a dead run's).
    pub async fn heartbeat(&self) -> Result<()> {
        self.heartbeat_for(HEARTBEAT_TTL).await
    }

    /// The heartbeat, lasting `life` unless renewed: `stampede prepare` leaves one that lasts
    /// until its shards start theirs.
    ///
    /// At `maxmemory` under noeviction Redis refuses the SET with OOM; the key is then
    /// renewed with PEXPIRE, which Redis never refuses for memory (it allocates nothing), so
    /// a full cache does not make a live run look dead to `stampede cleanup`. Only a key that
    /// is already gone cannot be renewed so.
    pub async fn heartbeat_for(&self, life: Duration) -> Result<()> {
        let mut c = self.conn.clone();
        let key = format!("{}{HEARTBEAT}", self.prefix);
        let px = life.as_millis().clamp(1, u128::from(u64::MAX)) as u64;
        let set = redis::cmd("SET")
            .arg(&key)
            .arg(std::process::id())
            .arg("PX")
            .arg(px)
            .query_async::<()>(&mut c)
            .await;
        match set {
            Err(e) if crate::memory::is_oom(&e) => {
                let renewed: bool = redis::cmd("PEXPIRE")
                    .arg(&key)
                    .arg(px)
                    .query_async(&mut c)
                    .await
                    .context(
                        "renewing the run's heartbeat with PEXPIRE after SET was refused with OOM",
                    )?;
                if renewed {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!(
                        "Redis refused the heartbeat's SET with OOM (maxmemory reached under noeviction) and the key had already expired, so PEXPIRE could not renew it"
                    ))
                }
            }
            r => r.context("writing the run's heartbeat"),
        }
    }

    /// Run namespaces (`stampede:<id>:`) with keys in this Redis and no live heartbeat: runs
    /// that died without removing their keys. On a cluster every node is scanned.
    pub async fn dead_namespaces(&self) -> Result<Vec<String>> {
        let mut ids = std::collections::BTreeSet::new();
        for mut c in self.scan_conns() {
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg("stampede:*")
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut c)
                    .await
                    .context("scanning for stampede's keys")?;
                for k in keys {
                    if let Some(id) = k.split(':').nth(1) {
                        ids.insert(id.to_string());
                    }
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        let mut c = self.conn.clone();
        let mut dead = Vec::new();
        for id in ids {
            let alive: bool = redis::cmd("EXISTS")
                .arg(format!("stampede:{id}:{HEARTBEAT}"))
                .query_async(&mut c)
                .await
                .context("reading a run's heartbeat")?;
            if !alive {
                dead.push(format!("stampede:{id}:"));
            }
        }
        Ok(dead)
    }

    /// The value of the run's key `name` (a sharded run's signals), None when it is not set.
    pub async fn get_signal(&self, name: &str) -> Result<Option<String>> {
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("GET");
        cmd.arg(format!("{}{name}", self.prefix));
        let q = cmd.query_async::<Option<String>>(&mut c);
        tokio::time::timeout(Duration::from_secs(5), q)
            .await
            .context("GET timed out")?
            .with_context(|| format!("reading the run's signal {name}"))
    }

    /// Set the run's key `name` unless it is set already; true when this call set it.
    pub async fn set_signal(&self, name: &str, value: &str) -> Result<bool> {
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("{}{name}", self.prefix))
            .arg(value)
            .arg("NX");
        let q = cmd.query_async::<Option<String>>(&mut c);
        let set = tokio::time::timeout(Duration::from_secs(5), q)
            .await
            .context("SET timed out")?
            .with_context(|| format!("writing the run's signal {name}"))?;
        Ok(set.is_some())
    }

    /// Add `member` to the run's set `name` (a barrier's arrivals); how many members it holds.
    pub async fn join_set(&self, name: &str, member: &str) -> Result<u64> {
        let mut c = self.conn.clone();
        let key = format!("{}{name}", self.prefix);
        let mut pipe = redis::pipe();
        pipe.cmd("SADD")
            .arg(&key)
            .arg(member)
            .ignore()
            .cmd("SCARD")
            .arg(&key);
        let q = pipe.query_async::<(u64,)>(&mut c);
        let (n,) = tokio::time::timeout(Duration::from_secs(5), q)
            .await
            .context("SADD timed out")?
            .with_context(|| format!("joining the run's barrier {name}"))?;
        Ok(n)
    }

    /// The members of the run's set `name`.
    pub async fn set_members(&self, name: &str) -> Result<Vec<String>> {
        let mut c = self.conn.clone();
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(format!("{}{name}", self.prefix));
        let q = cmd.query_async::<Vec<String>>(&mut c);
        tokio::time::timeout(Duration::from_secs(5), q)
            .await
            .context("SMEMBERS timed out")?
            .with_context(|| format!("reading the run's barrier {name}"))
    }

    /// This admin connection on another run's namespace (to remove a dead run's keys).
    pub fn for_namespace(&self, prefix: &str) -> Admin {
        Admin {
            conn: self.conn.clone(),
            prefix: Arc::from(prefix),
            nodes: self.nodes.clone(),
        }
    }

    /// Delete every key of this run's namespace but its heartbeat (SCAN + UNLINK): the
    /// drop-cache of an app under test, whose keys under `CACHE_PREFIX` are named by the app
    /// (its entries, and its locks too: the tool cannot tell them apart). How many it removed.
    pub async fn unlink_app_keys(&self) -> Result<u64> {
        let pattern = format!("{}*", self.prefix);
        let heartbeat = format!("{}{HEARTBEAT}", self.prefix);
        let mut c = self.conn.clone();
        let mut removed = 0;
        let mut cursor: u64 = 0;
        let limit = Duration::from_secs(5);
        loop {
            let (next, mut keys): (u64, Vec<Vec<u8>>) = tokio::time::timeout(
                limit,
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut c),
            )
            .await
            .context("SCAN of the app's keys got no answer within 5 s")?
            .context("scanning the app's keys")?;
            keys.retain(|k| k.as_slice() != heartbeat.as_bytes());
            if !keys.is_empty() {
                removed += tokio::time::timeout(
                    limit,
                    redis::cmd("UNLINK").arg(&keys).query_async::<u64>(&mut c),
                )
                .await
                .context("UNLINK of the app's keys got no answer within 5 s")?
                .context("UNLINK of the app's keys")?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok(removed)
    }

    /// Delete every key of this run's namespace (SCAN + UNLINK; never FLUSH a shared server):
    /// how many keys it removed. On a cluster every node is scanned and each key unlinked on
    /// the node that owns it.
    pub async fn remove_namespace(&self) -> Result<u64> {
        let pattern = format!("{}*", self.prefix);
        let mut removed = 0;
        let mut owner = self.conn.clone();
        for mut c in self.scan_conns() {
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut c)
                    .await
                    .context("scanning the run's keys")?;
                if !keys.is_empty() {
                    removed += redis::cmd("UNLINK")
                        .arg(&keys)
                        .query_async::<u64>(&mut owner)
                        .await
                        .context("removing the run's keys")?;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(removed)
    }
}

/// What stampede says when a redis:// URL points at a Redis Cluster node.
pub(super) fn cluster_unsupported(url: &str) -> String {
    format!(
        "{} is a Redis Cluster node, given as one server (a request for another node's slot would answer MOVED): give the cluster as --redis-url {}",
        redact::url(url),
        redact::url(&url.replacen("redis://", "redis+cluster://", 1).replacen(
            "rediss://",
            "rediss+cluster://",
            1
        ))
    )
}

/// The ACL user of a Redis URL (`default` when none is named).
pub(super) fn redis_user(url: &str) -> String {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .and_then(|auth| auth.rsplit_once('@'))
        .map(|(cred, _)| cred.split(':').next().unwrap_or(""))
        .filter(|u| !u.is_empty())
        .unwrap_or("default")
        .to_string()
}

pub(super) fn info_field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}
