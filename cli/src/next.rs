//! `slotguard next`: the slots a cron expression yields, the cron equivalent of
//! `systemd-analyze calendar`.
//!
//! Two modes share one validation ([`request`]), so a request means the same thing and fails with the
//! same message in both:
//! - for a person ([`person`]): one expression from the arguments, a header and one line per slot;
//! - for a program ([`jsonl`]): one JSON request a line on stdin, one JSON answer a line on stdout.

use std::process::ExitCode;

use clap::Args;

mod calendar;
mod jsonl;
mod overrides;
mod person;
mod request;
mod shown;

use request::{DEFAULT_COUNT, DEFAULT_ZONE, MAX_COUNT};

const EXAMPLES: &str = "\
Examples:
  slotguard next '0 2 * * *' --tz Asia/Seoul
  slotguard next '30 2 * * *' --tz America/New_York --after 2026-03-07T12:00:00Z --dst shift
  slotguard next '0 2 25 * *' --tz Asia/Seoul --calendar KR --adjust preceding
  slotguard next '0 2 25 * *' --tz Asia/Seoul --calendar KR --holidays extra.csv --adjust preceding
  echo '{\"expr\": \"0 2 * * *\", \"tz\": \"Asia/Seoul\", \"count\": 3}' | slotguard next --jsonl

DST policies (what happens to a wall time the clock skips or repeats):
  vixie    cronie's rule (default): a fixed-time job whose time is skipped runs at the transition
           when the gap is under 3 h; a repeated time runs once. Other jobs skip the gap and run
           in both passes of a repeated hour.
  skip     a skipped time does not run; a repeated time runs once, at its first instant
  shift    a skipped time is read with the old offset (02:30 becomes 03:30 EDT); repeated: once
  instant  a skipped time does not run; a repeated time runs at both instants";

/// Arguments of `slotguard next`.
#[derive(Debug, Args)]
#[command(
    override_usage = "slotguard next <EXPR> [--tz ZONE] [--after RFC3339] [--count N] [--dst POLICY]\n       \
                      [--calendar NAME] [--holidays FILE] [--adjust CONVENTION] [--shift N]\n       \
                      slotguard next --jsonl < requests.jsonl",
    after_long_help = EXAMPLES
)]
pub(crate) struct NextArgs {
    /// The cron expression, quoted as one argument: '0 2 * * *', '*/15 9-17 * * MON-FRI', '@daily'.
    /// Five fields (min hour dom month dow) or six (seconds first).
    #[arg(value_name = "EXPR", required_unless_present = "jsonl", num_args = 1..)]
    expr: Vec<String>,

    /// The IANA zone the expression's wall-clock times are read in.
    #[arg(long, value_name = "ZONE", default_value = DEFAULT_ZONE)]
    tz: String,

    /// List the slots strictly after this RFC 3339 instant, such as 2026-03-08T00:00:00Z or
    /// 2026-03-08T09:00:00+09:00 [default: now].
    #[arg(long, value_name = "RFC3339")]
    after: Option<String>,

    /// How many slots to list.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_COUNT,
        allow_negative_numbers = true,
        help = format!("How many slots to list, 1 to {MAX_COUNT}")
    )]
    count: i64,

    /// The DST policy: vixie, skip, shift or instant (see --help).
    #[arg(long, value_name = "POLICY", default_value = "vixie")]
    dst: String,

    /// A business calendar: a builtin one (AU, CA, CN, DE, FR, GB, JP, KR, SG, US; Saturday and
    /// Sunday off, public holidays 2000-2050). The expression's dates are then nominal, moved by
    /// --adjust and --shift. Given a store (SLOTGUARD_DATABASE_URL, as the operations take it), the
    /// operators' holiday overrides of NAME there apply too (`slotguard holiday`).
    #[arg(long, value_name = "NAME")]
    calendar: Option<String>,

    /// Holidays from a file, added to --calendar (or to a calendar with Saturday and Sunday off):
    /// an iCalendar export (`.ics`: each VEVENT's dates, less its EXDATEs) or `date,name` rows
    /// (any other name, e.g. `.csv`).
    #[arg(long, value_name = "FILE")]
    holidays: Option<std::path::PathBuf>,

    /// What becomes of a nominal date that is not a business day: skip (default), following,
    /// preceding, modified-following, modified-preceding or nearest.
    #[arg(long, value_name = "CONVENTION")]
    adjust: Option<String>,

    /// Move each date by N business days after --adjust (back when negative).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    shift: Option<i64>,

    /// Read one JSON request a line from stdin, such as {"expr": "0 2 * * *", "tz": "Asia/Seoul"}, and
    /// answer each with one line, {"next": [...]} or {"error": "..."}, in order.
    #[arg(
        long,
        conflicts_with_all = ["expr", "tz", "after", "count", "dst", "calendar", "holidays", "adjust", "shift"]
    )]
    jsonl: bool,
}

/// Runs `slotguard next` in the mode its arguments ask for.
pub(crate) fn run(args: NextArgs, store: &crate::ops::Store) -> ExitCode {
    if args.jsonl {
        jsonl::run()
    } else {
        person::run(args, store)
    }
}
