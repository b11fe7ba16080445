//! The load ledger: loads recorded by the database itself, on the server's one clock.
//!
//! The tool's own herd figures ([`crate::metrics::LoadTracker`]) time loads on the clock of the
//! process that sends them. That is exact for one process, and useless when the loads come
//! from somewhere the tool does not see (an app under test) or from several machines whose
//! clocks differ by about a load's duration (shards). The ledger moves the bookkeeping into
//! Postgres: `{schema}.stampede_load(id)` spends the load's cost, records the key with its
//! start and end by `clock_timestamp()`, and returns the item's row. Whoever loads through it
//! is counted exactly, in any language, on any machine.
//!
//! Herds computed from the ledger count statements running on the server (a load queued for a
//! pooled connection is not in it yet), and only loads that completed: one cancelled by
//! `statement_timeout` rolls its row back with it.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result};

/// The ledger's table in the run's schema.
pub const LEDGER_TABLE: &str = "stampede_ledger";
/// The load function in the run's schema: `SELECT * FROM {schema}.stampede_load($1)`.
pub const LOAD_FUNCTION: &str = "stampede_load";

/// One completed load as the server recorded it: µs since the Unix epoch, server clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerLoad {
    pub key: i64,
    pub start_us: i64,
    pub end_us: i64,
}

/// Herd figures over a set of loads, on one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedgerHerds {
    /// Loads in the set.
    pub loads: u64,
    /// Distinct keys loaded.
    pub keys: u64,
    /// Most loads of one key running at once.
    pub peak_herd: u64,
    /// Loads that started while another load of the same key was running.
    pub redundant: u64,
}

/// SQL that creates the ledger table and the load function in `schema`. `logged` as for the
/// run's other tables: a Postgres crash empties an unlogged ledger.
pub fn install_sql(schema: &str, cost: Duration, logged: bool) -> String {
    let table = if logged {
        "CREATE TABLE"
    } else {
        "CREATE UNLOGGED TABLE"
    };
    let seconds = cost.as_secs_f64();
    // The item is read first, then the cost spent: a load returns the row as it was when the
    // load started, as a query's snapshot is taken when it starts and the built-in loader's
    // single statement does. (Read after the sleep, each plpgsql statement taking a snapshot
    // of its own, a load that started before an update committed returned the new row, and
    // a delete-then-update bug whose update lands within one load's cost could never put an
    // old value back.) RETURN QUERY appends the row and goes on. The ledger's row is written
    // after the sleep: a load cancelled by statement_timeout or a broken connection leaves
    // none, so the ledger holds loads that completed. Columns are qualified because RETURNS
    // TABLE names are plpgsql variables.
    format!(
        "{table} {schema}.{LEDGER_TABLE} (key bigint NOT NULL, started timestamptz NOT NULL, ended timestamptz NOT NULL);
         CREATE FUNCTION {schema}.{LOAD_FUNCTION}(p_id bigint)
           RETURNS TABLE (id bigint, payload text, version bigint)
           LANGUAGE plpgsql AS $fn$
         DECLARE t0 timestamptz := clock_timestamp();
         BEGIN
           RETURN QUERY SELECT i.id, i.payload, i.version FROM {schema}.items i WHERE i.id = p_id;
           PERFORM pg_sleep({seconds});
           INSERT INTO {schema}.{LEDGER_TABLE} (key, started, ended) VALUES (p_id, t0, clock_timestamp());
         END
         $fn$;"
    )
}

/// Create the ledger and its load function in `schema` (which holds `items`).
pub async fn install(
    client: &tokio_postgres::Client,
    schema: &str,
    cost: Duration,
    logged: bool,
) -> Result<()> {
    client
        .batch_execute(&install_sql(schema, cost, logged))
        .await
        .with_context(|| format!("creating the load ledger in {schema}"))
}

/// The server's clock now, µs since the Unix epoch: bounds a window on the clock the ledger
/// is written by.
pub async fn server_now_us(client: &tokio_postgres::Client) -> Result<i64> {
    let row = client
        .query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
            &[],
        )
        .await
        .context("reading the Postgres server's clock")?;
    Ok(row.get(0))
}

