//! `slotguard next --jsonl`, run as a process.
//!
//! Expected instants are worked out by hand from the zones' rules, not taken from the program:
//! Asia/Seoul is UTC+9 without DST; America/New_York springs forward at 2026-03-08 02:00 EST (07:00Z).

mod common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use chrono::Utc;
use common::{instant, run, slotguard, stdout_lines};
use serde_json::{Value, json};

/// Feeds `input` to `slotguard next --jsonl`, checks it succeeded, and parses every answer line.
fn answers(input: Vec<u8>) -> Vec<Value> {
    let output = run(&["next", "--jsonl"], input);
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.stderr.is_empty());
    stdout_lines(&output)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

/// The error message of an answer, which must be an error.
fn error(answer: &Value) -> &str {
    assert_eq!(answer.as_object().map(|o| o.len()), Some(1), "{answer}");
    answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn good_and_bad_lines_are_answered_in_order() {
    let long_expr = format!("{} 2 * * *", "1".repeat(9_992));
    assert_eq!(long_expr.len(), 10_000);
    let mut input: Vec<u8> = Vec::new();
    let mut line = |bytes: &[u8]| {
        input.extend_from_slice(bytes);
        input.push(b'\n');
    };
    // 0: 02:00 KST is 17:00Z the day before.
    line(br#"{"expr": "0 2 * * *", "tz": "Asia/Seoul", "after": "2026-03-08T00:00:00Z", "count": 3}"#);
    // 1: not JSON (unterminated object)
    line(br#"{"expr": "0 2 * * *""#);
    // 2: a raw NUL byte inside the string
    line(b"{\"expr\": \"0 2 * * *\0\"}");
    // 3: an escaped NUL: valid JSON, not a valid expression
    line(br#"{"expr": "0 2 * * *\u0000"}"#);
    // 4: blank, and 5: only white space
    line(b"");
    line(b" \t ");
    // 6: a 10,000-character expression
    line(json!({ "expr": long_expr }).to_string().as_bytes());
    // 7: a misspelt zone
    line(br#"{"expr": "0 2 * * *", "tz": "Asia/Seol"}"#);
    // 8: tz and dst default to UTC and vixie; the offset of `after` is honoured: 09:00+09:00 = 00:00Z.
    line(br#"{"expr": "*/15 * * * *", "after": "2026-03-08T09:00:00+09:00", "count": 2}"#);
    // 9: a date that does not exist
    line(br#"{"expr": "0 2 * * *", "after": "2026-02-30T00:00:00Z"}"#);
    // 10, 11: count out of range
    line(br#"{"expr": "0 2 * * *", "count": 10001}"#);
    line(br#"{"expr": "0 2 * * *", "count": 0}"#);
    // 12: an unknown field
    line(br#"{"expr": "0 2 * * *", "zone": "Asia/Seoul"}"#);
    // 13: 02:30 does not exist in New York on 2026-03-08; shift reads it as EST: 07:30Z.
    line(br#"{"expr": "30 2 * * *", "tz": "America/New_York", "after": "2026-03-07T12:00:00Z", "count": 2, "dst": "shift"}"#);
    // 14: the same under vixie: the transition itself, 03:00 EDT = 07:00Z.
    line(br#"{"expr": "30 2 * * *", "tz": "America/New_York", "after": "2026-03-07T12:00:00Z", "count": 2}"#);
    // 15: not UTF-8
    line(b"\xff\xfe{}");
    // 16: an unknown policy
    line(br#"{"expr": "0 2 * * *", "dst": "sometimes"}"#);
    // 17: a JSON value that is not an object
    line(br#"["0 2 * * *"]"#);
    // 18: no expression
    line(br#"{"tz": "UTC"}"#);
    // 19: a Windows line ending, and null for an optional field
    input.extend_from_slice(
        b"{\"expr\": \"@daily\", \"after\": \"2026-03-08T00:00:00Z\", \"count\": 1, \"tz\": null}\r\n",
    );
    // 20: no `after`: now. Last line, without a line ending.
    input.extend_from_slice(br#"{"expr": "* * * * *", "count": 1}"#);

    let before = Utc::now();
    let got = answers(input);
    assert_eq!(got.len(), 21, "{got:#?}");

    assert_eq!(
        got[0],
        json!({"next": ["2026-03-08T17:00:00Z", "2026-03-09T17:00:00Z", "2026-03-10T17:00:00Z"]})
    );
    assert!(error(&got[1]).starts_with("invalid JSON: "), "{}", got[1]);
    assert!(
        error(&got[2]).starts_with("invalid JSON: control character"),
        "{}",
        got[2]
    );
    assert!(
        error(&got[3]).starts_with("day-of-week field `*\\0`"),
        "{}",
        got[3]
    );
    assert!(error(&got[4]).starts_with("empty line"), "{}", got[4]);
    assert!(error(&got[5]).starts_with("empty line"), "{}", got[5]);
    let long = error(&got[6]);
    assert!(long.starts_with("minute field `111"), "{long}");
    assert!(long.len() < 300, "{long}");
    assert_eq!(
        error(&got[7]),
        "unknown time zone `Asia/Seol`; did you mean `Asia/Seoul`?"
    );
    assert_eq!(
        got[8],
        json!({"next": ["2026-03-08T00:15:00Z", "2026-03-08T00:30:00Z"]})
    );
    assert!(
        error(&got[9]).starts_with("after `2026-02-30T00:00:00Z` is not an RFC 3339 instant"),
        "{}",
        got[9]
    );
    assert_eq!(
        error(&got[10]),
        "count 10001 is out of range: expected 1 to 10000"
    );
    assert_eq!(
        error(&got[11]),
        "count 0 is out of range: expected 1 to 10000"
    );
    assert!(
        error(&got[12]).starts_with("invalid request: unknown field `zone`"),
        "{}",
        got[12]
    );
    // Then 02:30 EDT on the 9th = 06:30Z.
    assert_eq!(
        got[13],
        json!({"next": ["2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"]})
    );
    assert_eq!(
        got[14],
        json!({"next": ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]})
    );
    assert!(error(&got[15]).starts_with("invalid JSON: "), "{}", got[15]);
    assert!(
        error(&got[16]).starts_with("unknown DST policy `sometimes`"),
        "{}",
        got[16]
    );
    assert!(error(&got[17]).ends_with("found an array"), "{}", got[17]);
    assert!(
        error(&got[18]).contains("missing field `expr`"),
        "{}",
        got[18]
    );
    assert_eq!(got[19], json!({"next": ["2026-03-09T00:00:00Z"]}));
    let now_slot = instant(got[20]["next"][0].as_str().unwrap());
    assert!(now_slot > before, "{now_slot} is not after {before}");
    assert!(
        now_slot <= Utc::now() + chrono::TimeDelta::seconds(60),
        "{now_slot}"
    );
}

#[test]
fn instants_are_utc_whole_seconds_with_z() {
    let got = answers(
        br#"{"expr": "15 30 9 * * MON-FRI", "tz": "Asia/Kolkata", "after": "2026-03-06T04:00:00.5Z", "count": 3}"#
            .to_vec(),
    );
    // 09:30:15 IST (UTC+05:30) is 04:00:15Z; 2026-03-06 is a Friday, so then Monday and Tuesday.
    assert_eq!(
        got,
        [json!({"next": ["2026-03-06T04:00:15Z", "2026-03-09T04:00:15Z", "2026-03-10T04:00:15Z"]})]
    );
}

#[test]
fn empty_input_gives_no_output_and_success() {
    assert!(answers(Vec::new()).is_empty());
}

#[test]
fn large_input_streams_with_an_oversized_line_in_the_middle() {
    const LINES: usize = 30_000;
    const OVERSIZED: usize = 15_000;
    let mut input = String::new();
    for i in 0..LINES {
        if i == OVERSIZED {
            // 2 MiB inside one JSON string: more than the program holds for one line.
            let filler = " ".repeat(2 << 20);
            writeln!(input, r#"{{"expr": "0 2 * * *{filler}"}}"#).unwrap();
        } else if i % 7 == 3 {
            input.push_str("{\"expr\": \"61 * * * *\"}\n");
        } else {
            let (minute, hour) = (i % 60, (i / 60) % 24);
            writeln!(
                input,
                r#"{{"expr": "{minute} {hour} * * *", "after": "2026-01-01T00:00:00Z", "count": 1}}"#
            )
            .unwrap();
        }
    }
    let got = answers(input.into_bytes());
    assert_eq!(got.len(), LINES);
    for (i, answer) in got.iter().enumerate() {
        if i == OVERSIZED {
            assert_eq!(
                error(answer),
                "line longer than 1048576 bytes: expected one small JSON object"
            );
        } else if i % 7 == 3 {
            assert_eq!(error(answer), "minute field `61`: 61 is out of range 0-59");
        } else {
            let (minute, hour) = (i % 60, (i / 60) % 24);
            // Strictly after midnight: 00:00 itself is the next day's.
            let expected = if (minute, hour) == (0, 0) {
                "2026-01-02T00:00:00Z".to_owned()
            } else {
                format!("2026-01-01T{hour:02}:{minute:02}:00Z")
            };
            assert_eq!(answer, &json!({ "next": [expected] }), "line {i}");
        }
    }
}

#[test]
fn answers_each_line_before_the_next_arrives() {
    // As a co-process: write a line, read its answer, only then write the next.
    let mut child = slotguard(&["next", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, receive) = mpsc::channel();
    let reader = thread::spawn(move || {
        for line in stdout.lines() {
            if send.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut ask = |request: &str| -> Value {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let line = receive
            .recv_timeout(Duration::from_secs(30))
            .expect("no answer while stdin is still open: output is not flushed per line");
        serde_json::from_str(&line).unwrap()
    };
    assert_eq!(
        ask(
            r#"{"expr": "0 2 * * *", "tz": "Asia/Seoul", "after": "2026-03-08T00:00:00Z", "count": 1}"#
        ),
        json!({"next": ["2026-03-08T17:00:00Z"]})
    );
    assert!(error(&ask("not json")).starts_with("invalid JSON: "));
    assert_eq!(
        ask(
            r#"{"expr": "0 0 * * *", "tz": "Asia/Seoul", "after": "2026-03-08T00:00:00Z", "count": 1}"#
        ),
        // 00:00 KST on the 9th = 15:00Z on the 8th.
        json!({"next": ["2026-03-08T15:00:00Z"]})
    );
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(status.success());
}

/// Issue 26: `calendar` (a builtin name or an inline weekend and holidays), `adjust` and `shift`.
/// Korean payday, 02:00 KST (17:00Z the day before) on the 25th or the business day before: the
/// 25th of September 2026 is Chuseok (24th–26th), so it is Wednesday the 23rd; the 25th of October
/// is a Sunday, so it is Friday the 23rd.
#[test]
fn calendars_move_the_dates() {
    let base = json!({"expr": "0 2 25 * *", "tz": "Asia/Seoul",
        "after": "2026-09-01T00:00:00Z", "count": 2});
    let with = |extra: Value| {
        let mut request = base.clone();
        request
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        request.to_string()
    };
    let input = [
        base.to_string(),
        with(json!({"calendar": "KR", "adjust": "preceding"})),
        // An inline calendar: only the 25th of September is a holiday; following, then one more
        // business day: Tuesday the 29th; October's 25th (Sunday) becomes Tuesday the 27th.
        with(
            json!({"calendar": {"weekend": ["sat", "sun"], "holidays": ["2026-09-25"]},
            "adjust": "following", "shift": 1}),
        ),
        // `skip` is the default: September's, October's and December's (Christmas) 25th are
        // dropped; November's (a Wednesday) and January 2027's (a Monday) are kept.
        with(json!({"calendar": "KR"})),
        with(json!({"adjust": "preceding"})),
        with(json!({"calendar": "XX"})),
        with(json!({"calendar": {"weekend": ["Sat"]}})),
        with(json!({"calendar": "KR", "shift": 261})),
        with(json!({"calendar": "KR", "adjust": "sideways"})),
    ]
    .join("\n");
    let got = answers(input.into_bytes());
    assert_eq!(got.len(), 9);
    assert_eq!(
        got[0],
        json!({"next": ["2026-09-24T17:00:00Z", "2026-10-24T17:00:00Z"]})
    );
    assert_eq!(
        got[1],
        json!({"next": ["2026-09-22T17:00:00Z", "2026-10-22T17:00:00Z"]})
    );
    assert_eq!(
        got[2],
        json!({"next": ["2026-09-28T17:00:00Z", "2026-10-26T17:00:00Z"]})
    );
    assert_eq!(
        got[3],
        json!({"next": ["2026-11-24T17:00:00Z", "2027-01-24T17:00:00Z"]})
    );
    assert!(error(&got[4]).contains("needs a calendar"), "{}", got[4]);
    assert!(
        error(&got[5]).starts_with("unknown calendar \"XX\""),
        "{}",
        got[5]
    );
    assert!(error(&got[6]).contains("weekend day `Sat`"), "{}", got[6]);
    assert!(
        error(&got[7]).contains("shift 261 is out of range"),
        "{}",
        got[7]
    );
    assert!(
        error(&got[8]).contains("unknown business-day convention"),
        "{}",
        got[8]
    );
}
