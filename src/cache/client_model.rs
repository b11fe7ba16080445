//! How a Redis client library behaves when the network misbehaves (`--redis-client`): its
//! command timeout (or none), its connect timeout, what it does with a command while its
//! connection is down (queue it until the connection is back, retry it a few times, or fail
//! it at once), its reconnect backoff and its connections — each library's documented defaults
//! (docs/faults.md has the table with versions and sources). The tool's connections are
//! multiplexed, so a library with a pool of blocking connections is modelled by its timeouts
//! and retries over the run's multiplexed connections.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The client libraries whose defaults `--redis-client` applies.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RedisClient {
    /// The tool's own: a 100 ms deadline per command, a failure served as a miss (fail open).
    #[default]
    Stampede,
    /// node-redis 4.x (npm `redis`): no command timeout, commands queued while disconnected.
    NodeRedis,
    /// ioredis 5.x: no command timeout, queued while disconnected, failed after 20 reconnects.
    Ioredis,
    /// redis-py 5.x: no socket timeout, a command on a broken connection fails.
    RedisPy,
    /// go-redis v9: 3 s read timeout, 3 retries with 8-512 ms backoff.
    GoRedis,
    /// Lettuce 6.x: 60 s command timeout, commands queued while disconnected.
    Lettuce,
}

/// What a command does while its connection is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhileDown {
    /// Waits for the reconnect attempt in flight and fails if it fails (redis-rs's
    /// connection manager: the tool's own). Commands that fail together load together.
    Reconnect,
    /// Fails at once (the tool serves it as a miss).
    Fail,
    /// Sent again up to this many times, after the backoff, within its deadline.
    Retry(u32),
    /// Held until the connection is back, within its deadline.
    Queue,
}

/// A library's behaviour, as the tool's Redis client applies it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientModel {
    /// The command timeout; None: the library has none (a command waits as long as it takes).
    pub command_timeout: Option<Duration>,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    pub while_down: WhileDown,
    /// Reconnect (and retry) backoff: the first wait, the longest, and the factor between.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub backoff_factor: f64,
    /// Connections per app instance.
    pub conns: u32,
}

/// What "no command timeout" is here: longer than any run, so a command waits for its answer.
pub const NO_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl RedisClient {
    pub fn name(self) -> &'static str {
        match self {
            RedisClient::Stampede => "stampede",
            RedisClient::NodeRedis => "node-redis",
            RedisClient::Ioredis => "ioredis",
            RedisClient::RedisPy => "redis-py",
            RedisClient::GoRedis => "go-redis",
            RedisClient::Lettuce => "lettuce",
        }
    }

    /// The library's documented defaults (docs/faults.md names each source).
    pub fn model(self) -> ClientModel {
        let base = ClientModel {
            command_timeout: Some(ms(100)),
            connect_timeout: ms(500),
            while_down: WhileDown::Reconnect,
            backoff_min: ms(10),
            backoff_max: ms(100),
            backoff_factor: 2.0,
            conns: 1,
        };
        match self {
            RedisClient::Stampede => base,
            // connectTimeout 5000; no command timeout; offline queue on; reconnectStrategy
            // min(retries × 50, 500) ms; one socket.
            RedisClient::NodeRedis => ClientModel {
                command_timeout: None,
                connect_timeout: ms(5_000),
                while_down: WhileDown::Queue,
                backoff_min: ms(50),
                backoff_max: ms(500),
                backoff_factor: 2.0,
                conns: 1,
            },
            // connectTimeout 10000; commandTimeout unset; enableOfflineQueue; retryStrategy
            // min(times × 50, 2000) ms; maxRetriesPerRequest 20.
            RedisClient::Ioredis => ClientModel {
                command_timeout: None,
                connect_timeout: ms(10_000),
                while_down: WhileDown::Retry(20),
                backoff_min: ms(50),
                backoff_max: ms(2_000),
                backoff_factor: 2.0,
                conns: 1,
            },
            // socket_timeout and socket_connect_timeout None; no retry by default in 5.x.
            RedisClient::RedisPy => ClientModel {
                command_timeout: None,
                connect_timeout: NO_TIMEOUT,
                while_down: WhileDown::Fail,
                backoff_min: ms(10),
                backoff_max: ms(100),
                backoff_factor: 2.0,
                conns: 1,
            },
            // DialTimeout 5 s, ReadTimeout 3 s, MaxRetries 3, MinRetryBackoff 8 ms,
            // MaxRetryBackoff 512 ms, PoolSize 10 × GOMAXPROCS (2 cores here: 20).
            RedisClient::GoRedis => ClientModel {
                command_timeout: Some(ms(3_000)),
                connect_timeout: ms(5_000),
                while_down: WhileDown::Retry(3),
                backoff_min: ms(8),
                backoff_max: ms(512),
                backoff_factor: 2.0,
                conns: 20,
            },
            // RedisURI default timeout 60 s, SocketOptions connect timeout 10 s, autoReconnect
            // with DisconnectedBehavior.DEFAULT (commands buffered), exponential reconnect delay
            // up to 30 s; one shared connection.
            RedisClient::Lettuce => ClientModel {
                command_timeout: Some(ms(60_000)),
                connect_timeout: ms(10_000),
                while_down: WhileDown::Queue,
                backoff_min: ms(1),
                backoff_max: ms(30_000),
                backoff_factor: 2.0,
                conns: 1,
            },
        }
    }
}

impl ClientModel {
    /// The deadline a command runs under.
    pub fn deadline(&self) -> Duration {
        self.command_timeout.unwrap_or(NO_TIMEOUT)
    }

    /// The wait before the `n`th retry (from 1).
    pub fn backoff(&self, n: u32) -> Duration {
        let f = self.backoff_factor.powi(n.saturating_sub(1).min(30) as i32);
        self.backoff_min.mul_f64(f).min(self.backoff_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_tools_own_and_backoff_is_capped() {
        assert_eq!(RedisClient::default().model().deadline(), ms(100));
        let io = RedisClient::Ioredis.model();
        assert_eq!(io.deadline(), NO_TIMEOUT);
        assert_eq!(io.backoff(1), ms(50));
        assert_eq!(io.backoff(3), ms(200));
        assert_eq!(io.backoff(30), ms(2_000));
        assert_eq!(RedisClient::GoRedis.model().while_down, WhileDown::Retry(3));
        // The tool's own keeps redis-rs's behaviour: no gate that fails commands at once.
        assert_eq!(
            RedisClient::default().model().while_down,
            WhileDown::Reconnect
        );
        assert_eq!(RedisClient::RedisPy.model().while_down, WhileDown::Fail);
    }
}