/// The loads that started in `[from_us, to_us)` (server clock), in start order.
pub async fn read(
    client: &tokio_postgres::Client,
    schema: &str,
    from_us: i64,
    to_us: i64,
) -> Result<Vec<LedgerLoad>> {
    let sql = format!(
        "SELECT key, (extract(epoch FROM started) * 1000000)::int8 AS s,
                (extract(epoch FROM ended) * 1000000)::int8 AS e
         FROM {schema}.{LEDGER_TABLE}
         WHERE started >= to_timestamp($1::float8 / 1000000) AND started < to_timestamp($2::float8 / 1000000)
         ORDER BY started"
    );
    let rows = client
        .query(&sql, &[&(from_us as f64), &(to_us as f64)])
        .await
        .with_context(|| format!("reading the load ledger {schema}.{LEDGER_TABLE}"))?;
    Ok(rows
        .iter()
        .map(|r| LedgerLoad {
            key: r.get(0),
            start_us: r.get(1),
            end_us: r.get(2),
        })
        .collect())
}

/// Herds over any set of loads (one process's, or several shards' together). Two loads of a
/// key overlap when one starts before the other ends; one that starts exactly when another
/// ends does not overlap it.
pub fn herds(loads: &[LedgerLoad]) -> LedgerHerds {
    let mut by_key: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    for l in loads {
        by_key
            .entry(l.key)
            .or_default()
            .push((l.start_us, l.end_us.max(l.start_us)));
    }
    let mut out = LedgerHerds {
        loads: loads.len() as u64,
        keys: by_key.len() as u64,
        ..LedgerHerds::default()
    };
    let mut events: Vec<(i64, i8)> = Vec::new();
    for spans in by_key.values() {
        events.clear();
        for &(s, e) in spans {
            events.push((s, 1));
            events.push((e, -1));
        }
        // Ends sort before starts at the same instant (-1 < 1): touching is not overlapping.
        events.sort_unstable();
        let mut running: u64 = 0;
        for &(_, delta) in &events {
            if delta > 0 {
                if running > 0 {
                    out.redundant += 1;
                }
                running += 1;
                out.peak_herd = out.peak_herd.max(running);
            } else {
                running = running.saturating_sub(1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(key: i64, start_us: i64, end_us: i64) -> LedgerLoad {
        LedgerLoad {
            key,
            start_us,
            end_us,
        }
    }

    #[test]
    fn overlapping_loads_of_one_key_are_a_herd() {
        let h = herds(&[load(1, 0, 100), load(1, 10, 110), load(1, 20, 120)]);
        assert_eq!(
            h,
            LedgerHerds {
                loads: 3,
                keys: 1,
                peak_herd: 3,
                redundant: 2
            }
        );
    }

    #[test]
    fn loads_back_to_back_or_of_other_keys_are_not() {
        let h = herds(&[load(1, 0, 100), load(1, 100, 200), load(2, 50, 150)]);
        assert_eq!(h.peak_herd, 1);
        assert_eq!(h.redundant, 0);
        assert_eq!(h.keys, 2);
    }

    #[test]
    fn a_chain_counts_each_overlapping_start() {
        // a overlaps b, b overlaps c, a and c do not overlap: two redundant starts, peak 2.
        let h = herds(&[load(7, 0, 100), load(7, 90, 200), load(7, 150, 300)]);
        assert_eq!(h.peak_herd, 2);
        assert_eq!(h.redundant, 2);
    }

    #[test]
    fn shards_merged_show_a_herd_neither_shows_alone() {
        let shard0 = [load(5, 0, 100), load(6, 0, 10)];
        let shard1 = [load(5, 50, 150)];
        assert_eq!(herds(&shard0).peak_herd, 1);
        assert_eq!(herds(&shard1).peak_herd, 1);
        let all: Vec<_> = shard0.iter().chain(&shard1).copied().collect();
        assert_eq!(herds(&all).peak_herd, 2);
    }

    #[test]
    fn no_loads_no_herds() {
        assert_eq!(herds(&[]), LedgerHerds::default());
    }
}
