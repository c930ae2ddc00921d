//! What a slot of a job with a business calendar was planned on, recorded with its run: the nominal
//! dates of the cron expression it stands for, the calendar and its data version. An operator's
//! override added later never changes it, so the history says why a slot is where it is.

use chrono::NaiveDate;
use slotguard_cron::{Schedule, Slot};

/// The calendar a slot was planned on ([`ClaimRequest::calendar`](super::ClaimRequest::calendar),
/// [`RunRecord::calendar`](super::RunRecord::calendar)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CalendarStamp {
    /// The expression's dates the slot stands for, ascending: its business date when no rule
    /// moved it, the holiday it was moved from when one did, several when they moved onto one day.
    pub nominal_dates: Vec<NaiveDate>,
    /// The calendar's name (`KR`, or a calendar built in code).
    pub calendar: String,
    /// The calendar's data version (`holidays 0.109`, empty for one built in code), followed by
    /// `+ override #N` when operators' overrides were in force, `N` the last of them.
    pub version: String,
}

impl CalendarStamp {
    /// The stamp of `slot` of `schedule`, on `schedule`'s calendar with the overrides up to
    /// `override_seq` in force; `None` when the schedule has no calendar.
    pub fn of(schedule: &Schedule, slot: &Slot, override_seq: Option<i64>) -> Option<Self> {
        let calendar = schedule.business()?.calendar();
        let version = match override_seq {
            Some(seq) if calendar.version().is_empty() => format!("override #{seq}"),
            Some(seq) => format!("{} + override #{seq}", calendar.version()),
            None => calendar.version().to_owned(),
        };
        let mut nominal_dates = schedule.nominal_dates(slot);
        if nominal_dates.is_empty() {
            // A slot the calendar removes (`skip`) stands for its own date.
            nominal_dates.push(slot.business_date());
        }
        Some(CalendarStamp {
            nominal_dates,
            calendar: calendar.name().to_owned(),
            version,
        })
    }

    /// The nominal dates as a store keeps them: `YYYY-MM-DD`, comma-separated.
    pub fn nominal_text(&self) -> String {
        let dates: Vec<String> = self.nominal_dates.iter().map(ToString::to_string).collect();
        dates.join(",")
    }

    /// The stamp a store's three columns hold; `None` when the run has none (no calendar, or a row
    /// written before runs recorded it). A date that does not parse is left out.
    pub fn from_columns(
        nominal: Option<&str>,
        calendar: Option<String>,
        version: Option<String>,
    ) -> Option<Self> {
        let calendar = calendar?;
        let nominal_dates = nominal
            .unwrap_or_default()
            .split(',')
            .filter_map(|d| d.parse().ok())
            .collect();
        Some(CalendarStamp {
            nominal_dates,
            calendar,
            version: version.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use slotguard_cron::{Adjust, BusinessRule, Calendar};

    use super::*;

    fn date(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn a_payday_moved_by_chuseok_records_the_25th() {
        let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Preceding);
        let payday = Schedule::parse("0 2 25 * *", "Asia/Seoul")
            .unwrap()
            .with_calendar(rule);
        let slot = payday
            .next_after(Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).unwrap())
            .unwrap();
        assert_eq!(slot.business_date(), date("2026-09-23"));
        let stamp = CalendarStamp::of(&payday, &slot, None).unwrap();
        assert_eq!(stamp.nominal_dates, vec![date("2026-09-25")]);
        assert_eq!(stamp.calendar, "KR");
        assert!(stamp.version.starts_with("holidays "), "{}", stamp.version);
        let with = CalendarStamp::of(&payday, &slot, Some(17)).unwrap();
        assert_eq!(with.version, format!("{} + override #17", stamp.version));
        let back = CalendarStamp::from_columns(
            Some(&stamp.nominal_text()),
            Some(stamp.calendar.clone()),
            Some(stamp.version.clone()),
        );
        assert_eq!(back, Some(stamp));
    }

    #[test]
    fn no_calendar_no_stamp() {
        let daily = Schedule::parse("0 2 * * *", "UTC").unwrap();
        let slot = daily
            .next_after(Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).unwrap())
            .unwrap();
        assert_eq!(CalendarStamp::of(&daily, &slot, None), None);
        assert_eq!(
            CalendarStamp::from_columns(Some("2026-09-01"), None, None),
            None
        );
    }

    #[test]
    fn two_dates_onto_one_day_are_both_kept() {
        let stamp = CalendarStamp {
            nominal_dates: vec![date("2026-09-24"), date("2026-09-25")],
            calendar: "KR".into(),
            version: String::new(),
        };
        assert_eq!(stamp.nominal_text(), "2026-09-24,2026-09-25");
        let back =
            CalendarStamp::from_columns(Some(&stamp.nominal_text()), Some("KR".into()), None);
        assert_eq!(back, Some(stamp));
    }
}
