use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = meta_server::cli::Cli::parse();
    match meta_server::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            let message = meta_server::redact::process().apply(&format!("{e:#}"));
            let message = meta_server::cli::terminal::escape(&message);
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
