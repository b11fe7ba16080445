//! The break-even hit rate: what a hit and a miss cost, measured in the run, and the hit rate
//! above which the cache pays off. With G the mean Redis read, L the mean load (pool wait +
//! statement) and S the mean write-back, a hit costs G and a miss G + L + S, while without a
//! cache every request costs L; so caching saves latency above h* = (G + S) / (L + S). A load
//! measured under a cache meets a database the cache unburdens, so in a comparison that ran
//! `no-cache` its L stands in for the others' ([`rebase`]), and `load_ms_from` says so. In a
//! run with a fault, G, L, S, h* and the hit rate set against it come from the undisturbed
//! part of the window ([`super::undisturbed`]), never from the fault's own commands.

use serde::{Deserialize, Serialize};

use super::undisturbed::Part;
use super::{Known, RunResult};

/// Where `load_ms` comes from when it is the run's own.
pub const THIS_RUN: &str = "this run";

/// The run's cost figures (null for an app under test: its steps are not seen).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CostFigures {
    /// G: a request's Redis read (the GET before anything else), mean, ms; null when none
    /// was timed (`no-cache` reads nothing).
    pub redis_read_ms: Option<f64>,
    /// L: a load as the app waits for it (pool wait + statement), mean, ms: this run's own,
    /// or the `no-cache` run's of the same comparison (`load_ms_from`). Null without loads.
    pub load_ms: Option<f64>,
    /// S: a load's write-back to Redis (its SET), mean, ms; null when none was timed.
    pub write_back_ms: Option<f64>,
    /// h* = (G + S) / (L + S): the hit rate above which the cache saves latency over loading
    /// every request. Above 1 it never does. Null without G, L or S (`no-cache`).
    pub break_even_hit_rate: Option<f64>,
    /// Where `load_ms` was measured: `this run`, or the strategy of the comparison's run
    /// without a cache (`no-cache`), whose database no cache unburdened.
    pub load_ms_from: String,
    /// This run's own L, ms, whatever `load_ms_from` says.
    #[serde(default)]
    pub run_load_ms: Option<f64>,
    /// Reads, loads and write-backs behind G, L and S (to weigh them when shards merge).
    #[serde(default)]
    pub redis_reads: u64,
    #[serde(default)]
    pub loads: u64,
    #[serde(default)]
    pub write_backs: u64,
    /// Where G, L, S and h* were measured in a run with a fault: the undisturbed part of its
    /// window ("the undisturbed 3.0 s of the 10.0 s window (outside the partition from 3.0 s
    /// to 5.0 s and the 10s observation after it)"), or null with the reason when there is
    /// none ("every second of the window was under a fault …"). Absent without a fault: the
    /// whole window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undisturbed: Option<Known<String>>,
    /// The hit rate over that same part, which h* is set against; absent without a fault
    /// (the run's `hit_rate` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_rate: Option<f64>,
}

/// h* from G, L and S (ms); None when a figure is missing or L + S is not positive.
pub fn break_even(g: Option<f64>, l: Option<f64>, s: Option<f64>) -> Option<f64> {
    let (g, l, s) = (g?, l?, s?);
    (l + s > 0.0).then(|| (g + s) / (l + s))
}

impl CostFigures {
    /// From the run's sums: µs and counts of reads, loads and write-backs.
    pub fn measured(
        (read_us, reads): (u64, u64),
        (load_us, loads): (u64, u64),
        (write_back_us, write_backs): (u64, u64),
    ) -> CostFigures {
        let mean = |us: u64, n: u64| (n > 0).then(|| us as f64 / 1000.0 / n as f64);
        let (g, l, s) = (
            mean(read_us, reads),
            mean(load_us, loads),
            mean(write_back_us, write_backs),
        );
        CostFigures {
            redis_read_ms: g,
            load_ms: l,
            write_back_ms: s,
            break_even_hit_rate: break_even(g, l, s),
            load_ms_from: THIS_RUN.to_string(),
            run_load_ms: l,
            redis_reads: reads,
            loads,
            write_backs,
            undisturbed: None,
            hit_rate: None,
        }
    }

    /// From the undisturbed part of a window with a fault, or unknown (every figure null) with
    /// the reason there is none.
    pub fn of_part(part: &Result<Part, String>) -> CostFigures {
        match part {
            Ok(p) => {
                let c = &p.cost;
                CostFigures {
                    undisturbed: Some(Known::Value(p.words.clone())),
                    hit_rate: p.hit_rate(),
                    ..CostFigures::measured(
                        (c.read_us, c.reads),
                        (c.load_us, c.loads),
                        (c.write_back_us, c.write_backs),
                    )
                }
            }
            Err(why) => CostFigures {
                undisturbed: Some(Known::Unknown(why.clone())),
                load_ms_from: THIS_RUN.to_string(),
                ..CostFigures::default()
            },
        }
    }

    /// The hit rate h* is set against: the undisturbed part's in a run with a fault, else
    /// the run's.
    pub fn set_against(&self, r: &RunResult) -> Option<f64> {
        match &self.undisturbed {
            Some(_) => self.hit_rate,
            None => r.hit_rate.value(),
        }
    }

