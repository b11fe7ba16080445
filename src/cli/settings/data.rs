//! The data's settings: the keys and values, Redis's memory limit, the database and the writes.

use std::path::PathBuf;

use crate::origin::DbQuery;
use crate::values::valid::*;
use crate::values::{Dur, DurRange, Percent, Rate, Size};
use crate::workload::{MissingIds, Start};

/// Most keys a run may seed: each is a Postgres row and a cache entry.
pub const MAX_KEYS: u64 = 50_000_000;

/// Most database connections a run may open in all (instances × db-pool): each is a Postgres
/// backend process of several MB, and a managed server is given exactly this many.
pub const MAX_DB_CONNECTIONS: u32 = 2000;

settings! {
    #[command(next_help_heading = "Keys and values")]
    pub struct KeyFlags / KeyResolved {

        /// Distinct item ids (database rows and keys) [default: 10000]
        ///
        /// Number of distinct item ids in the database and in the key space.
        #[arg(long, value_name = "N")]
        pub keys: Option<u64> => or,
            default 10_000,
            check at_least(1),
            check at_most(MAX_KEYS, "every key is a row seeded into Postgres and a cache entry");

        /// Zipf exponent of key popularity, > 0 [default: 1.0]
        ///
        /// Larger = more skewed.
        #[arg(long, value_name = "S")]
        pub zipf: Option<f64> => or, default 1.0, check above_zero;

        /// Seed of the key sequence [default: 42]
        ///
        /// The same seed gives the same keys for every strategy.
        #[arg(long, value_name = "N")]
        pub seed: Option<u64> => or, default 42;

        /// Bytes of payload per item [default: 1024]
        #[arg(long, value_name = "BYTES")]
        pub value_size: Option<usize> => or,
            default 1024,
            check at_least(1),
            check at_most_16_mib;

        /// Payload sizes per item: 100..10k or lognormal:mean=1k,sd=2k
        ///
        /// Each item gets its own payload size, drawn from this distribution with the run's seed
        /// (the same seed, the same sizes): `MIN..MAX` uniform with both ends included, or
        /// `lognormal:mean=M,sd=S` with the sizes' own mean and standard deviation. Sizes read as
        /// --maxmemory's (k: 1000, kb: 1024). A write keeps each item's size. Instead of
        /// --value-size.
        #[arg(hide_short_help = true, long, value_name = "DIST", conflicts_with = "value_size")]
        pub value_size_dist: Option<crate::sizes::SizeDist> => or;

        /// TTL of a cache entry (the soft expiry under swr) [default: 3s]
        ///
        /// Time to live of a cache entry; under swr, its soft expiry.
        #[arg(long, value_name = "DURATION")]
        pub ttl: Option<Dur> => or, default Dur::secs(3), check positive;

        /// Cache at the start: steady, cold or synchronized [default: steady]
        ///
        /// What the cache holds when traffic starts.
        ///
        /// steady: what a long-running service would hold under this workload: each key present
        /// with the probability its request rate and TTL imply, its remaining TTL spread
        /// (docs/design.md). With --clients, whose rate is not known in advance, every key counts
        /// as requested often enough to stay cached.
        ///
        /// cold: empty; every key's first request misses (a cold start).
        ///
        /// synchronized: every key present, all written at the same instant (the mass expiry TTL
        /// jitter is for).
        #[arg(long)]
        pub start: Option<Start> => or;

        /// The K hottest keys start cached with their full TTL [default: 0]
        ///
        /// The K most popular keys are in the cache with their full TTL when traffic starts;
        /// --start applies to the rest.
        #[arg(long, value_name = "K")]
        pub warm: Option<u64> => or, default 0;

        /// Share of requests for ids absent from the database [default: 0%]
        ///
        /// Share of requests for ids that do not exist in the database (e.g. 5%).
        #[arg(long, value_name = "P")]
        pub missing_ratio: Option<Percent> => or, default Percent(0.0);

        /// Missing ids: zipf (a few, often) or unique [default: zipf]
        ///
        /// zipf: the missing ids are Zipf-shaped like the items (past the seeded range): the
        /// same few are asked for often, and --negative-ttl answers them from the cache.
        ///
        /// unique: each missing request asks for a different id (drawn from 2^40), so negative
        /// caching saves nothing and only a limit in front of the database (--db-rate,
        /// --db-limit) protects it.
        #[arg(hide_short_help = true, long, value_name = "SHAPE")]
        pub missing_ids: Option<MissingIds> => or;

        /// How long a not-found sentinel is cached [default: off]
        ///
        /// Cache a not-found sentinel for this long (negative caching).
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub negative_ttl: Option<Dur> => or, check positive;
    }
}

