//! The app's own database role on a managed Postgres: every statement the app sends is then
//! the app's in pg_stat_statements and pg_stat_activity, told apart from stampede's own
//! (seeding, heartbeats, the samplers) without matching statement text.

use anyhow::{Context, Result};

/// Connected with the run's TLS settings (the URL's sslmode), as every other connection of
/// the run.
async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    Ok(crate::tls::pg_connect(url)
        .await
        .context("connecting to create or drop the app's database role")?
        .0)
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

    /// On a managed Postgres started with `--tls` (TCP over TLS only, URL with
    /// sslmode=verify-full) the role is made and dropped over the URL's TLS.
    #[tokio::test]
    async fn the_role_is_made_and_dropped_over_the_urls_tls() {
        let pg = crate::servers::ManagedPostgres::start_with(Default::default(), true)
            .await
            .expect("postgres with TLS");
        let url = pg.url();
        assert!(url.contains("sslmode=verify-full"), "{url}");
        create(&url, "stampede_app_tls", "public")
            .await
            .expect("creating the role over TLS");
        let (c, _) = crate::tls::pg_connect(&url).await.unwrap();
        let count = "SELECT count(*) FROM pg_roles WHERE rolname = 'stampede_app_tls'";
        let n: i64 = c.query_one(count, &[]).await.unwrap().get(0);
        assert_eq!(n, 1);
        super::drop(&url, "stampede_app_tls")
            .await
            .expect("dropping the role over TLS");
        let n: i64 = c.query_one(count, &[]).await.unwrap().get(0);
        assert_eq!(n, 0);
    }
}
