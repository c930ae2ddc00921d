//! Scenarios of bad input: hostile values, checks before the store is opened, and `--help`.

use super::*;

/// Hostile and oversized input: a clear error, nothing changed, nothing dropped.
pub(crate) fn hostile_input_changes_nothing(fx: &Fixture) {
    fx.seed();
    for (name, shown) in [
        (
            "x'; DROP TABLE jobs; --",
            "unknown job `x'; DROP TABLE jobs; --`: no scheduler has registered it",
        ),
        (
            "<script>alert(1)</script>",
            "unknown job `<script>alert(1)</script>`: no scheduler has registered it",
        ),
        (
            "report\n\u{1b}[2J",
            "unknown job `report\\n\\u{1b}[2J`: no scheduler has registered it",
        ),
    ] {
        assert_eq!(fx.slotguard(&["runs", name]).fails(3), shown);
        assert_eq!(
            fx.slotguard(&["retry", name, "2026-03-01T02:00:00Z", "--reason", "r"])
                .fails(3),
            shown
        );
        assert_eq!(
            fx.slotguard(&["pause", name, "--reason", "r"]).fails(3),
            shown
        );
    }
    // A long name is shortened in the message.
    let long = "j".repeat(10_000);
    let message = fx.slotguard(&["runs", &long]).fails(3).to_owned();
    assert!(message.len() < 200, "{message}");
    assert!(message.contains("(10000 characters)"), "{message}");

    // Linux caps one argument at MAX_ARG_STRLEN (32 pages, 128 KiB): a 1 MiB reason cannot even be
    // passed to a program. 100 KB can, and is refused as too long.
    let huge = "r".repeat(1 << 20);
    let spawn = Command::new(env!("CARGO_BIN_EXE_slotguard"))
        .args(["pause", REPORT, "--reason", &huge])
        .output();
    if cfg!(target_os = "linux") {
        let err = spawn.expect_err("a 1 MiB argument");
        assert_eq!(err.kind(), std::io::ErrorKind::ArgumentListTooLong, "{err}");
    }
    let big = "r".repeat(100_000);
    for args in [
        &["pause", REPORT, "--reason", &big][..],
        &["retry", REPORT, "2026-03-01T02:00:00Z", "--reason", &big],
        &["trigger", REPORT, "--reason", &big],
    ] {
        let out = fx.slotguard(args);
        assert_eq!(
            out.fails(2),
            "invalid reason: is 100000 bytes; at most 1024 are accepted"
        );
    }
    let out = fx.slotguard(&["pause", REPORT, "--reason", "r", "--actor", &big]);
    assert_eq!(
        out.fails(2),
        "invalid actor: is 100000 bytes; at most 128 are accepted"
    );
    for reason in ["", "   ", "bell\u{7}"] {
        fx.slotguard(&["pause", REPORT, "--reason", reason])
            .fails(2);
    }
    // A slot of 10,000 characters: a short message.
    let message = fx
        .slotguard(&["retry", REPORT, &"9".repeat(10_000), "--reason", "r"])
        .fails(2)
        .to_owned();
    assert!(message.len() < 300, "{message}");

    // Nothing changed, nothing was dropped.
    assert!(fx.audit().is_empty());
    assert!(!fx.paused(REPORT));
    assert_eq!(fx.run("2026-03-01T02:00:00Z").status, RunStatus::Failed);
    let jobs = fx.slotguard(&["jobs"]);
    assert_eq!(table(jobs.ok()).1.len(), 3);
}

/// Bad input is reported as such before the store is opened: a malformed slot with an unreachable
/// store is still exit 2.
pub(crate) fn input_is_checked_before_the_store(fx: &Fixture) {
    let mut args = vec!["retry", REPORT, "not-a-slot", "--reason", "r"];
    args.extend(["--database-url", "postgres://postgres@127.0.0.1:1/x"]);
    assert!(run(&args, &[]).fails(2).starts_with("SLOT: `not-a-slot`"));
    // The URL from the environment.
    fx.seed();
    let store = fx.store_args();
    let mut env: Vec<(&str, Option<&str>)> = vec![("SLOTGUARD_DATABASE_URL", Some(&store[1]))];
    if store.len() > 2 {
        env.push(("SLOTGUARD_SCHEMA", Some(&store[3])));
    }
    let out = run(&["runs", REPORT, "--limit", "1"], &env);
    assert_eq!(table(out.ok()).1.len(), 1);
}

/// Issue 21, point 8: `slotguard --help` lists every exit code, 5 and 6 of `trigger --wait`
/// included.
pub(crate) fn help_lists_every_exit_code() {
    let out = run(&["--help"], &[]);
    let text = out.ok();
    for code in [
        "0 done",
        "1 ",
        "2 usage",
        "3 unknown",
        "4 refused",
        "5 ",
        "6 ",
        "7 ",
    ] {
        assert!(text.contains(code), "`{code}` missing: {text}");
    }
    assert!(text.contains("trigger --wait"), "{text}");
}
