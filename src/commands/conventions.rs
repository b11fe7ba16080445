//! What a command-line tool ships beside its work, printed to stdout for the user to put where
//! their tools look: the JSON Schemas of the scenario and results files (`schema`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{SchemaCmd, SchemaFile};
use crate::results::schema;

pub fn schema(cmd: SchemaCmd) -> Result<ExitCode> {
    let value = match cmd.file {
        SchemaFile::Scenario => schema::scenario(),
        SchemaFile::Results => schema::results(),
    };
    let text = serde_json::to_string_pretty(&value).context("encoding the schema")?;
    print((text + "\n").as_bytes())
}

/// Write everything to stdout. A reader that closes the pipe early (`stampede schema … | head`)
/// has read all it wanted: that is not an error.
fn print(bytes: &[u8]) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("writing to stdout"),
    }
}
