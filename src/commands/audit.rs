//! `stampede audit`: the checklist run against an app, its card printed and written where
//! `--out` asks; exit 1 when a check fails (or a `--require`d one is SKIP).

use std::process::ExitCode;

use anyhow::Result;

use crate::audit::{self, Settings, card};
use crate::cli::AuditCmd;
use crate::error::EXIT_FAILED_CHECK;
use crate::session::{Status, shutdown_on_signals};

pub async fn run(cmd: AuditCmd) -> Result<ExitCode> {
    let s = Settings::resolve(&cmd)?;
    let status = Status::new(cmd.quiet);
    let say = |l: &str| status.line(l);
    let a = audit::run(&s, shutdown_on_signals(), &say).await?;
    print!("{}", card::text(&a));
    if let Some(dir) = &cmd.out {
        let checks = dir.join("checks");
        let write =
            |p: std::path::PathBuf, body: String| crate::report::sink::write_text(&p, &body);
        write(dir.join("audit.json"), serde_json::to_string_pretty(&a)?)?;
        write(dir.join("audit.md"), card::markdown(&a))?;
        for c in &a.checks {
            write(
                checks.join(format!("{}.json", c.name)),
                serde_json::to_string_pretty(&c.raw)?,
            )?;
        }
        status.line(&format!("audit written to {}", dir.display()));
    }
    Ok(if a.failed(&s.require) {
        ExitCode::from(EXIT_FAILED_CHECK)
    } else {
        ExitCode::SUCCESS
    })
}
