//! The Pareto front of a comparison: which strategies no other beats on every objective, and
//! when the trials are too few or too close to say that one does.

use super::mann_whitney::{holm, mann_whitney_u, median_lower, trials_to_decide};
use super::{MIN_TRIALS, median};

/// Which rows of a set of objective vectors are dominated, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pareto {
    /// For each row, the lowest-indexed row that dominates it, or `None` if none does.
    pub dominated_by: Vec<Option<usize>>,
    /// The rows no other row dominates, in ascending order.
    pub front: Vec<usize>,
}

/// The Pareto front of `rows`, each a vector of objectives where lower is better (DB calls,
/// p99, stale responses, errors, rejected, …).
///
/// Row `d` dominates row `r` when `d` is at least as good on every objective — `r` is better
/// on none beyond the noise — and `better_beyond_noise(d, r, o)` holds for at least one
/// objective `o`, meaning row `d` is better than row `r` on `o` by more than the noise between
/// trials (the caller decides what that is; [`verdicts`] uses the Holm-corrected U test). A
/// difference inside the noise neither makes a strategy dominated nor saves it from being
/// dominated.
///
/// Ties are broken deterministically: a dominated row names the lowest-indexed row that
/// dominates it. Rows of different lengths, or with NaN objectives, are not comparable and do
/// not dominate one another.
pub fn pareto_front<R, F>(rows: &[R], mut better_beyond_noise: F) -> Pareto
where
    R: AsRef<[f64]>,
    F: FnMut(usize, usize, usize) -> bool,
{
    let dominated_by: Vec<Option<usize>> = (0..rows.len())
        .map(|r| {
            (0..rows.len()).find(|&d| {
                let (vd, vr) = (rows[d].as_ref(), rows[r].as_ref());
                d != r
                    && comparable(vd, vr)
                    && (0..vd.len()).all(|o| !better_beyond_noise(r, d, o))
                    && (0..vd.len()).any(|o| better_beyond_noise(d, r, o))
            })
        })
        .collect();
    let front = dominated_by
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_none())
        .map(|(i, _)| i)
        .collect();
    Pareto {
        dominated_by,
        front,
    }
}

fn comparable(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().chain(b).all(|x| !x.is_nan())
}

/// Where one strategy stands on the front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// No other strategy's medians are as good on every objective and better on one.
    Front,
    /// Strategy `by` is lower beyond the noise on at least one objective, and this one is
    /// lower beyond the noise on none.
    Dominated { by: usize },
    /// Strategy `by` looks better — its medians are as good on every objective and better on
    /// one — but the trials cannot tell: fewer than [`MIN_TRIALS`] on a side, or no difference
    /// beyond the noise once corrected for the number of objectives. It stays on the front.
    /// `trials`: how many trials per strategy would decide it if further trials overlapped
    /// as these do (None: more than anyone would run, or no objective is lower beyond a coin
    /// toss).
    Undecided { by: usize, trials: Option<usize> },
}

impl Standing {
    /// Whether the strategy is on the front: not dominated (an undecided one is).
    pub fn on_front(self) -> bool {
        !matches!(self, Standing::Dominated { .. })
    }
}

/// The Pareto verdicts of a comparison from its trials: `samples[row][objective]` holds every
/// trial's value of that objective for that strategy, lower is better, the same objectives in
/// the same order for every row.
///
/// "Lower beyond the noise" on an objective: both strategies ran at least [`MIN_TRIALS`]
/// trials, the two-sided exact Mann–Whitney U test tells them apart after Holm's correction
/// over the pair's objectives (adjusted p < `alpha`), and the median is lower. The correction
/// is what keeps two strategies that are in truth the same from being marked dominated more
/// than `alpha` of the time: with eight objectives each tested at α, one of them would come
/// out "different" about a third of the time. A strategy is dominated ([`pareto_front`]) when
/// another is lower beyond the noise on one objective and it is lower beyond the noise on
/// none; else, when another's medians are at least as good on every objective and lower on
/// one, it is undecided; else it is plainly on the front.
pub fn verdicts(samples: &[Vec<Vec<f64>>], alpha: f64) -> Vec<Standing> {
    let n = samples.len();
    let medians: Vec<Vec<f64>> = samples
        .iter()
        .map(|row| row.iter().map(|s| median(s).unwrap_or(f64::NAN)).collect())
        .collect();
    // Holm-adjusted p of every objective, once per unordered pair.
    let mut adjusted = vec![vec![Vec::new(); n]; n];
    for d in 0..n {
        for r in d + 1..n {
            let (a, b) = (&samples[d], &samples[r]);
            if a.len() != b.len() {
                continue;
            }
            let p: Vec<f64> = a
                .iter()
                .zip(b)
                .map(|(x, y)| mann_whitney_u(x, y).p)
                .collect();
            let adj = holm(&p);
            adjusted[d][r] = adj.clone();
            adjusted[r][d] = adj;
        }
    }
    let enough = |d: usize, r: usize, o: usize| {
        samples[d][o].len() >= MIN_TRIALS && samples[r][o].len() >= MIN_TRIALS
    };
    let beyond = |d: usize, r: usize, o: usize| {
        enough(d, r, o)
            && adjusted[d][r].get(o).is_some_and(|&q| q < alpha)
            && median_lower(&samples[d][o], &samples[r][o])
    };
    let decided = pareto_front(&medians, beyond);
    (0..n)
        .map(|r| {
            if let Some(by) = decided.dominated_by[r] {
                return Standing::Dominated { by };
            }
            let looks_better = |d: usize| {
                let (md, mr) = (&medians[d], &medians[r]);
                d != r
                    && comparable(md, mr)
                    && md.iter().zip(mr).all(|(x, y)| x <= y)
                    && md.iter().zip(mr).any(|(x, y)| x < y)
            };
            match (0..n).find(|&d| looks_better(d)) {
                None => Standing::Front,
                Some(by) => Standing::Undecided {
                    by,
                    trials: trials_needed(&samples[by], &samples[r], alpha),
                },
            }
        })
        .collect()
}

