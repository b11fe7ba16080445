//! The live view of a run: the current rate, hit rate, DB calls per second, p99 and a
//! sparkline of DB calls per second over the last seconds, so a herd shows while it happens.
//! On a terminal it is the progress bar's message; otherwise a plain status line every second.

use std::collections::VecDeque;
use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::results::Bucket;

/// How far back the sparkline reaches, and the width of one of its cells.
const SPARK_WINDOW_MS: u64 = 8_000;
const SPARK_CELL_MS: u64 = 500;
/// The rates shown are over the last second (a 100 ms bucket alone is too jumpy to read).
const RATE_WINDOW_MS: u64 = 1_000;
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

enum Mode {
    /// A progress bar on a terminal, its message updated every bucket.
    Bar,
    /// stderr is not a terminal: one line per second.
    Plain,
    /// --quiet.
    Off,
}

/// Fed one timeline bucket at a time by the driver's ticker.
pub struct Live {
    mode: Mode,
    bar: ProgressBar,
    /// Buckets of the last `SPARK_WINDOW_MS`, oldest first.
    recent: VecDeque<Bucket>,
    last_line_ms: u64,
    /// An app under test: its hits are not seen request by request, so the line shows the
    /// share of requests answered without an error instead of a hit rate.
    app: bool,
}

impl Live {
    /// The view for a run of this length: a bar on a terminal, plain lines elsewhere, nothing
    /// with `quiet`.
    /// The live view of a run that drives an app under test (`--target`).
    pub fn for_app(mut self) -> Live {
        self.app = true;
        self
    }

    pub fn new(duration: Duration, quiet: bool) -> Live {
        let mode = if quiet {
            Mode::Off
        } else if std::io::stderr().is_terminal() {
            Mode::Bar
        } else {
            Mode::Plain
        };
        Live::with_mode(mode, duration)
    }

    fn with_mode(mode: Mode, duration: Duration) -> Live {
        let bar = match mode {
            Mode::Bar => {
                let pb = ProgressBar::new(duration.as_millis() as u64);
                if let Ok(style) = ProgressStyle::with_template(
                    "{prefix} {spinner} [{bar:20}] {elapsed:>3}/{duration} {msg}",
                ) {
                    pb.set_style(style.progress_chars("=> "));
                }
                pb
            }
            Mode::Plain | Mode::Off => ProgressBar::hidden(),
        };
        Live {
            mode,
            bar,
            recent: VecDeque::new(),
            last_line_ms: 0,
            app: false,
        }
    }

    /// The bar, for the caller to clear when the run ends.
    pub fn bar(&self) -> ProgressBar {
        self.bar.clone()
    }

    /// A bucket has closed (`b.t_ms` is its end since the measured window started).
    pub fn tick(&mut self, b: &Bucket) {
        if matches!(self.mode, Mode::Off) {
            return;
        }
        self.recent.push_back(b.clone());
        while self
            .recent
            .front()
            .is_some_and(|o| o.t_ms + SPARK_WINDOW_MS <= b.t_ms)
        {
            self.recent.pop_front();
        }
        match self.mode {
            Mode::Bar => {
                self.bar.set_position(b.t_ms);
                self.bar.set_message(self.message(true));
            }
            Mode::Plain => {
                if b.t_ms >= self.last_line_ms + RATE_WINDOW_MS {
                    self.last_line_ms = b.t_ms;
                    eprintln!(
                        "t={:>6.1}s  {}",
                        b.t_ms as f64 / 1000.0,
                        self.message(false)
                    );
                }
            }
            Mode::Off => {}
        }
    }

    /// Rates over the last second, p99 of the last bucket, and (on a terminal) the sparkline.
    fn message(&self, spark: bool) -> String {
        let Some(last) = self.recent.back() else {
            return String::new();
        };
        // The window runs from the end of the last bucket before it (or the run's start).
        let from = last.t_ms.saturating_sub(RATE_WINDOW_MS);
        let mut start = 0;
        let (mut req, mut db, mut served, mut errors) = (0u64, 0u64, 0u64, 0u64);
        for b in &self.recent {
            if b.t_ms <= from {
                start = b.t_ms;
                continue;
            }
            req += b.requests;
            db += b.db_calls;
            served += b.hits + b.stale;
            errors += b.errors;
        }
        let secs = (last.t_ms.saturating_sub(start)).max(1) as f64 / 1000.0;
        let (label, good) = if self.app {
            ("ok ", req.saturating_sub(errors))
        } else {
            ("hit", served)
        };
        let share = if req == 0 {
            0.0
        } else {
            good as f64 * 100.0 / req as f64
        };
        let mut s = format!(
            "{:>7.0} req/s  {label} {:>5.1}%  db {:>6.0}/s  p99 {:>7.2} ms",
            req as f64 / secs,
            share,
            db as f64 / secs,
            last.p99_ms
        );
        if errors > 0 {
            s.push_str(&format!("  err {:.0}/s", errors as f64 / secs));
        }
        if spark {
            s.push_str("  db/s ");
            s.push_str(&self.sparkline());
        }
        s
    }

