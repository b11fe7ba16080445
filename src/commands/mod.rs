//! The commands: each reads its arguments, calls the layer that does the work (the
//! orchestration in `crate::session`, the results and the report) and says how the process
//! ends.

mod advise;
mod audit;
mod check;
mod compare;
mod conform;
mod conventions;
mod merge;
mod run;
mod sweep;
mod traces;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command, ReportCmd};
use crate::error::{EXIT_FAILED_CHECK, EXIT_INTERRUPTED, UsageError};
use crate::report;
use crate::session::{self, Status};

/// The program: parse the command line, run the command on a multi-threaded runtime, and turn
/// its outcome into the exit code. It lives here, not in `main.rs`, so that the runtime's task
/// for the whole command future is compiled once, with the library: spawned from the binary,
/// every async body below was compiled a second time in the binary's crate (71 s of a
/// 2-core build).
pub fn main() -> ExitCode {
    use clap::Parser;
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stampede")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::from(crate::error::EXIT_ENV);
        }
    };
    // The program runs as a task on a worker thread, not in block_on on this thread: a future
    // polled by block_on hands every wake-up between this thread and the workers (two context
    // switches each), which at one open-loop dispatch per wake-up cost more than the requests.
    let result = match runtime.block_on(async { tokio::spawn(run(cli)).await }) {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(anyhow::anyhow!("the main task was cancelled: {e}")),
    };
    // Background tasks still parked on a dead socket must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(crate::error::exit_code(&e))
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run(cmd) => run::run(cmd).await,
        Command::Report(cmd) => report_cmd(cmd),
        Command::Compare(cmd) => compare::run(cmd).await,
        Command::Conform(cmd) => conform::run(cmd).await,
        Command::Advise(cmd) => advise::run(cmd).await,
        Command::Audit(cmd) => audit::run(cmd).await,
        Command::Sweep(cmd) => sweep::run(cmd).await,
        Command::Check(cmd) => check::run(cmd),
        Command::Cleanup(cmd) => {
            session::cleanup::cleanup(&crate::scenario::invocation::for_cleanup(&cmd)?).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge(cmd) => merge::run(cmd),
        Command::Prepare(cmd) => {
            let (sc, plan) = crate::scenario::invocation::for_prepare(&cmd)?;
            session::shards::prepare(&sc, &plan).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions(cmd) => conventions::completions(cmd),
        Command::Man => conventions::man(),
        Command::Schema(cmd) => conventions::schema(cmd),
        Command::TraceStats(cmd) => traces::stats(cmd),
        Command::Mrc(cmd) => traces::mrc(cmd),
    }
}

/// Render results already written: the HTML report with --html, else each one's summary.
fn report_cmd(cmd: ReportCmd) -> Result<ExitCode> {
    if cmd.inputs.iter().all(|d| session::sweep::is_sweep(d)) {
        return sweep::report(&cmd.inputs, cmd.html.as_deref());
    }
    if let [file] = cmd.inputs.as_slice()
        && let Some(page) = report::html::curve::mrc_report(file)?
    {
        return mrc_report(file, &page, cmd.html.as_deref());
    }
    // An advise directory: its final trials are a comparison.
    let mut cmd = cmd;
    for d in cmd.inputs.iter_mut() {
        if d.join("advise.json").is_file() && d.join("final").is_dir() {
            *d = d.join("final");
        }
    }
    let results = report::html::load(&cmd.inputs)?;
    match &cmd.html {
        Some(p) => {
            // A comparison's directory holds its summary: the verdict from every trial.
            let summary = match cmd.inputs.as_slice() {
                [dir] if dir.join("summary.json").is_file() => {
                    let f = dir.join("summary.json");
                    let text = std::fs::read_to_string(&f)
                        .with_context(|| format!("reading {}", f.display()))?;
                    match serde_json::from_str::<crate::results::summary::CompareSummary>(&text) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            eprintln!(
                                "warning: {} could not be read ({e}): the verdict is computed from the results shown (one trial per strategy)",
                                f.display()
                            );
                            None
                        }
                    }
                }
                _ => None,
            };
            report::sink::write_text(p, &report::html::render(&results, summary.as_ref())?)?;
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

/// `report` of `mrc --json`'s document: its chart with `--html`, else where to find it.
fn mrc_report(file: &Path, page: &str, html: Option<&Path>) -> Result<ExitCode> {
    let Some(out) = html else {
        return Err(UsageError::new(format!(
            "{} is a miss-ratio curve (`mrc --json`): give --html FILE for its chart, or run `stampede mrc` for the table",
            file.display()
        ))
        .into());
    };
    report::sink::write_text(out, page)?;
    eprintln!(
        "HTML chart of the miss-ratio curve in {} written to {}",
        file.display(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// How `run` and `compare` end once their results are written: the broken thresholds printed,
/// then 130 when interrupted, 1 when a threshold broke, else 0.
fn ending(interrupted: bool, broken: &str, status: &Status, what: &str) -> ExitCode {
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

/// The trials of `--repeat` and `--same-seed`, as the orchestration takes them.
fn trials(f: &crate::cli::TrialFlags) -> crate::session::trials::Trials {
    crate::session::trials::Trials {
        repeat: f.repeat,
        same_seed: f.same_seed,
    }
}
