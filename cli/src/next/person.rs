//! `slotguard next` for a person: a header, then one line per slot.
//!
//! ```text
//! next 2 slots of "30 2 * * *" in America/New_York (DST policy vixie) after 2026-03-07T12:00:00Z
//! UTC                   local                                business date
//! 2026-03-08T07:00:00Z  Sun 2026-03-08 03:00:00-04:00 EDT    2026-03-08  (02:30 does not exist; vixie)
//! 2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00-04:00 EDT    2026-03-09
//! ```

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use chrono::{LocalResult, NaiveDateTime, TimeZone, Utc};
use slotguard_cron::{DstPolicy, Slot};

use super::NextArgs;
use super::calendar::CalendarSpec;
use super::request::{Fields, Request, representable, utc_string};
use crate::exit::{self, USAGE, report};

/// Validates the arguments and prints the slots; bad input is reported on stderr with exit code 2.
pub(super) fn run(args: NextArgs, store: &crate::ops::Store) -> ExitCode {
    let expr = match <[String; 1]>::try_from(args.expr) {
        Ok([expr]) => expr,
        Err(many) => {
            report(format_args!(
                "expected the cron expression as one quoted argument, such as \
                 slotguard next '0 2 * * *', but found {} arguments (the shell also expands an \
                 unquoted *)",
                many.len()
            ));
            return ExitCode::from(USAGE);
        }
    };
    let calendar = match &args.holidays {
        None => args.calendar.clone().map(CalendarSpec::Builtin),
        Some(path) => match super::calendar::from_file(path, args.calendar.as_deref()) {
            Ok(calendar) => Some(CalendarSpec::File(calendar)),
            Err(problem) => {
                report(problem);
                return ExitCode::from(USAGE);
            }
        },
    };
    let calendar = match super::overrides::with_overrides(calendar, args.calendar.as_deref(), store)
    {
        Ok(calendar) => calendar,
        Err((code, message)) => {
            report(message);
            return ExitCode::from(code);
        }
    };
    let fields = Fields {
        expr,
        tz: Some(args.tz),
        after: args.after,
        count: Some(args.count),
        dst: Some(args.dst),
        calendar,
        adjust: args.adjust,
        shift: args.shift,
    };
    let request = match Request::new(&fields, Utc::now()) {
        Ok(request) => request,
        Err(err) => {
            report(err);
            return ExitCode::from(USAGE);
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    match write_slots(&mut out, &request).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => exit::write_error(&err),
    }
}

/// Writes the header and one line per slot: UTC instant, local time with offset and abbreviation,
/// business date, and a note where a DST rule moved the slot or its wall time happens twice.
fn write_slots(out: &mut impl Write, request: &Request) -> io::Result<()> {
    let schedule = &request.schedule;
    writeln!(
        out,
        "next {} slot{} of {:?} in {} (DST policy {}) after {}",
        request.count,
        if request.count == 1 { "" } else { "s" },
        schedule.expr().source(),
        schedule.zone().name(),
        schedule.dst(),
        utc_string(request.after),
    )?;
    if let Some(rule) = schedule.business() {
        writeln!(
            out,
            "on calendar {}, {}{}",
            rule.calendar(),
            rule.convention(),
            match rule.shift() {
                0 => String::new(),
                n => format!(", shifted {n:+} business days"),
            }
        )?;
    }
    writeln!(out, "{:<22}{:<37}business date", "UTC", "local")?;
    let mut listed = 0;
    for slot in request.slots() {
        let local = slot.local();
        write!(
            out,
            "{}  {} {:<5}  {}",
            utc_string(slot.scheduled_at),
            local.format("%a %Y-%m-%d %H:%M:%S%:z"),
            local.format("%Z").to_string(),
            slot.business_date(),
        )?;
        if let Some(note) = dst_note(&slot, schedule.dst()) {
            write!(out, "  ({note})")?;
        }
        if let Some(note) = calendar_note(schedule, &slot) {
            write!(out, "  ({note})")?;
        }
        writeln!(out)?;
        listed += 1;
    }
    if listed < request.count {
        writeln!(
            out,
            "no further slots up to {}",
            utc_string(representable().1)
        )?;
    }
    Ok(())
}

/// Why a slot is not simply "its wall time, read once": the wall time was skipped by the clock and
/// the policy moved the slot, or the wall time happens twice and this is one of the two.
fn dst_note(slot: &Slot, policy: DstPolicy) -> Option<String> {
    let local = slot.local().naive_local();
    if local != slot.wall {
        let wall = if local.date() == slot.wall.date() {
            clock(slot.wall)
        } else {
            // Pacific/Apia skipped a whole day: name the date the slot belonged to.
            format!("{} {}", slot.wall.date(), clock(slot.wall))
        };
        return Some(format!("{wall} does not exist; {policy}"));
    }
    match slot.zone.from_local_datetime(&slot.wall) {
        LocalResult::Ambiguous(first, _) => {
            let which = if first.with_timezone(&Utc) == slot.scheduled_at {
                "first"
            } else {
                "second"
            };
            Some(format!(
                "{} occurs twice; this is the {which}",
                clock(slot.wall)
            ))
        }
        LocalResult::Single(_) | LocalResult::None => None,
    }
}

/// The nominal dates a calendar moved onto the slot's date, each with the holiday (or weekend) that
/// moved it.
fn calendar_note(schedule: &slotguard_cron::Schedule, slot: &Slot) -> Option<String> {
    let rule = schedule.business()?;
    let moved: Vec<String> = schedule
        .nominal_dates(slot)
        .into_iter()
        .filter(|d| *d != slot.business_date())
        .map(|d| match rule.calendar().holiday(d) {
            Some(name) => format!("{d} {name}"),
            None if rule.calendar().is_business_day(d) => format!("{d} by the shift"),
            None => format!("{d} weekend"),
        })
        .collect();
    (!moved.is_empty()).then(|| format!("moved from {}", moved.join(", ")))
}

/// `02:30`, or `02:30:15` when the seconds matter.
fn clock(wall: NaiveDateTime) -> String {
    let format = if wall.format("%S").to_string() == "00" {
        "%H:%M"
    } else {
        "%H:%M:%S"
    };
    wall.format(format).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(expr: &str, tz: &str, dst: &str, after: &str, count: i64) -> Vec<String> {
        let fields = Fields {
            expr: expr.to_owned(),
            tz: Some(tz.to_owned()),
            after: Some(after.to_owned()),
            count: Some(count),
            dst: Some(dst.to_owned()),
            ..Fields::default()
        };
        let request = Request::new(&fields, Utc::now()).unwrap();
        let mut out = Vec::new();
        write_slots(&mut out, &request).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn apia_skipped_day_names_the_date() {
        // Pacific/Apia went from 2011-12-29 23:59:59 -10:00 to 2011-12-31 00:00:00 +14:00.
        let out = lines(
            "0 12 * * *",
            "Pacific/Apia",
            "shift",
            "2011-12-29T23:00:00Z",
            1,
        );
        // 2011-12-30 12:00 read with -10:00 is 22:00Z, which is 2011-12-31 12:00 +14:00.
        assert_eq!(
            out[2],
            "2011-12-30T22:00:00Z  Sat 2011-12-31 12:00:00+14:00 +14    2011-12-30  \
             (2011-12-30 12:00 does not exist; shift)"
        );
    }

    #[test]
    fn seconds_are_shown_when_they_matter() {
        let out = lines(
            "15 30 2 * * *",
            "America/New_York",
            "vixie",
            "2026-03-07T12:00:00Z",
            1,
        );
        assert!(
            out[2].ends_with("(02:30:15 does not exist; vixie)"),
            "{}",
            out[2]
        );
    }

    #[test]
    fn the_end_of_the_calendar_is_said() {
        let out = lines("0 0 1 1 *", "UTC", "vixie", "9999-06-01T00:00:00Z", 3);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2], "no further slots up to 9999-12-31T23:59:59Z");
    }
}
