//! `slotguard next --jsonl`: one JSON request a line on stdin, one JSON answer a line on stdout.
//!
//! Built to run as a co-process: each answer is written and flushed before the next line is read, and
//! memory stays bounded whatever the input (a line is held only up to [`MAX_LINE`] bytes). Every input
//! line gets exactly one answer, blank and broken lines included, so answer *n* belongs to line *n*.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::error::Category;

use super::request::{Fields, Request, utc_string};
use crate::exit::{self, FAILURE, report};

/// The longest line read; a request is a few hundred bytes, so anything near this is a mistake, and
/// the rest of such a line is skipped rather than held in memory.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Longest error message taken from the JSON parser, which quotes input (a 10,000-character field
/// name, a string where a number belongs) in full.
const MAX_MESSAGE: usize = 240;

/// The answer to one line.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Answer {
    /// The slots, as UTC instants with whole seconds and a `Z` suffix.
    Next(Vec<String>),
    /// Why the line could not be answered.
    Error(String),
}

/// One line of input, as far as it was kept.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// The whole line is in the buffer (without its line ending).
    Complete,
    /// The line was longer than [`MAX_LINE`]; it was skipped up to its end.
    TooLong,
}

/// Serves stdin to stdout until stdin ends; bad lines are answered, not fatal.
pub(super) fn run() -> ExitCode {
    match serve(&mut io::stdin().lock(), &mut io::stdout().lock(), Utc::now) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed::Read(err)) => {
            report(format_args!("reading stdin: {err}"));
            ExitCode::from(FAILURE)
        }
        Err(Failed::Write(err)) => exit::write_error(&err),
    }
}

/// An I/O error that ends the stream.
#[derive(Debug)]
enum Failed {
    Read(io::Error),
    Write(io::Error),
}

/// Answers every line of `input` on `output`, flushing after each; `now` is asked once per line that
/// has no `after`, so a long-running co-process keeps answering from the current time.
fn serve(
    input: &mut impl BufRead,
    output: &mut impl Write,
    now: impl Fn() -> DateTime<Utc>,
) -> Result<(), Failed> {
    let mut buf = Vec::new();
    let mut first = true;
    while let Some(line) = read_line(input, &mut buf, MAX_LINE).map_err(Failed::Read)? {
        let mut bytes = buf.as_slice();
        if first {
            // Tolerate the byte-order mark some Windows tools put at the start of a file.
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            first = false;
        }
        let answer = match line {
            Line::Complete => answer(bytes, &now),
            Line::TooLong => Answer::Error(format!(
                "line longer than {MAX_LINE} bytes: expected one small JSON object"
            )),
        };
        serde_json::to_writer(&mut *output, &answer)
            .map_err(io::Error::from)
            .and_then(|()| output.write_all(b"\n"))
            .and_then(|()| output.flush())
            .map_err(Failed::Write)?;
    }
    Ok(())
}

/// The answer to one complete line.
fn answer(line: &[u8], now: &impl Fn() -> DateTime<Utc>) -> Answer {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Answer::Error(
            r#"empty line: expected a JSON object such as {"expr": "0 2 * * *"}"#.to_owned(),
        );
    }
    let fields = match parse_fields(line) {
        Ok(fields) => fields,
        Err(message) => return Answer::Error(message),
    };
    match Request::new(&fields, now()) {
        Ok(request) => Answer::Next(
            request
                .slots()
                .map(|slot| utc_string(slot.scheduled_at))
                .collect(),
        ),
        Err(err) => Answer::Error(err.to_string()),
    }
}

