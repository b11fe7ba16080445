//! The fault schedule's probe of Postgres: its own bounded connection that tells when the
//! server is back after a kill and reads its counts just before one.

use std::time::Duration;

use tokio_postgres_rustls::MakeRustlsConnect;

use super::Db;
use super::counts::server_calls;

/// How long one probe of the fault schedule (connect, `SELECT 1`, reading the counts) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

impl Db {
    /// The fault schedule's own connection to this server: it reads the counts before a
    /// crash and tells when the server is back.
    pub fn probe(&self) -> PgProbe {
        PgProbe {
            config: self.config.clone(),
            tls: self.tls.clone(),
            schema: self.schema.clone(),
            // The user's statement is not found by schema: read at the end only.
            stats: self.stat_statements_missing.is_none() && self.own.is_none(),
            client: None,
        }
    }
}

/// The fault schedule's connection to Postgres: opened on demand and again after a crash,
/// every step bounded, so it can tell when the server is back and read its counts just
/// before a kill.
pub struct PgProbe {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    schema: String,
    /// Whether pg_stat_statements can be read.
    stats: bool,
    client: Option<tokio_postgres::Client>,
}

impl PgProbe {
    async fn client(&mut self) -> Option<&tokio_postgres::Client> {
        if self
            .client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            self.client = None;
            if let Ok(Ok((client, conn))) =
                tokio::time::timeout(PROBE_TIMEOUT, self.config.connect(self.tls.clone())).await
            {
                tokio::spawn(async move {
                    // Ends when the client is dropped or the server goes away.
                    let _ = conn.await;
                });
                self.client = Some(client);
            }
        }
        self.client.as_ref()
    }

    /// Whether the server answers a query now.
    pub async fn ready(&mut self) -> bool {
        let Some(c) = self.client().await else {
            return false;
        };
        let ok = matches!(
            tokio::time::timeout(PROBE_TIMEOUT, c.simple_query("SELECT 1")).await,
            Ok(Ok(_))
        );
        if !ok {
            self.client = None;
        }
        ok
    }

    /// The server's count of the measured loader statement now; None when it cannot be read.
    pub async fn server_calls(&mut self) -> Option<u64> {
        if !self.stats {
            return None;
        }
        let schema = self.schema.clone();
        let c = self.client().await?;
        tokio::time::timeout(PROBE_TIMEOUT, server_calls(c, &schema))
            .await
            .ok()
            .flatten()
    }
}
