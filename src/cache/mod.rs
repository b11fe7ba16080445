//! Redis access for one app instance: every command carries a deadline, a failure or a late
//! answer is counted and reported as an error the request path treats as a miss (fail open),
//! and connections reconnect on their own after Redis comes back. Keys live under a per-run
//! namespace so a shared Redis only ever sees this run's keys touched.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::EnvError;
use crate::metrics::{Counters, bump};
use crate::protect::rate::{GCRA_LUA, GlobalAsk};
use crate::redact;
use crate::strategy::invalidate::{CHECKED_SET_LUA, WRITER_SET_LUA};
use crate::strategy::lock::RELEASE_LUA;
use crate::tls::RedisTls;

pub mod cluster;
mod memory;
pub mod nodes;
pub use cluster::{Conn, is_cluster};
pub use memory::{DEFAULT_SAMPLES, EvictionPolicy, MemoryConfig, MemoryLimit, MemoryStats};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheError {
    /// The deadline (`--redis-timeout`) passed first.
    Timeout,
    /// Redis answered with an error or the connection is down.
    Failed,
}

/// A Redis key written into a stack buffer, so building one costs no allocation. A key of one
/// entry carries the entry's id as its hash tag (`<prefix><kind>{<id>}`), so an entry, its
/// lock, its lease token and its version marker share one Redis Cluster slot and every Lua
/// script over them touches one slot (no CROSSSLOT), on a cluster and off it alike.
struct KeyBuf {
    buf: [u8; 96],
    len: usize,
}

impl KeyBuf {
    fn new(prefix: &str, middle: &str, id: u64) -> KeyBuf {
        let mut k = KeyBuf {
            buf: [0; 96],
            len: 0,
        };
        let mut w = &mut k.buf[..];
        // The prefix is bounded when the namespace is made; a write that does not fit is a bug.
        let _ = write!(w, "{prefix}{middle}{{{id}}}");
        k.len = 96 - w.len();
        k
    }
    /// A key of the run's namespace with no id.
    fn named(prefix: &str, name: &str) -> KeyBuf {
        let mut k = KeyBuf {
            buf: [0; 96],
            len: 0,
        };
        let mut w = &mut k.buf[..];
        let _ = write!(w, "{prefix}{name}");
        k.len = 96 - w.len();
        k
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Reconnect quickly and forever: Redis going away mid-run is a scenario, not a failure of the
/// tool. The default back-off (100 ms doubling, 6 tries) came back seconds late or never.
fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100))
        .set_exponent_base(2.0)
        .set_number_of_retries(usize::MAX)
        .set_connection_timeout(Some(timeout.max(Duration::from_millis(500))))
        .set_response_timeout(None)
}

pub struct Cache {
    conns: Box<[Conn]>,
    next: AtomicUsize,
    timeout: Duration,
    prefix: Arc<str>,
    release: redis::Script,
    checked_set: redis::Script,
    writer_set: redis::Script,
    rate: redis::Script,
    counters: Arc<Counters>,
}

/// The key of an entry's lease token and of its writers' version marker.
const LEASE: &str = "lease:";
const MARKER: &str = "ver:";
/// The key of the run's global rate limit (`--db-rate-scope global`): its bucket's TAT.
const RATE: &str = "rate:db";

/// What a conditional SET checks (see [`Cache::set_checked`]).
#[derive(Debug, Clone, Copy)]
pub struct SetCheck {
    /// The lease token the SET must present.
    pub lease: Option<u64>,
    /// Refuse when the entry or the version marker holds a newer version.
    pub versioned: bool,
}

