//! What a run's setup made and the measurement reads: the run's schema, its Redis admin
//! connection and namespace, and how long seeding took. The built-in app's run
//! ([`super::run_on`]), an app under test's ([`super::app_run`]) and a shard's
//! ([`super::shards`]) each make one; the phases they share ([`super::lifecycle`],
//! [`super::faults`]) and the result ([`super::build`]) read it.

use std::sync::Arc;

use anyhow::Result;

use super::env::Status;
use crate::cache;
use crate::origin::{Db, DbQuery};
use crate::scenario::Scenario;

/// What the run's setup made, for the measurement.
pub(crate) struct Setup<'a> {
    pub(crate) db: &'a Db,
    pub(crate) admin: &'a cache::Admin,
    pub(crate) prefix: Arc<str>,
    pub(crate) seed_ms: u64,
    pub(crate) heavy_query_ms: Option<f64>,
}

/// Under `--db-query heavy`, seed the reviews table and measure one heavy query.
pub(super) async fn heavy_setup(sc: &Scenario, db: &Db, status: &Status) -> Result<Option<f64>> {
    if sc.db_query != DbQuery::Heavy {
        return Ok(None);
    }
    let ms = db.seed_reviews(sc.keys).await?;
    status.line(&format!(
        "heavy DB query: one aggregate over {} reviews takes {ms:.1} ms on the idle server (median of 5, one core: no parallel workers)",
        crate::origin::REVIEW_ROWS
    ));
    Ok(Some(ms))
}
