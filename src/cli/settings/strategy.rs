//! The strategy's settings and the protections in front of the database.

use crate::protect::rate::RateScope;
use crate::strategy::lock::{LockTimeoutPolicy, LockWaiters, Writeback};
use crate::values::valid::*;
use crate::values::{Dur, LockTtl, Percent, Rate};

settings! {
    #[command(next_help_heading = "Strategy")]
    pub struct StrategyFlags / StrategyResolved {

        /// The strategy (scenario file key `strategy`); on the command line it is `run --strategy`,
        /// and `compare --strategies` for a comparison.
        #[arg(skip)]
        pub strategy: Option<String> => or, check strategy_name;

        /// XFetch: how eagerly to recompute early [default: 1.0]
        ///
        /// How eagerly to recompute before expiry (0 disables early recompute).
        #[arg(long, value_name = "BETA")]
        pub beta: Option<f64> => or,
            default 1.0,
            search "0.5,2" when |s| s.freshness.early(),
            check zero_or_more;

        /// SWR: how long a stale entry may be served [default: 10s]
        ///
        /// How long past its soft expiry an entry may still be served while it is refreshed.
        #[arg(long, value_name = "DURATION")]
        pub stale: Option<Dur> => or, search "2s,30s" when |s| s.freshness.windowed();

        /// Mutex: lease of the Redis lock (PX), or auto [default: 2s]
        ///
        /// auto: --lock-ttl-factor × the p99 of the run's load times so far (at least 100 ms;
        /// 2s until the first load completes), taken afresh at each lock.
        #[arg(long, value_name = "DURATION|auto")]
        pub lock_ttl: Option<LockTtl> => or,
            default LockTtl::Fixed(Dur::secs(2)),
            search "500ms,5s,auto" when |s| s.coordination.mutex(),
            check lease_positive;

        /// Mutex: --lock-ttl auto's multiple of the load p99 [default: 3]
        #[arg(hide_short_help = true, long, value_name = "K")]
        pub lock_ttl_factor: Option<f64> => or, default 3.0, check above_zero;

        /// Mutex: the holder extends its lease while it loads
        ///
        /// Every third of the lease, while its load runs, the holder extends the lock to a full
        /// lease again if it still holds it (compare-and-extend in Lua, as Redisson's watchdog),
        /// retrying within the lease when Redis is slow (lock.extended). A holder that dies is
        /// not extended: its key is blocked for at most one lease. --lock-extend alone is
        /// --lock-extend=true.
        #[arg(long, value_name = "BOOL")]
        pub lock_extend: Option<bool> => or, search "true" when |s| s.coordination.mutex();

        /// Mutex: how often a waiter polls the cache [default: 50ms]
        ///
        /// With ±50% jitter.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub lock_poll: Option<Dur> => or, default Dur::millis(50), check positive;

        /// Mutex: longest wait of a waiter [default: 2s]
        ///
        /// How long a waiter waits before applying --lock-timeout-policy.
        #[arg(long, value_name = "DURATION")]
        pub lock_wait: Option<Dur> => or, default Dur::secs(2), search "250ms,1s" when |s| s.coordination.mutex() || s.coordination.single_flight();

        /// Mutex: past --lock-wait: load, error, stale or retry-after [default: load]
        ///
        /// What a waiter does when --lock-wait runs out.
        ///
        /// load: load from the database anyway (outcome `fallback`).
        ///
        /// error: give up (outcome `error`).
        ///
        /// stale: serve the stale value if there is one (needs the swr freshness), else load.
        ///
        /// retry-after: answer "retry after D" (outcome `retry-after`, as a 503 with
        /// Retry-After): D is --retry-after, else the lock's remaining lease; with --retries the
        /// client waits D before its next attempt instead of its own backoff.
        #[arg(hide_short_help = true, long, value_name = "POLICY")]
        pub lock_timeout_policy: Option<LockTimeoutPolicy> => or, default LockTimeoutPolicy::Load;

        /// Mutex: waiters take a freed lock over, or reread [default: takeover]
        ///
        /// takeover: after each poll that finds no value a waiter tries to take the lock, so a
        /// holder that died or whose lease ran out is replaced at once.
        ///
        /// reread: waiters only read the cache again, as the stampede references' waiters do;
        /// a key whose holder is gone waits for --lock-wait, then --lock-timeout-policy.
        #[arg(hide_short_help = true, long, value_name = "MODE")]
        pub lock_waiters: Option<LockWaiters> => or, search "reread" when |s| s.coordination.mutex();

        /// Mutex: the D of a retry-after answer [default: the lock's remaining lease]
        ///
        /// Under --lock-timeout-policy retry-after; the lock's remaining lease is read with
        /// PTTL at the moment of the answer.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub retry_after: Option<Dur> => or, check positive;

        /// Mutex: cache the load made past --lock-wait [default: on]
        ///
        /// on: a waiter whose wait ran out and loaded (--lock-timeout-policy load) writes the
        /// value back, as the holder would. off: it answers with it without caching it, as the
        /// references do, so only a lock holder writes the key.
        #[arg(hide_short_help = true, long, value_name = "on|off")]
        pub fallback_writeback: Option<Writeback> => or, search "off" when |s| s.coordination.mutex();

        /// Fail-safe: serve D past expiry on a failure [default: off]
        ///
        /// Every entry stays in Redis D past its hard expiry (past the stale window under swr).
        /// A request that finds such an entry loads as on a miss; only when that load fails (an
        /// error, a timeout, a refusal by --db-limit, --breaker or --db-rate) is the kept value
        /// served (outcome `stale`, counted in db.fail_safe), and the key is not tried again on
        /// that instance for --fail-safe-throttle. Not swr: swr serves stale instead of waiting
        /// for a load, fail-safe only when the load fails; with swr, swr's window comes first. The
        /// same kept entry is what --lock-timeout-policy stale serves when a wait runs out.
        #[arg(long, value_name = "DURATION")]
        pub fail_safe: Option<Dur> => or, search "30s" when |s| s.caches(), under fault, check positive;

        /// Fail-safe: no load of a failed key for D [default: 30s]
        ///
        /// After a key's load failed and its kept value was served, the instance serves that
        /// value without a load for D (db.fail_safe_throttled), so a failing database is not
        /// asked for the key by every request.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub fail_safe_throttle: Option<Dur> => or, check positive;

        /// Soft timeout: answer with the kept value at D [default: off]
        ///
        /// When a request holds a kept value (--fail-safe, which it needs) and its load has not
        /// finished within D, it is answered with that value at D (db.soft_timeouts) and the load
        /// goes on behind it and writes back (db.soft_timeout_write_backs). Not a third hard
        /// timeout: a load's hard bounds stay --db-timeout and the client's --request-timeout.
        #[arg(long, value_name = "DURATION")]
        pub soft_timeout: Option<Dur> => or, check positive;

        /// Eager refresh: refresh at P of the TTL [default: off]
        ///
        /// A read of a fresh entry that has lived at least P (e.g. 80%) of its TTL is served and
        /// starts one background refresh of the key in its instance, unless one is running
        /// (db.eager_refreshes); a fixed-threshold counterpart to xfetch's probabilistic early
        /// recompute (Caffeine's refreshAfterWrite, FusionCache's eager refresh).
        #[arg(long, value_name = "P")]
        pub eager_refresh: Option<Percent> => or,
            search "50%,80%" when |s| s.plain(),
            check share_of_ttl;

        /// Refresh-ahead: re-load the hot keys every D [default: off]
        ///
        /// A background job re-loads the --rewarm-top most popular keys every D from the start of
        /// the traffic and writes them with a full TTL, fresh or not (refresh-ahead on a
        /// schedule), under the strategy's coordination; its loads are DB calls, also counted
        /// apart (db.rewarm_calls).
        #[arg(long, value_name = "DURATION")]
        pub rewarm_every: Option<Dur> => or, check positive;

        /// Refresh-ahead: how many of the hottest keys [default: 100]
        ///
        /// The keys of popularity rank 1..=K (the most requested) are re-loaded every
        /// --rewarm-every.
        #[arg(hide_short_help = true, long, value_name = "K")]
        pub rewarm_top: Option<u64> => or, default 100, check at_least(1);

        /// L1: in-process LRU entries per instance [default: off]
        ///
        /// Each app instance keeps the entries it read or loaded in an LRU of N entries (an L1
        /// in front of Redis): a request reads it first (outcome `l1-hit`), then Redis, then the
        /// database; a load writes both. Lock polls and re-checks read Redis. What it costs in
        /// consistency depends on --l1-invalidate; docs/l1.md has the figures.
        #[arg(long, value_name = "N")]
        pub l1: Option<u64> => or,
            search "1000,10000" when |s| s.plain_or_in_process(),
            check at_least(1),
            check at_most(100_000_000, "entries per instance");

        /// L1: how long an entry is served [default: its Redis TTL]
        ///
        /// An entry is served from the tier for D after it was read or loaded, never past its
        /// Redis entry's own expiry (the default: exactly that).
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub l1_ttl: Option<Dur> => or, search "250ms,1s" when |s| s.plain_or_in_process(), with l1, check positive;

        /// L1: invalidation: ttl, pubsub or tracking [default: ttl]
        ///
        /// ttl: it does not; an entry changed by another instance is served until its L1 TTL.
        ///
        /// pubsub: every write publishes its key on the run's channel and every instance drops
        /// it (a message lost while the subscriber reconnects is lost: the tier keeps serving).
        ///
        /// tracking: Redis client-side caching (CLIENT TRACKING, broadcast mode on the run's
        /// namespace, RESP3 pushes); when that connection drops the tier is flushed and bypassed
        /// until tracking is on again.
        #[arg(hide_short_help = true, long, value_name = "MODE")]
        pub l1_invalidate: Option<crate::l1::L1Invalidate> => or;

        /// Spread TTLs within ±P [default: 0%; 10% under jitter]
        ///
        /// Spread every TTL written uniformly within ±P (e.g. 10%); 0% by default, 10% for
        /// --strategy jitter.
        #[arg(long, value_name = "P")]
        pub jitter: Option<Percent> => or, search "5%,20%" when |s| s.jitter_preset;

        /// Lease: how long a lease token lives [default: 2s]
        ///
        /// It lives that long unless the holder's SET consumes it first; one token per key at a
        /// time, and a write's delete removes it. Only with a lease strategy (lease, swr+lease,
        /// xfetch+lease).
        #[arg(long, value_name = "DURATION")]
        pub lease_ttl: Option<Dur> => or,
            default Dur::secs(2),
            search "500ms,5s" when |s| s.coordination.lease(),
            check positive;
    }
}

