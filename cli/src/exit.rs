//! Exit codes and the handling of output errors, shared by every subcommand.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

/// Clap's code for a usage error; we use it for bad input too, so scripts see one code for "you asked
/// for something wrong".
pub(crate) const USAGE: u8 = 2;

/// Anything else that failed: reading stdin, writing stdout.
pub(crate) const FAILURE: u8 = 1;

/// The exit code for an error while writing output.
///
/// A closed pipe (`slotguard next ... | head -3`) is how a reader says it has seen enough: that ends
/// the command quietly and successfully, as it does for the classic Unix tools.
pub(crate) fn write_error(err: &io::Error) -> ExitCode {
    if err.kind() == io::ErrorKind::BrokenPipe {
        ExitCode::SUCCESS
    } else {
        report(format_args!("writing output: {err}"));
        ExitCode::from(FAILURE)
    }
}

/// Prints `error: <message>` on stderr.
///
/// Unlike `eprintln!`, this never panics: if stderr itself is gone there is nobody left to tell.
pub(crate) fn report(message: impl fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "error: {message}");
}
