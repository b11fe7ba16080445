//! stampede as a library: the binary's modules. Only what the integration tests use is public,
//! so the compiler sees what nothing uses. Dependencies run one way, leaves first: values,
//! error, metric, metrics, fault, thresholds → workload, strategy → cache, origin, servers →
//! protect → scenario → instance, results → driver, chaos, live → report → commands.

pub mod cache;
mod chaos;
pub mod cli;
pub mod commands;
mod driver;
pub mod error;
mod fault;
mod instance;
mod live;
pub mod metric;
pub mod metrics;
mod origin;
mod pacer;
mod protect;
mod report;
pub mod results;
mod scenario;
pub mod servers;
mod stats;
mod steady;
pub mod strategy;
mod thresholds;
mod values;
mod workload;
