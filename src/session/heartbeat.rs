//! The run's heartbeats: what tells `stampede cleanup` that a run on servers it did not start
//! is alive. One in Redis, the key `stampede:<id>:heartbeat`, which expires 5 s after its last
//! renewal, and one in Postgres, the row of the run's schema that `cleanup --older-than` judges.
//! Each is renewed on its own clock and each renewal is bounded in time: a server that stalls
//! (a Postgres that stops answering, a paused Redis) holds up only its own heartbeat, never the
//! other's, so a stalled Postgres cannot let the Redis key lapse and a concurrent `cleanup`
//! remove a live run's keys. A renewal that fails or runs late is said on stderr, and the
//! longest gap of each heartbeat goes into the result (`servers.heartbeat`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::cache::{Admin, HEARTBEAT_TTL};
use crate::origin::Db;
use crate::results::HeartbeatFigures;

/// When heartbeats are renewed and how long a renewal may take.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// How often a heartbeat is renewed.
    every: Duration,
    /// How long one renewal may take before it counts as failed and the next is tried.
    bound: Duration,
    /// How long the Redis key lives after a renewal.
    life: Duration,
}

/// Every second, each renewal given 1.5 s: well inside the Redis key's 5 s life, so a late
/// renewal still leaves room for two more.
const TIMING: Timing = Timing {
    every: Duration::from_secs(1),
    bound: Duration::from_millis(1500),
    life: HEARTBEAT_TTL,
};

/// How long one renewal may take (for a heartbeat written once, outside the loop).
pub(crate) const BOUND: Duration = TIMING.bound;

/// The servers a heartbeat is kept on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Redis,
    Postgres,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Redis => "Redis",
            Server::Postgres => "Postgres",
        }
    }

    /// What a heartbeat left unrenewed too long lets `cleanup` do.
    fn at_risk(self, life: Duration) -> String {
        match self {
            Server::Redis => format!(
                "once {} pass without a renewal the key expires and a `stampede cleanup` would take the run for dead and remove its keys",
                secs(life)
            ),
            Server::Postgres => "a `stampede cleanup --pg-url` takes the run for dead once its heartbeat is older than --older-than (60 s by default) and would drop its schema".to_string(),
        }
    }
}

/// One heartbeat's record: when it was last renewed and how it went.
#[derive(Debug, Default)]
struct Track {
    /// The last renewal that completed (or when the heartbeat began, before the first).
    since: Option<Instant>,
    /// Longest time between two completed renewals so far.
    longest: Duration,
    /// Renewals that failed or did not complete within [`BOUND`].
    failed: u64,
    /// Whether the current run of failures has been said already (one warning per episode).
    warned: bool,
}

/// The heartbeats of one run: kept while the run's work goes ([`Heartbeat::redis`],
/// [`Heartbeat::postgres`]), then read for the result ([`Heartbeat::figures`]).
#[derive(Debug)]
pub(crate) struct Heartbeat {
    timing: Timing,
    redis: Mutex<Track>,
    postgres: Mutex<Track>,
}

/// A duration as a user reads it: `5 s`, `1.5 s`, `50 ms`.
fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", (d.as_secs_f64() * 10.0).round() / 10.0)
    }
}

impl Heartbeat {
    pub(crate) fn new() -> Heartbeat {
        Heartbeat::with(TIMING)
    }

    fn with(timing: Timing) -> Heartbeat {
        Heartbeat {
            timing,
            redis: Mutex::default(),
            postgres: Mutex::default(),
        }
    }

