//! `rampart`: argument parsing and terminal UX over Rampart's library crates.
#![forbid(unsafe_code)]

/// `println!` that hands back the write's error instead of panicking, so a
/// reader that went away (`rampart kms key list | head`) ends the command
/// quietly (see `main`) rather than with a panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod cli;
mod commands;
mod duration;
mod errors;
mod notify;
mod passphrase;
mod size;

use std::process::ExitCode;

use clap::Parser;

/// An error that is the user's to fix (bad arguments, a wrong passphrase):
/// exit status 2 rather than 1.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A command's answer given by exit status alone (`is-luks` saying "no"):
/// exit with this status and print nothing.
#[derive(Debug)]
pub struct QuietExit(pub u8);

impl std::fmt::Display for QuietExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for QuietExit {}

fn main() -> ExitCode {
    rampart_crypto::disable_core_dumps();
    let args = cli::Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RAMPART_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match commands::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(QuietExit(status)) = error.downcast_ref::<QuietExit>() {
                return ExitCode::from(*status);
            }
            let broken_pipe = |e: &(dyn std::error::Error + 'static)| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            };
            if error.chain().any(broken_pipe) {
                // The reader of our standard output is gone (`| head`): what
                // it wanted it has; as ripgrep does, no error.
                return ExitCode::SUCCESS;
            }
            // One line: the whole cause chain. An error is an answer, not a
            // bug, so RUST_BACKTRACE never adds a stack dump here; panics
            // (bugs) still get theirs from the panic hook.
            eprintln!("rampart: error: {error:#}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
