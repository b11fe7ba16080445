//! stampede as a library: the binary's modules. Only what the integration tests use is public,
//! so the compiler sees what nothing uses. Modules import one way, down the layers declared in
//! tests/layers.rs (leaves → clients and servers → the run's description → results → the
//! traffic → the orchestration in `session` → `commands`), which holds them to it; the app
//! under test (`app`) is one room whose parts sit in the layers where they are used.

mod advise;
mod app;
mod audit;
pub mod cache;
pub mod cli;
pub mod cluster;
pub mod commands;
mod conform;
mod driver;
pub mod error;
pub mod exporter;
mod fault;
mod instance;
mod l1;
pub mod ledger;
mod live;
mod memory;
pub mod metric;
pub mod metrics;
mod net;
mod origin;
mod pacer;
mod protect;
mod redact;
mod report;
mod results;
mod scenario;
pub mod servers;
mod session;
pub mod shard;
pub mod sizes;
mod stats;
mod steady;
pub mod strategy;
mod thresholds;
pub mod tls;
pub mod trace;
mod values;
mod workload;
