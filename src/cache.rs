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
use crate::strategy::lock::RELEASE_LUA;
use crate::values::redact_url;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheError {
    /// The deadline (`--redis-timeout`) passed first.
    Timeout,
    /// Redis answered with an error or the connection is down.
    Failed,
}

/// A Redis key written into a stack buffer, so building one costs no allocation.
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
        let _ = write!(w, "{prefix}{middle}{id}");
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
    conns: Box<[ConnectionManager]>,
    next: AtomicUsize,
    timeout: Duration,
    prefix: Arc<str>,
    release: redis::Script,
    counters: Arc<Counters>,
}

/// Open a connection manager, giving up after a few seconds with an error naming the URL.
pub async fn connect(url: &str, timeout: Duration) -> Result<ConnectionManager> {
    let client = redis::Client::open(url)
        .map_err(|e| EnvError(format!("bad Redis URL {}: {e}", redact_url(url))))?;
    let fut = ConnectionManager::new_with_config(client, manager_config(timeout));
    match tokio::time::timeout(Duration::from_secs(5), fut).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(EnvError(format!(
            "cannot connect to Redis at {}: {e} (is it running and reachable?)",
            redact_url(url)
        ))
        .into()),
        Err(_) => Err(EnvError(format!(
            "cannot connect to Redis at {}: no answer within 5 s",
            redact_url(url)
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
        let mut v = Vec::with_capacity(conns as usize);
        for _ in 0..conns {
            v.push(connect(url, timeout).await?);
        }
        Ok(Cache {
            conns: v.into_boxed_slice(),
            next: AtomicUsize::new(0),
            timeout,
            prefix,
            release: redis::Script::new(RELEASE_LUA),
            counters,
        })
    }

    fn conn(&self) -> ConnectionManager {
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
            Ok(Err(_)) => {
                bump(&self.counters.redis_errors);
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
        let k = KeyBuf::new(&self.prefix, "lock:", id);
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
        let k = KeyBuf::new(&self.prefix, "lock:", id);
        let mut c = self.conn();
        let mut inv = self.release.key(k.as_bytes());
        inv.arg(token);
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
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
}

/// The tool's own connection for reading INFO and cleaning up; never used by requests, so its
/// commands do not pollute the keyspace figures.
#[derive(Clone)]
pub struct Admin {
    conn: ConnectionManager,
    prefix: Arc<str>,
}

impl Admin {
    pub async fn open(url: &str, prefix: Arc<str>) -> Result<Admin> {
        Ok(Admin {
            conn: connect(url, Duration::from_secs(2)).await?,
            prefix,
        })
    }

    async fn info(&self, section: &str) -> Result<String> {
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

    /// `CLIENT PAUSE <ms> ALL`: the server stops running every client's commands for `d`
    /// (connections stay open, commands wait), then resumes by itself. The reply comes before
    /// the pause starts.
    pub async fn pause(&self, d: Duration) -> Result<()> {
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

    pub async fn version(&self) -> Result<String> {
        let info = self.info("server").await?;
        Ok(info_field(&info, "redis_version")
            .unwrap_or("unknown")
            .to_string())
    }

    pub async fn stats(&self) -> Result<RedisStats> {
        let info = self.info("stats").await?;
        let num = |k| {
            info_field(&info, k)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(RedisStats {
            keyspace_hits: num("keyspace_hits"),
            keyspace_misses: num("keyspace_misses"),
        })
    }

    /// Write entries directly (cache warming), pipelined, outside the request path:
    /// (id, value, PX in ms).
    pub async fn set_many(&self, entries: &[(u64, Vec<u8>, u64)]) -> Result<()> {
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

    /// Say this run is alive: the namespace's heartbeat key, which expires unless renewed
    /// (`stampede cleanup` treats a namespace without one as a dead run's).
    pub async fn heartbeat(&self) -> Result<()> {
        let mut c = self.conn.clone();
        redis::cmd("SET")
            .arg(format!("{}{HEARTBEAT}", self.prefix))
            .arg(std::process::id())
            .arg("PX")
            .arg(HEARTBEAT_TTL.as_millis() as u64)
            .query_async::<()>(&mut c)
            .await
            .context("writing the run's heartbeat")
    }

    /// Run namespaces (`stampede:<id>:`) with keys in this Redis and no live heartbeat: runs
    /// that died without removing their keys.
    pub async fn dead_namespaces(&self) -> Result<Vec<String>> {
        let mut c = self.conn.clone();
        let mut ids = std::collections::BTreeSet::new();
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
        }
    }

    /// Delete every key of this run's namespace (SCAN + UNLINK; never FLUSH a shared server).
    pub async fn remove_namespace(&self) -> Result<u64> {
        let mut c = self.conn.clone();
        let pattern = format!("{}*", self.prefix);
        let mut cursor: u64 = 0;
        let mut removed = 0;
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
                removed += keys.len() as u64;
                redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async::<()>(&mut c)
                    .await
                    .context("removing the run's keys")?;
            }
            if next == 0 {
                return Ok(removed);
            }
            cursor = next;
        }
    }
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
        assert_eq!(k.as_bytes(), b"stampede:ab12:lock:42");
        let k = KeyBuf::new("stampede:ab12:", "", u64::MAX);
        assert_eq!(k.as_bytes(), b"stampede:ab12:18446744073709551615");
    }

    #[test]
    fn info_fields() {
        let info = "# Stats\r\nkeyspace_hits:12\r\nkeyspace_misses:3\r\n";
        assert_eq!(info_field(info, "keyspace_hits"), Some("12"));
        assert_eq!(info_field(info, "keyspace_misses"), Some("3"));
        assert_eq!(info_field(info, "nope"), None);
    }
}
