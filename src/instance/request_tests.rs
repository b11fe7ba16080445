//! The request path's tests: a coordination's claims against a real Redis, and the size of a
//! request's future.

use super::*;
use crate::servers::ManagedRedis;
use crate::strategy::lock::LockTimeoutPolicy;
use crate::strategy::single_flight::follow;
use std::time::Duration;

/// xfetch under mutex+single-flight: a reader drawn to recompute early leads its instance's
/// flight of the key, then finds another instance holding the lock and gives way, serving
/// the value it holds. A request of its instance that missed meanwhile followed it.
#[tokio::test]
async fn an_early_leader_that_gives_way_hands_its_followers_the_value_it_serves() {
    let redis = ManagedRedis::start().await.expect("redis-server starts");
    let counters = Arc::new(Counters::default());
    let cache = Cache::open(
        &redis.url(),
        1,
        Duration::from_secs(2),
        Arc::from("test:"),
        counters.clone(),
    )
    .await
    .expect("connecting");
    // Another instance holds the key's lock.
    assert!(cache.try_lock(7, 1, 60_000).await.expect("SET NX"));
    let settings = Settings {
        ttl_ms: 2000,
        auto_factor: None,
        extend: false,
        poll: Duration::from_millis(50),
        wait: Duration::from_secs(2),
        on_timeout: LockTimeoutPolicy::Load,
        waiters: crate::strategy::lock::LockWaiters::Takeover,
        retry_after: None,
        fallback_writeback: true,
    };
    let coord = Coordinator::new(
        Coordination::MutexSingleFlight,
        settings,
        2000,
        Arc::default(),
    );
    // The value that drew the reader is of version 5.
    let mut early = std::pin::pin!(coord.early(&cache, &counters, 7, 5));
    // Polled once, the early reader leads the flight and waits for Redis's answer.
    tokio::select! {
        biased;
        _ = &mut early => panic!("the lock was asked for without waiting for Redis"),
        () = std::future::ready(()) => {}
    }
    let Miss::Follow(rx) = coord.miss(&cache, &counters, 7).await else {
        panic!("a miss while the early reader leads must follow it")
    };
    assert!(
        early.await.is_none(),
        "the lock is held elsewhere: give way"
    );
    assert_eq!(
        follow(rx).await,
        Ok(5),
        "the follower is served the value its leader serves (version 0 served nothing)"
    );
}

/// Size of the future `f` returns, without running it.
fn future_size<F, Fut>(_f: F) -> usize
where
    F: FnOnce(Arc<Instance>) -> Fut,
{
    std::mem::size_of::<Fut>()
}

/// Every open-loop worker holds a request future sized for its largest path, even idle:
/// the loading paths are boxed so that size stays that of the hit path.
#[test]
fn request_future_is_sized_for_the_hit_path() {
    let handle = future_size(|i| async move { i.handle(1).await });
    let read = future_size(|i| async move { i.read(1).await });
    let fill = future_size(|i| async move { i.fill(1, None, Why::Absent).await });
    assert!(handle < read + 256, "handle {handle} B, read {read} B");
    assert!(handle < fill, "handle {handle} B, fill {fill} B");
}