    /// ", from the undisturbed 3.0 s of …" for a sentence; empty without a fault.
    pub fn where_words(&self) -> String {
        match &self.undisturbed {
            Some(Known::Value(w)) => format!(", from {w}"),
            _ => String::new(),
        }
    }

    /// The same figures with L from another run (`from` names it), h* recomputed.
    pub fn with_load(&self, load_ms: Option<f64>, from: &str) -> CostFigures {
        CostFigures {
            load_ms,
            break_even_hit_rate: break_even(self.redis_read_ms, load_ms, self.write_back_ms),
            load_ms_from: from.to_string(),
            ..self.clone()
        }
    }
}

/// Whether a result ran without a cache.
pub fn is_no_cache(r: &RunResult) -> bool {
    !r.scenario.strategy.caches()
}

/// Take L for `r`'s break-even from `no_cache`, a run of the same comparison without a cache
/// (under a cache the database is lighter, so its loads are cheaper than the cache saves). False
/// when there was nothing to change; else the diagnoses, which read the break-even, are judged
/// again by the caller (`diagnose` reads the cost, not the other way round).
pub fn rebase(r: &mut RunResult, no_cache: &RunResult) -> bool {
    let (Some(c), Some(n)) = (&r.cost, &no_cache.cost) else {
        return false;
    };
    if is_no_cache(r) || n.load_ms.is_none() {
        return false;
    }
    let rebased = c.with_load(n.load_ms, &no_cache.strategy);
    if rebased == *c {
        return false;
    }
    r.cost = Some(rebased);
    true
}

/// The break-even in words, for the summaries: G, L (and where it came from), S, h*, and the
/// run's hit rate against it. None without a cost, or for a run without a cache.
pub fn line(r: &RunResult) -> Option<String> {
    let c = r.cost.as_ref()?;
    let ms = |v: Option<f64>| v.map_or_else(|| "unknown".to_string(), |v| format!("{v:.3}"));
    if let Some(Known::Unknown(why)) = &c.undisturbed {
        return Some(format!(
            "break-even hit rate unknown: {why}; whether caching pays is not judged from a fault's seconds"
        ));
    }
    if is_no_cache(r) {
        return Some(format!(
            "no cache: every request loads, L {} ms (pool wait + statement){}; the break-even of a caching run in the same comparison takes this L",
            ms(c.load_ms),
            c.where_words()
        ));
    }
    let from = if c.load_ms_from == THIS_RUN {
        "L this run's".to_string()
    } else {
        format!(
            "L from {}, this run's own {} ms",
            c.load_ms_from,
            ms(c.run_load_ms)
        )
    };
    let verdict = match (c.break_even_hit_rate, c.set_against(r)) {
        (Some(h), _) if h >= 1.0 => {
            "; caching never pays off here: a hit costs more than a load".to_string()
        }
        (Some(h), Some(hr)) => format!(
            "; hit rate {:.1}%{} is {} it: caching {} latency",
            hr * 100.0,
            if c.undisturbed.is_some() {
                " over the same seconds"
            } else {
                ""
            },
            if hr >= h { "above" } else { "below" },
            if hr >= h { "saves" } else { "costs" }
        ),
        _ => String::new(),
    };
    Some(format!(
        "break-even hit rate {} = (G {} + S {}) / (L {} + S {}) ms, {from}{}{verdict}",
        c.break_even_hit_rate
            .map_or_else(|| "unknown".to_string(), |h| format!("{:.1}%", h * 100.0)),
        ms(c.redis_read_ms),
        ms(c.write_back_ms),
        ms(c.load_ms),
        ms(c.write_back_ms),
        c.where_words(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_labs_figures_give_its_break_even() {
        // G 0.100, L 0.244, S 0.164 ms → 64.7%.
        let h = break_even(Some(0.100), Some(0.244), Some(0.164)).unwrap();
        assert!((h - 0.647).abs() < 0.001, "{h}");
        assert_eq!(break_even(None, Some(1.0), Some(1.0)), None);
        assert_eq!(break_even(Some(0.0), Some(0.0), Some(0.0)), None);
    }

    #[test]
    fn measured_means_and_another_runs_load() {
        let c = CostFigures::measured((1000, 10), (2440, 10), (1640, 10));
        assert_eq!(c.redis_read_ms, Some(0.1));
        assert_eq!(c.load_ms_from, THIS_RUN);
        let h = c.break_even_hit_rate.unwrap();
        assert!((h - 0.647).abs() < 0.001);
        let r = c.with_load(Some(1.0), "no-cache");
        assert_eq!((r.load_ms, r.run_load_ms), (Some(1.0), Some(0.244)));
        assert!(
            r.break_even_hit_rate.unwrap() < h,
            "a dearer load lowers h*"
        );
        assert_eq!(r.load_ms_from, "no-cache");
        let unknown =
            CostFigures::of_part(&Err("every second of the window was under a fault".into()));
        assert_eq!(unknown.break_even_hit_rate, None);
        assert!(matches!(unknown.undisturbed, Some(Known::Unknown(_))));
        let none = CostFigures::measured((0, 0), (500, 1), (0, 0));
        assert_eq!((none.redis_read_ms, none.break_even_hit_rate), (None, None));
    }
}
