//! The load's settings: its rate or clients and its window, and the trace that can replace it.

use std::path::PathBuf;

use crate::values::valid::*;
use crate::values::{Dur, Rate};
use crate::workload::Arrival;

settings! {
    #[command(next_help_heading = "Load")]
    pub struct LoadFlags / LoadResolved {

        /// Open loop: requests per second [default: 10000 unless --clients]
        ///
        /// Open loop: start this many requests per second whether or not earlier ones finished
        /// (accepts 10k).
        #[arg(long, value_name = "RATE", conflicts_with = "clients")]
        pub rps: Option<Rate> => or,
            check rate_above_zero("requests");

        /// Closed loop: this many workers, spread over the instances.
        ///
        /// Each worker sends its next request when its last returns.
        #[arg(long, value_name = "N")]
        pub clients: Option<u32> => or,
            check at_least(1),
            check at_most(100_000, "each client is a task with its own key stream; use the open loop (--rps) for more load");

        /// Open-loop spacing of requests: constant or poisson [default: constant]
        ///
        /// constant: evenly spaced, one request every 1/rps seconds.
        ///
        /// poisson: exponential gaps with mean 1/rps (a Poisson process), seeded.
        #[arg(long)]
        pub arrival: Option<Arrival> => or;

        /// How long the measured part of the run lasts [default: 10s]
        #[arg(long, value_name = "DURATION")]
        pub duration: Option<Dur> => or, default Dur::secs(10), check positive;

        /// Unmeasured traffic sent before the measured part [default: 0s]
        ///
        /// Traffic sent before the measured part and excluded from every figure.
        #[arg(long, value_name = "DURATION")]
        pub warmup: Option<Dur> => or, default Dur::secs(0);

        /// Simulated app instances [default: 2]
        ///
        /// Each has its own Redis connections, DB pool and in-process state. With --app-cmd,
        /// the app under test is started once per instance (INSTANCE 0 to N-1, a PORT each)
        /// and the requests are spread over them likewise.
        #[arg(long, value_name = "N")]
        pub instances: Option<u32> => or, default 2, check at_least(1), check at_most(256, "");

        /// Open loop: requests handled at once per instance [default: 2048]
        ///
        /// More are queued up to --backlog, then shed (counted, never silently dropped).
        #[arg(long, value_name = "N")]
        pub max_inflight: Option<u32> => or,
            default 2048,
            check at_least(1),
            check at_most(1_000_000, "requests held in memory at once per instance");

        /// Open loop: queued requests allowed per instance [default: 0]
        ///
        /// Requests per instance that may queue once --max-inflight are being handled; beyond it
        /// requests are shed.
        #[arg(hide_short_help = true, long, value_name = "N")]
        pub backlog: Option<u32> => or,
            default 0,
            check at_most(1_000_000, "requests held in memory at once per instance");
    }
}

settings! {
    #[command(next_help_heading = "Trace")]
    pub struct TraceFlags / TraceResolved {

        /// Replay this access trace as the traffic (.gz/.zst streamed)
        ///
        /// Each distinct trace key becomes one item (ids in order of first appearance), seeded
        /// with the trace's value size for it; requests go out at the trace's timestamps (times
        /// --speed). The trace decides the rate, the duration and the keys: --duration selects a
        /// slice of trace time, --rps re-times the trace at a constant rate keeping its order.
        /// docs/traces.md has the formats.
        #[arg(long, value_name = "FILE")]
        pub trace: Option<PathBuf> => or;

        /// A synthetic workload with a trace's shape (trace-stats --json)
        ///
        /// Reads what `stampede trace-stats FILE --json` wrote and takes its shape as the
        /// defaults: --keys (distinct keys), --zipf (the fitted exponent), --rps (the mean rate;
        /// the reads' share of it, the rest as --write-rps), --value-size-dist (a lognormal with the
        /// trace's mean and median value size) and --ttl (the median TTL). Flags given win. A team
        /// can share the shape without the trace.
        #[arg(long, value_name = "FILE")]
        pub workload_from: Option<PathBuf> => or;

        /// The trace's format [default: detected from its content]
        ///
        /// twitter (cache-trace CSV), meta (CacheLib KV replay CSV, v1 or v2), csv or jsonl
        /// (timestamp and key, optional value_size, op, ttl), monitor (redis-cli MONITOR output).
        #[arg(hide_short_help = true, long, value_name = "FORMAT")]
        pub trace_format: Option<crate::trace::Format> => or;

        /// Map csv/jsonl columns: timestamp=ts,key=k,...
        #[arg(hide_short_help = true, long, value_name = "MAP")]
        pub trace_columns: Option<String> => or;

        /// Replay reads only, or SETs/DELETEs too as writes [default: reads]
        ///
        /// reads: a look-aside trace's SETs and DELETEs are mostly the app's own write-backs; they
        /// are counted and skipped. all: they are replayed as writes (--invalidate applies).
        #[arg(hide_short_help = true, long, value_name = "OPS")]
        pub trace_ops: Option<crate::trace::replay::TraceOps> => or;

        /// Replay the trace X times faster than recorded [default: 1]
        #[arg(hide_short_help = true, long, value_name = "X")]
        pub speed: Option<f64> => or, default 1.0, check above_zero;

        /// Place each whole second's requests: even or random [default: even]
        ///
        /// For traces stamped in whole seconds: evenly over the second in trace order, or at
        /// seeded random instants within it (the count per second kept exactly).
        #[arg(hide_short_help = true, long, value_name = "HOW")]
        pub trace_spread: Option<crate::trace::replay::Spread> => or;

        /// Skip the trace's first D of trace time [default: 0s]
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub trace_skip: Option<Dur> => or;
    }
}
