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
/// p99, stale responses, errors).
///
/// Row `d` dominates row `r` when `d` is at least as good on every objective, plainly
/// (`rows[d][o] <= rows[r][o]`, on the figures the caller passes, typically medians), and `better_beyond_noise(d, r, o)` holds for at least one
/// objective `o`, meaning row `d` is better than row `r` on `o` by more than the noise between
/// trials (the caller decides what that is; see [`lower_beyond_noise`]). A difference inside
/// the noise never makes a strategy dominated, so the front keeps every strategy that is not
/// clearly beaten.
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
                    && vd.iter().zip(vr).all(|(x, y)| x <= y)
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
}
