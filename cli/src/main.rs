//! `slotguard`, the command line of slotguard.
//!
//! One module per subcommand. Today there is `next` (the slots a cron expression yields, like
//! `systemd-analyze calendar`); the operations on a running cluster (`runs`, `missed`, `retry`, `pause`,
//! `resume`) will be added as further variants of [`Command`], each in its own module.
//!
//! Exit codes follow clap's convention: 0 for success, 2 for a usage error or bad input, 1 for any other
//! failure (an I/O error).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod exit;
mod next;

/// The `slotguard` command line.
#[derive(Debug, Parser)]
#[command(name = "slotguard", version, about = "Operate slotguard schedules")]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands. Each variant's arguments and behaviour live in the module of the same name.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print the next slots of a cron expression in a zone, as the scheduler computes them.
    Next(next::NextArgs),
}

fn main() -> ExitCode {
    // `Cli::parse` prints clap's own errors and exits with 2 on a usage error.
    let cli = Cli::parse();
    match cli.command {
        Command::Next(args) => next::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
