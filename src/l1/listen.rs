//! Each instance's invalidation connection: how its tier hears that another instance changed
//! a key. `pubsub`: a subscriber on the run's channel (RESP2 pub/sub), reconnected when it
//! drops; what was published meanwhile is lost, and the tier keeps serving what it holds
//! until its TTL (availability over correctness, as a pub/sub cache bus is). `tracking`: a
//! RESP3 connection with `CLIENT TRACKING ON BCAST PREFIX <namespace>`: Redis pushes an
//! invalidation for every change of a key under the run's namespace, whichever connection
//! read it (broadcast mode; the default mode would have to route every read through this one
//! connection). When it drops the tier is flushed and bypassed until tracking is on again
//! (correctness over availability, as redis-rs's cache, rueidis and Lettuce do).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures_util::StreamExt;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{L1, L1Invalidate};
use crate::error::EnvError;
use crate::redact;
use crate::tls::RedisTls;

/// Wait between attempts to re-establish a dropped invalidation connection.
const RETRY: Duration = Duration::from_millis(50);

/// The key id in an entry key of the run's namespace (`<prefix>{<id>}`); None for the
/// namespace's other keys (locks, leases, markers).
fn entry_id(key: &[u8], prefix: &[u8]) -> Option<u64> {
    let rest = key
        .strip_prefix(prefix)?
        .strip_prefix(b"{")?
        .strip_suffix(b"}")?;
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// Open `l1`'s invalidation connection (none under `ttl`) and keep it open until `abort`.
/// The first attempt's failure is the run's: an error naming what to check.
pub async fn connect(
    l1: Arc<L1>,
    mode: L1Invalidate,
    url: &str,
    tls: &RedisTls,
    prefix: Arc<str>,
    abort: CancellationToken,
) -> Result<()> {
    let fail = |what: &str, e: redis::RedisError| {
        EnvError(format!(
            "--l1-invalidate {mode}: cannot {what} on Redis at {}: {e} (is it Redis 6 or later, and reachable?)",
            redact::url(url)
        ))
    };
    match mode {
        L1Invalidate::Ttl => Ok(()),
        L1Invalidate::Pubsub => {
            let client = crate::tls::redis_client(url, tls)?;
            let channel = super::channel(&prefix);
            let stream = subscribe(&client, &channel)
                .await
                .map_err(|e| fail("subscribe to the invalidation channel", e))?;
            tokio::spawn(pubsub(l1, client, channel, stream, abort));
            Ok(())
        }
        L1Invalidate::Tracking => {
            let base = crate::tls::redis_client(url, tls)?;
            let info = base.get_connection_info().clone();
            let resp3 = info
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3);
            let client = redis::Client::open(info.set_redis_settings(resp3))
                .map_err(|e| fail("open a RESP3 connection", e))?;
            let dropped = Arc::new(Notify::new());
            let conn = track(&client, &l1, &prefix, &dropped)
                .await
                .map_err(|e| fail("turn CLIENT TRACKING on", e))?;
            tokio::spawn(tracking(l1, client, prefix, dropped, conn, abort));
            Ok(())
        }
    }
}

async fn subscribe(client: &redis::Client, channel: &str) -> redis::RedisResult<PubSubStream> {
    let mut ps = client.get_async_pubsub().await?;
    ps.subscribe(channel).await?;
    Ok(ps.into_on_message())
}

type PubSubStream = redis::aio::PubSubStream;

/// Drop every key published on the channel; resubscribe when the connection drops.
async fn pubsub(
    l1: Arc<L1>,
    client: redis::Client,
    channel: String,
    mut stream: PubSubStream,
    abort: CancellationToken,
) {
    loop {
        loop {
            let msg = tokio::select! {
                m = stream.next() => m,
                _ = abort.cancelled() => return,
            };
            let Some(msg) = msg else { break };
            if let Some(id) = std::str::from_utf8(msg.get_payload_bytes())
                .ok()
                .and_then(|s| s.parse().ok())
            {
                l1.received(id);
            }
        }
        stream = loop {
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = abort.cancelled() => return,
            }
            if let Ok(s) = subscribe(&client, &channel).await {
                break s;
            }
        };
    }
}

/// A RESP3 connection whose pushes invalidate `l1`, with broadcast tracking of the run's
/// namespace on; the tier resumes once tracking is on. Its drop suspends the tier and
/// wakes `dropped`.
async fn track(
    client: &redis::Client,
    l1: &Arc<L1>,
    prefix: &Arc<str>,
    dropped: &Arc<Notify>,
) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let (tier, wake, pfx) = (l1.clone(), dropped.clone(), prefix.clone());
    // Runs on the connection's own task, in the order Redis sent the pushes; it must not
    // block, and takes one shard's mutex briefly per key.
    let on_push = move |p: PushInfo| -> Result<(), std::convert::Infallible> {
        match p.kind {
            PushKind::Invalidate => {
                for v in p.data {
                    match v {
                        Value::Array(keys) => {
                            for k in keys {
                                if let Value::BulkString(b) = k
                                    && let Some(id) = entry_id(&b, pfx.as_bytes())
                                {
                                    tier.received(id);
                                }
                            }
                        }
                        // FLUSHDB/FLUSHALL: every key is invalid.
                        Value::Nil => tier.flush(),
                        _ => {}
                    }
                }
            }
            PushKind::Disconnection => {
                tier.suspend();
                wake.notify_one();
            }
            _ => {}
        }
        Ok(())
    };
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_push_sender(on_push);
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    redis::cmd("CLIENT")
        .arg("TRACKING")
        .arg("ON")
        .arg("BCAST")
        .arg("PREFIX")
        .arg(prefix.as_bytes())
        .query_async::<()>(&mut conn)
        .await?;
    l1.resume();
    Ok(conn)
}

/// Hold the tracking connection; when it drops (the tier is suspended then), open another
/// until one takes, or the run ends.
async fn tracking(
    l1: Arc<L1>,
    client: redis::Client,
    prefix: Arc<str>,
    dropped: Arc<Notify>,
    conn: redis::aio::MultiplexedConnection,
    abort: CancellationToken,
) {
    let mut conn = Some(conn);
    loop {
        tokio::select! {
            _ = dropped.notified() => {}
            _ = abort.cancelled() => return,
        }
        drop(conn.take());
        conn = loop {
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = abort.cancelled() => return,
            }
            if let Ok(c) = track(&client, &l1, &prefix, &dropped).await {
                break Some(c);
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_entry_keys_of_the_namespace_name_an_id() {
        let p = b"stampede:ab12:";
        assert_eq!(entry_id(b"stampede:ab12:{42}", p), Some(42));
        assert_eq!(entry_id(b"stampede:ab12:42", p), None);
        assert_eq!(entry_id(b"stampede:ab12:lease:{42}", p), None);
        assert_eq!(entry_id(b"stampede:ab12:", p), None);
        assert_eq!(entry_id(b"stampede:zz:{42}", p), None);
    }
}
