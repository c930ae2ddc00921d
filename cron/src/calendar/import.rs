//! Calendars read from files people already have: an iCalendar export of a holiday calendar
//! (`VEVENT`s, with `EXDATE`s taken out) and a CSV of `date,name` rows.

use chrono::NaiveDate;
use icalendar::parser::{Component, read_calendar, unfold};

use super::{Calendar, CalendarError, Weekend};

/// The longest event read, in days: a holiday of a year is a data error, not a closure.
const MAX_EVENT_DAYS: i64 = 62;

impl Calendar {
    /// `weekend` and the holidays of an iCalendar file: each `VEVENT`'s dates, from `DTSTART` up to
    /// the day before `DTEND` (one day without it), named by its `SUMMARY`, less the dates its
    /// `EXDATE`s list; cancelled events (`STATUS:CANCELLED`) are left out. A date-time counts as its
    /// date as written. Recurring events (`RRULE`, `RDATE`) are refused: export their dates.
    ///
    /// ```
    /// use slotguard_cron::{Calendar, Weekend};
    ///
    /// let ics = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260603\r\n\
    ///            SUMMARY:Local elections\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    /// let calendar = Calendar::from_ical("kr-extra", Weekend::NONE, ics)?;
    /// let day = chrono::NaiveDate::from_ymd_opt(2026, 6, 3).unwrap();
    /// assert_eq!(calendar.holiday(day), Some("Local elections"));
    /// # Ok::<(), slotguard_cron::CalendarError>(())
    /// ```
    ///
    /// # Errors
    /// [`CalendarError::Import`] for text that is not iCalendar, an event without a readable
    /// `DTSTART`, a recurring event, or one longer than 62 days.
    pub fn from_ical(
        name: impl Into<String>,
        weekend: Weekend,
        text: &str,
    ) -> Result<Calendar, CalendarError> {
        let unfolded = unfold(text);
        let parsed = read_calendar(&unfolded).map_err(|e| ical_error(first_line(&e)))?;
        let mut calendar = Calendar::new(name, weekend);
        calendar.version = "iCalendar".to_owned();
        let mut events = Vec::new();
        collect_events(&parsed.components, &mut events);
        for (index, event) in events.into_iter().enumerate() {
            for (date, summary) in
                event_dates(event).map_err(|p| ical_error(format!("event {}: {p}", index + 1)))?
            {
                calendar.holidays.insert(date, summary);
            }
        }
        Ok(calendar)
    }

    /// `weekend` and the holidays of a CSV file of `date,name` rows (`2026-06-03,Local elections`):
    /// the name may be left out; a first row `date,name` and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// [`CalendarError::Import`] naming the row whose date is not `YYYY-MM-DD`.
    pub fn from_csv(
        name: impl Into<String>,
        weekend: Weekend,
        text: &str,
    ) -> Result<Calendar, CalendarError> {
        let mut calendar = Calendar::new(name, weekend);
        calendar.version = "CSV".to_owned();
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        for (index, record) in reader.records().enumerate() {
            let record = record.map_err(|e| csv_error(e.to_string()))?;
            let row = record
                .position()
                .map_or(index as u64 + 1, csv::Position::line);
            let first = record.get(0).unwrap_or_default();
            if index == 0 && first.eq_ignore_ascii_case("date") {
                continue;
            }
            let date = NaiveDate::parse_from_str(first, "%Y-%m-%d").map_err(|_| {
                csv_error(format!(
                    "line {row}: {:?} is not a YYYY-MM-DD date",
                    crate::shown_within(first, 32)
                ))
            })?;
            let holiday = record.get(1).filter(|n| !n.is_empty()).unwrap_or("holiday");
            calendar.holidays.insert(date, holiday.to_owned());
        }
        Ok(calendar)
    }
}

fn ical_error(problem: String) -> CalendarError {
    CalendarError::Import {
        format: "iCalendar",
        problem,
    }
}

fn csv_error(problem: String) -> CalendarError {
    CalendarError::Import {
        format: "CSV",
        problem,
    }
}

/// The first line of a parser's message (nom's run on with the input).
fn first_line(message: &str) -> String {
    crate::shown_within(message.lines().next().unwrap_or("unreadable"), 120)
}

/// Every `VEVENT`, at any depth.
fn collect_events<'c, 'a>(components: &'c [Component<'a>], out: &mut Vec<&'c Component<'a>>) {
    for component in components {
        if component.name.as_str().eq_ignore_ascii_case("VEVENT") {
            out.push(component);
        }
        collect_events(&component.components, out);
    }
}

