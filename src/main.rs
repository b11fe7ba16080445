//! stampede: reproduce cache stampedes on a real Redis in front of a real Postgres and measure
//! how well each protection strategy holds.

use std::process::ExitCode;

use clap::Parser;
use stampede::{cli, commands, error};

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("stampede")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::from(error::EXIT_ENV);
        }
    };
    // The program runs as a task on a worker thread, not in block_on on this thread: a future
    // polled by block_on hands every wake-up between this thread and the workers (two context
    // switches each), which at one open-loop dispatch per wake-up cost more than the requests.
    let result = match runtime.block_on(async { tokio::spawn(commands::run(cli)).await }) {
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
            ExitCode::from(error::exit_code(&e))
        }
    }
}
