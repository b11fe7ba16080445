//! The servers' counts of a run: the loader and write statements as pg_stat_statements
//! counts them, the load ledger on the server's clock, and the rows' versions, all read on
//! the admin connection (none of them is a DB call).

use anyhow::{Context, Result};

use super::Db;
use super::load::{MEASURED_ALIAS, WRITE_ALIAS};
use crate::ledger::{self, LedgerLoad};

impl Db {
    /// Executions of the measured window's loader statement counted by the server
    /// (pg_stat_statements: statements that completed), or None when the extension is not
    /// available.
    pub async fn server_calls(&self) -> Option<u64> {
        if self.stat_statements_missing.is_some() {
            return None;
        }
        if let Some(own) = &self.own {
            return self.own_server_calls(own).await;
        }
        server_calls(&*self.admin().await.ok()?, &self.schema).await
    }

    /// The server's clock now, µs since the epoch: the clock the load ledger is written by.
    pub async fn server_now_us(&self) -> Result<i64> {
        ledger::server_now_us(&*self.admin().await?).await
    }

    /// The loads recorded in the run's ledger that started in `[from_us, to_us)`, server clock.
    pub async fn ledger_loads(&self, from_us: i64, to_us: i64) -> Result<Vec<LedgerLoad>> {
        ledger::read(&*self.admin().await?, &self.schema, from_us, to_us).await
    }

    /// Executions of the write statement counted by the server (pg_stat_statements), or None
    /// when the extension is not available.
    pub async fn server_writes(&self) -> Option<u64> {
        if self.stat_statements_missing.is_some() {
            return None;
        }
        let pattern = format!("%{}.items%{WRITE_ALIAS}%", self.schema);
        let row = self
            .admin()
            .await
            .ok()?
            .query_one(
                "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE query LIKE $1",
                &[&pattern],
            )
            .await
            .ok()?;
        Some(row.get::<_, i64>(0) as u64)
    }

    /// The current version of each of `ids` (on the admin connection: not a DB call).
    pub async fn versions(&self, ids: &[i64]) -> Result<Vec<(i64, i64)>> {
        let sql = format!(
            "SELECT id, version FROM {}.items WHERE id = ANY($1)",
            self.schema
        );
        let rows = self
            .admin()
            .await?
            .query(&sql, &[&ids])
            .await
            .context("reading the written items' versions")?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

/// The measured window's loader statement as pg_stat_statements counts it in `schema`.
pub(super) async fn server_calls(client: &tokio_postgres::Client, schema: &str) -> Option<u64> {
    // The built-in loader reads `{schema}.items`; a sharded run's calls `{schema}.stampede_load`.
    let pattern = format!("%{MEASURED_ALIAS}%{schema}.items%");
    let ledger = format!(
        "%{MEASURED_ALIAS}%{schema}.{}(%",
        crate::ledger::LOAD_FUNCTION
    );
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE (query LIKE $1 OR query LIKE $2) AND query NOT LIKE '%stampede_unmeasured%'",
            &[&pattern, &ledger],
        )
        .await
        .ok()?;
    Some(row.get::<_, i64>(0) as u64)
}
