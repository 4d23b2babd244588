//! `pier`: argv -> command; errors -> exit code (2 for configuration errors).
#![forbid(unsafe_code)]

use clap::Parser;
use pier::cli::{Cli, Command};
use pier::config::ConfigError;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => pier::runtime::run_server(args),
        Command::Check(args) => pier::runtime::check(args),
        Command::Echo(args) => pier::echo::run(args),
        Command::Bench(args) => pier::bench::run(args),
        Command::Tunnel(args) => pier::runtime::run_tunnel(args),
        Command::Upgrade(args) => pier::runtime::binary_upgrade(args),
    };
    if let Err(err) = result {
        if let Some(cfg) = err.downcast_ref::<ConfigError>() {
            eprintln!("pier: configuration error: {cfg}");
            std::process::exit(2);
        }
        if let Some(usage) = err.downcast_ref::<pier::bench::UsageError>() {
            eprintln!("pier: {usage}");
            std::process::exit(2);
        }
        // A sentence, as every log line: without Rust's ` (os error N)`.
        let text = pier::io_text::strip_os_error_numbers(&format!("{err:#}"));
        eprintln!("pier: error: {text}");
        std::process::exit(1);
    }
}