/// Open a connection manager, giving up after a few seconds with an error naming the URL.
/// A first plain connection is made before the manager: the manager retries forever, so
/// what went wrong (a certificate that does not verify, a server that wants TLS) is only
/// seen on a single attempt.
pub async fn connect(url: &str, tls: &RedisTls, timeout: Duration) -> Result<ConnectionManager> {
    let client = crate::tls::redis_client(url, tls)?;
    crate::tls::warn_insecure(url, tls);
    let first = tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await;
    let failure = match first {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer within 5 s".to_string()),
    };
    if let Some(e) = failure {
        let msg = match crate::tls::explain_redis_failure(url, tls, &e).await {
            Some(m) => m,
            None => format!(
                "cannot connect to Redis at {}: {e} (is it running and reachable?)",
                redact::url(url)
            ),
        };
        return Err(EnvError(msg).into());
    }
    let fut = ConnectionManager::new_with_config(client, manager_config(timeout));
    match tokio::time::timeout(Duration::from_secs(5), fut).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(EnvError(format!(
            "cannot connect to Redis at {}: {e} (is it running and reachable?)",
            redact::url(url)
        ))
        .into()),
        Err(_) => Err(EnvError(format!(
            "cannot connect to Redis at {}: no answer within 5 s",
            redact::url(url)
        ))
        .into()),
    }
}

impl Cache {
    pub async fn open(
        url: &str,
        conns: u32,
        timeout: Duration,
        prefix: Arc<str>,
        counters: Arc<Counters>,
    ) -> Result<Cache> {
        Self::open_with(
            url,
            &RedisTls::default(),
            conns,
            timeout,
            prefix,
            counters,
            false,
        )
        .await
    }

    /// As [`Cache::open`], with TLS settings for a `rediss://` URL. On a cluster
    /// (`redis+cluster://`) each of the `conns` connections has one socket per node, so
    /// `--redis-conns` is per node; `replicas`: reads go to replicas (`--read-from-replicas`).
    pub async fn open_with(
        url: &str,
        tls: &RedisTls,
        conns: u32,
        timeout: Duration,
        prefix: Arc<str>,
        counters: Arc<Counters>,
        replicas: bool,
    ) -> Result<Cache> {
        let mut v = Vec::with_capacity(conns as usize);
        for _ in 0..conns {
            v.push(if is_cluster(url) {
                Conn::Cluster(cluster::connect(url, tls, timeout, replicas).await?)
            } else {
                Conn::Single(connect(url, tls, timeout).await?)
            });
        }
        Ok(Cache {
            conns: v.into_boxed_slice(),
            next: AtomicUsize::new(0),
            timeout,
            prefix,
            release: redis::Script::new(RELEASE_LUA),
            checked_set: redis::Script::new(CHECKED_SET_LUA),
            writer_set: redis::Script::new(WRITER_SET_LUA),
            rate: redis::Script::new(GCRA_LUA),
            counters,
        })
    }

    fn conn(&self) -> Conn {
        let i = self.next.fetch_add(1, Relaxed) % self.conns.len();
        self.conns[i].clone()
    }

    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, CacheError> {
        let mut c = self.conn();
        self.deadline(cmd.query_async::<T>(&mut c)).await
    }

