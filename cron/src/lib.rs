//! The cron dialect and the DST-aware slot engine of [slotguard](https://docs.rs/slotguard).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use slotguard_cron::{DstPolicy, Schedule};
//!
//! // 02:30 does not exist in New York on 2026-03-08; cronie's rule fires at the transition.
//! let schedule = Schedule::parse("30 2 * * *", "America/New_York")?.with_dst(DstPolicy::Vixie);
//! let slot = schedule.next_after(Utc.with_ymd_and_hms(2026, 3, 8, 0, 0, 0).unwrap()).unwrap();
//! assert_eq!(slot.local().to_rfc3339(), "2026-03-08T03:00:00-04:00");
//! # Ok::<(), slotguard_cron::ScheduleError>(())
//! ```
//!
//! This crate is re-exported by `slotguard`; the `#[scheduled]` macro uses it to check expressions and
//! zones at compile time with exactly the rules the runtime applies.

mod calendar;
mod dst;
mod error;
mod expr;
mod names;
mod schedule;
mod zone;

pub use calendar::{
    Adjust, BUILTIN, BusinessRule, Calendar, CalendarError, MAX_SHIFT, UnknownAdjust, Weekend,
};
pub use chrono_tz::Tz;
pub use dst::{DstPolicy, UnknownDstPolicy};
pub use error::{Field, FieldError, ParseError, UnknownZone, shown_within};
pub use expr::CronExpr;
pub use names::{MAX_NAME_CHARS, NameProblem, check_job_name, check_partition};
pub use schedule::{REMOVED_HORIZON, Schedule, ScheduleError, Slot, Slots};
pub use zone::parse_zone;
