//! What a command-line tool ships beside its work, each printed to stdout for the user to put
//! where their system looks: shell completions (`completions`), the man page (`man`) and the
//! JSON Schemas of the scenario and results files (`schema`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_mangen::Man;

use crate::cli::{Cli, CompletionsCmd, SchemaCmd, SchemaFile};
use crate::results::schema;

pub fn completions(cmd: CompletionsCmd) -> Result<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(cmd.shell, &mut Cli::command(), "stampede", &mut out);
    print(&out)
}

pub fn man() -> Result<ExitCode> {
    print(&man_page().context("rendering the man page")?)
}

pub fn schema(cmd: SchemaCmd) -> Result<ExitCode> {
    let value = match cmd.file {
        SchemaFile::Scenario => schema::scenario::<crate::cli::RunFlags>(),
        SchemaFile::Results => schema::results(),
    };
    let text = serde_json::to_string_pretty(&value).context("encoding the schema")?;
    print((text + "\n").as_bytes())
}

/// One page for the whole command, as ripgrep and fd ship it: stampede's own sections, then a
/// section per subcommand with its synopsis, description and options (under their help
/// headings, as subsections), so that `man stampede` and a search in it find every flag.
fn man_page() -> std::io::Result<Vec<u8>> {
    // The help subcommand is clap's, not a command of stampede's.
    let mut cli = Cli::command().disable_help_subcommand(true);
    // Building gives every subcommand its full name ("stampede run") for its synopsis.
    cli.build();
    let top = Man::new(cli.clone());
    let mut out = Vec::new();
    top.render_title(&mut out)?;
    top.render_name_section(&mut out)?;
    top.render_synopsis_section(&mut out)?;
    top.render_description_section(&mut out)?;
    top.render_options_section(&mut out)?;
    top.render_subcommands_section(&mut out)?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_bin_name().unwrap_or(sub.get_name());
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        let page = Man::new(sub.clone());
        let mut part = Vec::new();
        page.render_synopsis_section(&mut part)?;
        page.render_description_section(&mut part)?;
        page.render_options_section(&mut part)?;
        if sub.get_after_help().is_some() || sub.get_after_long_help().is_some() {
            page.render_extra_section(&mut part)?;
        }
        out.extend(subsections(&part));
    }
    // stampede's after-help is its exit codes.
    let mut extra = Vec::new();
    top.render_extra_section(&mut extra)?;
    out.extend(
        String::from_utf8_lossy(&extra)
            .replacen(".SH EXTRA", ".SH \"EXIT STATUS\"", 1)
            .bytes(),
    );
    top.render_version_section(&mut out)?;
    Ok(one_page(&String::from_utf8_lossy(&out), &cli).into_bytes())
}

/// The sections rendered apart, made one page: the string definition every rendered part
/// starts with kept once, and the list of subcommands pointing at their sections of this page
/// rather than at pages of their own (`stampede-run(1)`), which are not installed.
fn one_page(roff: &str, cli: &clap::Command) -> String {
    let preamble = [".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];
    let mut defined = false;
    let mut out = String::with_capacity(roff.len());
    for line in roff.lines() {
        if preamble.contains(&line) {
            if defined {
                continue;
            }
            // The pair comes first, in this order.
            defined = line == preamble[1];
        }
        let refers = cli
            .get_subcommands()
            .find(|s| line == format!("stampede\\-{}(1)", s.get_name().replace('-', "\\-")));
        match refers {
            Some(s) => out.push_str(&format!(
                "\\fBstampede {}\\fR",
                s.get_name().replace('-', "\\-")
            )),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// A subcommand's sections as subsections of its own section. roff escapes a text line that
/// starts with a dot, so every line that starts with `.SH ` is a heading.
fn subsections(roff: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(roff);
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix(".SH ") {
            Some("EXTRA") => out.push_str(".SS NOTES"),
            Some(heading) => {
                out.push_str(".SS ");
                out.push_str(heading);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Write everything to stdout. A reader that closes the pipe early (`stampede man | head`)
/// has read all it wanted: that is not an error.
fn print(bytes: &[u8]) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("writing to stdout"),
    }
}
