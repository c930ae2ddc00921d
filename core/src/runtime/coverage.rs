//! Whether each job's business calendar has holiday data for the slots ahead: the
//! `job_calendar_last_year` gauge, and a warning at start-up when a slot within the coming year
//! falls in a year the data does not cover (there every weekday would count as a business day).

use chrono::{Datelike, Duration};

use super::Runtime;

/// How far ahead the start-up check looks.
const AHEAD_DAYS: i64 = 366;

/// Sets the gauge of every job with a calendar, and warns for those that run out within a year.
pub(crate) fn report(rt: &Runtime) {
    let now = rt.clock.now();
    for job in &rt.jobs {
        let Some(rule) = job.schedule.business() else {
            continue;
        };
        let calendar = rule.calendar();
        let Some((_, last)) = calendar.years() else {
            continue;
        };
        crate::metrics::calendar_last_year(&job.name, last);
        let ahead = (now + Duration::days(AHEAD_DAYS)).year();
        if let Some(year) = (now.year()..=ahead).find(|y| !calendar.covers(*y)) {
            tracing::warn!(
                event = "job_calendar_uncovered",
                job = %job.name,
                calendar = calendar.name(),
                version = calendar.version(),
                year,
                last_covered = last,
                "the job's calendar has no holiday data for a year its slots reach: every weekday then counts as a business day; update slotguard or extend the calendar"
            );
        }
    }
}