    /// DB calls per cell of `SPARK_CELL_MS` over the last `SPARK_WINDOW_MS`, scaled to the
    /// window's highest cell; a cell before the run started is blank, an idle one is `▁`.
    fn sparkline(&self) -> String {
        let cells = (SPARK_WINDOW_MS / SPARK_CELL_MS) as usize;
        let Some(last) = self.recent.back() else {
            return String::new();
        };
        let end = last.t_ms;
        let mut sums = vec![None::<u64>; cells];
        for b in &self.recent {
            // A bucket belongs to the cell holding its end.
            let age = end - b.t_ms;
            let k = (age / SPARK_CELL_MS) as usize;
            if k < cells {
                let slot = &mut sums[cells - 1 - k];
                *slot = Some(slot.unwrap_or(0) + b.db_calls);
            }
        }
        // Cells after the run started that got no bucket (a bucket wider than a cell) are idle.
        for (i, slot) in sums.iter_mut().enumerate() {
            let age_start = (cells - 1 - i) as u64 * SPARK_CELL_MS;
            if slot.is_none() && age_start < end {
                *slot = Some(0);
            }
        }
        let max = sums.iter().flatten().copied().max().unwrap_or(0);
        sums.iter()
            .map(|c| match c {
                None => ' ',
                Some(0) => LEVELS[0],
                Some(v) => {
                    let top = (LEVELS.len() - 1) as f64;
                    let i = ((*v as f64 / max as f64) * top).ceil() as usize;
                    LEVELS[i.clamp(1, LEVELS.len() - 1)]
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(live: &mut Live, calls: &[u64]) {
        for (i, &c) in calls.iter().enumerate() {
            live.tick(&Bucket {
                t_ms: (i as u64 + 1) * 100,
                requests: 100,
                hits: 90,
                db_calls: c,
                p99_ms: 1.5,
                ..Default::default()
            });
        }
    }

    #[test]
    fn sparkline_shows_a_spike_and_blank_before_the_start() {
        let mut live = Live::with_mode(Mode::Off, Duration::from_secs(10));
        live.mode = Mode::Bar;
        live.bar = ProgressBar::hidden();
        // 3 s of buckets: idle, a herd of 60 at 1.0 s, idle.
        let mut calls = vec![0u64; 30];
        calls[10] = 60;
        feed(&mut live, &calls);
        let spark = live.sparkline();
        assert_eq!(spark.chars().count(), 16);
        assert!(spark.starts_with("          "), "{spark:?}");
        assert_eq!(spark.chars().filter(|&c| c == '█').count(), 1, "{spark:?}");
        assert_eq!(
            spark.trim_start().chars().filter(|&c| c == '▁').count(),
            5,
            "{spark:?}"
        );
    }

    #[test]
    fn rates_are_over_the_last_second() {
        let mut live = Live::with_mode(Mode::Off, Duration::from_secs(10));
        live.mode = Mode::Plain;
        feed(&mut live, &[5; 25]);
        let m = live.message(false);
        // 10 buckets of 100 requests in the last second, 5 DB calls each.
        assert!(m.contains("   1000 req/s"), "{m}");
        assert!(m.contains("hit  90.0%"), "{m}");
        assert!(m.contains("db     50/s"), "{m}");
    }

    #[test]
    fn rates_early_in_the_run_use_the_time_so_far() {
        let mut live = Live::with_mode(Mode::Off, Duration::from_secs(10));
        live.mode = Mode::Plain;
        feed(&mut live, &[5; 3]);
        let m = live.message(false);
        assert!(m.contains("   1000 req/s"), "{m}");
        assert!(m.contains("db     50/s"), "{m}");
    }
}