    /// Every Redis command's deadline and its bookkeeping: a success marks Redis healthy, a
    /// failure or a late answer is counted and reported as an error the caller treats as a miss.
    async fn deadline<T>(
        &self,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, CacheError> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(v)) => {
                self.counters.redis_health.note_ok();
                Ok(v)
            }
            Ok(Err(e)) => {
                bump(&self.counters.redis_errors);
                if memory::is_oom(&e) {
                    bump(&self.counters.redis_oom);
                }
                Err(CacheError::Failed)
            }
            Err(_) => {
                bump(&self.counters.redis_timeouts);
                Err(CacheError::Timeout)
            }
        }
    }

    pub async fn get(&self, id: u64) -> Result<Option<Vec<u8>>, CacheError> {
        let k = KeyBuf::new(&self.prefix, "", id);
        // Sized up front: `redis::cmd` grows its buffers argument by argument (one more
        // allocation on every read).
        let mut cmd = redis::Cmd::with_capacity(2, 3 + k.as_bytes().len());
        cmd.arg("GET").arg(k.as_bytes());
        self.run(&cmd).await
    }

    /// Tell every instance's in-process tier that `id` changed (`--l1-invalidate pubsub`): a
    /// PUBLISH on the run's channel; how many subscribers got it.
    pub async fn publish_l1(&self, id: u64) -> Result<u64, CacheError> {
        let channel = crate::l1::channel(&self.prefix);
        self.run(redis::cmd("PUBLISH").arg(channel).arg(id)).await
    }

    pub async fn set(&self, id: u64, value: &[u8], px_ms: u64) -> Result<(), CacheError> {
        let k = KeyBuf::new(&self.prefix, "", id);
        self.run(
            redis::cmd("SET")
                .arg(k.as_bytes())
                .arg(value)
                .arg("PX")
                .arg(px_ms),
        )
        .await
    }

    /// `SET lock:id token NX PX ttl`: true when this caller now holds the lock.
    pub async fn try_lock(&self, id: u64, token: u64, ttl_ms: u64) -> Result<bool, CacheError> {
        self.try_token("lock:", id, token, ttl_ms).await
    }

    async fn try_token(
        &self,
        kind: &str,
        id: u64,
        token: u64,
        ttl_ms: u64,
    ) -> Result<bool, CacheError> {
        let k = KeyBuf::new(&self.prefix, kind, id);
        let r: Option<String> = self
            .run(
                redis::cmd("SET")
                    .arg(k.as_bytes())
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms),
            )
            .await?;
        Ok(r.is_some())
    }

    /// Release the lock if this caller still owns it; false means the lease had run out and the
    /// lock was gone or someone else's.
    pub async fn unlock(&self, id: u64, token: u64) -> Result<bool, CacheError> {
        self.release_token("lock:", id, token).await
    }

    async fn release_token(&self, kind: &str, id: u64, token: u64) -> Result<bool, CacheError> {
        let k = KeyBuf::new(&self.prefix, kind, id);
        let mut c = self.conn();
        let mut inv = self.release.key(k.as_bytes());
        inv.arg(token);
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
    }
}

impl Cache {
    /// A reader's SET under a lease and/or versions, in one Lua call: Ok(false) when refused
    /// (a newer version is cached or announced, or the lease token is no longer the key's).
    pub async fn set_checked(
        &self,
        id: u64,
        value: &[u8],
        px_ms: u64,
        version: u64,
        check: SetCheck,
    ) -> Result<bool, CacheError> {
        let k = KeyBuf::new(&self.prefix, "", id);
        let lease = KeyBuf::new(&self.prefix, LEASE, id);
        let marker = KeyBuf::new(&self.prefix, MARKER, id);
        let mut c = self.conn();
        let mut inv = self.checked_set.key(k.as_bytes());
        inv.key(lease.as_bytes())
            .key(marker.as_bytes())
            .arg(value)
            .arg(px_ms)
            .arg(check.lease.map_or(String::new(), |t| t.to_string()))
            .arg(version)
            .arg(if check.versioned { "1" } else { "0" });
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
    }

    /// A writer's SET after its commit, deleting the key's outstanding lease; versioned, it
    /// raises the version marker (kept `marker_px_ms`) and is refused (Ok(false)) when a newer
    /// version is cached or announced.
    pub async fn writer_set(
        &self,
        id: u64,
        value: &[u8],
        px_ms: u64,
        version: u64,
        versioned: bool,
        marker_px_ms: u64,
    ) -> Result<bool, CacheError> {
        let k = KeyBuf::new(&self.prefix, "", id);
        let lease = KeyBuf::new(&self.prefix, LEASE, id);
        let marker = KeyBuf::new(&self.prefix, MARKER, id);
        let mut c = self.conn();
        let mut inv = self.writer_set.key(k.as_bytes());
        inv.key(lease.as_bytes())
            .key(marker.as_bytes())
            .arg(value)
            .arg(px_ms)
            .arg(version)
            .arg(marker_px_ms)
            .arg(if versioned { "1" } else { "0" });
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
    }