settings! {
    #[command(next_help_heading = "Redis memory")]
    pub struct MemoryFlags / MemoryResolved {

        /// Managed Redis: its memory limit, e.g. 8mb [default: none]
        ///
        /// Set on the managed Redis (CONFIG SET) before the start state is written, and given to
        /// it again after a kill-redis fault. Bytes, or with a unit as Redis reads one (k, m, g:
        /// powers of 1000; kb, mb, gb: of 1024); 0 is no limit. The start state then stops at
        /// the limit. On --redis-url the server's own configuration is read and reported, never
        /// changed, and this flag is refused.
        #[arg(long, value_name = "SIZE")]
        pub maxmemory: Option<Size> => or;

        /// What Redis does at the limit [default: noeviction]
        ///
        /// Redis's maxmemory-policy: noeviction (writes are refused with OOM; the request is still
        /// answered from the database), allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
        /// volatile-lfu, volatile-random or volatile-ttl. Acts once --maxmemory sets a limit.
        #[arg(long, value_name = "POLICY")]
        pub maxmemory_policy: Option<crate::memory::EvictionPolicy> => or;

        /// Keys the approximate LRU/LFU/TTL samples [default: 5]
        ///
        /// Redis's maxmemory-samples, 1 to 64: more is closer to the exact policy and costs more
        /// CPU per eviction.
        #[arg(
            hide_short_help = true,
            long,
            value_name = "N",
            value_parser = clap::value_parser!(u32).range(1..=64),
        )]
        pub maxmemory_samples: Option<u32> => or, default crate::memory::DEFAULT_SAMPLES, check at_least(1), check at_most(64, "Redis takes 1 to 64");
    }
}

settings! {
    #[command(next_help_heading = "Database")]
    pub struct DbFlags / DbResolved {

        /// Time a load spends inside Postgres [default: 10ms]
        ///
        /// Time each load spends inside Postgres, holding a real connection.
        #[arg(long, value_name = "DURATION")]
        pub db_cost: Option<Dur> => or, default Dur::millis(10);

        /// Database connections per app instance [default: 16]
        ///
        /// A load waits for one, then sends its statement (one DB call): peak concurrent counts
        /// statements (at most instances × pool); peak in flight, the per-key herd and redundant
        /// loads count loads, those queued for a connection included.
        #[arg(long, value_name = "N")]
        pub db_pool: Option<u32> => or,
            default 16,
            check at_least(1),
            check at_most(MAX_DB_CONNECTIONS, "every connection is a Postgres backend process");

        /// Deadline of a load [default: none; 1s with a kill-postgres fault]
        ///
        /// Statement timeout of a load and bound on the wait for a pooled connection (and, with a
        /// Postgres fault, on opening a new one); exceeded = error outcome. None by default; 1s when
        /// a kill-postgres fault is scheduled.
        #[arg(long, value_name = "DURATION")]
        pub db_timeout: Option<Dur> => or, check positive;

        /// What a load costs the DB: sleep or heavy [default: sleep]
        ///
        /// sleep: pg_sleep(--db-cost) inside Postgres: a fixed cost that holds a real connection
        /// but no CPU, so only the pool saturates.
        ///
        /// heavy: a CPU-bound aggregate over a seeded `reviews` table: the server's CPU saturates
        /// for real.
        #[arg(long)]
        pub db_query: Option<DbQuery> => or, default DbQuery::Sleep;

        /// Your own load: the query a miss runs on --pg-url, $1 the key.
        ///
        /// This query (one parameter, $1, the key) on your --pg-url is what a miss runs, at its
        /// real cost (no pg_sleep). stampede then creates, alters and drops nothing in that
        /// database (a read-only role works; every transaction there is read-only, so the server
        /// refuses a query that writes); keys come from --keys-sql or --keys-file; the start
        /// is cold unless --start says otherwise. DB calls are read from pg_stat_statements for
        /// this statement when the extension is there.
        #[arg(long, value_name = "SQL")]
        pub db_sql: Option<String> => or;

        /// With --db-sql: a query returning the keys, most popular first.
        ///
        /// The keys are the first column of what this query returns (e.g. SELECT id FROM items
        /// ORDER BY views DESC); popularity is Zipf over them in the order returned (the first the
        /// most popular); --keys N keeps the first N. Runs in a READ ONLY transaction.
        #[arg(hide_short_help = true, long, value_name = "SQL", conflicts_with = "keys_file")]
        pub keys_sql: Option<String> => or;

        /// With --db-sql: a file of keys, one a line, most popular first.
        ///
        /// The keys, one per line, most popular first (instead of --keys-sql).
        #[arg(hide_short_help = true, long, value_name = "FILE")]
        pub keys_file: Option<PathBuf> => or;
    }
}

