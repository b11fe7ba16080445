//! Which SET a load's write-back issues: the last step of admit → load → store. A pure
//! decision, beside [`super::freshness::Policy::judge`] (what a read does with what it found):
//! the request path carries it out and counts what Redis answered.

use super::Coordination;

/// What a load brought back, as far as the store cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A row: its value is written back.
    Row,
    /// No such row, and negative caching is on: a not-found sentinel is written back.
    Missing,
}

/// The SET a write-back issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// `SET PX`, unconditionally.
    Plain,
    /// A SET checked in Redis: it presents the lease token `lease` (the lease coordination),
    /// and/or under `versioned` it is refused when a newer version is cached or announced by
    /// a writer's marker (`--invalidate versioned`). Redis may refuse it.
    Checked { lease: Option<u64>, versioned: bool },
    /// No SET at all: under the lease coordination a load holding no token (a waiter's
    /// fallback, a load while Redis was unreachable) stores nothing, so a write's delete is
    /// never undone by a load that held no lease. The request serves what it loaded.
    Refused,
}

/// Which SET stores what a load brought back. `coordination`: the run's (only the lease
/// checks a SET); `lease`: the token the load holds, if any; `versioned`: whether readers'
/// SETs are checked against the writers' versions (writes under `--invalidate versioned`).
/// A not-found sentinel is always a plain SET: it carries no version a write could outdate.
pub fn decide(
    value: Value,
    coordination: Coordination,
    lease: Option<u64>,
    versioned: bool,
) -> Set {
    if value == Value::Missing {
        return Set::Plain;
    }
    let lease = lease.filter(|_| coordination.lease());
    if lease.is_some() || versioned {
        Set::Checked { lease, versioned }
    } else if coordination.lease() {
        Set::Refused
    } else {
        Set::Plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_a_store_issues() {
        use Coordination as C;
        let checked = |lease, versioned| Set::Checked { lease, versioned };
        // (what was loaded, coordination, token held, versioned) → the SET
        let cases = [
            (Value::Row, C::None, None, false, Set::Plain),
            (Value::Row, C::SingleFlight, None, false, Set::Plain),
            (Value::Row, C::Mutex, None, false, Set::Plain),
            (Value::Row, C::MutexSingleFlight, None, false, Set::Plain),
            (Value::Row, C::None, None, true, checked(None, true)),
            (Value::Row, C::Mutex, None, true, checked(None, true)),
            // A token is only presented under a lease.
            (Value::Row, C::Mutex, Some(7), false, Set::Plain),
            (
                Value::Row,
                C::Lease,
                Some(7),
                false,
                checked(Some(7), false),
            ),
            (Value::Row, C::Lease, Some(7), true, checked(Some(7), true)),
            // Under a lease, no token, no SET, unless versioned checks it anyway.
            (Value::Row, C::Lease, None, false, Set::Refused),
            (Value::Row, C::Lease, None, true, checked(None, true)),
            // A not-found sentinel is plain whatever the coordination.
            (Value::Missing, C::Lease, None, false, Set::Plain),
            (Value::Missing, C::Lease, Some(7), true, Set::Plain),
            (Value::Missing, C::None, None, true, Set::Plain),
        ];
        for (value, c, lease, versioned, want) in cases {
            assert_eq!(
                decide(value, c, lease, versioned),
                want,
                "{value:?} {c:?} lease {lease:?} versioned {versioned}"
            );
        }
    }
}
