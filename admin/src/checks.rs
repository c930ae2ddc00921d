//! The checks every change and read makes before the store is asked: names, partitions, ranges.

use chrono::{DateTime, Utc};
use slotguard::store::JobRecord;
use slotguard::{check_job_name, check_partition};

use crate::missed::schedule_of;
use crate::{AdminError, rfc3339, shown};

/// The first slot of the job's schedule at or after `at`, as a message names it.
pub(crate) fn first_slot_from(record: &JobRecord, at: DateTime<Utc>) -> String {
    let first = schedule_of(record).and_then(|s| {
        s.slots_after(at - chrono::Duration::seconds(1))
            .find(|slot| slot.scheduled_at >= at)
    });
    match first {
        Some(slot) => format!(
            "the first slot that would be accepted is {}",
            rfc3339(&slot.scheduled_at)
        ),
        None => "the schedule has no slot after it".to_owned(),
    }
}

/// Refuses a range that names an instant before 1970: a typo (year 0), never history to run.
pub(crate) fn since_epoch(
    record: &JobRecord,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), AdminError> {
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    let (field, at) = match (from < epoch, to < epoch) {
        (true, _) => ("from", from),
        (false, true) => ("to", to),
        (false, false) => return Ok(()),
    };
    Err(AdminError::Invalid {
        field,
        problem: format!(
            "{} is before 1970-01-01T00:00:00Z, and instants before 1970 are refused; {}",
            rfc3339(&at),
            first_slot_from(record, epoch)
        ),
    })
}

/// Refuses a backfill that reaches before the job was first registered, unless asked for.
pub(crate) fn since_first_seen(record: &JobRecord, from: DateTime<Utc>) -> Result<(), AdminError> {
    if from >= record.registered_at {
        return Ok(());
    }
    Err(AdminError::Invalid {
        field: "from",
        problem: format!(
            "{} is before `{}` was first registered ({}); {}; to backfill history from before the \
             job existed, say so (beforeFirstSeen: true, --before-first-seen)",
            rfc3339(&from),
            shown(&record.definition.name),
            rfc3339(&record.registered_at),
            first_slot_from(record, record.registered_at)
        ),
    })
}

/// Checks that a range `[from, to)` is not empty.
pub(crate) fn ordered(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), AdminError> {
    if from < to {
        return Ok(());
    }
    Err(AdminError::Invalid {
        field: "range",
        problem: format!(
            "`from` ({}) must be before `to` ({})",
            rfc3339(&from),
            rfc3339(&to)
        ),
    })
}

/// A job name by the rule every job is registered under ([`check_job_name`]): a name that breaks it
/// names no job, on every store, and is not sent to one (PostgreSQL refuses a NUL in a query).
pub(crate) fn named(job: &str) -> Result<(), AdminError> {
    check_job_name(job).map_err(|_| AdminError::UnknownJob { job: shown(job) })
}

/// A partition key by the rule of [`check_partition`], or the empty key of unpartitioned runs.
pub(crate) fn partition_key(partition: &str) -> Result<(), AdminError> {
    if partition.is_empty() {
        return Ok(());
    }
    check_partition(partition).map_err(|problem| AdminError::Invalid {
        field: "partition",
        problem: format!("`{}`: {problem}", shown(partition)),
    })
}
