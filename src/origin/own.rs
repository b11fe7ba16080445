//! Your own load (`--db-sql`): the team's query on its own table is what a miss runs, with
//! the keys from `--keys-sql` or `--keys-file`. Nothing is created, altered or dropped in that
//! database (a read-only role works): no schema, no seed, no heartbeat table. The statement
//! sent wraps the query so that every call returns one row (the query's rows as JSON, null
//! when it found none), and DB calls are read from pg_stat_statements for that statement, as
//! the difference between the end of the run and its start.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio_postgres::types::{ToSql, Type};

use super::{
    Db, UNMEASURED_COLUMN, check_room, connect_admin_with, ssl_in_use, stat_statements_missing,
};
use crate::error::UsageError;

/// `--db-sql` with where its keys come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OwnLoad {
    /// The query, taking the key as `$1`.
    pub sql: String,
    /// A query whose first column lists the keys, most popular first.
    pub keys_sql: Option<String>,
    /// A file of keys, one per line, most popular first.
    pub keys_file: Option<PathBuf>,
}

/// What the wrapped statement is found by in pg_stat_statements.
const OWN_ALIAS: &str = "stampede_own_load";

/// One key, already of the type the query's `$1` takes, so a load converts nothing.
#[derive(Debug)]
enum Key {
    I16(i16),
    I32(i32),
    I64(i64),
    Text(String),
}

impl Key {
    fn param(&self) -> &(dyn ToSql + Sync) {
        match self {
            Key::I16(v) => v,
            Key::I32(v) => v,
            Key::I64(v) => v,
            Key::Text(v) => v,
        }
    }
}

/// The user's query, prepared for the loader, and its keys.
#[derive(Debug)]
pub(super) struct OwnQuery {
    /// The wrapped statement in the measured window and outside it.
    pub(super) sql: [String; 2],
    /// The type of `$1`.
    pub(super) types: [Type; 1],
    keys: Vec<Key>,
    /// The statement's calls in pg_stat_statements when the run attached (other runs').
    baseline: u64,
}

impl OwnQuery {
    /// The parameter of item `id` (1 = the first key); None past the last key.
    pub(super) fn key(&self, id: u64) -> Option<&(dyn ToSql + Sync)> {
        let i = usize::try_from(id.checked_sub(1)?).ok()?;
        self.keys.get(i).map(Key::param)
    }
}

/// The statement sent for the user's query: always one row (json_agg over none is null),
/// with the loader's two columns (payload, version).
fn wrapped(sql: &str, measured: bool) -> String {
    let extra = if measured { "" } else { UNMEASURED_COLUMN };
    format!(
        "SELECT (SELECT json_agg(q)::text FROM ({sql}) q) AS payload, 1::int8 AS {OWN_ALIAS}{extra}"
    )
}

/// The query as given, without a trailing `;` (it becomes a subquery).
fn trimmed(sql: &str) -> &str {
    sql.trim().trim_end_matches(';').trim_end()
}

fn read_keys_file(path: &std::path::Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError::new(format!("reading --keys-file {}: {e}", path.display())))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

fn convert(raw: Vec<String>, ty: &Type) -> Result<Vec<Key>, UsageError> {
    let bad = |k: &str, e: &dyn std::fmt::Display| {
        UsageError::new(format!(
            "key {k:?} is not a {} (the type of $1 in --db-sql): {e}",
            ty.name()
        ))
    };
    raw.into_iter()
        .map(|k| {
            Ok(match *ty {
                Type::INT2 => Key::I16(k.parse().map_err(|e| bad(&k, &e))?),
                Type::INT4 => Key::I32(k.parse().map_err(|e| bad(&k, &e))?),
                Type::INT8 => Key::I64(k.parse().map_err(|e| bad(&k, &e))?),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => Key::Text(k),
                _ => {
                    return Err(UsageError::new(format!(
                        "$1 of --db-sql is of type {}: stampede passes keys as smallint, integer, bigint or text; cast in the query, e.g. WHERE id = ($1::text)::{}",
                        ty.name(),
                        ty.name()
                    )));
                }
            })
        })
        .collect()
}

/// The server's message for `e`, and whether it refused a write in a read-only transaction.
fn server_said(e: &tokio_postgres::Error) -> (String, bool) {
    let read_only = e.code() == Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION);
    let msg = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_string());
    (msg, read_only)
}

/// What a query of the user's that the server refused becomes: a usage error saying why.
fn refused(flag: &str, what: &str, e: &tokio_postgres::Error) -> UsageError {
    match server_said(e) {
        (msg, true) => UsageError::new(format!(
            "{flag} must only read: stampede runs it in a read-only transaction so that nothing is created or changed in your database, and the server refused it{what} ({msg}). Give a query that only reads"
        )),
        (msg, false) => UsageError::new(format!("{flag} failed{what}: {msg}")),
    }
}