settings! {
    #[command(next_help_heading = "Protection")]
    pub struct ProtectionFlags / ProtectionResolved {

        /// Bulkhead: most loads in flight per instance [default: off]
        ///
        /// Most loads in flight at once per instance (a bulkhead): a load over the limit is not
        /// queued, it is refused without reaching Postgres, and its request is served the value it
        /// holds, if any (an xfetch early recompute keeps the current one; under swr, an entry kept
        /// past its window), or else fails fast with outcome `rejected` (not an error).
        #[arg(long, value_name = "N")]
        pub db_limit: Option<u32> => or,
            check at_least(1),
            check at_most(100_000, "loads in flight at once per instance");

        /// Rate limit: most loads per second [default: off]
        ///
        /// A token bucket on loads: at most R a second (accepts 1k), --db-burst at once after an
        /// idle spell, per instance or for the whole run (--db-rate-scope). A load over the limit
        /// is not queued, it is refused without reaching Postgres, like the bulkhead's (stale if
        /// held, else `rejected`); the re-warm job's loads pass through it too.
        #[arg(long, value_name = "R")]
        pub db_rate: Option<Rate> => or,
            check rate_above_zero("loads");

        /// Rate limit: loads let through at once [default: R/10]
        ///
        /// The token bucket's size: after an idle spell this many loads go at once, then one every
        /// 1/R. Default: a tenth of a second's worth (R/10), at least 1.
        #[arg(hide_short_help = true, long, value_name = "B")]
        pub db_burst: Option<u32> => or,
            check at_least(1),
            check at_most(1_000_000, "loads let through at once");

        /// Rate limit per instance or global [default: instance]
        ///
        /// instance: one bucket of R per app instance (the database sees up to R × instances).
        ///
        /// global: one bucket of R for the whole run, kept in Redis (GCRA in one Lua call, on
        /// Redis's clock, within --redis-timeout); while Redis cannot answer, each instance limits
        /// itself to R / instances, and the time it did is reported.
        #[arg(hide_short_help = true, long, value_name = "SCOPE")]
        pub db_rate_scope: Option<RateScope> => or;

        /// A circuit breaker on each instance's loads [default: off]
        ///
        /// It opens when, over --breaker-window (and at least --breaker-min-loads loads), the share
        /// of failed loads reaches --breaker-error-rate or their mean latency reaches
        /// --breaker-latency; while open, loads are refused (stale if held, else `rejected`); after
        /// --breaker-cooldown it lets --breaker-probes loads through and closes if all succeed in
        /// time, else opens again.
        ///
        /// --breaker alone is --breaker=true; --breaker=false turns it off.
        #[arg(long, value_name = "BOOL")]
        pub breaker: Option<bool> => or;

        /// Breaker: share of failed loads that opens it [default: 50%]
        ///
        /// The share of failed loads (errors and timeouts) over the window that opens it.
        #[arg(hide_short_help = true, long, value_name = "P")]
        pub breaker_error_rate: Option<Percent> => or,
            check error_rate;

        /// Breaker: mean load latency that opens it [default: 1s]
        ///
        /// The mean load latency over the window (pool wait included) that opens it; a probe this
        /// slow fails.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub breaker_latency: Option<Dur> => or, check positive;

        /// Breaker: how far back loads are counted [default: 1s]
        ///
        /// How far back the failed loads and latencies that open it are counted.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub breaker_window: Option<Dur> => or, check positive;

        /// Breaker: how long it stays open before probing [default: 2s]
        ///
        /// While open it refuses every load.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub breaker_cooldown: Option<Dur> => or, check positive;

        /// Breaker: loads let through when half-open [default: 3]
        ///
        /// Loads let through after the cooldown (half-open); it closes when all succeed within
        /// --breaker-latency, else opens again.
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub breaker_probes: Option<u32> => or,
            check at_least(1),
            check at_most(10_000, "loads let through at once while half-open");

        /// Breaker: fewest loads in the window to open it [default: 20]
        ///
        /// The fewest loads in the window before it may open, so a handful of failures does not
        /// trip it.
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub breaker_min_loads: Option<u32> => or, check at_least(1);
    }
}

/// A strategy the parser knows.
#[allow(clippy::ptr_arg)] // called on the setting's own value, a String
pub fn strategy_name(s: &String) -> Result<(), String> {
    crate::strategy::StrategySpec::parse(s)
        .map(drop)
        .map_err(|e| format!(": {e}"))
}