settings! {
    #[command(next_help_heading = "Writes")]
    pub struct WriteFlags / WriteResolved {

        /// Writes per second alongside the reads [default: 0]
        ///
        /// Writes per second sent alongside the reads, to the same app instances (an open loop of
        /// its own, evenly spaced over the measured window): each is one transaction, an UPDATE
        /// that bumps the item's version and changes its payload, then the invalidation. Counted as
        /// db.writes, apart from db.calls. 0: no writes, and no consistency figure can be other
        /// than 0.
        #[arg(long, value_name = "RATE")]
        pub write_rps: Option<Rate> => or,
            check write_rate;

        /// Zipf exponent of the keys written [default: --zipf]
        ///
        /// By default the reads' exponent, --zipf.
        #[arg(hide_short_help = true, long, value_name = "S")]
        pub write_zipf: Option<f64> => or, check above_zero;

        /// What a write does to the cache [default: delete]
        ///
        /// What a write does to the cache after its commit: delete (the key and its lease), set
        /// (the new value), versioned (the new value through a Lua SET that refuses an older
        /// version than the cache or the writers' version marker holds; readers' SETs go through it
        /// too), none (TTL only), delete-first (DEL before the UPDATE: the wrong order, to
        /// compare), delete-guarded (raise the version marker, then DEL; readers' SETs are
        /// checked against the marker). compare takes a comma-separated list and runs every strategy with
        /// each, labelled strategy/invalidation. Needs --write-rps.
        #[arg(long, value_name = "delete|set|versioned|none")]
        pub invalidate: Option<String> => or,
            check invalidation_name;

        /// Racing writers: N writers of the same key per write [default: 1]
        ///
        /// Each write event of --write-rps runs N writers on the same key at once, through the
        /// instances in turn (the lab's racing writers). db.writes and the write latency count
        /// each writer; the per-write consistency figures (writes probed, writes_left_wrong)
        /// count events: the key is read back once all N are done.
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub writers_per_key: Option<u32> => or,
            default 1,
            check at_least(1),
            check at_most(64, "writers of one key at once");

        /// Racing writers: a wait between the UPDATE and the cache step [default: none]
        ///
        /// MIN..MAX (e.g. 1ms..5ms), drawn uniformly for each writer: the pause between the
        /// commit and the invalidation that follows it (for delete-first, between the DEL and
        /// the UPDATE), as the lab injected to widen the race.
        #[arg(hide_short_help = true, long, value_name = "MIN..MAX")]
        pub write_gap: Option<DurRange> => or;
    }
}

/// One invalidation the strategy knows.
#[allow(clippy::ptr_arg)] // called on the setting's own value, a String
pub fn invalidation_name(i: &String) -> Result<(), String> {
    crate::strategy::invalidate::invalidation(i)
        .map(drop)
        .map_err(|e| format!(": {e}"))
}