/// Run `--keys-sql` in a READ ONLY transaction, rolled back after: the server refuses
/// anything in it that would write. The connection's default is read-only too, so a COMMIT
/// inside the user's SQL does not let what follows it write.
async fn keys_from_sql(admin: &tokio_postgres::Client, q: &str) -> Result<Vec<String>> {
    admin
        .batch_execute("BEGIN READ ONLY")
        .await
        .context("starting the read-only transaction for --keys-sql")?;
    let got = admin.simple_query(q).await;
    // Nothing to keep, whatever happened: the transaction only read.
    let _ = admin.batch_execute("ROLLBACK").await;
    let msgs = got.map_err(|e| refused("--keys-sql", "", &e))?;
    Ok(msgs
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect())
}

/// Calls of the wrapped statement by this role in this database, or None when unreadable.
pub(super) async fn statement_calls(client: &tokio_postgres::Client) -> Option<u64> {
    let pattern = format!("%{OWN_ALIAS}%");
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE query LIKE $1 AND query NOT LIKE '%stampede_unmeasured%' AND userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&pattern],
        )
        .await
        .ok()?;
    Some(row.get::<_, i64>(0) as u64)
}

impl Db {
    /// Attach to the user's database for `--db-sql`: check that the query takes exactly one
    /// parameter, read the keys (at most `cap`, 0 for all), and create nothing. Returns the
    /// number of keys.
    pub async fn attach(
        url: &str,
        own: &OwnLoad,
        cap: u64,
        connections: Option<u32>,
    ) -> Result<(Db, u64)> {
        // Read-only: the server, not a promise of the tool's, keeps the user's database as it
        // was, on this connection and on the loaders' made from its config.
        let (admin, target) = connect_admin_with(url, true).await?;
        let version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .context("reading the Postgres server version")?
            .get(0);
        if let Some(connections) = connections {
            check_room(&admin, url, connections).await?;
        }
        let sql = trimmed(&own.sql);
        let stmt = admin.prepare(&wrapped(sql, true)).await.map_err(|e| {
            UsageError::new(format!(
                "--db-sql does not prepare on {}: {}",
                crate::redact::url(url),
                e.as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_string())
            ))
        })?;
        let ty = match stmt.params() {
            [one] => one.clone(),
            other => {
                return Err(UsageError::new(format!(
                    "--db-sql must take exactly one parameter, $1 (the key); this query takes {}",
                    other.len()
                ))
                .into());
            }
        };
        let mut raw = match (&own.keys_sql, &own.keys_file) {
            (Some(q), _) => keys_from_sql(&admin, q).await?,
            (None, Some(f)) => read_keys_file(f)?,
            (None, None) => {
                return Err(UsageError::new(
                    "--db-sql needs its keys: --keys-sql 'SELECT id FROM …' or --keys-file FILE",
                )
                .into());
            }
        };
        if cap > 0 {
            raw.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
        }
        if raw.is_empty() {
            return Err(UsageError::new("--keys-sql / --keys-file gave no keys").into());
        }
        let keys = convert(raw, &ty)?;
        // Once on the first key, outside the measured statement (not a DB call of the run): a
        // query the server refuses (one that writes, a table the role may not read) stops the
        // run here with the reason, instead of failing every load of it.
        let probe = admin
            .prepare_typed(&wrapped(sql, false), std::slice::from_ref(&ty))
            .await
            .map_err(|e| refused("--db-sql", " to prepare", &e))?;
        if let Some(first) = keys.first() {
            admin
                .query_one(&probe, &[first.param()])
                .await
                .map_err(|e| refused("--db-sql", " on the first key", &e))?;
        }
        let n = keys.len() as u64;
        let stat_statements_missing = stat_statements_missing(&admin).await;
        let baseline = if stat_statements_missing.is_none() {
            statement_calls(&admin).await.unwrap_or(0)
        } else {
            0
        };
        let tls = ssl_in_use(&admin).await;
        let query = OwnQuery {
            sql: [wrapped(sql, true), wrapped(sql, false)],
            types: [ty],
            keys,
            baseline,
        };
        Ok((
            Db {
                admin: Mutex::new(Arc::new(admin)),
                config: target.config,
                tls: target.tls,
                url: url.to_string(),
                schema: String::new(),
                version,
                logged: false,
                stat_statements_missing,
                own: Some(Arc::new(query)),
                ssl: tls,
            },
            n,
        ))
    }

    /// Under `--db-sql`: the rows of `ids` for cache warming, one query per key (the
    /// statement outside the measured window, so not counted as a DB call of the run).
    pub(super) async fn own_rows(
        &self,
        own: &OwnQuery,
        ids: &[i64],
    ) -> Result<Vec<(i64, String, i64)>> {
        let admin = self.admin().await?;
        let stmt = admin
            .prepare_typed(&own.sql[1], &own.types)
            .await
            .context("preparing --db-sql to warm the cache")?;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(key) = own.key(id as u64) else {
                continue;
            };
            let row = admin
                .query_one(&stmt, &[key])
                .await
                .context("running --db-sql to warm the cache")?;
            if let Some(payload) = row.get::<_, Option<String>>(0) {
                out.push((id, payload, 1));
            }
        }
        Ok(out)
    }

    /// Under `--db-sql`: the statement's calls since the run attached.
    pub(super) async fn own_server_calls(&self, own: &OwnQuery) -> Option<u64> {
        let now = statement_calls(&*self.admin().await.ok()?).await?;
        Some(now.saturating_sub(own.baseline))
    }
}
