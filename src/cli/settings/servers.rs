//! Where the servers are and how to reach them (TLS), and the Redis Cluster's settings.

use std::path::PathBuf;

use crate::values::valid::*;
use crate::values::{Dur, Rtt};

settings! {
    #[command(next_help_heading = "Servers and TLS")]
    pub struct ServerFlags / ServerResolved {

        /// Redis connections per app instance, each multiplexed [default: 1]
        ///
        /// The requests that start together share one write.
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub redis_conns: Option<u32> => or,
            default 1,
            check at_least(1),
            check at_most(64, "each connection is multiplexed; more only cost CPU");

        /// Use this Redis instead of starting one.
        ///
        /// redis://[:password@]host:port[/db]; only the run's own keys are touched.
        #[arg(long, value_name = "URL")]
        pub redis_url: Option<String> => or,
            check url(REDIS_SCHEMES);

        /// Use this Postgres instead of starting one.
        ///
        /// postgres://user[:password]@host:port/db; the run's schema is dropped afterwards.
        #[arg(long, value_name = "URL")]
        pub pg_url: Option<String> => or, check url(PG_SCHEMES);

        /// Deadline of every Redis command [default: 100ms]
        ///
        /// A late or failed command counts as a miss.
        #[arg(long, value_name = "DURATION")]
        pub redis_timeout: Option<Dur> => or, default Dur::millis(100), check positive;

        /// Client library whose defaults to use [default: stampede]
        ///
        /// Its command timeout (or none), connect timeout, what a command does while the
        /// connection is down (fail, retry N times, or queue until it is back), reconnect backoff
        /// and connections, as that library's documented defaults (docs/faults.md).
        /// --redis-timeout and --redis-conns win over the library's values. LIBRARY: stampede,
        /// node-redis, ioredis, redis-py, go-redis or lettuce.
        #[arg(long, value_name = "LIBRARY")]
        pub redis_client: Option<crate::cache::RedisClient> => or;

        /// Check every cached value is its key's [default: off]
        ///
        /// Every value read from Redis is compared with its key's seeded payload (the md5 of
        /// its id, as the items table holds it): a reply handed to another request (a network
        /// fault that broke a stream's order) is counted in redis.value_mismatches. Costs an md5
        /// per read. --check-values alone is --check-values=true.
        #[arg(hide_short_help = true, long, value_name = "BOOL")]
        pub check_values: Option<bool> => or;

        /// Round trip added between the app and its servers [default: none]
        ///
        /// A TCP proxy of the tool's own goes between each app instance and Redis and Postgres,
        /// on loopback, delaying each direction by half of it, bytes kept in order: 0.5ms, or
        /// 0.5ms±0.1ms with jitter (a data centre is 0.2-1 ms, across zones 1-2 ms; loopback
        /// alone ~0.06 ms). The tool's own connections (INFO, pg_stat_statements, the heartbeat,
        /// probes) bypass it. Not on a Redis Cluster, with TLS or with --target yet.
        #[arg(long, value_name = "RTT")]
        pub net_rtt: Option<Rtt> => or;

        /// Round trip added between the app and Redis only [default: --net-rtt]
        #[arg(hide_short_help = true, long, value_name = "RTT")]
        pub redis_rtt: Option<Rtt> => or;

        /// Round trip added between the app and Postgres only [default: --net-rtt]
        #[arg(hide_short_help = true, long, value_name = "RTT")]
        pub pg_rtt: Option<Rtt> => or;

        /// Start the managed servers with TLS [default: off]
        ///
        /// A CA and server certificates are made for the run in each server's temp dir;
        /// redis-server then listens on TLS only (rediss://) and Postgres accepts TCP over TLS only
        /// (sslmode=verify-full against the run's CA). The result says servers.tls: true.
        ///
        /// --tls alone is --tls=true; --tls=false turns it off.
        #[arg(long, value_name = "BOOL")]
        pub tls: Option<bool> => or;
    }
}

settings! {
    /// The client's TLS for a Redis given as rediss://, a group of its own so that `cleanup`
    /// takes the same flags.
    #[command(next_help_heading = "Servers and TLS")]
    pub struct RedisTlsFlags / RedisTlsResolved {
        /// rediss:// only: CA file (PEM) to verify Redis's certificate with.
        ///
        /// Verify Redis's certificate against this CA file (PEM) instead of the system's store.
        #[arg(hide_short_help = true, long, value_name = "FILE")]
        pub redis_ca: Option<PathBuf> => or;

        /// rediss:// only: client certificate (PEM), with --redis-key.
        ///
        /// For a Redis that requires one (tls-auth-clients yes).
        #[arg(hide_short_help = true, long, value_name = "FILE", requires = "redis_key")]
        pub redis_cert: Option<PathBuf> => or;

        /// rediss:// only: the private key (PEM) of --redis-cert.
        #[arg(hide_short_help = true, long, value_name = "FILE", requires = "redis_cert")]
        pub redis_key: Option<PathBuf> => or;

        /// rediss:// only: do not verify Redis's certificate at all.
        ///
        /// Prints a warning: anyone on the path can read and change the traffic. --redis-insecure
        /// alone is --redis-insecure=true; --redis-insecure=false verifies.
        #[arg(hide_short_help = true, long, value_name = "BOOL")]
        pub redis_insecure: Option<bool> => or;
    }
}

impl RedisTlsFlags {
    /// The TLS settings these flags give.
    pub fn tls(&self) -> crate::tls::RedisTls {
        crate::tls::RedisTls {
            ca: self.redis_ca.clone(),
            cert: self.redis_cert.clone(),
            key: self.redis_key.clone(),
            insecure: self.redis_insecure.unwrap_or(false),
        }
    }
}

settings! {
    #[command(next_help_heading = "Cluster")]
    pub struct ClusterFlags / ClusterResolved {

        /// Managed cluster: P primaries, R replicas each [default: 3:1]
        ///
        /// Off unless given. Instead of one redis-server: P primaries with R replicas each on free
        /// loopback ports (their cluster bus too), cluster-node-timeout 1000 ms, stopped and
        /// removed after the run like the single server. --redis-cluster alone is 3:1. An external cluster is --redis-url
        /// redis+cluster://host:port[,host:port…].
        #[arg(
            long,
            value_name = "P[:R]",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "3:1",
        )]
        pub redis_cluster: Option<String> => or;

        /// Cluster: GETs go to replicas [default: off]
        ///
        /// Reads (GET) go to a replica of the key's primary; writes, locks and scripts stay on
        /// the primary. With writes the consistency figures then count replication lag too.
        /// --read-from-replicas alone is --read-from-replicas=true.
        #[arg(hide_short_help = true, long, value_name = "BOOL")]
        pub read_from_replicas: Option<bool> => or;

        /// Primary a kill or failover strikes [default: hottest]
        ///
        /// On a Redis Cluster, the primary a kill-redis fault kills and a failover hands over.
        /// hottest: the primary serving the slot of the run's most popular key; random: one drawn
        /// with the run's seed; or a node id (CLUSTER NODES) or host:port.
        #[arg(hide_short_help = true, long, value_name = "hottest|random|ID")]
        pub redis_node: Option<String> => or;

        /// Slot a migrate-slot fault moves [default: the hottest key's]
        ///
        /// On a Redis Cluster, the slot (0 to 16383) a migrate-slot fault moves (its `slot` key
        /// is the same); by default the slot of
        /// the run's most popular key (its entry, lock, lease token and version marker share it).
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub slot: Option<u16> => or, check at_most(16383, "Redis Cluster has slots 0 to 16383");
    }
}
