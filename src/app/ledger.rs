//! The load ledger as an app-under-test run reads it: the loads the app made through
//! `stampede_load(id)` in the measured window (on the server's clock, as the sampler bounded
//! it), their herds, or why there are none.

use super::sample::Sampled;
use crate::ledger::{self, LedgerHerds};
use crate::origin::Db;

/// What the ledger says about a run.
pub struct Ledger {
    /// None when the app made no load through the function, or the ledger could not be read.
    pub herds: Option<LedgerHerds>,
    /// Why `herds` is missing, or what to make of them.
    pub note: Option<String>,
}

pub async fn read(db: &Db, sampled: &Sampled) -> Ledger {
    let (Some(from), Some(to)) = (sampled.server_from_us, sampled.server_to_us) else {
        return Ledger {
            herds: None,
            note: Some(
                "the server's clock could not be read at the window's ends (Postgres down?): the ledger was not read, so db.peak_key_herd and db.redundant_loads are unknown".to_string(),
            ),
        };
    };
    let loads = db.ledger_loads(from, to).await;
    match loads {
        Ok(loads) if loads.is_empty() => Ledger {
            herds: None,
            note: Some(format!(
                "the app made no load through {}.{}(id) in the window: per-key herds and redundant loads are unknown (db.peak_key_herd, db.redundant_loads and app.ledger_loads are null); load through that function to have them",
                db.schema,
                ledger::LOAD_FUNCTION
            )),
        },
        Ok(loads) => {
            let h = ledger::herds(&loads);
            let note = sampled.db_calls.filter(|&c| c != h.loads).map(|c| {
                format!(
                    "pg_stat_statements counted {c} of the app's statements and the ledger {} loads: the app sends statements other than its loads (or loads some other way); --db-match narrows db.calls to its loads",
                    h.loads
                )
            });
            Ledger {
                herds: Some(h),
                note,
            }
        }
        Err(e) => Ledger {
            herds: None,
            note: Some(format!(
                "the load ledger could not be read ({e:#}): db.peak_key_herd and db.redundant_loads are unknown"
            )),
        },
    }
}
