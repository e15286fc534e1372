use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = meta_server::cli::Cli::parse();
    meta_server::cli::init_logging(&cli);
    match meta_server::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
