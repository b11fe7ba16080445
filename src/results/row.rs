//! One strategy's row of a comparison's summary: its headline figures (with several trials,
//! the medians, their intervals and the trials' values), its marks and its verdict. The
//! summary ([`super::summary`]) ranks the rows and the conclusion ([`super::conclusion`]) reads
//! them; both import it from here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// The mark of a pair that left keys wrong, in rows and in the front's line.
pub const LEAVES_KEYS_WRONG: &str = "leaves keys wrong";

/// One strategy's headline figures: with several trials, the medians.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Row {
    /// 1 = fewest DB calls.
    pub rank: usize,
    /// Canonical strategy name; its results are `<strategy>.json`, or `<strategy>/trial-N.json`
    /// with several trials.
    pub strategy: String,
    /// Every metric of the list (docs/results.md), by name: `db_calls`, `hit_rate`, `p99`, …
    /// (the median over the trials); null when unknown.
    #[serde(deserialize_with = "nan::map")]
    pub figures: BTreeMap<String, f64>,
    /// Trials run.
    #[serde(default = "one")]
    pub trials: usize,
    /// Every trial's value of every metric, by name, in trial order (null: unknown in it).
    #[serde(default, deserialize_with = "nan::vec_map")]
    pub samples: BTreeMap<String, Vec<f64>>,
    /// The interval of each metric's median, with its real coverage (distribution-free, from
    /// order statistics); null below 5 trials, where no interval is computed.
    #[serde(default)]
    pub ci: Option<Ci>,
    /// Whether this strategy's DB calls cannot be told from the next one's (two-sided
    /// Mann–Whitney U at α = 0.05); null below 5 trials on either side, or for the last row.
    #[serde(default)]
    pub same_as_next: Option<bool>,
    /// The strategy that dominates this one on the Pareto objectives, if any (beyond the
    /// noise: never while the verdict is undecided).
    #[serde(default)]
    pub dominated_by: Option<String>,
    /// Whether another strategy looks better (medians as good on every objective and better on
    /// one) but the trials cannot tell: fewer than 5, or no difference beyond the noise after
    /// the correction. The strategy stays on the front.
    #[serde(default)]
    pub undecided: bool,
    /// With `undecided`: the strategy that looks better.
    #[serde(default)]
    pub undecided_vs: Option<String>,
    /// With `undecided`: trials per strategy that would decide it if further trials overlapped
    /// as these do; null when more than 100 would be needed or nothing is lower beyond a coin
    /// toss.
    #[serde(default)]
    pub trials_to_decide: Option<usize>,
    /// Whether any trial left keys wrong (`divergent_keys` > 0): the cache held another version
    /// than the database once writes and in-flight work were over, wrong until the TTL.
    #[serde(default)]
    pub leaves_keys_wrong: bool,
    /// `db_calls` divided by the best strategy's; null when the best made no call.
    pub db_calls_vs_best: Option<f64>,
    /// Requests scheduled in the measured window (equal across strategies in open loop).
    pub scheduled: u64,
    /// Fingerprint of the key draws (equal = the same keys were asked for).
    pub key_digest: String,
    /// Thresholds broken by this strategy in any trial (names); empty when all passed or none
    /// were set.
    pub thresholds_broken: Vec<String>,
    /// Diagnosis codes of any trial (see docs/results.md).
    #[serde(default)]
    pub diagnoses: Vec<String>,
    /// True when this strategy's run was cut short.
    pub interrupted: bool,
    /// Whether the runs had writes (the consistency figures mean something).
    #[serde(default)]
    pub writes: bool,
    /// The DB calls by cause of the trial whose DB calls are the median (a real trial's, so
    /// they add up to its calls); null when unknown (an app under test).
    #[serde(default)]
    pub by_cause: Option<super::causes::ByCause>,
}

fn one() -> usize {
    1
}

