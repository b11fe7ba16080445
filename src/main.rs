//! stampede: reproduce cache stampedes on a real Redis in front of a real Postgres and measure
//! how well each protection strategy holds.

use std::process::ExitCode;

use clap::Parser;
use stampede::{app, cli, error};

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
    let result = runtime.block_on(app::run(cli));
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
