//! Renderers: the typed results ([`crate::results`]) shown for people — the terminal summary,
//! aligned tables for a terminal or CI log, Markdown for CI summaries, and the HTML report.
//! They read results; they never compute a figure. [`sink`] is where every output of results
//! goes, and the only code that writes a result file.

mod cluster;
mod describe;
mod holder;
pub mod html;
pub mod markdown;
mod memory;
mod network;
pub mod sink;
pub mod sweep;
pub mod tables;
pub mod terminal;

pub use describe::describe;