/// The request on a line that is not blank.
fn parse_fields(line: &[u8]) -> Result<Fields, String> {
    let start = line.iter().find(|b| !b.is_ascii_whitespace());
    if start != Some(&b'{') {
        // A derived `Deserialize` also takes a struct from an array (`["0 2 * * *"]`); a request is
        // an object with named fields, so say what the line holds instead, if it is JSON at all.
        serde_json::from_slice::<IgnoredAny>(line).map_err(|err| json_error(&err))?;
        let found = match start {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return Err(format!(
            "invalid request: expected a JSON object such as {{\"expr\": \"0 2 * * *\"}}, found {found}"
        ));
    }
    serde_json::from_slice(line).map_err(|err| json_error(&err))
}

/// The parser's message, marked as broken JSON or as a request of the wrong shape, and kept short.
fn json_error(err: &serde_json::Error) -> String {
    let message = err.to_string();
    let message = if message.chars().count() <= MAX_MESSAGE {
        message
    } else {
        // Keep the start (what is wrong) and the end (where: "at line 1 column N").
        let chars: Vec<char> = message.chars().collect();
        let head: String = chars[..MAX_MESSAGE - 40].iter().collect();
        let tail: String = chars[chars.len() - 40..].iter().collect();
        format!("{head} … {tail}")
    };
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => format!("invalid JSON: {message}"),
        Category::Data => format!("invalid request: {message}"),
    }
}

/// Reads one line into `buf`, without its `\n` or `\r\n`, keeping at most `max` bytes of it.
///
/// Returns `None` at the end of the input. A last line without a line ending is still a line.
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Option<Line>> {
    buf.clear();
    let mut started = false;
    let mut too_long = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            break;
        }
        started = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = newline.map_or(available.len(), |i| i + 1);
        input.consume(used);
        if newline.is_some() {
            break;
        }
    }
    if !started {
        return Ok(None);
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(if too_long {
        Line::TooLong
    } else {
        Line::Complete
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed_now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_772_928_000, 0).unwrap() // 2026-03-08T00:00:00Z
    }

    fn serve_str(input: &[u8]) -> Vec<String> {
        let mut output = Vec::new();
        serve(&mut &input[..], &mut output, fixed_now).unwrap();
        String::from_utf8(output)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn read_line_splits_caps_and_strips() {
        // A buffer smaller than the lines, so a line arrives in pieces.
        let data: &[u8] = b"ab\r\n\ncdefgh\nij";
        let mut input = io::BufReader::with_capacity(3, data);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(line) = read_line(&mut input, &mut buf, 4).unwrap() {
            got.push((line, String::from_utf8(buf.clone()).unwrap()));
        }
        assert_eq!(
            got,
            [
                (Line::Complete, "ab".to_owned()),
                (Line::Complete, String::new()),
                (Line::TooLong, String::new()),
                (Line::Complete, "ij".to_owned()),
            ]
        );
    }

    #[test]
    fn now_is_the_default_after() {
        let out = serve_str(b"{\"expr\": \"0 2 * * *\", \"tz\": \"Asia/Seoul\", \"count\": 1}\n");
        // 02:00 KST on 2026-03-09 is 17:00Z on 2026-03-08, the first after midnight UTC.
        assert_eq!(out, [r#"{"next":["2026-03-08T17:00:00Z"]}"#]);
    }

    #[test]
    fn byte_order_mark_only_on_the_first_line() {
        let out = serve_str(b"\xEF\xBB\xBF{\"expr\":\"@daily\",\"count\":1}\n\xEF\xBB\xBF{}\n");
        assert_eq!(out[0], r#"{"next":["2026-03-09T00:00:00Z"]}"#);
        assert!(
            out[1].starts_with(r#"{"error":"invalid JSON"#),
            "{}",
            out[1]
        );
    }

    #[test]
    fn long_parser_messages_are_cut() {
        let key = "k".repeat(10_000);
        let out = serve_str(format!("{{\"{key}\": 1}}\n").as_bytes());
        assert!(out[0].len() < 400, "{}", out[0]);
        assert!(out[0].contains("unknown field"), "{}", out[0]);
        assert!(out[0].contains("column"), "{}", out[0]);
    }
}
