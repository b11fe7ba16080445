//! Redis access for one app instance: every command carries a deadline, a failure or a late
//! answer is counted and reported as an error the request path treats as a miss (fail open),
//! and connections reconnect on their own after Redis comes back. Keys live under a per-run
//! namespace so a shared Redis only ever sees this run's keys touched.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Result;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::EnvError;
use crate::metrics::{Counters, bump};
use crate::protect::rate::{GCRA_LUA, GlobalAsk};
use crate::redact;
use crate::strategy::invalidate::{CHECKED_SET_LUA, GUARDED_DELETE_LUA, WRITER_SET_LUA};
use crate::strategy::lock::{EXTEND_LUA, RELEASE_LUA};
use crate::tls::RedisTls;

mod admin;
pub mod client_model;
pub mod local;

mod memory_commands;
pub mod nodes;
pub use crate::cluster::client::{Conn, is_cluster};
use admin::info_field;
pub use admin::{Admin, HEARTBEAT_TTL, RedisStats};
pub use client_model::{ClientModel, RedisClient, WhileDown};

/// Whether `bytes`, an entry read for `id`, holds `id`'s payload: the items table seeds it as
/// md5(id) in hex, repeated, its first 8 characters replaced by the version on a write; so
/// characters 8 to 32 are the md5's. A negative entry (no payload) or one shorter passes.
fn is_its_value(id: u64, bytes: &[u8]) -> bool {
    use md5::Digest;
    let payload = bytes
        .get(crate::strategy::envelope::HEADER_LEN..)
        .unwrap_or_default();
    let n = payload.len().min(32);
    if n <= 8 {
        return true;
    }
    let digest = md5::Md5::digest(id.to_string().as_bytes());
    let mut hex = [0u8; 32];
    for (i, b) in digest.iter().enumerate() {
        hex[2 * i] = b"0123456789abcdef"[usize::from(b >> 4)];
        hex[2 * i + 1] = b"0123456789abcdef"[usize::from(b & 15)];
    }
    payload[8..n] == hex[8..n]
}

/// What a command does under a client that fails while disconnected.
enum Gate {
    /// The connection is up: go.
    Go,
    /// Down: this one goes as the reconnect attempt.
    Probe,
    /// Down: fail at once.
    Fail,
}

/// The reconnect attempt in flight, cleared however it ends.
struct Probe<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        self.0.store(false, Relaxed);
    }
}

/// The connection is down (dropped, refused, reset): what a client library may queue or retry.
fn is_down(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

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

/// Reconnect forever, with the library's backoff (the tool's own: 10 ms doubling to 100 ms):
/// Redis going away mid-run is a scenario, not a failure of the tool. redis-rs's default
/// back-off (100 ms doubling, 6 tries) came back seconds late or never.
fn manager_config(model: &ClientModel) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_min_delay(model.backoff_min)
        .set_max_delay(model.backoff_max)
        .set_exponent_base(model.backoff_factor as f32)
        .set_number_of_retries(usize::MAX)
        .set_connection_timeout(Some(model.connect_timeout))
        .set_response_timeout(None)
}

pub struct Cache {
    conns: Box<[Conn]>,
    next: AtomicUsize,
    timeout: Duration,
    /// What a command does while its connection is down, and the backoff between tries.
    model: ClientModel,
    /// A client that fails commands while disconnected: µs since `epoch` before which they
    /// fail at once (0: the connection is up). One command a backoff goes through, as the
    /// library's reconnect attempt, and clears it when answered.
    down_until_us: AtomicU64,
    /// `--check-values`: every value read is compared with its key's seeded payload.
    check_values: bool,
    /// That command is in flight: the others fail meanwhile.
    probing: std::sync::atomic::AtomicBool,
    epoch: std::time::Instant,
    prefix: Arc<str>,
    release: redis::Script,
    extend: redis::Script,
    checked_set: redis::Script,
    writer_set: redis::Script,
    guarded_delete: redis::Script,
    rate: redis::Script,
    counters: Arc<Counters>,
    /// The instance's own entries, for a library that keeps them in its process
    /// ([`local`]): read and written there instead of Redis.
    local: Option<local::Entries>,
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
    let model = ClientModel {
        connect_timeout: timeout.max(Duration::from_millis(500)),
        ..RedisClient::Stampede.model()
    };
    connect_as(url, tls, &model).await
}

