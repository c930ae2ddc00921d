//! `slotguard`, the command line of slotguard.
//!
//! `next` (the slots a cron expression yields, like `systemd-analyze calendar`) works offline; the
//! operations on a cluster's store (`jobs`, `runs`, `missed`, `retry`, `cancel`, `trigger`,
//! `backfill`, `pause`, `resume`, `audit`, `replicas`, `schedule`, `skip`, `unskip`, `holiday`) live
//! in
//! [`ops`].
//!
//! Exit codes follow clap's convention: 0 for success, 2 for a usage error or bad input, 1 for any other
//! failure (an I/O error, an unreachable store); the operations add 3 (unknown job or slot), 4
//! (refused by the run's status or the job's pause state), with `trigger --wait` 5 (the run
//! ended without success) and 6 (not finished within `--timeout`), and 7 (a stored schedule changed
//! since the version a change was read at).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod exit;
mod next;
mod ops;

/// The `slotguard` command line.
#[derive(Debug, Parser)]
#[command(
    name = "slotguard",
    version,
    about = "Operate slotguard schedules",
    after_help = "Exit codes: 0 done; 1 a failure (I/O, store unreachable); 2 usage or bad input; \
                  3 unknown job or slot; 4 refused by the run's status or the job's pause state; \
                  with trigger --wait, 5 the run ended without success (failed, dead, skipped, \
                  abandoned) and 6 it had not finished within --timeout; 7 a stored schedule \
                  changed since the --version given (schedule set, schedule remove)."
)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,

    #[command(flatten)]
    store: ops::Store,
}

/// The subcommands. Each variant's arguments and behaviour live in the module of the same name.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print the next slots of a cron expression in a zone, as the scheduler computes them.
    Next(next::NextArgs),
    /// Operations on a cluster's store.
    #[command(flatten)]
    Op(ops::Op),
}

/// The command line, with `--database-url` and `--schema` (global, for the operations) hidden from
/// `next --help`: `next` works offline and ignores them.
fn command() -> clap::Command {
    let command = Cli::command();
    let hidden: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().hide(true))
        .collect();
    // An argument a subcommand has already is not propagated to it again.
    command.mut_subcommand("next", |next| next.args(hidden))
}

fn main() -> ExitCode {
    // Clap prints its own errors and exits with 2 on a usage error.
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Next(args) => next::run(args, &cli.store),
        Command::Op(op) => ops::run(&cli.store, op),
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

    /// Issue 15, item 14: `next --help` shows only what `next` uses; the operations keep the store.
    #[test]
    fn next_help_shows_only_its_own_options() {
        let mut command = command();
        command.build();
        let next = command
            .find_subcommand_mut("next")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(!next.contains("--database-url"), "{next}");
        assert!(!next.contains("--schema"), "{next}");
        assert!(next.contains("--tz"), "{next}");
        let runs = command
            .find_subcommand_mut("runs")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(runs.contains("--database-url"), "{runs}");
    }
}
