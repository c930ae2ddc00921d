//! The arguments of `holiday`: operators' overrides of a business calendar.

use clap::Subcommand;

use super::Why;

/// `holiday add|remove|list`.
#[derive(Debug, Subcommand)]
pub(crate) enum HolidayOp {
    /// Make DATE a holiday on CALENDAR (a builtin one, or a registered job's): running schedulers
    /// follow it half a second after it is stored; a slot already claimed stays where it was.
    Add {
        /// The calendar (`KR`, or the name of a registered job's calendar).
        calendar: String,
        /// The date, YYYY-MM-DD.
        date: String,
        /// The holiday's name, as a `skip` calendar's removed slot records it.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        why: Why,
    },
    /// Make DATE no holiday on CALENDAR (a weekend day stays one).
    Remove {
        /// The calendar.
        calendar: String,
        /// The date, YYYY-MM-DD.
        date: String,
        #[command(flatten)]
        why: Why,
    },
    /// List the overrides in force (the latest of each calendar and date).
    List {
        /// Only this calendar's.
        #[arg(long)]
        calendar: Option<String>,
        /// One JSON object per override and line, as `GET /calendar-overrides` lists them.
        #[arg(long)]
        json: bool,
    },
}
