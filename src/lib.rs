//! stampede as a library: the binary's modules. Only what the integration tests use is public,
//! so the compiler sees what nothing uses. Modules import one way, leaves first (values, error,
//! metric, metrics, ledger, stats, steady, workload, servers → fault, origin, thresholds → strategy,
//! protect → cache, cli → scenario, instance → results → chaos, live, report → driver →
//! commands); tests/layers.rs holds them to it.

pub mod cache;
mod chaos;
pub mod cli;
pub mod commands;
mod driver;
pub mod error;
mod fault;
mod instance;
pub mod ledger;
mod live;
pub mod metric;
pub mod metrics;
mod origin;
mod pacer;
mod protect;
mod report;
mod results;
mod scenario;
pub mod servers;
mod stats;
mod steady;
pub mod strategy;
mod thresholds;
mod values;
mod workload;