/// How many trials per strategy would decide that `d` is lower than `r` on some objective
/// where its median is lower, if further trials overlapped as these do: the fewest over those
/// objectives, at Holm's first step (α over the number of objectives), and never fewer than
/// [`MIN_TRIALS`] nor than one more than either side has run.
fn trials_needed(d: &[Vec<f64>], r: &[Vec<f64>], alpha: f64) -> Option<usize> {
    let level = alpha / d.len().max(1) as f64;
    let ran = d.iter().chain(r).map(Vec::len).min().unwrap_or(0);
    let at_least = if ran >= MIN_TRIALS {
        ran + 1
    } else {
        MIN_TRIALS
    };
    d.iter()
        .zip(r)
        .filter(|(x, y)| median_lower(x, y))
        .filter_map(|(x, y)| trials_to_decide(x, y, level, at_least))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::DEFAULT_ALPHA;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, LogNormal, Normal, Poisson};

    #[test]
    fn pareto_small_set() {
        // Objectives: DB calls, p99, stale, errors.
        let rows = [
            vec![100.0, 50.0, 0.0, 0.0], // 0: front
            vec![10.0, 80.0, 5.0, 0.0],  // 1: front (fewer calls, worse p99)
            vec![100.0, 60.0, 0.0, 0.0], // 2: dominated by 0 (worse p99)
            vec![10.0, 80.0, 5.0, 3.0],  // 3: dominated by 1 (errors)
            vec![200.0, 90.0, 9.0, 3.0], // 4: dominated by 0, 1, 2, 3 -> lowest is 0
            vec![100.0, 50.5, 0.0, 0.0], // 5: worse than 0 only within the noise
        ];
        // "Beyond the noise": more than 1 unit lower.
        let plain = |d: usize, r: usize, o: usize| rows[d][o] + 1.0 < rows[r][o];
        let p = pareto_front(&rows, plain);
        assert_eq!(
            p.dominated_by,
            vec![None, None, Some(0), Some(1), Some(0), None]
        );
        assert_eq!(p.front, vec![0, 1, 5]);
    }

    #[test]
    fn pareto_equal_rows_and_noise() {
        // Equal rows never dominate each other: neither is better beyond the noise.
        let rows = [[1.0, 1.0], [1.0, 1.0]];
        let p = pareto_front(&rows, |d, r, o| rows[d][o] < rows[r][o]);
        assert_eq!(p.front, vec![0, 1]);
        // A predicate that calls nothing beyond the noise leaves everyone on the front.
        let rows = [[1.0, 1.0], [9.0, 9.0]];
        let p = pareto_front(&rows, |_, _, _| false);
        assert_eq!(p.front, vec![0, 1]);
        // Lower but not at least as good elsewhere: no domination.
        let rows = [[1.0, 2.0], [2.0, 1.0]];
        let p = pareto_front(&rows, |d, r, o| rows[d][o] < rows[r][o]);
        assert_eq!(p.dominated_by, vec![None, None]);
        let empty: [[f64; 2]; 0] = [];
        assert_eq!(
            pareto_front(&empty, |_, _, _| true).front,
            Vec::<usize>::new()
        );
    }

    /// One strategy's trials of one objective each: `rows[row][objective]`.
    fn rows(v: &[&[&[f64]]]) -> Vec<Vec<Vec<f64>>> {
        v.iter()
            .map(|row| row.iter().map(|o| o.to_vec()).collect())
            .collect()
    }

    #[test]
    fn verdicts_with_five_trials_on_one_objective() {
        let s = rows(&[
            &[&[10.0, 11.0, 12.0, 10.5, 11.5]],
            &[&[50.0, 51.0, 52.0, 50.5, 51.5]],
            &[&[10.2, 11.2, 11.8, 10.4, 11.4]],
        ]);
        // 1 is beyond the noise above 0 (complete separation, p = 2/252). 2's median is a hair
        // above 0's, inside the noise: 0 looks better, the trials cannot tell, 2 stays on the
        // front, and no number of trials in sight would tell a difference that small.
        assert_eq!(
            verdicts(&s, DEFAULT_ALPHA),
            vec![
                Standing::Front,
                Standing::Dominated { by: 0 },
                Standing::Undecided {
                    by: 0,
                    trials: None
                },
            ]
        );
    }

    #[test]
    fn worse_only_within_the_noise_is_still_at_least_as_good() {
        // Two objectives, five trials each: 0 has far fewer calls; its p99 is a hair higher,
        // inside the noise. Holm over two objectives: 2 x 2/252 = 0.016 < 0.05, so 0 dominates
        // 1; a plain comparison of medians would not say so.
        let s = rows(&[
            &[&[4.0, 4.0, 4.0, 4.0, 4.0], &[0.68, 0.61, 0.94, 0.70, 0.66]],
            &[
                &[240.0, 240.0, 241.0, 239.0, 240.0],
                &[0.66, 0.63, 1.05, 0.64, 0.65],
            ],
        ]);
        assert!(
            median(&s[0][1]) > median(&s[1][1]),
            "0's median p99 is higher"
        );
        assert_eq!(
            verdicts(&s, DEFAULT_ALPHA),
            vec![Standing::Front, Standing::Dominated { by: 0 }]
        );
    }

    #[test]
    fn fewer_than_five_trials_never_dominate() {
        // One trial each (the default): 1 is worse on everything, by a lot. Without trials to
        // tell noise from a difference, undecided; 5 trials could decide it over 5 objectives.
        let one = rows(&[
            &[&[100.0], &[1.0], &[0.0], &[0.0], &[0.0]],
            &[&[900.0], &[9.0], &[5.0], &[3.0], &[1.0]],
        ]);
        assert_eq!(
            verdicts(&one, DEFAULT_ALPHA),
            vec![
                Standing::Front,
                Standing::Undecided {
                    by: 0,
                    trials: Some(5)
                }
            ]
        );
        // Four trials apart on every figure: still undecided, still 5.
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [11.0, 12.0, 13.0, 14.0];
        let four = rows(&[&[&a, &a], &[&b, &b]]);
        assert_eq!(
            verdicts(&four, DEFAULT_ALPHA)[1],
            Standing::Undecided {
                by: 0,
                trials: Some(5)
            }
        );
        // Equal figures: nothing looks better, nothing to decide.
        let same = rows(&[&[&[1.0], &[2.0]], &[&[1.0], &[2.0]]]);
        assert_eq!(
            verdicts(&same, DEFAULT_ALPHA),
            vec![Standing::Front, Standing::Front]
        );
        // A trade-off: each better on one figure. Both on the front, nothing undecided.
        let trade = rows(&[&[&[1.0], &[9.0]], &[&[9.0], &[1.0]]]);
        assert_eq!(
            verdicts(&trade, DEFAULT_ALPHA),
            vec![Standing::Front, Standing::Front]
        );
    }

    #[test]
    fn five_trials_cannot_decide_over_seven_objectives() {
        // Complete separation on DB calls at 5 trials (p = 2/252 = 0.0079) passes α/5 but not
        // α/7 = 0.0071 (seven objectives with writes): undecided, and 6 trials would decide it.
        let low = [1.0, 2.0, 3.0, 4.0, 5.0];
        let high = [6.0, 7.0, 8.0, 9.0, 10.0];
        let zero = [0.0; 5];
        let five = rows(&[
            &[&low, &zero, &zero, &zero, &zero],
            &[&high, &zero, &zero, &zero, &zero],
        ]);
        assert_eq!(
            verdicts(&five, DEFAULT_ALPHA)[1],
            Standing::Dominated { by: 0 }
        );
        let seven = rows(&[
            &[&low, &zero, &zero, &zero, &zero, &zero, &zero],
            &[&high, &zero, &zero, &zero, &zero, &zero, &zero],
        ]);
        assert_eq!(
            verdicts(&seven, DEFAULT_ALPHA)[1],
            Standing::Undecided {
                by: 0,
                trials: Some(6)
            }
        );
        // Six trials apart: decided.
        let six = rows(&[
            &[
                &[1.0, 2.0, 3.0, 4.0, 5.0, 5.5],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
            ],
            &[
                &[6.0, 7.0, 8.0, 9.0, 10.0, 11.0],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
                &[0.0; 6],
            ],
        ]);
        assert_eq!(
            verdicts(&six, DEFAULT_ALPHA)[1],
            Standing::Dominated { by: 0 }
        );
    }

    /// One strategy's trials of eight objectives shaped like the real ones: DB calls and p99
    /// sharing a per-trial machine factor (so the objectives are not independent), stale
    /// responses, zero-heavy errors and rejections, a stale-read share, divergent keys and a
    /// zero-heavy share of writes left wrong.
    fn draw_strategy(rng: &mut StdRng, trials: usize, calls_mean: f64) -> Vec<Vec<f64>> {
        let machine = Normal::new(0.0, 1.0).expect("valid normal");
        let p99 = LogNormal::new(0.0, 0.3).expect("valid lognormal");
        let stale = Poisson::new(3.0).expect("valid poisson");
        let divergent = Poisson::new(0.4).expect("valid poisson");
        let mut objectives: Vec<Vec<f64>> = (0..8).map(|_| Vec::with_capacity(trials)).collect();
        for _ in 0..trials {
            let m: f64 = machine.sample(rng);
            objectives[0].push((calls_mean + 20.0 * m + 10.0 * machine.sample(rng)).round());
            objectives[1].push(p99.sample(rng) * (1.0 + 0.1 * m));
            objectives[2].push(stale.sample(rng));
            objectives[3].push(if rng.random_bool(0.3) { 1.0 } else { 0.0 });
            objectives[4].push(if rng.random_bool(0.1) { 2.0 } else { 0.0 });
            objectives[5].push(rng.random::<f64>() * 0.01);
            objectives[6].push(divergent.sample(rng));
            objectives[7].push(if rng.random_bool(0.2) {
                rng.random::<f64>() * 0.05
            } else {
                0.0
            });
        }
        objectives
    }

    #[test]
    fn identical_strategies_are_marked_dominated_at_most_alpha_of_the_time() {
        let mut rng = StdRng::seed_from_u64(2026);
        for objectives in [5, 7, 8] {
            for trials in [5, 8, 12] {
                let draws = 1000;
                let (mut corrected, mut uncorrected) = (0, 0);
                for _ in 0..draws {
                    let mut pair: Vec<Vec<Vec<f64>>> = (0..2)
                        .map(|_| draw_strategy(&mut rng, trials, 1000.0))
                        .collect();
                    for row in &mut pair {
                        row.truncate(objectives);
                    }
                    let v = verdicts(&pair, DEFAULT_ALPHA);
                    corrected += usize::from(v.iter().any(|s| !s.on_front()));
                    // The rule without the correction: each objective tested at α on its own.
                    let beyond = |d: usize, r: usize, o: usize| {
                        mann_whitney_u(&pair[d][o], &pair[r][o]).p < DEFAULT_ALPHA
                            && median_lower(&pair[d][o], &pair[r][o])
                    };
                    let medians: Vec<Vec<f64>> = pair
                        .iter()
                        .map(|r| r.iter().map(|o| median(o).unwrap_or(0.0)).collect())
                        .collect();
                    let p = pareto_front(&medians, beyond);
                    uncorrected += usize::from(p.front.len() < 2);
                }
                let rate = corrected as f64 / draws as f64;
                let raw = uncorrected as f64 / draws as f64;
                assert!(
                    rate <= DEFAULT_ALPHA,
                    "{objectives} objectives, {trials} trials: identical strategies marked dominated {rate:.3} of the time"
                );
                // Without the correction the same draws cross α (0.10 to 0.21 here): the test
                // can fail.
                assert!(
                    raw > DEFAULT_ALPHA,
                    "{objectives} objectives, {trials} trials: uncorrected {raw:.3}"
                );
            }
        }
    }

    #[test]
    fn a_real_difference_is_found() {
        // The other side of the rate above: 10% fewer DB calls, all else equal, is decided at
        // 8 trials most of the time over eight objectives.
        let mut rng = StdRng::seed_from_u64(7);
        let draws = 300;
        let mut found = 0;
        for _ in 0..draws {
            let pair = vec![
                draw_strategy(&mut rng, 8, 900.0),
                draw_strategy(&mut rng, 8, 1000.0),
            ];
            found +=
                usize::from(verdicts(&pair, DEFAULT_ALPHA)[1] == Standing::Dominated { by: 0 });
        }
        assert!(found * 10 > draws * 6, "found {found} of {draws}");
    }
}
