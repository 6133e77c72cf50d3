//! `kubedav`: one binary, many targets. `--target=all` runs every service in one process
//! (the gateway calls the cores directly); any other target runs one service, as each
//! Kubernetes Deployment does.

mod cli;
mod run;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kubedav: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            eprintln!("kubedav: {message}");
            ExitCode::FAILURE
        }
    }
}
