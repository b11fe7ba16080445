//! stampede as a library: the binary's modules, public so integration tests can start the
//! same managed servers and read the same result types the tool writes.

pub mod app;
pub mod cache;
pub mod chaos;
pub mod check;
pub mod cli;
pub mod compare;
pub mod driver;
pub mod error;
pub mod fault;
pub mod instance;
pub mod live;
pub mod metrics;
pub mod origin;
pub mod pacer;
pub mod report;
pub mod scenario;
pub mod servers;
pub mod strategy;
pub mod thresholds;
pub mod values;
pub mod workload;
