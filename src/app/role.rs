//! The app's own database role on a managed Postgres: every statement the app sends is then
//! the app's in pg_stat_statements and pg_stat_activity, told apart from stampede's own
//! (seeding, heartbeats, the samplers) without matching statement text.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio_postgres::NoTls;

use crate::error::EnvError;
use crate::values::redact_url;

async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, conn) =
        tokio::time::timeout(Duration::from_secs(6), tokio_postgres::connect(url, NoTls))
            .await
            .map_err(|_| {
                EnvError(format!(
                    "connecting to Postgres at {}: no answer",
                    redact_url(url)
                ))
            })?
            .with_context(|| format!("connecting to Postgres at {}", redact_url(url)))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// Create `role` (login, no password: the managed server trusts loopback) with what the app
/// needs in `schema`: read the items, call the ledger function, write the ledger.
pub async fn create(admin_url: &str, role: &str, schema: &str) -> Result<()> {
    let c = connect(admin_url).await?;
    c.batch_execute(&format!(
        "CREATE ROLE {role} LOGIN;
         GRANT USAGE ON SCHEMA {schema} TO {role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role};
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role};"
    ))
    .await
    .with_context(|| format!("creating the app's database role {role}"))
}

/// Drop `role` once the app is stopped and its schema dropped. Best effort: a managed server
/// goes away with its run anyway.
pub async fn drop(admin_url: &str, role: &str) -> Result<()> {
    let c = connect(admin_url).await?;
    c.batch_execute(&format!(
        "DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};"
    ))
    .await
    .with_context(|| format!("dropping the app's database role {role}"))
}

/// `url` connecting as `user` instead of its own user (password, if any, dropped).
pub fn with_user(url: &str, user: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let host = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    format!("{scheme}{user}@{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_replaced_and_the_password_dropped() {
        assert_eq!(
            with_user("postgres://postgres@127.0.0.1:5432/postgres", "app"),
            "postgres://app@127.0.0.1:5432/postgres"
        );
        assert_eq!(
            with_user("postgres://u:secret@h:1/db?sslmode=disable", "app"),
            "postgres://app@h:1/db?sslmode=disable"
        );
        assert_eq!(with_user("postgres://h/db", "app"), "postgres://app@h/db");
    }
}
