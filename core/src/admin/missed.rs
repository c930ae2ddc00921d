//! Missed slots: the slots of a job's schedule in a range that have no row at all (nothing ran and
//! nothing recorded why), for one job or for every job at once.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard_cron::{DstPolicy, Schedule};

use super::{Admin, AdminError, MAX_SCAN_SLOTS, rfc3339, shown};
use crate::store::{JobRecord, StoreError};

/// A slot of the schedule with no row: nothing ran and nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissedSlot {
    /// The slot's instant.
    pub scheduled_at: DateTime<Utc>,
    /// Its wall time in the job's zone.
    pub wall: NaiveDateTime,
    /// Its business date.
    pub business_date: NaiveDate,
}

/// One job's part of [`Admin::missed_everywhere`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobMissed {
    /// The job.
    pub job: String,
    /// Its missed slots, oldest first; or why they could not be counted (a stored schedule this
    /// version cannot read, a range holding more than [`MAX_SCAN_SLOTS`] of its slots).
    pub missed: Result<Vec<MissedSlot>, AdminError>,
}

impl Admin {
    /// Slots of the job's schedule in `[from, to)` (and before now) that have no row at all:
    /// nothing ran and nothing recorded why.
    pub async fn missed(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<MissedSlot>, AdminError> {
        Ok(self.scan(job, from, to).await?.1)
    }

    /// [`missed`](Self::missed) for every registered job, in the order the store lists them: one
    /// read of the jobs and one of their slot rows (one statement on PostgreSQL, whatever the
    /// number of jobs), which runs on its own task while the schedules are walked. A job whose slots cannot be counted gets its own error and the others are
    /// still answered; a range that ends before it starts, or a store that cannot be asked, is an
    /// error for all.
    pub async fn missed_everywhere(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<JobMissed>, AdminError> {
        let to = self.settled_end(from, to)?;
        let records = self.store.jobs().await?;
        // The store reads every job's rows while the schedules are walked here.
        let names: Vec<String> = records.iter().map(|r| r.definition.name.clone()).collect();
        let asked = names.len();
        let store = Arc::clone(&self.store);
        let rows = tokio::spawn(async move { store.slot_times_of(&names, from, to).await });
        let expected: Vec<Result<Vec<MissedSlot>, AdminError>> = records
            .iter()
            .map(|record| expected_of(record, from, to))
            .collect();
        let present = rows.await.map_err(|e| {
            StoreError::Rejected(format!("the read of the slot rows did not finish: {e}"))
        })??;
        if present.len() != asked {
            return Err(StoreError::Rejected(format!(
                "slot_times_of answered {} lists for {asked} jobs",
                present.len()
            ))
            .into());
        }
        Ok(records
            .into_iter()
            .zip(expected)
            .zip(present)
            .map(|((record, expected), present)| JobMissed {
                job: record.definition.name,
                missed: expected.map(|slots| missing(slots, &present)),
            })
            .collect())
    }

    /// The number of schedule slots in `[from, to)` (and before now), and those of them with no row.
    pub(super) async fn scan(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(usize, Vec<MissedSlot>), AdminError> {
        let record = self.job(job).await?;
        let to = self.settled_end(from, to)?;
        let expected = expected_of(&record, from, to)?;
        let present = self.store.slot_times(job, from, to).await?;
        let total = expected.len();
        Ok((total, missing(expected, &present)))
    }

    /// `to`, or now when that is earlier: the end of a range whose slots can be missed. Refused when
    /// the range is empty.
    fn settled_end(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, AdminError> {
        let to = to.min(self.clock.now());
        if from >= to {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "`from` ({}) must be before `to` and before now ({})",
                    rfc3339(&from),
                    rfc3339(&to)
                ),
            });
        }
        Ok(to)
    }
}

/// The schedule a stored definition names, if this version can read it.
pub(super) fn schedule_of(record: &JobRecord) -> Option<Schedule> {
    let def = &record.definition;
    let dst: DstPolicy = def.dst.parse().ok()?;
    Some(Schedule::parse(&def.cron, &def.zone).ok()?.with_dst(dst))
}

/// The slots of a stored job's schedule in `[from, to)`.
fn expected_of(
    record: &JobRecord,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MissedSlot>, AdminError> {
    let schedule = schedule_of(record).ok_or_else(|| AdminError::Invalid {
        field: "job",
        problem: format!(
            "the stored schedule of `{}` cannot be read by this version",
            shown(&record.definition.name)
        ),
    })?;
    expected_slots(&schedule, from, to)
}

/// Those of `expected` with no instant in `present` (ascending).
fn missing(expected: Vec<MissedSlot>, present: &[DateTime<Utc>]) -> Vec<MissedSlot> {
    expected
        .into_iter()
        .filter(|s| present.binary_search(&s.scheduled_at).is_err())
        .collect()
}

/// The schedule's slots in `[from, to)`, refusing a range of more than [`MAX_SCAN_SLOTS`].
fn expected_slots(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MissedSlot>, AdminError> {
    let mut out = Vec::new();
    let start = from - chrono::Duration::seconds(1);
    for slot in schedule.slots_after(start) {
        if slot.scheduled_at >= to {
            break;
        }
        if slot.scheduled_at < from {
            continue;
        }
        if out.len() == MAX_SCAN_SLOTS {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "it holds more than {MAX_SCAN_SLOTS} slots of the schedule; narrow it"
                ),
            });
        }
        out.push(MissedSlot {
            scheduled_at: slot.scheduled_at,
            wall: slot.wall,
            business_date: slot.business_date(),
        });
    }
    Ok(out)
}
