//! The commands: each reads its arguments, does its work on the layers below and says how the
//! process ends. `run` and `compare` share a session ([`session`]): the servers and one
//! strategy's run on them.

mod app_ledger;
mod app_run;
mod check;
mod compare;
mod merge;
mod run;
mod session;
mod shards;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{CleanupCmd, Cli, Command, ReportCmd};
use crate::error::UsageError;
use crate::error::{EXIT_FAILED_CHECK, EXIT_INTERRUPTED};
use crate::report;
use crate::values::redact_url;

pub use compare::parse_list;

pub async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run(cmd) => run::run(cmd).await,
        Command::Report(cmd) => report_cmd(cmd),
        Command::Compare(cmd) => compare::run(cmd).await,
        Command::Check(cmd) => check::run(cmd),
        Command::Cleanup(cmd) => cleanup(cmd).await,
        Command::Merge(cmd) => merge::run(cmd),
        Command::Prepare(cmd) => shards::prepare(cmd).await,
    }
}

/// Render results already written: the HTML report with --html, else each one's summary.
fn report_cmd(cmd: ReportCmd) -> Result<ExitCode> {
    let results = report::html::load(&cmd.inputs)?;
    match &cmd.html {
        Some(p) => {
            report::html::write(&results, p)?;
            eprintln!(
                "HTML report of {} result(s) written to {}",
                results.len(),
                p.display()
            );
        }
        None => {
            for r in &results {
                print!("{}", report::terminal::summary(r));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Remove what dead runs left on external servers: Redis namespaces with no live heartbeat,
/// Postgres schemas whose heartbeat is stale. A live run renews both every second.
async fn cleanup(cmd: CleanupCmd) -> Result<ExitCode> {
    if cmd.redis_url.is_none() && cmd.pg_url.is_none() {
        return Err(UsageError::new(
            "cleanup needs --redis-url and/or --pg-url: the servers whose leftovers to remove (a managed server's are removed by the next run)",
        )
        .into());
    }
    if let Some(url) = &cmd.redis_url {
        let admin = crate::cache::Admin::open(url, std::sync::Arc::from("stampede:")).await?;
        let dead = admin.dead_namespaces().await?;
        for ns in &dead {
            let n = admin.for_namespace(ns).remove_namespace().await?;
            println!(
                "removed {n} keys of the dead run {ns}* from {}",
                redact_url(url)
            );
        }
        if dead.is_empty() {
            println!("no dead run's keys in {}", redact_url(url));
        }
    }
    if let Some(url) = &cmd.pg_url {
        let dead = crate::origin::dead_schemas(url, cmd.older_than.0).await?;
        for s in &dead {
            crate::origin::drop_schema(url, s).await?;
            println!("dropped the dead run's schema {s} from {}", redact_url(url));
        }
        if dead.is_empty() {
            println!("no dead run's schema in {}", redact_url(url));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How `run` and `compare` end once their results are written: the broken thresholds printed,
/// then 130 when interrupted, 1 when a threshold broke, else 0.
fn ending(interrupted: bool, broken: &str, status: &session::Status, what: &str) -> ExitCode {
    eprint!("{broken}");
    if interrupted {
        status.line(&format!("interrupted: {what}"));
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    if !broken.is_empty() {
        return ExitCode::from(EXIT_FAILED_CHECK);
    }
    ExitCode::SUCCESS
}
