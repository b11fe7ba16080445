//! Single-flight: within one app instance, concurrent callers of one key share one load.
//! The leader's result is broadcast to every follower; a leader that fails hands its failure to
//! all of them, and a leader that panics or is cancelled drops its sender, which wakes every
//! follower with `Abandoned` instead of leaving it hanging.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::origin::LoadFailure;

/// What followers see: nothing yet, then the leader's result (the version it loaded, 0 for
/// none).
pub type Slot = Option<Result<u64, LoadFailure>>;

#[derive(Default)]
pub struct SingleFlight {
    flights: Mutex<HashMap<u64, watch::Receiver<Slot>>>,
}

/// The caller's part in a flight.
pub enum Role<'a> {
    /// Do the load, then [`Leader::finish`].
    Leader(Leader<'a>),
    /// Someone else is loading this key: [`follow`] their result.
    Follower(watch::Receiver<Slot>),
}

pub struct Leader<'a> {
    table: &'a SingleFlight,
    key: u64,
    tx: Option<watch::Sender<Slot>>,
}

impl SingleFlight {
    /// Join the flight for `key`, starting one if none is in the air.
    pub fn join(&self, key: u64) -> Role<'_> {
        let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = flights.get(&key) {
            return Role::Follower(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(key, rx);
        Role::Leader(Leader {
            table: self,
            key,
            tx: Some(tx),
        })
    }

    /// Whether a load of `key` is in the air in this instance.
    #[cfg(test)]
    pub fn in_flight(&self, key: u64) -> bool {
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&key)
    }

    fn remove(&self, key: u64) {
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    }
}

impl Leader<'_> {
    pub fn finish(mut self, result: Result<u64, LoadFailure>) {
        self.table.remove(self.key);
        if let Some(tx) = self.tx.take() {
            // No receiver left is fine: every follower may have been cancelled.
            let _ = tx.send(Some(result));
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.tx.is_some() {
            // Cancelled or panicked before finishing: unregister; dropping `tx` wakes followers.
            self.table.remove(self.key);
        }
    }
}

/// Wait for the leader's result.
pub async fn follow(mut rx: watch::Receiver<Slot>) -> Result<u64, LoadFailure> {
    match rx.wait_for(Option::is_some).await {
        Ok(v) => v.unwrap_or(Err(LoadFailure::Abandoned)),
        Err(_) => Err(LoadFailure::Abandoned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn followers_share_the_leaders_result() {
        let sf = SingleFlight::default();
        let Role::Leader(leader) = sf.join(1) else {
            panic!("first caller leads")
        };
        let Role::Follower(a) = sf.join(1) else {
            panic!("second follows")
        };
        let Role::Follower(b) = sf.join(1) else {
            panic!("third follows")
        };
        assert!(
            matches!(sf.join(2), Role::Leader(_)),
            "other keys fly alone"
        );
        leader.finish(Err(LoadFailure::Db));
        assert_eq!(follow(a).await, Err(LoadFailure::Db));
        assert_eq!(follow(b).await, Err(LoadFailure::Db));
        assert!(!sf.in_flight(1));
    }

    #[tokio::test]
    async fn a_cancelled_leader_does_not_strand_followers() {
        let sf = Arc::new(SingleFlight::default());
        let sf2 = sf.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let Role::Leader(_leader) = sf2.join(7) else {
                panic!()
            };
            let _ = ready_tx.send(());
            std::future::pending::<()>().await;
        });
        ready_rx.await.unwrap();
        let Role::Follower(rx) = sf.join(7) else {
            panic!("must follow")
        };
        task.abort();
        assert_eq!(follow(rx).await, Err(LoadFailure::Abandoned));
        assert!(!sf.in_flight(7));

        let sf3 = sf.clone();
        let panicking = tokio::spawn(async move {
            let Role::Leader(_leader) = sf3.join(8) else {
                panic!()
            };
            tokio::task::yield_now().await;
            panic!("load panicked");
        });
        tokio::task::yield_now().await;
        if let Role::Follower(rx) = sf.join(8) {
            assert_eq!(follow(rx).await, Err(LoadFailure::Abandoned));
        }
        assert!(panicking.await.is_err());
        assert!(!sf.in_flight(8));
    }
}