    /// A writer's delete after its commit: the entry and its outstanding lease token, in one
    /// command (so the token's holder cannot SET between the two).
    pub async fn delete(&self, id: u64) -> Result<(), CacheError> {
        let k = KeyBuf::new(&self.prefix, "", id);
        let lease = KeyBuf::new(&self.prefix, LEASE, id);
        self.run::<i64>(redis::cmd("DEL").arg(k.as_bytes()).arg(lease.as_bytes()))
            .await
            .map(|_| ())
    }

    /// `SET lease:id token NX PX ttl`: true when this caller now holds the key's lease.
    pub async fn try_lease(&self, id: u64, token: u64, ttl_ms: u64) -> Result<bool, CacheError> {
        self.try_token(LEASE, id, token, ttl_ms).await
    }

    /// One load's turn in the run's global rate limit, in one Lua call within
    /// `--redis-timeout`: Ok(true) when it may go.
    pub async fn rate_take(&self, ask: GlobalAsk) -> Result<bool, CacheError> {
        let k = KeyBuf::named(&self.prefix, RATE);
        let mut c = self.conn();
        let mut inv = self.rate.key(k.as_bytes());
        inv.arg(ask.step_us).arg(ask.tau_us);
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
    }

    /// Give the lease back if it is still this caller's (a load that failed, or found the
    /// value already there); a SET that presented it consumed it already.
    pub async fn release_lease(&self, id: u64, token: u64) -> Result<bool, CacheError> {
        self.release_token(LEASE, id, token).await
    }
}

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
    conn: Conn,
    prefix: Arc<str>,
    /// A cluster's nodes, each on a connection of its own (INFO, SCAN, PING reach every one
    /// of them); empty for a single server.
    nodes: Arc<[nodes::Node]>,
}

impl Admin {
    /// Open the admin connection with the run's TLS settings: there is no way to open one
    /// without them, so no part of a run (shards, app runs, cleanup) connects otherwise.
    pub async fn open(url: &str, tls: &RedisTls, prefix: Arc<str>) -> Result<Admin> {
        if is_cluster(url) {
            let conn = cluster::connect(url, tls, Duration::from_secs(2), false).await?;
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
    async fn info(&self, section: &str) -> Result<String> {
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
    async fn check_key_access(
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
            Err(e) if memory::is_oom(&e) => {
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
fn cluster_unsupported(url: &str) -> String {
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
fn redis_user(url: &str) -> String {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .and_then(|auth| auth.rsplit_once('@'))
        .map(|(cred, _)| cred.split(':').next().unwrap_or(""))
        .filter(|u| !u.is_empty())
        .unwrap_or("default")
        .to_string()
}

fn info_field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_without_allocation() {
        let k = KeyBuf::new("stampede:ab12:", "lock:", 42);
        assert_eq!(k.as_bytes(), b"stampede:ab12:lock:{42}");
        let k = KeyBuf::new("stampede:ab12:", "", u64::MAX);
        assert_eq!(k.as_bytes(), b"stampede:ab12:{18446744073709551615}");
    }

    #[test]
    fn acl_user_of_a_url() {
        assert_eq!(redis_user("redis://app:secret@h:1/"), "app");
        assert_eq!(redis_user("rediss://:secret@h:1/"), "default");
        assert_eq!(redis_user("redis://h:1/"), "default");
    }

    #[test]
    fn info_fields() {
        let info = "# Stats\r\nkeyspace_hits:12\r\nkeyspace_misses:3\r\n";
        assert_eq!(info_field(info, "keyspace_hits"), Some("12"));
        assert_eq!(info_field(info, "keyspace_misses"), Some("3"));
        assert_eq!(info_field(info, "nope"), None);
    }
}
