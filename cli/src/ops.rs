//! The operations on a cluster's store: `jobs`, `runs`, `run`, `missed`, `retry`, `cancel`,
//! `trigger`, `backfill`, `pause`, `resume`, `audit`, `replicas`, the stored schedules (`schedule
//! add|list|show|set|remove|preview`), `skip`, `unskip` and holiday overrides (`holiday
//! add|remove|list`). Each is one call of the admin API
//! ([`slotguard_admin::Admin`]) on the store the replicas share, printed as a table (or, for the
//! listings, as JSON with `--json`). Every change to a job or a run is a
//! [`slotguard_admin::Command`] handed to `Admin::execute`, as the HTTP router's and the
//! dashboard's changes are; a stored schedule and a skip are changed by the admin API's own
//! methods (`Admin::add_schedule`, `Admin::skip`, `Admin::add_holiday`, ...), as the HTTP router
//! changes them.
//!
//! Every argument is checked before the store is opened (`Plan::new`), so bad input is reported as
//! bad input (exit 2) even when the store is unreachable. Exit codes, for scripts: 0 done; 2 bad input
//! (usage, a malformed date, a reason too long, a range too large, no store at the place named); 3
//! unknown job or slot; 4 refused by the run's status (retry of a running run) or by the job's pause
//! state (a second pause, the resume of an active job); 1 the store could not be reached, no job's
//! missed slots could be counted, or another failure; with `trigger --wait`, 5 the run ended without success (failed,
//! dead, skipped, abandoned) and 6 it had not finished when `--timeout` passed; 7 a change to a
//! stored schedule was read at an older version than the latest. Errors are one line on stderr,
//! prefixed `error:`.

use std::io::Write as _;
use std::process::ExitCode;

use crate::exit;

mod args;
mod execute;
mod failure;
mod plan;
mod show;
mod store;
#[cfg(test)]
mod tests;

pub(crate) use args::Op;
pub(crate) use store::Store;

use failure::failure;
use plan::Plan;

/// Unknown job or slot.
const NOT_FOUND: u8 = 3;
/// Refused by the run's status, or by the job's pause state (a second pause, a needless resume).
const REFUSED: u8 = 4;
/// A change to a stored schedule read at an older version than the latest: read it again.
const STALE_VERSION: u8 = 7;
/// `trigger --wait`: the run ended without success (failed, dead, skipped, abandoned).
const UNSUCCESSFUL: u8 = 5;
/// `trigger --wait`: the run had not finished when `--timeout` passed.
const STILL_GOING: u8 = 6;

const EXAMPLES: &str = "\
Examples:
  export SLOTGUARD_DATABASE_URL=postgres://ops@db.internal/app   # or sqlite:/var/lib/app/slotguard.db
  slotguard jobs
  slotguard runs daily-settlement --status failed
  slotguard run daily-settlement 2026-03-08T17:00:00Z
  slotguard retry daily-settlement 2026-03-08T17:00:00Z --reason 'bank API was down'
  slotguard retry daily-settlement --failed --from 2026-03-01T00:00:00Z --to 2026-03-08T00:00:00Z --reason 'bank API was down'
  slotguard trigger daily-settlement --reason 'settle again' --wait --timeout 300
  slotguard missed daily-settlement --from 2026-03-01T00:00:00Z --json
  slotguard missed --from 2026-03-01T00:00:00Z                    # every job

Exit codes: 0 done, 2 bad input, 3 unknown job or slot, 4 refused by the run's status or the
job's pause state, 1 store unreachable, no job's missed slots countable, or another failure;
trigger --wait: 0 succeeded, 5 ended without success, 6 not finished within --timeout.";

const SCHEDULE_EXAMPLES: &str = "\
Examples:
  export SLOTGUARD_DATABASE_URL=postgres://ops@db.internal/app   # or sqlite:/var/lib/app/slotguard.db
  slotguard schedule preview --job daily-settlement --cron '0 9 * * *' --tz America/New_York --count 3
  slotguard schedule add acme-report --job daily-settlement --cron '0 9 * * *' --tz America/New_York \\
      --partition acme --remaining-runs 3 --reason 'onboarding acme'
  slotguard schedule list --job daily-settlement
  slotguard schedule show acme-report
  slotguard schedule set acme-report --version 1 --cron '30 9 * * *' --reason later
  slotguard schedule set acme-report --version 2 --paused --note 'month-end freeze' --reason freeze
  slotguard schedule remove acme-report --version 3 --reason 'acme left'
  slotguard skip daily-settlement 2026-12-24T17:00:00Z --reason holiday
  slotguard unskip daily-settlement 2026-12-24T17:00:00Z --reason 'not a holiday'

Exit codes: 0 done, 2 bad input (the message names the argument), 3 unknown job or schedule (or,
for unskip, no skip to undo), 4 the schedule exists already or the slot has a row already, 7 the
schedule changed since --version was read (nothing was changed), 1 store unreachable or another
failure.";

const HOLIDAY_EXAMPLES: &str = "\
Examples:
  export SLOTGUARD_DATABASE_URL=postgres://ops@db.internal/app   # or sqlite:/var/lib/app/slotguard.db
  slotguard holiday add KR 2026-10-02 --name '임시공휴일' --reason 'temporary holiday decree'
  slotguard holiday remove KR 2026-10-02 --reason 'decree withdrawn'
  slotguard holiday list --calendar KR

Exit codes: 0 done, 2 bad input (an unknown calendar, a bad or absurd date, a long reason; the
message names the argument), 1 store unreachable or another failure.";

/// Runs one operation and prints its result.
pub(crate) fn run(store: &Store, op: Op) -> ExitCode {
    let result = Plan::new(op).and_then(|plan| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failure(format!("starting the async runtime: {e}")))?;
        runtime.block_on(async {
            let admin = store.open().await?;
            plan.execute(&admin).await
        })
    });
    match result {
        Ok(answer) => match std::io::stdout().lock().write_all(answer.text.as_bytes()) {
            Ok(()) => ExitCode::from(answer.code),
            Err(e) => exit::write_error(&e),
        },
        Err(failure) => {
            exit::report(show::one_line(&failure.message));
            ExitCode::from(failure.code)
        }
    }
}
