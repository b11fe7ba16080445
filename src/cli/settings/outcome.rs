//! How the run is judged: the client's timeouts and retries, the recovery verdict, the timeline's width and the thresholds.

use crate::thresholds::{ThresholdArg, Thresholds};
use crate::values::valid::*;
use crate::values::{Dur, Percent};

settings! {
    #[command(next_help_heading = "Client")]
    pub struct ClientFlags / ClientResolved {

        /// The client gives up on a request after D [default: never]
        ///
        /// The simulated client's own deadline (the built-in app's counterpart of --http-timeout):
        /// the request counts as timed out at D, while the work it started goes on (the app does
        /// not know the client left) and keeps its in-flight slot until it ends; a load it started
        /// still runs and, if it completes, writes back.
        #[arg(long, value_name = "DURATION")]
        pub request_timeout: Option<Dur> => or, check positive;

        /// Retry a failed or timed-out request up to N times [default: 0]
        ///
        /// Each retry waits --retry-backoff (doubled for each one after), is counted
        /// (requests.retries) and keeps the request's latency counted from its first attempt's
        /// scheduled start.
        #[arg(long, value_name = "N")]
        pub retries: Option<u32> => or, default 0,
            check at_most(100, "one request is retried at most 100 times");

        /// The wait before the first retry, doubled after [default: 100ms]
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub retry_backoff: Option<Dur> => or, default Dur::millis(100);

        /// Spread each retry's wait within ±P [default: 0%]
        #[arg(hide_short_help = true, long, value_name = "P")]
        pub retry_jitter: Option<Percent> => or, default Percent(0.0);

        /// Goodput's deadline [default: --request-timeout, else 1s]
        ///
        /// Goodput counts the requests answered with a value (hit, stale, waited, loaded) within D
        /// of their scheduled start: not errors, rejections or timeouts.
        #[arg(long, value_name = "DURATION")]
        pub goodput_within: Option<Dur> => or, check positive;
    }
}

settings! {
    #[command(next_help_heading = "Recovery verdict")]
    pub struct RecoveryFlags / RecoveryResolved {

        /// Baseline span before the first shock [default: 2s]
        ///
        /// The baseline of the recovery verdict: goodput, hit rate, DB calls/s and p99 over this
        /// span before the first shock.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub baseline_window: Option<Dur> => or, default Dur::secs(2), check whole_seconds;

        /// Share of the baseline's goodput that is back [default: 95%]
        #[arg(hide_short_help = true, long, value_name = "P")]
        pub recovery_goodput: Option<Percent> => or, default Percent(0.95);

        /// Hit-rate points under the baseline still back [default: 5]
        #[arg(hide_short_help = true, long, value_name = "POINTS")]
        pub recovery_hit_points: Option<f64> => or, default 5.0,
            check at_least(0.0),
            check at_most(100.0, "points of hit rate");

        /// How long both must stay back [default: 2s]
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub settle: Option<Dur> => or, default Dur::secs(2), check whole_seconds;

        /// Least time after the last shock for a verdict [default: 10s]
        ///
        /// With less of the window left after the last shock ends, the verdict is not-judged.
        #[arg(hide_short_help = true, long, value_name = "DURATION")]
        pub observe: Option<Dur> => or, default Dur::secs(10);
    }
}

settings! {
    pub struct ReportFlags / ReportResolved {

        /// Width of a timeline bucket [default: 100ms]
        #[arg(hide_short_help = true, long, value_name = "DURATION", help_heading = "Output")]
        pub interval: Option<Dur> => or, default Dur::millis(100), check at_least(Dur::millis(10));

        /// Exit 1 when a figure breaks a limit, e.g. p99_ms_max=250.
        ///
        /// E.g. p99_ms_max=250 or hit_rate_min=95% (repeatable; over the scenario's [thresholds]).
        /// Names: db_calls_max, redundant_loads_max, peak_key_herd_max, peak_concurrent_max,
        /// hit_rate_min, stale_ratio_max, error_rate_max, rejected_rate_max, p50_ms_max,
        /// p95_ms_max, p99_ms_max, stale_read_ratio_max, staleness_p99_ms_max, divergent_keys_max,
        /// invalidation_failures_max, writes_left_wrong_ratio_max, recovery_back_ms_max; for `sweep
        /// --boundary rps` also boundary_rps_min (req/s). A limit on a figure the run could not
        /// measure fails (and one the mode can never know is refused before the run).
        #[arg(
            long = "threshold",
            value_name = "NAME=VALUE",
            value_parser = crate::thresholds::parse_arg,
            help_heading = "Thresholds",
        )]
        #[serde(skip)]
        pub threshold: Vec<ThresholdArg> => flags;

        /// A scenario file's `[thresholds]` table (no flag of its own: --threshold sets one).
        #[arg(skip)]
        #[serde(default)]
        pub thresholds: Option<Thresholds> => or;
    }
}