/// [`connect`], the connection reconnecting as the client `model` does.
pub async fn connect_as(
    url: &str,
    tls: &RedisTls,
    model: &ClientModel,
) -> Result<ConnectionManager> {
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
    let fut = ConnectionManager::new_with_config(client, manager_config(model));
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
        let model = ClientModel {
            command_timeout: Some(timeout),
            connect_timeout: timeout.max(Duration::from_millis(500)),
            conns,
            ..RedisClient::Stampede.model()
        };
        Self::open_with(url, &RedisTls::default(), &model, prefix, counters, false).await
    }

    /// As [`Cache::open`], with TLS settings for a `rediss://` URL and the client library's
    /// behaviour (`--redis-client`). On a cluster (`redis+cluster://`) each of the `conns`
    /// connections has one socket per node, so `--redis-conns` is per node; `replicas`: reads
    /// go to replicas (`--read-from-replicas`).
    pub async fn open_with(
        url: &str,
        tls: &RedisTls,
        model: &ClientModel,
        prefix: Arc<str>,
        counters: Arc<Counters>,
        replicas: bool,
    ) -> Result<Cache> {
        let timeout = model.deadline();
        let mut v = Vec::with_capacity(model.conns as usize);
        for _ in 0..model.conns {
            v.push(if is_cluster(url) {
                Conn::Cluster(crate::cluster::client::connect(url, tls, timeout, replicas).await?)
            } else {
                Conn::Single(connect_as(url, tls, model).await?)
            });
        }
        Ok(Cache {
            conns: v.into_boxed_slice(),
            next: AtomicUsize::new(0),
            timeout,
            model: *model,
            down_until_us: AtomicU64::new(0),
            check_values: false,
            probing: std::sync::atomic::AtomicBool::new(false),
            epoch: std::time::Instant::now(),
            prefix,
            release: redis::Script::new(RELEASE_LUA),
            extend: redis::Script::new(EXTEND_LUA),
            checked_set: redis::Script::new(CHECKED_SET_LUA),
            writer_set: redis::Script::new(WRITER_SET_LUA),
            guarded_delete: redis::Script::new(GUARDED_DELETE_LUA),
            rate: redis::Script::new(GCRA_LUA),
            counters,
            local: None,
        })
    }

    fn conn(&self) -> Conn {
        let i = self.next.fetch_add(1, Relaxed) % self.conns.len();
        self.conns[i].clone()
    }

    /// One command under its deadline; on a connection that is down it is sent again as the
    /// client library would (`--redis-client`: at once failed, retried N times, or held until
    /// the connection is back), every try within the one deadline.
    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, CacheError> {
        let _probe = if self.model.while_down == WhileDown::Fail {
            match self.fail_fast() {
                Gate::Go => None,
                Gate::Probe => Some(Probe(&self.probing)),
                Gate::Fail => {
                    bump(&self.counters.redis_errors);
                    return Err(CacheError::Failed);
                }
            }
        } else {
            None
        };
        let tries = async {
            let mut n = 0u32;
            loop {
                let mut c = self.conn();
                match cmd.query_async::<T>(&mut c).await {
                    Err(e) if is_down(&e) && self.again(n) => {
                        n += 1;
                        tokio::time::sleep(self.model.backoff(n)).await;
                    }
                    Err(e) if is_down(&e) => {
                        self.note_down();
                        return Err(e);
                    }
                    r => {
                        if self.model.while_down == WhileDown::Fail {
                            self.down_until_us.store(0, Relaxed);
                        }
                        return r;
                    }
                }
            }
        };
        self.deadline(tries).await
    }

    /// While the connection is down, whether this command fails at once: all do but one per
    /// backoff, which goes through as the reconnect attempt (and the others fail while it is in
    /// flight).
    fn fail_fast(&self) -> Gate {
        let until = self.down_until_us.load(Relaxed);
        if until == 0 {
            return Gate::Go;
        }
        let now = self.epoch.elapsed().as_micros() as u64;
        if now < until || self.probing.swap(true, Relaxed) {
            return Gate::Fail;
        }
        Gate::Probe
    }

    /// The connection was found down: fail commands at once for a backoff.
    fn note_down(&self) {
        if self.model.while_down == WhileDown::Fail {
            let now = self.epoch.elapsed().as_micros() as u64;
            let next = now + self.model.backoff_min.as_micros() as u64;
            self.down_until_us.store(next.max(1), Relaxed);
        }
    }

    /// Whether a command that found its connection down `n` times is sent again.
    fn again(&self, n: u32) -> bool {
        match self.model.while_down {
            WhileDown::Fail | WhileDown::Reconnect => false,
            WhileDown::Retry(k) => n < k,
            WhileDown::Queue => true,
        }
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
                if crate::memory::is_oom(&e) {
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
        let v: Option<Vec<u8>> = match &self.local {
            Some(l) => l.get(id, local::now_ms()),
            None => {
                let k = KeyBuf::new(&self.prefix, "", id);
                // Sized up front: `redis::cmd` grows its buffers argument by argument (one
                // more allocation on every read).
                let mut cmd = redis::Cmd::with_capacity(2, 3 + k.as_bytes().len());
                cmd.arg("GET").arg(k.as_bytes());
                self.run(&cmd).await?
            }
        };
        if self.check_values
            && let Some(bytes) = &v
            && !is_its_value(id, bytes)
        {
            bump(&self.counters.value_mismatches);
        }
        Ok(v)
    }

    /// Check every value read against its key (`--check-values`).
    pub fn checking_values(mut self, on: bool) -> Cache {
        self.check_values = on;
        self
    }

    /// Keep the entries in this instance's memory instead of Redis (a library preset whose
    /// library keeps them in its process, `EntryStore::Process`).
    pub fn in_process(mut self, on: bool) -> Cache {
        self.local = on.then(local::Entries::default);
        self
    }

    /// Whether the entries are this instance's own ([`Cache::in_process`]).
    pub fn is_in_process(&self) -> bool {
        self.local.is_some()
    }

    /// Write entries (id, encoded entry, PX ms) into this instance's own store: the warm-up of
    /// an in-process cache, each instance filled as a warmed-up process would be.
    pub fn warm_in_process(&self, entries: &[(u64, Vec<u8>, u64)]) {
        if let Some(l) = &self.local {
            let now = local::now_ms();
            for (id, v, px) in entries {
                l.set(*id, v, *px, now);
            }
        }
    }

    /// Tell every instance's in-process tier that `id` changed (`--l1-invalidate pubsub`): a
    /// PUBLISH on the run's channel; how many subscribers got it.
    pub async fn publish_l1(&self, id: u64) -> Result<u64, CacheError> {
        let channel = crate::l1::channel(&self.prefix);
        self.run(redis::cmd("PUBLISH").arg(channel).arg(id)).await
    }

    pub async fn set(&self, id: u64, value: &[u8], px_ms: u64) -> Result<(), CacheError> {
        if let Some(l) = &self.local {
            l.set(id, value, px_ms, local::now_ms());
            return Ok(());
        }
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

    /// Extend the lock to `ttl_ms` from now if this caller still owns it; false means it had
    /// run out and is gone or someone else's.
    pub async fn extend_lock(&self, id: u64, token: u64, ttl_ms: u64) -> Result<bool, CacheError> {
        let k = KeyBuf::new(&self.prefix, "lock:", id);
        let mut c = self.conn();
        let mut inv = self.extend.key(k.as_bytes());
        inv.arg(token).arg(ttl_ms);
        Ok(self.deadline(inv.invoke_async::<i64>(&mut c)).await? == 1)
    }

    /// How long the lock of `id` has left; None when no lock is held.
    pub async fn lock_pttl(&self, id: u64) -> Result<Option<Duration>, CacheError> {
        let k = KeyBuf::new(&self.prefix, "lock:", id);
        let ms: i64 = self.run(redis::cmd("PTTL").arg(k.as_bytes())).await?;
        Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
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
        // In one process a reader's SET races no other instance's: nothing to check against.
        if self.local.is_some() {
            return self.set(id, value, px_ms).await.map(|()| true);
        }
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

    /// A writer's guarded delete after its commit (`--invalidate delete-guarded`): the version
    /// marker raised to `version` (kept `marker_px_ms`), then the key and its lease deleted.
    pub async fn guarded_delete(
        &self,
        id: u64,
        version: u64,
        marker_px_ms: u64,
    ) -> Result<(), CacheError> {
        if self.local.is_some() {
            return self.delete(id).await;
        }
        let k = KeyBuf::new(&self.prefix, "", id);
        let lease = KeyBuf::new(&self.prefix, LEASE, id);
        let marker = KeyBuf::new(&self.prefix, MARKER, id);
        let mut c = self.conn();
        let mut inv = self.guarded_delete.key(k.as_bytes());
        inv.key(lease.as_bytes())
            .key(marker.as_bytes())
            .arg(version)
            .arg(marker_px_ms);
        self.deadline(inv.invoke_async::<i64>(&mut c)).await?;
        Ok(())
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
        if self.local.is_some() {
            return self.set(id, value, px_ms).await.map(|()| true);
        }
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
        if let Some(l) = &self.local {
            l.delete(id);
            return Ok(());
        }
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

#[cfg(test)]
mod tests {
    use super::admin::redis_user;
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

#[cfg(test)]
mod value_tests {
    use super::is_its_value;
    use crate::strategy::envelope::HEADER_LEN;

    fn entry(payload: &str) -> Vec<u8> {
        let mut v = vec![0u8; HEADER_LEN];
        v.extend_from_slice(payload.as_bytes());
        v
    }

    #[test]
    fn a_value_is_its_keys_by_the_seeded_md5_whatever_its_version() {
        // md5("1") = c4ca4238a0b923820dcc509a6f75849b; a write replaces the first 8 characters.
        assert!(is_its_value(
            1,
            &entry("c4ca4238a0b923820dcc509a6f75849bc4ca")
        ));
        assert!(is_its_value(1, &entry("00000002a0b923820dcc509a6f75849b")));
        // md5("2") = c81e728d9d4c2f636f067f89cc14862c: another key's value.
        assert!(!is_its_value(1, &entry("c81e728d9d4c2f636f067f89cc14862c")));
        assert!(is_its_value(1, &entry("")));
    }
}