/// The intervals of a row's medians: every metric's the same order statistics of its trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    /// P(lo <= true median <= hi) for any continuous distribution: 1 - 2 P(B < lo rank), B ~
    /// Binomial(trials, 1/2). The narrowest interval reaching 95%, or (min, max) where none
    /// does: 0.9375 at 5 trials, 0.969 at 6.
    pub coverage: f64,
    /// 1-based ranks of the bounds in the sorted trials.
    pub ranks: [usize; 2],
    /// Metric name → [lo, hi].
    #[serde(deserialize_with = "nan::pair_map")]
    pub bounds: BTreeMap<String, [f64; 2]>,
}

/// Reading back what serde_json wrote: an unknown figure travels as NaN, which JSON writes
/// as `null`.
pub(crate) mod nan {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer};

    fn or_nan(v: Option<f64>) -> f64 {
        v.unwrap_or(f64::NAN)
    }

    pub fn one<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Option::<f64>::deserialize(d).map(or_nan)
    }

    pub fn map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let m = BTreeMap::<String, Option<f64>>::deserialize(d)?;
        Ok(m.into_iter().map(|(k, v)| (k, or_nan(v))).collect())
    }

    pub fn vec_map<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<f64>>, D::Error> {
        let m = BTreeMap::<String, Vec<Option<f64>>>::deserialize(d)?;
        Ok(m.into_iter()
            .map(|(k, v)| (k, v.into_iter().map(or_nan).collect()))
            .collect())
    }

    pub fn pair_map<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, [f64; 2]>, D::Error> {
        let m = BTreeMap::<String, [Option<f64>; 2]>::deserialize(d)?;
        Ok(m.into_iter()
            .map(|(k, [a, b])| (k, [or_nan(a), or_nan(b)]))
            .collect())
    }
}

impl Row {
    /// One figure of the row (0 when the row was written without it).
    pub fn figure(&self, m: Metric) -> f64 {
        self.figures.get(m.name()).copied().unwrap_or(0.0)
    }

    /// Every trial's value of `m`.
    pub fn samples_of(&self, m: Metric) -> &[f64] {
        self.samples.get(m.name()).map_or(&[], Vec::as_slice)
    }

    /// The strategy with its marks: interrupted, diagnosed (`*`), leaves keys wrong.
    pub fn label(&self, markdown: bool) -> String {
        let tick = if markdown { "`" } else { "" };
        format!(
            "{tick}{}{tick}{}{}{}",
            self.strategy,
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            },
            if self.diagnoses.is_empty() { "" } else { " *" },
            if self.leaves_keys_wrong {
                format!(" ({LEAVES_KEYS_WRONG})")
            } else {
                String::new()
            }
        )
    }

    /// Where the row stands: "Pareto front", "dominated by X", or "undecided vs X (--repeat
    /// N)".
    pub fn verdict(&self) -> String {
        match (&self.dominated_by, &self.undecided_vs) {
            (Some(d), _) => format!("dominated by {d}"),
            (None, Some(u)) if self.undecided => match self.trials_to_decide {
                Some(n) => format!("undecided vs {u} (--repeat {n})"),
                None => format!("undecided vs {u} (too close to decide)"),
            },
            _ => "Pareto front".to_string(),
        }
    }

    /// "1.00x", or "n/a" when the best made no call.
    pub fn vs_best(&self) -> String {
        match self.db_calls_vs_best {
            Some(x) => format!("{x:.2}x"),
            None if self.figure(Metric::DbCalls) == 0.0 => "1.00x".to_string(),
            None => "n/a".to_string(),
        }
    }

    /// "ok", "—" (none set) or the broken thresholds' names.
    pub fn thresholds_cell(&self, any_set: bool) -> String {
        if !any_set {
            "—".to_string()
        } else if self.thresholds_broken.is_empty() {
            "ok".to_string()
        } else {
            format!("BROKEN: {}", self.thresholds_broken.join(", "))
        }
    }
}
