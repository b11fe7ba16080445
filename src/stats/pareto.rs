//! The Pareto front of a comparison: which strategies no other beats on every objective.

/// Which rows of a set of objective vectors are dominated, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pareto {
    /// For each row, the lowest-indexed row that dominates it, or `None` if none does.
    pub dominated_by: Vec<Option<usize>>,
    /// The rows no other row dominates, in ascending order.
    pub front: Vec<usize>,
}

/// The Pareto front of `rows`, each a vector of objectives where lower is better (DB calls,
/// p99, stale responses, errors, rejected).
///
/// Row `d` dominates row `r` when `d` is at least as good on every objective — `r` is better
/// on none beyond the noise — and `better_beyond_noise(d, r, o)` holds for at least one
/// objective `o`, meaning row `d` is better than row `r` on `o` by more than the noise between
/// trials (the caller decides what that is; see [`super::lower_beyond_noise`]: with few trials
/// it is a plain comparison of the figures). A difference inside the noise neither makes a
/// strategy dominated nor saves it from being dominated.
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
                    && vd.len() == vr.len()
                    && vd.iter().chain(vr).all(|x| !x.is_nan())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{DEFAULT_ALPHA, lower_beyond_noise, median};

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

    #[test]
    fn pareto_with_trials_rule() {
        // Five trials per strategy; the rule of lower_beyond_noise on the samples.
        let calls = [
            vec![10.0, 11.0, 12.0, 10.5, 11.5],
            vec![50.0, 51.0, 52.0, 50.5, 51.5],
            vec![10.2, 11.2, 11.8, 10.4, 11.4],
        ];
        let medians: Vec<Vec<f64>> = calls
            .iter()
            .map(|c| vec![median(c).unwrap_or(f64::NAN)])
            .collect();
        let p = pareto_front(&medians, |d, r, _| {
            lower_beyond_noise(&calls[d], &calls[r], DEFAULT_ALPHA)
        });
        // 2 has a lower median than 0 but not beyond the noise: both stay on the front.
        assert_eq!(p.dominated_by, vec![None, Some(0), None]);
        assert_eq!(p.front, vec![0, 2]);
    }

    #[test]
    fn worse_only_within_the_noise_is_still_at_least_as_good() {
        // Two objectives, five trials each: 0 has far fewer calls; its p99 is a hair higher,
        // inside the noise. 0 dominates 1; a plain comparison of medians would not say so.
        let calls = [
            vec![4.0, 4.0, 4.0, 4.0, 4.0],
            vec![240.0, 240.0, 241.0, 239.0, 240.0],
        ];
        let p99 = [
            vec![0.68, 0.61, 0.94, 0.70, 0.66],
            vec![0.66, 0.63, 1.05, 0.64, 0.65],
        ];
        let samples = [calls, p99];
        let medians: Vec<Vec<f64>> = (0..2)
            .map(|i| samples.iter().map(|o| median(&o[i]).unwrap()).collect())
            .collect();
        assert!(medians[0][1] > medians[1][1], "0's median p99 is higher");
        let p = pareto_front(&medians, |d, r, o| {
            lower_beyond_noise(&samples[o][d], &samples[o][r], DEFAULT_ALPHA)
        });
        assert_eq!(p.dominated_by, vec![None, Some(0)]);
    }
}
