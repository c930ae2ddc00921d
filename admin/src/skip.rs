//! Skipping one upcoming slot: recorded `skipped` with the operator's reason before any replica
//! claims it, and undone until then.

use crate::planned::stored_timeline;
use chrono::{DateTime, Utc};
use slotguard::store::{ClaimRequest, JobRecord, RunRecord, SlotKey, Trigger};
use slotguard::{Overlap, Slot};

use crate::checks::partition_key;
use crate::missed::schedule_of;
use crate::{Admin, AdminError, ChangeRequest, rfc3339, shown};

impl Admin {
    /// Skips the upcoming slot `slot` of `job` (on `partition`; empty for the job's own): no
    /// replica runs it, and it is recorded `skipped` with the reason. The slot must be one of the
    /// job's schedules (its code's, or a stored one of that partition) names, and still ahead.
    ///
    /// # Errors
    /// [`AdminError::Refused`] when the slot has a row already (claimed, run, or skipped);
    /// [`AdminError::Invalid`] for a slot that is past or not a slot of the job's schedules, the
    /// partition, actor or reason; [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn skip(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<RunRecord, AdminError> {
        by.validate()?;
        let record = self.job(job).await?;
        partition_key(partition)?;
        if slot <= self.clock.now() {
            return Err(not_ahead(slot));
        }
        let (named, fingerprint) = self.slot_of(&record, slot, partition).await?;
        let request = ClaimRequest {
            key: SlotKey {
                job: job.to_owned(),
                scheduled_at: slot,
                partition: partition.to_owned(),
            },
            trigger: Trigger::Schedule,
            zone: named.zone.name().to_owned(),
            wall: named.wall,
            business_date: named.business_date(),
            fingerprint,
            stale_after: self.stale_after,
            overlap: Overlap::Skip,
            calendar: None,
            ahead: false,
            defer_if_contended: false,
        };
        let written = self
            .store
            .skip_slot(&request, &by.actor, &by.reason)
            .await?;
        let run = self.find_run(job, slot, partition).await?;
        if written {
            return Ok(run);
        }
        Err(AdminError::Refused {
            action: "skip",
            job: shown(job),
            slot,
            status: run.status,
            hint: "the slot has a row already: it was claimed, ran or was skipped",
        })
    }

    /// Undoes [`Admin::skip`] of `slot`, if no replica has claimed it since and it is still ahead:
    /// the slot runs as its schedule says.
    ///
    /// # Errors
    /// [`AdminError::UnknownRun`] when the slot has no operator's skip to undo (never skipped, or
    /// a replica has already claimed it); [`AdminError::UnknownJob`]; [`AdminError::Invalid`] for
    /// a slot whose time has passed, the partition, actor or reason; [`AdminError::Store`].
    pub async fn unskip(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<(), AdminError> {
        by.validate()?;
        self.job(job).await?;
        partition_key(partition)?;
        if slot <= self.clock.now() {
            // Its time has passed: without the skip it would be a slot nothing ran nor recorded.
            return Err(not_ahead(slot));
        }
        let key = SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        };
        if self.store.unskip_slot(&key, &by.actor, &by.reason).await? {
            return Ok(());
        }
        Err(AdminError::UnknownRun {
            job: shown(job),
            slot,
            partition: partition.to_owned(),
        })
    }

    /// The slot `slot` of the job's code schedule (empty partition) or of one of its stored
    /// schedules of `partition`, with the fingerprint of the schedule that names it.
    async fn slot_of(
        &self,
        record: &JobRecord,
        slot: DateTime<Utc>,
        partition: &str,
    ) -> Result<(Slot, u64), AdminError> {
        let before = slot - chrono::TimeDelta::nanoseconds(1);
        if partition.is_empty()
            && let Some(schedule) = schedule_of(record)
            && let Some(planned) = self.planned(record).await?
            && let Some(named) = planned
                .next_after(before)
                .filter(|s| s.scheduled_at == slot)
        {
            // As the replicas record it: the code schedule's fingerprint.
            return Ok((named, schedule.fingerprint()));
        }
        let overrides = self.overrides_of(std::slice::from_ref(record)).await?;
        let job = &record.definition.name;
        let mut after = None;
        loop {
            let page = self
                .store
                .schedules(Some(job), after.as_deref(), 500)
                .await?;
            for latest in &page {
                if latest
                    .spec
                    .as_ref()
                    .is_none_or(|s| s.partition != partition)
                {
                    continue;
                }
                // The latest version decides a slot at or after its effect; only an earlier slot
                // needs the versions before it.
                let history = if latest.effective_at <= slot {
                    vec![latest.clone()]
                } else {
                    self.store.schedule_history(&latest.id).await?
                };
                let timeline = stored_timeline(record, &history, &overrides);
                if let Some((named, version)) = timeline.next_after(before)
                    && named.scheduled_at == slot
                {
                    let fingerprint = timeline.schedule(version).map_or(0, |s| s.fingerprint());
                    return Ok((named, fingerprint));
                }
            }
            if page.len() < 500 {
                return Err(not_a_slot(job, slot, partition));
            }
            after = page.last().map(|v| v.id.clone());
        }
    }
}

fn not_ahead(slot: DateTime<Utc>) -> AdminError {
    AdminError::Invalid {
        field: "scheduleSlot",
        problem: format!(
            "{} is not ahead: only an upcoming slot can be skipped or unskipped",
            rfc3339(&slot)
        ),
    }
}

fn not_a_slot(job: &str, slot: DateTime<Utc>, partition: &str) -> AdminError {
    AdminError::Invalid {
        field: "scheduleSlot",
        problem: format!(
            "{} is not a slot of job `{}`'s schedules{}",
            rfc3339(&slot),
            shown(job),
            if partition.is_empty() {
                String::new()
            } else {
                format!(" for partition `{}`", shown(partition))
            }
        ),
    }
}
