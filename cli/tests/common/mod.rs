//! Running the real `slotguard` binary as a process.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::thread;

use chrono::{DateTime, Utc};

/// The binary under test, with the arguments given.
pub(crate) fn slotguard(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slotguard"));
    command.args(args);
    command
}

/// Runs `slotguard` with `args`, feeding it `stdin` from another thread (so a large input cannot
/// deadlock against a full stdout pipe), and waits for it.
pub(crate) fn run(args: &[&str], stdin: Vec<u8>) -> Output {
    let mut child = slotguard(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn slotguard");
    let mut input = child.stdin.take().expect("stdin");
    let writer = thread::spawn(move || {
        // The program may exit before reading everything (a usage error): that is not a test failure.
        let _ = input.write_all(&stdin);
    });
    let output = child.wait_with_output().expect("wait for slotguard");
    writer.join().expect("stdin writer");
    output
}

/// Standard output, which must be UTF-8, as lines.
pub(crate) fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stdout.clone())
        .expect("stdout is UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Parses an instant the way the program writes it (`2026-03-08T17:00:00Z`).
pub(crate) fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|err| panic!("{text:?} is not RFC 3339: {err}"))
        .with_timezone(&Utc)
}
