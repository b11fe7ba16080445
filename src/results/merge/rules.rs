//! The rules a part of a result merges by, one function per rule, so that each field's
//! merge names its rule: a `Merge` impl destructures the other shard's part exhaustively
//! (`let Self { a, b } = other;`), so a field added without a rule does not compile.

use anyhow::Result;

use crate::results::Known;

/// A part of a result that folds another shard's same part into itself.
pub trait Merge {
    /// Fold `other` (a later shard's part, shards taken in index order) into `self`.
    fn merge(&mut self, other: &Self) -> Result<()>;
}

/// A count: the shards' counts added.
pub fn sum<T: std::ops::AddAssign + Copy>(a: &mut T, b: &T) {
    *a += *b;
}

/// A count that may be unknown: added, and unknown when a shard's is (with its reason).
pub fn sum_known(a: &mut Known<u64>, b: &Known<u64>) {
    if let (Known::Value(x), Known::Value(y)) = (&*a, b) {
        *a = Known::Value(x + y);
    } else if a.is_known() {
        *a = Known::unknown(format!(
            "a shard's is unknown: {}",
            b.reason().unwrap_or_default()
        ));
    }
}

/// A part that may be unknown: merged by `f`, and unknown when a shard's is (with its reason).
pub fn sum_known_by<T>(
    a: &mut Known<T>,
    b: &Known<T>,
    f: impl FnOnce(&mut T, &T) -> Result<()>,
) -> Result<()> {
    match (&mut *a, b) {
        (Known::Value(x), Known::Value(y)) => f(x, y)?,
        (Known::Value(_), Known::Unknown(why)) => {
            *a = Known::unknown(format!("a shard's is unknown: {why}"));
        }
        _ => {}
    }
    Ok(())
}

/// A count that may be missing: added, and missing when a shard's is.
pub fn sum_some(a: &mut Option<u64>, b: &Option<u64>) {
    *a = a.zip(*b).map(|(x, y)| x + y);
}

/// A peak or a worst case: the largest of the shards'.
pub fn max<T: PartialOrd + Copy>(a: &mut T, b: &T) {
    if *b > *a {
        *a = *b;
    }
}

/// An earliest moment: the smallest of the shards'.
pub fn min<T: PartialOrd + Copy>(a: &mut T, b: &T) {
    if *b < *a {
        *a = *b;
    }
}

/// True when it is true of any shard.
pub fn any(a: &mut bool, b: &bool) {
    *a |= *b;
}

/// True when it is true of every shard.
pub fn all(a: &mut bool, b: &bool) {
    *a &= *b;
}

/// The same in every shard of one run (the merge checks it before folding, or the shards
/// share it by construction: one scenario, one pair of servers): the first shard's.
pub fn same<T>(_a: &mut T, _b: &T) {}

/// Read once for the whole run by shard 0, or set up by the shard that did it: the first
/// shard's (the merge sorts the shards by index).
pub fn first<T>(_a: &mut T, _b: &T) {}

/// Derived from other figures: computed again once every shard is folded in.
pub fn recomputed<T>(_a: &mut T, _b: &T) {}

/// Merged by the enclosing part, which holds what it is weighed by.
pub fn by_parent<T>(_a: &mut T, _b: &T) {}

/// A mean weighed by what it averages (`wa`, `wb`: the shards' counts behind each, before
/// they are summed); unknown when neither shard has one or nothing stands behind either.
pub fn weighted_mean(a: &mut Option<f64>, wa: u64, b: &Option<f64>, wb: u64) {
    let total = wa + wb;
    *a = (total > 0 && (a.is_some() || b.is_some()))
        .then(|| (a.unwrap_or(0.0) * wa as f64 + b.unwrap_or(0.0) * wb as f64) / total as f64);
}

/// A part only some runs have: merged when both shards have it, unknown (None) otherwise.
pub fn both<T: Merge>(a: &mut Option<T>, b: &Option<T>) -> Result<()> {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y),
        _ => {
            *a = None;
            Ok(())
        }
    }
}

/// A part of counts a shard may lack (none counted there): merged, a missing one as zeros.
pub fn either<T: Merge + Default + Clone>(a: &mut Option<T>, b: &Option<T>) -> Result<()> {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y),
        (None, Some(y)) => {
            let mut x = T::default();
            x.merge(y)?;
            *a = Some(x);
            Ok(())
        }
        (_, None) => Ok(()),
    }
}
