//! The app under test (`--target`): an HTTP endpoint driven with the same workload instead of
//! the built-in request path. This module holds what a run needs to know about it (the
//! [`TargetSpec`] kept in the scenario and the results), the HTTP request path ([`http`]) and
//! the figures read from the servers' side while it runs ([`sample`]), which hold whatever
//! language or framework the app is written in.

pub mod conn;
pub mod http;
pub mod ledger;
pub mod process;
pub mod sample;

use serde::{Deserialize, Serialize};

use crate::error::UsageError;
use crate::redact;
use crate::values::Dur;

/// Where the key goes in `--target`.
pub const KEY_MARK: &str = "{key}";
/// Where the app's port goes in `--target` and `--app-ready` under `--app-cmd`.
pub const PORT_MARK: &str = "{port}";

/// Everything about the app under test, as the run was told.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetSpec {
    /// The URL template, `{key}` standing for the item id (and `{port}` for the app's port);
    /// written with its credentials redacted.
    #[serde(serialize_with = "ser_target_url")]
    pub url: String,
    /// Deadline of one request, connection included.
    pub http_timeout: Dur,
    /// Connections to the target at most (`--http-conns`); a request waits for a free one.
    /// Absent in results written before it existed (a connection per request in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_conns: Option<u32>,
    /// Extra request headers, `Name: value`; values are not written to results.
    #[serde(serialize_with = "ser_headers")]
    pub headers: Vec<String>,
    /// Statuses that count as success; empty: any 2xx.
    pub expect_status: Vec<u16>,
    /// A regular expression the body must match for the response to count as success.
    pub expect_body: Option<String>,
    /// The shell command that starts the app (null: the app is already running); written
    /// with its secrets redacted.
    #[serde(serialize_with = "redact::ser_command")]
    pub app_cmd: Option<String>,
    /// The URL that answers 2xx once the app is ready (null: the target's port accepts
    /// connections).
    #[serde(serialize_with = "redact::ser_url")]
    pub app_ready: Option<String>,
    /// How long the app may take to be ready.
    pub app_ready_timeout: Dur,
    /// Where the app's output goes (null: a file in the temp dir, named in the results).
    pub app_log: Option<String>,
    /// The schema the app reads, when it was configured before the run (`--schema`).
    pub schema: Option<String>,
    /// Which statements of pg_stat_statements are the app's (a Postgres regular expression on
    /// the statement text); null: every statement of the app's role (managed Postgres) or
    /// every statement naming the run's schema.
    pub db_match: Option<String>,
    /// The variant of the app (`compare --variant`), null for a plain run.
    pub variant: Option<String>,
    /// Environment the variant gives the app, in order; written names only, like the
    /// headers (values are often credentials).
    #[serde(serialize_with = "ser_env")]
    pub app_env: Vec<(String, String)>,
}

fn ser_target_url<S: serde::Serializer>(u: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact::url(u))
}

fn ser_env<S: serde::Serializer>(env: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    env.iter()
        .map(|(k, _)| (k.clone(), redact::MASK.to_string()))
        .collect::<Vec<_>>()
        .serialize(s)
}

fn ser_headers<S: serde::Serializer>(h: &[String], s: S) -> Result<S::Ok, S::Error> {
    let names: Vec<String> = h
        .iter()
        .map(|h| format!("{}: <redacted>", h.split(':').next().unwrap_or("").trim()))
        .collect();
    names.serialize(s)
}

impl TargetSpec {
    /// The name a result of this target goes by: the variant's, else `app`.
    pub fn name(&self) -> &str {
        self.variant.as_deref().unwrap_or("app")
    }

    /// The URL with `{port}` filled in.
    pub fn url_for(&self, port: Option<u16>) -> String {
        fill_port(&self.url, port)
    }

    /// The target for people: secrets in the URL redacted.
    pub fn shown(&self) -> String {
        redact::url(&self.url)
    }

    /// The variant's environment for people: the names, the values hidden.
    pub fn shown_env(&self) -> Vec<String> {
        self.app_env
            .iter()
            .map(|(k, _)| redact::env_pair(k))
            .collect()
    }
}

/// `template` with `{port}` replaced by `port` (unchanged without a port).
pub fn fill_port(template: &str, port: Option<u16>) -> String {
    match port {
        Some(p) => template.replace(PORT_MARK, &p.to_string()),
        None => template.to_string(),
    }
}

/// One `--variant NAME=ENV=VALUE[,ENV=VALUE…]`: the name and the environment it sets.
pub fn parse_variant(s: &str) -> Result<(String, Vec<(String, String)>), UsageError> {
    // The variant as given is not quoted back: its values may be credentials.
    let shown = s.split_once('=').map_or(s, |(n, _)| n);
    let bad = |why: &str| {
        UsageError::new(format!(
            "--variant {shown}=…: {why}; write NAME=ENV=VALUE[,ENV=VALUE…] (a value cannot hold a comma), e.g. lock=APP_STRATEGY=lock"
        ))
    };
    let (name, rest) = s.split_once('=').ok_or_else(|| bad("no environment"))?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(bad("the name must be letters, digits, '-', '_' or '.'"));
    }
    let mut env = Vec::new();
    for (i, pair) in rest.split(',').enumerate() {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad(&format!("its part {} has no '='", i + 1)))?;
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(&format!("'{k}' is not an environment variable name")));
        }
        env.push((k.to_string(), v.to_string()));
    }
    Ok((name.to_string(), env))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn variants_parse_and_bad_ones_say_why() {
        let (n, env) = parse_variant("lock=APP_STRATEGY=lock,POOL=4").unwrap();
        assert_eq!(n, "lock");
        assert_eq!(
            env,
            vec![
                ("APP_STRATEGY".to_string(), "lock".to_string()),
                ("POOL".to_string(), "4".to_string())
            ]
        );
        assert!(parse_variant("lock").is_err());
        assert!(parse_variant("=A=b").is_err());
        assert!(parse_variant("x=A").is_err());
        assert!(parse_variant("x=A-B=c").is_err());
    }

    #[test]
    fn headers_are_written_without_their_values() {
        let j = serde_json::to_string(&TargetSpec {
            url: "http://x/{key}".into(),
            http_timeout: Dur(Duration::from_secs(1)),
            http_conns: None,
            headers: vec!["Authorization: Bearer secret".into()],
            expect_status: vec![],
            expect_body: None,
            app_cmd: None,
            app_ready: None,
            app_ready_timeout: Dur(Duration::from_secs(1)),
            app_log: None,
            schema: None,
            db_match: None,
            variant: None,
            app_env: vec![],
        })
        .unwrap();
        assert!(j.contains("Authorization: <redacted>"), "{j}");
        assert!(!j.contains("secret"), "{j}");
    }
}