    fn track(&self, server: Server) -> std::sync::MutexGuard<'_, Track> {
        match server {
            Server::Redis => &self.redis,
            Server::Postgres => &self.postgres,
        }
        .lock()
        .unwrap_or_else(|p| p.into_inner())
    }

    /// Run `work` while renewing the run's heartbeat in Redis.
    pub(crate) async fn redis<T>(&self, admin: &Admin, work: impl Future<Output = T>) -> T {
        let beat = self.keep(Server::Redis, || admin.heartbeat());
        tokio::select! {
            biased;
            never = beat => match never {},
            t = work => t,
        }
    }

    /// Run `work` while renewing the heartbeat row of the run's schema (nothing to renew under
    /// `--db-sql`: the run has no schema).
    pub(crate) async fn postgres<T>(&self, db: &Db, work: impl Future<Output = T>) -> T {
        if !db.keeps_heartbeat() {
            return work.await;
        }
        let beat = self.keep(Server::Postgres, || db.heartbeat());
        tokio::select! {
            biased;
            never = beat => match never {},
            t = work => t,
        }
    }

    /// Run `work` while renewing both heartbeats, each on its own.
    pub(crate) async fn both<T>(&self, admin: &Admin, db: &Db, work: impl Future<Output = T>) -> T {
        self.redis(admin, self.postgres(db, work)).await
    }

    /// Renew one heartbeat every second for as long as the future is polled, each attempt
    /// bounded in time.
    async fn keep<F, Fut>(&self, server: Server, renew: F) -> Infallible
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        {
            let mut t = self.track(server);
            if t.since.is_none() {
                t.since = Some(Instant::now());
            }
        }
        let Timing { every, bound, .. } = self.timing;
        loop {
            let started = Instant::now();
            let outcome = match tokio::time::timeout(bound, renew()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("{e:#}")),
                Err(_) => Err(format!("no answer within {}", secs(bound))),
            };
            self.note(server, Instant::now(), outcome);
            // An attempt that ran out its bound is followed by the next at once.
            tokio::time::sleep_until(started + every).await;
        }
    }

    /// Record one renewal's outcome, saying on stderr when a heartbeat starts failing and when
    /// it is renewed again.
    fn note(&self, server: Server, now: Instant, outcome: Result<(), String>) {
        let life = self.timing.life;
        let mut t = self.track(server);
        match outcome {
            Ok(()) => {
                let gap = t.since.map_or(Duration::ZERO, |s| now.duration_since(s));
                t.longest = t.longest.max(gap);
                t.since = Some(now);
                if t.warned {
                    t.warned = false;
                    let lapsed = if server == Server::Redis && gap > life {
                        format!(
                            ": longer than the key's {} life, so a `stampede cleanup` meanwhile could have removed this run's keys (servers.heartbeat in the result says so)",
                            secs(life)
                        )
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "warning: this run's heartbeat in {} is renewed again, after {} without{lapsed}",
                        server.name(),
                        secs(gap)
                    );
                }
            }
            Err(why) => {
                t.failed += 1;
                if !t.warned {
                    t.warned = true;
                    eprintln!(
                        "warning: could not renew this run's heartbeat in {}: {why}. Retrying every second; {}",
                        server.name(),
                        server.at_risk(life)
                    );
                }
            }
        }
    }

    /// Longest time one heartbeat went without a renewal up to now, or None when it was never
    /// kept.
    fn longest(&self, server: Server, now: Instant) -> Option<Duration> {
        let t = self.track(server);
        let since = t.since?;
        Some(t.longest.max(now.duration_since(since)))
    }

    /// What the heartbeats were, for the result: the longest gaps and, when one was longer
    /// than the Redis key's life, what it may have cost.
    pub(crate) fn figures(&self) -> HeartbeatFigures {
        let now = Instant::now();
        let life = self.timing.life;
        let ms = |d: Duration| d.as_millis().min(u128::from(u64::MAX)) as u64;
        let redis = self.longest(Server::Redis, now);
        let postgres = self.longest(Server::Postgres, now);
        let failed = self.track(Server::Redis).failed + self.track(Server::Postgres).failed;
        let mut notes = Vec::new();
        if let Some(g) = redis.filter(|g| *g > life) {
            notes.push(format!(
                "the Redis heartbeat went {} without a renewal, longer than its key's {} life: a `stampede cleanup` in that time could have removed this run's keys (its figures would then count the misses that caused)",
                secs(g),
                secs(life)
            ));
        }
        if let Some(g) = postgres.filter(|g| *g > life) {
            notes.push(format!(
                "the Postgres heartbeat went {} without a renewal: a `stampede cleanup --older-than` shorter than that could have dropped this run's schema",
                secs(g)
            ));
        }
        HeartbeatFigures {
            redis_longest_gap_ms: redis.map(ms),
            postgres_longest_gap_ms: postgres.map(ms),
            failed_renewals: failed,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// The production timing scaled down 50×; the tests run on paused time, so the gaps they
    /// measure are exact however loaded the machine is.
    const FAST: Timing = Timing {
        every: Duration::from_millis(20),
        bound: Duration::from_millis(30),
        life: Duration::from_millis(100),
    };

    /// A renewal that never answers is given up after its bound and retried, and the other
    /// heartbeat goes on meanwhile: the stalled one's gap grows, the other's stays near its
    /// period.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_heartbeat_does_not_hold_up_the_other() {
        let hb = Heartbeat::with(FAST);
        let stalled = hb.keep(Server::Postgres, std::future::pending::<Result<()>>);
        let healthy = hb.keep(Server::Redis, || async { Ok(()) });
        tokio::select! {
            never = stalled => match never {},
            never = healthy => match never {},
            () = tokio::time::sleep(Duration::from_millis(400)) => {}
        }
        let f = hb.figures();
        let redis = f.redis_longest_gap_ms.expect("kept");
        assert!(
            redis < 100,
            "the healthy heartbeat went {redis} ms without a renewal"
        );
        let pg = f.postgres_longest_gap_ms.expect("kept");
        assert!(pg >= 400, "{pg}");
        // One attempt per bound at most: 400 ms hold about 13.
        assert!(
            (5..=14).contains(&f.failed_renewals),
            "{}",
            f.failed_renewals
        );
        let note = f.note.expect("a note for the long gap");
        assert!(note.contains("the Postgres heartbeat went"), "{note}");
        assert!(!note.contains("Redis"), "{note}");
    }

    /// A Redis heartbeat that lapsed past its key's life is said in the result's note; one
    /// renewed on time has none.
    #[tokio::test(start_paused = true)]
    async fn a_lapsed_redis_heartbeat_leaves_a_note() {
        let hb = Heartbeat::with(FAST);
        let calls = AtomicU32::new(0);
        // The first renewal works, the next eight fail, the rest work again.
        let renew = || {
            let n = calls.fetch_add(1, Relaxed);
            async move {
                if (1..=8).contains(&n) {
                    anyhow::bail!("connection refused")
                }
                Ok(())
            }
        };
        let beat = hb.keep(Server::Redis, renew);
        tokio::select! {
            never = beat => match never {},
            () = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        let f = hb.figures();
        assert_eq!(f.failed_renewals, 8);
        let gap = f.redis_longest_gap_ms.expect("kept");
        assert!((180..280).contains(&gap), "{gap}");
        assert_eq!(f.postgres_longest_gap_ms, None, "never kept");
        let note = f.note.expect("lapsed");
        assert!(note.contains("longer than its key's 100 ms life"), "{note}");

        let fine = Heartbeat::with(FAST);
        let beat = fine.keep(Server::Redis, || async { Ok(()) });
        tokio::select! {
            never = beat => match never {},
            () = tokio::time::sleep(Duration::from_millis(120)) => {}
        }
        let f = fine.figures();
        assert_eq!(f.failed_renewals, 0);
        assert_eq!(f.note, None);
    }
}
