//! `slotguard next` for a person, run as a process.
//!
//! Expected instants are worked out by hand from the zones' rules, not taken from the program:
//! Asia/Seoul is UTC+9 without DST; America/New_York is UTC-5 (EST) and UTC-4 (EDT), springing forward
//! at 2026-03-08 02:00 EST (07:00Z) and falling back at 2026-11-01 02:00 EDT (06:00Z).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use chrono::{TimeDelta, Utc};
use common::{instant, run, slotguard, stdout_lines};

/// Runs a person-mode command that must succeed and returns its stdout lines.
fn ok(args: &[&str]) -> Vec<String> {
    let output = run(args, Vec::new());
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.stderr.is_empty(), "{args:?} wrote to stderr");
    stdout_lines(&output)
}

/// Runs a person-mode command that must be refused with exit code 2 and returns its stderr.
fn refused(args: &[&str]) -> String {
    let output = run(args, Vec::new());
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    assert!(output.stdout.is_empty(), "{args:?} wrote to stdout");
    let stderr = String::from_utf8(output.stderr).expect("stderr is UTF-8");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn seoul_daily_two_am_with_default_count() {
    let lines = ok(&[
        "next",
        "0 2 * * *",
        "--tz",
        "Asia/Seoul",
        "--after",
        "2026-03-08T00:00:00Z",
    ]);
    // 02:00 KST is 17:00Z the day before; 2026-03-09 is a Monday. The business date is the KST date.
    assert_eq!(
        lines,
        [
            r#"next 5 slots of "0 2 * * *" in Asia/Seoul (DST policy vixie) after 2026-03-08T00:00:00Z"#,
            "UTC                   local                                business date",
            "2026-03-08T17:00:00Z  Mon 2026-03-09 02:00:00+09:00 KST    2026-03-09",
            "2026-03-09T17:00:00Z  Tue 2026-03-10 02:00:00+09:00 KST    2026-03-10",
            "2026-03-10T17:00:00Z  Wed 2026-03-11 02:00:00+09:00 KST    2026-03-11",
            "2026-03-11T17:00:00Z  Thu 2026-03-12 02:00:00+09:00 KST    2026-03-12",
            "2026-03-12T17:00:00Z  Fri 2026-03-13 02:00:00+09:00 KST    2026-03-13",
        ]
    );
}

#[test]
fn after_with_an_offset_and_exactly_on_a_slot() {
    // 2026-03-09T02:00:00+09:00 is itself a slot; slots are strictly after, so the next is a day on.
    let lines = ok(&[
        "next",
        "0 2 * * *",
        "--tz",
        "Asia/Seoul",
        "--after",
        "2026-03-09T02:00:00+09:00",
        "--count",
        "1",
    ]);
    assert_eq!(
        lines[0],
        r#"next 1 slot of "0 2 * * *" in Asia/Seoul (DST policy vixie) after 2026-03-08T17:00:00Z"#
    );
    assert_eq!(
        lines[2..],
        ["2026-03-09T17:00:00Z  Tue 2026-03-10 02:00:00+09:00 KST    2026-03-10"]
    );
}

#[test]
fn new_york_spring_forward_per_policy() {
    // 02:30 does not exist on 2026-03-08 in New York. From 07:00 EST on the 7th (12:00Z):
    let cases: [(&str, [&str; 2]); 4] = [
        // cronie: a fixed-time job runs at the transition, 03:00 EDT = 07:00Z.
        (
            "vixie",
            [
                "2026-03-08T07:00:00Z  Sun 2026-03-08 03:00:00-04:00 EDT    2026-03-08  (02:30 does not exist; vixie)",
                "2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00-04:00 EDT    2026-03-09",
            ],
        ),
        // The missing time does not run: next is 02:30 EDT on the 9th = 06:30Z.
        (
            "skip",
            [
                "2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00-04:00 EDT    2026-03-09",
                "2026-03-10T06:30:00Z  Tue 2026-03-10 02:30:00-04:00 EDT    2026-03-10",
            ],
        ),
        // 02:30 read with the old offset: 02:30 EST = 07:30Z = 03:30 EDT.
        (
            "SHIFT",
            [
                "2026-03-08T07:30:00Z  Sun 2026-03-08 03:30:00-04:00 EDT    2026-03-08  (02:30 does not exist; shift)",
                "2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00-04:00 EDT    2026-03-09",
            ],
        ),
        (
            "instant",
            [
                "2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00-04:00 EDT    2026-03-09",
                "2026-03-10T06:30:00Z  Tue 2026-03-10 02:30:00-04:00 EDT    2026-03-10",
            ],
        ),
    ];
    for (policy, expected) in cases {
        let lines = ok(&[
            "next",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-07T12:00:00Z",
            "--count",
            "2",
            "--dst",
            policy,
        ]);
        assert_eq!(
            lines[0],
            format!(
                r#"next 2 slots of "30 2 * * *" in America/New_York (DST policy {}) after 2026-03-07T12:00:00Z"#,
                policy.to_lowercase()
            )
        );
        assert_eq!(lines[2..], expected, "policy {policy}");
    }
}

#[test]
fn new_york_spring_forward_hourly_job_skips_the_gap_under_vixie() {
    // Not fixed-time, so vixie skips 02:30: 01:30 EST (06:30Z), then 03:30 EDT (07:30Z), unmarked.
    let lines = ok(&[
        "next",
        "30 * * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-08T06:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(
        lines[2..],
        [
            "2026-03-08T06:30:00Z  Sun 2026-03-08 01:30:00-05:00 EST    2026-03-08",
            "2026-03-08T07:30:00Z  Sun 2026-03-08 03:30:00-04:00 EDT    2026-03-08",
        ]
    );
}

#[test]
fn new_york_fall_back_vixie_once_instant_twice() {
    // 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST) on 2026-11-01. From 00:00 EDT (04:00Z):
    let args = |policy| {
        ok(&[
            "next",
            "30 1 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-11-01T04:00:00Z",
            "--count",
            "2",
            "--dst",
            policy,
        ])
    };
    assert_eq!(
        args("vixie")[2..],
        [
            "2026-11-01T05:30:00Z  Sun 2026-11-01 01:30:00-04:00 EDT    2026-11-01  (01:30 occurs twice; this is the first)",
            // The next day 01:30 EST = 06:30Z.
            "2026-11-02T06:30:00Z  Mon 2026-11-02 01:30:00-05:00 EST    2026-11-02",
        ]
    );
    assert_eq!(
        args("instant")[2..],
        [
            "2026-11-01T05:30:00Z  Sun 2026-11-01 01:30:00-04:00 EDT    2026-11-01  (01:30 occurs twice; this is the first)",
            "2026-11-01T06:30:00Z  Sun 2026-11-01 01:30:00-05:00 EST    2026-11-01  (01:30 occurs twice; this is the second)",
        ]
    );
}

#[test]
fn defaults_are_utc_now_and_five() {
    let before = Utc::now();
    let lines = ok(&["next", "* * * * *"]);
    assert!(
        lines[0].starts_with(r#"next 5 slots of "* * * * *" in UTC (DST policy vixie) after "#),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 7);
    let first = instant(&lines[2][..20]);
    // The next whole minute after the moment the command ran.
    assert!(first > before, "{first} is not after {before}");
    assert!(first <= Utc::now() + TimeDelta::seconds(60), "{first}");
    assert!(lines[2].contains("+00:00 UTC"), "{}", lines[2]);
}

#[test]
fn the_upper_count_bound_is_accepted() {
    let lines = ok(&[
        "next",
        "* * * * * *",
        "--after",
        "2026-01-01T00:00:00Z",
        "--count",
        "10000",
    ]);
    assert_eq!(lines.len(), 10_002);
    // 10,000 seconds after midnight is 02:46:40.
    assert!(
        lines[10_001].starts_with("2026-01-01T02:46:40Z  "),
        "{}",
        lines[10_001]
    );
}

#[test]
fn the_end_of_the_calendar_is_said() {
    let lines = ok(&[
        "next",
        "30 23 31 12 *",
        "--after",
        "9998-06-01T00:00:00Z",
        "--count",
        "3",
    ]);
    assert_eq!(
        lines[2..],
        [
            "9998-12-31T23:30:00Z  Thu 9998-12-31 23:30:00+00:00 UTC    9998-12-31",
            "9999-12-31T23:30:00Z  Fri 9999-12-31 23:30:00+00:00 UTC    9999-12-31",
            "no further slots up to 9999-12-31T23:59:59Z",
        ]
    );
}

#[test]
fn bad_input_exits_2_with_a_message_on_stderr() {
    let cases: [(&[&str], &str); 12] = [
        (
            &["next", "61 2 * * *"],
            "minute field `61`: 61 is out of range 0-59",
        ),
        (&["next", "0 2 * *"], "expected 5 fields"),
        (&["next", "0 0 30 2 *"], "can never fire"),
        (
            &["next", "0 2 * * *", "--tz", "Asia/Seol"],
            "unknown time zone `Asia/Seol`; did you mean `Asia/Seoul`?",
        ),
        (
            &["next", "0 2 * * *", "--count", "10001"],
            "count 10001 is out of range: expected 1 to 10000",
        ),
        (
            &["next", "0 2 * * *", "--count", "0"],
            "count 0 is out of range: expected 1 to 10000",
        ),
        (
            &["next", "0 2 * * *", "--count", "many"],
            "invalid value 'many'",
        ),
        (
            &["next", "0 2 * * *", "--after", "2026-02-30T00:00:00Z"],
            "after `2026-02-30T00:00:00Z` is not an RFC 3339 instant",
        ),
        (
            &["next", "0 2 * * *", "--dst", "never"],
            "unknown DST policy `never`: expected vixie, skip, shift or instant",
        ),
        (&["next", "0", "2", "*", "*", "*"], "one quoted argument"),
        (&["next"], "required"),
        (&["next", "0 2 * * *", "--jsonl"], "cannot be used with"),
    ];
    for (args, message) in cases {
        let stderr = refused(args);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    // No subcommand at all.
    refused(&[]);
}

#[test]
fn a_huge_expression_gets_a_short_message() {
    let expr = format!("{} 2 * * *", "1".repeat(9_992));
    assert_eq!(expr.len(), 10_000);
    let stderr = refused(&["next", &expr]);
    assert!(stderr.starts_with("error: minute field `111"), "{stderr}");
    assert!(stderr.len() < 300, "{stderr}");
}

#[test]
fn help_exits_0() {
    let output = run(&["next", "--help"], Vec::new());
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(
        help.contains("--jsonl") && help.contains("instant"),
        "{help}"
    );
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    // `slotguard next ... | head -1`: far more output than a pipe holds, and the reader goes away.
    let mut child = slotguard(&[
        "next",
        "* * * * * *",
        "--after",
        "2026-01-01T00:00:00Z",
        "--count",
        "10000",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut header = String::new();
    stdout.read_line(&mut header).unwrap();
    assert!(header.starts_with("next 10000 slots"), "{header}");
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{:?}", output.status);
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Issue 26: `--calendar`, `--adjust`, `--shift`; each moved slot names the nominal date and the
/// holiday that moved it.
#[test]
fn korean_payday_on_the_business_day_before() {
    let lines = ok(&[
        "next",
        "0 2 25 * *",
        "--tz",
        "Asia/Seoul",
        "--calendar",
        "KR",
        "--adjust",
        "preceding",
        "--after",
        "2026-09-01T00:00:00Z",
        "--count",
        "2",
    ]);
    assert!(
        lines[1].starts_with("on calendar KR (holidays "),
        "{lines:?}"
    );
    assert!(lines[1].ends_with("preceding"), "{lines:?}");
    assert!(
        lines[3].starts_with("2026-09-22T17:00:00Z  Wed 2026-09-23 02:00:00+09:00 KST"),
        "{lines:?}"
    );
    assert!(
        lines[3].ends_with("(moved from 2026-09-25 Chuseok)"),
        "{lines:?}"
    );
    assert!(
        lines[4].ends_with("(moved from 2026-10-25 weekend)"),
        "{lines:?}"
    );
    let stderr = refused(&["next", "0 2 * * *", "--shift", "1"]);
    assert!(stderr.contains("`shift` needs a calendar"), "{stderr}");
}

/// Issue 26: `--holidays FILE` adds a company's days (CSV or iCalendar) to a builtin calendar.
#[test]
fn holidays_from_a_file_move_the_slot() {
    let dir = std::env::temp_dir().join(format!("sg-holidays-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("acme.csv");
    std::fs::write(&csv, "date,name\n2026-11-25,Founders' day\n").unwrap();
    let ics = dir.join("acme.ics");
    std::fs::write(
        &ics,
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261125\r\n\
         SUMMARY:Founders' day\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    for file in [&csv, &ics] {
        let lines = ok(&[
            "next",
            "0 2 25 * *",
            "--tz",
            "Asia/Seoul",
            "--calendar",
            "KR",
            "--holidays",
            file.to_str().unwrap(),
            "--adjust",
            "preceding",
            "--after",
            "2026-11-01T00:00:00Z",
            "--count",
            "1",
        ]);
        assert!(lines[1].starts_with("on calendar acme ("), "{lines:?}");
        assert!(
            lines[3].starts_with("2026-11-23T17:00:00Z  Tue 2026-11-24 02:00:00+09:00 KST"),
            "{lines:?}"
        );
        assert!(
            lines[3].ends_with("(moved from 2026-11-25 Founders' day)"),
            "{lines:?}"
        );
    }
    let missing = dir.join("missing.csv");
    let stderr = refused(&["next", "0 2 * * *", "--holidays", missing.to_str().unwrap()]);
    assert!(stderr.contains("cannot read the holidays file"), "{stderr}");
    std::fs::write(&csv, "25/11/2026,Founders' day\n").unwrap();
    let stderr = refused(&["next", "0 2 * * *", "--holidays", csv.to_str().unwrap()]);
    assert!(stderr.contains("is not a YYYY-MM-DD date"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