/// The dates of one event, with its summary.
fn event_dates(event: &Component<'_>) -> Result<Vec<(NaiveDate, String)>, String> {
    let prop = |key: &'static str| props(event, key);
    if prop("STATUS").any(|s| s.eq_ignore_ascii_case("CANCELLED")) {
        return Ok(Vec::new());
    }
    if prop("RRULE").chain(prop("RDATE")).next().is_some() {
        return Err("a recurring event (RRULE or RDATE): list its dates instead".to_owned());
    }
    let start = prop("DTSTART").next().ok_or("no DTSTART")?;
    let start = date_of(start)?;
    let end = match prop("DTEND").next() {
        Some(end) => date_of(end)?.max(start.succ_opt().unwrap_or(start)),
        None => start.succ_opt().unwrap_or(start),
    };
    if (end - start).num_days() > MAX_EVENT_DAYS {
        return Err(format!(
            "{start} to {end} is longer than {MAX_EVENT_DAYS} days"
        ));
    }
    let mut excluded = Vec::new();
    for list in prop("EXDATE") {
        for value in list.split(',') {
            excluded.push(date_of(value)?);
        }
    }
    let summary = prop("SUMMARY")
        .next()
        .map_or("holiday".to_owned(), unescape);
    Ok(start
        .iter_days()
        .take_while(|d| *d < end)
        .filter(|d| !excluded.contains(d))
        .map(|d| (d, summary.clone()))
        .collect())
}

/// The values of the event's properties named `key`.
fn props<'e>(event: &'e Component<'_>, key: &'static str) -> impl Iterator<Item = &'e str> {
    event
        .properties
        .iter()
        .filter(move |p| p.name.as_str().eq_ignore_ascii_case(key))
        .map(|p| p.val.as_str())
}

/// The date of a `DATE` or `DATE-TIME` value (`20260603`, `20260603T000000Z`).
fn date_of(value: &str) -> Result<NaiveDate, String> {
    let digits = value.trim().get(..8).unwrap_or_default();
    NaiveDate::parse_from_str(digits, "%Y%m%d")
        .map_err(|_| format!("{:?} is not a date", crate::shown_within(value, 32)))
}

/// A `TEXT` value without its escapes.
fn unescape(text: &str) -> String {
    text.replace("\\n", " ")
        .replace("\\N", " ")
        .replace("\\,", ",")
        .replace("\\;", ";")
        .replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    const ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n\
        BEGIN:VEVENT\r\nUID:1\r\nDTSTART;VALUE=DATE:20261229\r\nDTEND;VALUE=DATE:20270102\r\n\
        SUMMARY:Year-end shutdown\\, office closed\r\nEXDATE;VALUE=DATE:20261231\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:2\r\nDTSTART:20260603T000000Z\r\nSUMMARY:Local \r\n elections\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:3\r\nDTSTART;VALUE=DATE:20260604\r\nSTATUS:CANCELLED\r\nEND:VEVENT\r\n\
        END:VCALENDAR\r\n";

    #[test]
    fn ical_events_exdates_folding_and_cancellations() {
        let calendar = Calendar::from_ical("acme", Weekend::SAT_SUN, ICS).unwrap();
        let days: Vec<_> = calendar
            .holidays()
            .map(|(d, n)| (d, n.to_owned()))
            .collect();
        let shutdown = "Year-end shutdown, office closed".to_owned();
        assert_eq!(
            days,
            vec![
                (day(2026, 6, 3), "Local elections".to_owned()),
                (day(2026, 12, 29), shutdown.clone()),
                (day(2026, 12, 30), shutdown.clone()),
                (day(2027, 1, 1), shutdown),
            ]
        );
        assert_eq!(calendar.version(), "iCalendar");
        assert!(calendar.covers(2090));
    }

    #[test]
    fn bad_ical_is_a_typed_error() {
        let recurring = ICS.replace("UID:2\r\n", "UID:2\r\nRRULE:FREQ=YEARLY\r\n");
        let long = ICS.replace("DTEND;VALUE=DATE:20270102", "DTEND;VALUE=DATE:20280102");
        let undated = ICS.replace("DTSTART:20260603T000000Z\r\n", "");
        let bad_date = ICS.replace("20260603T000000Z", "2026-06-03");
        for (text, wanted) in [
            (recurring.as_str(), "event 2: a recurring event"),
            (long.as_str(), "event 1: 2026-12-29 to 2028-01-02"),
            (undated.as_str(), "event 2: no DTSTART"),
            (bad_date.as_str(), "is not a date"),
            ("not a calendar at all", "iCalendar"),
        ] {
            let err = Calendar::from_ical("x", Weekend::NONE, text).unwrap_err();
            assert!(matches!(err, CalendarError::Import { .. }), "{err:?}");
            assert!(err.to_string().contains(wanted), "{err} / {wanted}");
        }
    }

    #[test]
    fn csv_rows_headers_comments_and_errors() {
        let text = "date,name\n# announced late\n2026-06-03, Local elections\n2026-10-09\n";
        let calendar = Calendar::from_csv("kr-extra", Weekend::NONE, text).unwrap();
        assert_eq!(calendar.holiday(day(2026, 6, 3)), Some("Local elections"));
        assert_eq!(calendar.holiday(day(2026, 10, 9)), Some("holiday"));
        assert_eq!(calendar.holidays().count(), 2);
        let err =
            Calendar::from_csv("x", Weekend::NONE, "2026-06-03,a\n03/06/2026,b\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot import the CSV calendar: line 2: \"03/06/2026\" is not a YYYY-MM-DD date"
        );
    }
}
