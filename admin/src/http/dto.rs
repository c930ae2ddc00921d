//! The JSON answers of the router: one DTO per shape, camelCase keys, instants in RFC 3339.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::Serialize;
use slotguard::store::{
    AttemptRecord, AuditRecord, CalendarStamp, JobRecord, ReplicaRecord, RunRecord, SlotKey,
};

use super::error::ApiError;
use crate::{BackfillReport, JobMissed, JobStatus, MissedSlot, RangeRetry, Triggered};

#[derive(Serialize)]
pub(super) struct JobsDto {
    pub(super) jobs: Vec<JobStatusDto>,
}

/// A job as `GET /jobs` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JobStatusDto {
    #[serde(flatten)]
    pub(super) job: JobDto,
    pub(super) next_slots: Vec<DateTime<Utc>>,
    pub(super) last_run: Option<RunSummaryDto>,
    pub(super) active: bool,
    pub(super) replicas: Vec<String>,
}

impl From<&JobStatus> for JobStatusDto {
    fn from(status: &JobStatus) -> Self {
        JobStatusDto {
            job: JobDto::from(&status.record),
            next_slots: status.next_slots.clone(),
            last_run: status.last_run.as_ref().map(RunSummaryDto::from),
            active: status.active(),
            replicas: status.replicas.clone(),
        }
    }
}

/// A job's stored definition and pause state.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JobDto {
    pub(super) name: String,
    pub(super) cron: String,
    pub(super) zone: String,
    pub(super) dst: String,
    pub(super) guard: String,
    pub(super) fingerprint: String,
    pub(super) calendar: Option<CalendarDto>,
    pub(super) paused: bool,
    pub(super) paused_by: Option<String>,
    pub(super) paused_reason: Option<String>,
    pub(super) paused_at: Option<DateTime<Utc>>,
    pub(super) registered_at: DateTime<Utc>,
    pub(super) seen_at: DateTime<Utc>,
}

/// A job's business calendar, convention and shift.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CalendarDto {
    pub(super) name: String,
    pub(super) version: String,
    pub(super) adjust: String,
    pub(super) shift: i32,
}

impl From<&slotguard::CalendarDefinition> for CalendarDto {
    fn from(c: &slotguard::CalendarDefinition) -> Self {
        CalendarDto {
            name: c.name.clone(),
            version: c.version.clone(),
            adjust: c.adjust.clone(),
            shift: c.shift,
        }
    }
}

impl From<&JobRecord> for JobDto {
    fn from(record: &JobRecord) -> Self {
        let def = &record.definition;
        JobDto {
            name: def.name.clone(),
            cron: def.cron.clone(),
            zone: def.zone.clone(),
            dst: def.dst.clone(),
            guard: def.guard.clone(),
            fingerprint: fingerprint(def.fingerprint),
            calendar: def.calendar.as_ref().map(CalendarDto::from),
            paused: record.paused,
            paused_by: record.paused_by.clone(),
            paused_reason: record.paused_reason.clone(),
            paused_at: record.paused_at,
            registered_at: record.registered_at,
            seen_at: record.seen_at,
        }
    }
}

/// The newest run of a job, in brief.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunSummaryDto {
    pub(super) id: i64,
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) partition: String,
    pub(super) status: &'static str,
    pub(super) trigger: &'static str,
    pub(super) attempt: u32,
    pub(super) started_at: Option<DateTime<Utc>>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) error_message: Option<String>,
}

impl From<&RunRecord> for RunSummaryDto {
    fn from(run: &RunRecord) -> Self {
        RunSummaryDto {
            id: run.id,
            scheduled_at: run.key.scheduled_at,
            partition: run.key.partition.clone(),
            status: run.status.as_str(),
            trigger: run.trigger.as_str(),
            attempt: run.attempt,
            started_at: run.started_at,
            finished_at: run.finished_at,
            error_message: run.error_message.clone(),
        }
    }
}

#[derive(Serialize)]
pub(super) struct RunsDto {
    pub(super) runs: Vec<RunDto>,
}

/// A run with its attempts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunDto {
    pub(super) id: i64,
    pub(super) job: String,
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) partition: String,
    pub(super) status: &'static str,
    pub(super) trigger: &'static str,
    pub(super) attempt: u32,
    pub(super) owner: Option<String>,
    pub(super) token: i64,
    pub(super) heartbeat_at: Option<DateTime<Utc>>,
    pub(super) stale_after_ms: u64,
    pub(super) next_attempt_at: Option<DateTime<Utc>>,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
    pub(super) started_at: Option<DateTime<Utc>>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) error_class: Option<String>,
    pub(super) error_message: Option<String>,
    pub(super) zone: String,
    pub(super) wall_time: NaiveDateTime,
    pub(super) business_date: NaiveDate,
    pub(super) fingerprint: String,
    /// The calendar the slot was planned on (`null` without one).
    pub(super) calendar: Option<StampDto>,
    pub(super) attempts: Vec<AttemptDto>,
}

/// The calendar a run's slot was planned on: the nominal dates it stands for, the calendar and its
/// data version.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StampDto {
    pub(super) nominal_dates: Vec<NaiveDate>,
    pub(super) name: String,
    pub(super) version: String,
}

impl From<&CalendarStamp> for StampDto {
    fn from(stamp: &CalendarStamp) -> Self {
        StampDto {
            nominal_dates: stamp.nominal_dates.clone(),
            name: stamp.calendar.clone(),
            version: stamp.version.clone(),
        }
    }
}

impl From<&RunRecord> for RunDto {
    fn from(run: &RunRecord) -> Self {
        RunDto {
            id: run.id,
            job: run.key.job.clone(),
            scheduled_at: run.key.scheduled_at,
            partition: run.key.partition.clone(),
            status: run.status.as_str(),
            trigger: run.trigger.as_str(),
            attempt: run.attempt,
            owner: run.owner.clone(),
            token: run.token,
            heartbeat_at: run.heartbeat_at,
            stale_after_ms: u64::try_from(run.stale_after.as_millis()).unwrap_or(u64::MAX),
            next_attempt_at: run.next_attempt_at,
            created_at: run.created_at,
            updated_at: run.updated_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
            zone: run.zone.clone(),
            wall_time: run.wall_time,
            business_date: run.business_date,
            fingerprint: fingerprint(run.fingerprint),
            calendar: run.calendar.as_ref().map(StampDto::from),
            attempts: run.attempts.iter().map(AttemptDto::from).collect(),
        }
    }
}

/// One attempt of a run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AttemptDto {
    pub(super) attempt: u32,
    pub(super) owner: String,
    pub(super) token: i64,
    pub(super) status: &'static str,
    pub(super) started_at: DateTime<Utc>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) message: Option<String>,
}

impl From<&AttemptRecord> for AttemptDto {
    fn from(attempt: &AttemptRecord) -> Self {
        AttemptDto {
            attempt: attempt.attempt,
            owner: attempt.owner.clone(),
            token: attempt.token,
            status: attempt.status.as_str(),
            started_at: attempt.started_at,
            finished_at: attempt.finished_at,
            message: attempt.message.clone(),
        }
    }
}

#[derive(Serialize)]
pub(super) struct MissedDto {
    pub(super) missed: Vec<MissedSlotDto>,
    /// The `from` of the next page; `null` when the range is done.
    pub(super) next: Option<DateTime<Utc>>,
}

#[derive(Serialize)]
pub(super) struct MissedEverywhereDto {
    pub(super) jobs: Vec<JobMissedDto>,
    /// The `cursor` of the next page; `null` when the range is done.
    pub(super) next: Option<String>,
}

/// One job's missed slots, or why they were not counted (the error answer's fields).
#[derive(Serialize)]
pub(super) struct JobMissedDto {
    pub(super) job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) missed: Option<Vec<MissedSlotDto>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) field: Option<&'static str>,
}

impl From<JobMissed> for JobMissedDto {
    fn from(part: JobMissed) -> Self {
        let (missed, error) = match part.missed {
            Ok(slots) => (Some(slots.iter().map(MissedSlotDto::from).collect()), None),
            Err(e) => (None, Some(ApiError::from(e))),
        };
        JobMissedDto {
            job: part.job,
            missed,
            error: error.as_ref().map(|e| e.kind),
            field: error.as_ref().and_then(|e| e.field),
            message: error.map(|e| e.message),
        }
    }
}

/// A slot of the schedule with no row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MissedSlotDto {
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) wall_time: NaiveDateTime,
    pub(super) business_date: NaiveDate,
}

impl From<&MissedSlot> for MissedSlotDto {
    fn from(slot: &MissedSlot) -> Self {
        MissedSlotDto {
            scheduled_at: slot.scheduled_at,
            wall_time: slot.wall,
            business_date: slot.business_date,
        }
    }
}

/// A retried run, with what happens to it next.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RetriedDto {
    #[serde(flatten)]
    pub(super) run: RunDto,
    pub(super) job_paused: bool,
    pub(super) message: &'static str,
}

/// A manual run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TriggeredDto {
    pub(super) run_id: i64,
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) paused: bool,
    /// The live replicas running the job when the run was created.
    pub(super) replicas: Vec<String>,
    pub(super) message: String,
}

impl From<&Triggered> for TriggeredDto {
    fn from(triggered: &Triggered) -> Self {
        TriggeredDto {
            run_id: triggered.run_id,
            scheduled_at: triggered.scheduled_at,
            paused: triggered.paused,
            replicas: triggered.replicas.clone(),
            message: triggered.outlook(),
        }
    }
}

/// What a backfill created, or would create.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BackfillDto {
    pub(super) dry_run: bool,
    pub(super) slots: Vec<MissedSlotDto>,
    pub(super) created: usize,
    pub(super) existing: usize,
    pub(super) last_due: Option<DateTime<Utc>>,
}

impl From<&BackfillReport> for BackfillDto {
    fn from(report: &BackfillReport) -> Self {
        BackfillDto {
            dry_run: report.dry_run,
            slots: report.slots.iter().map(MissedSlotDto::from).collect(),
            created: report.created,
            existing: report.existing,
            last_due: report.last_due,
        }
    }
}

/// What a retry of every failed run in a range did.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RangeRetryDto {
    pub(super) retried: Vec<SlotKeyDto>,
    pub(super) changed: Vec<SlotKeyDto>,
}

/// One slot of a job.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SlotKeyDto {
    pub(super) scheduled_at: DateTime<Utc>,
    pub(super) partition: String,
}

impl From<&RangeRetry> for RangeRetryDto {
    fn from(report: &RangeRetry) -> Self {
        let keys = |keys: &[SlotKey]| {
            keys.iter()
                .map(|k| SlotKeyDto {
                    scheduled_at: k.scheduled_at,
                    partition: k.partition.clone(),
                })
                .collect()
        };
        RangeRetryDto {
            retried: keys(&report.retried),
            changed: keys(&report.changed),
        }
    }
}

#[derive(Serialize)]
pub(super) struct AuditDto {
    pub(super) audit: Vec<AuditRecordDto>,
    /// The `before` of the next page: the last record's id when the page is full, else `null`.
    pub(super) next: Option<i64>,
}

/// One change in the audit trail.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuditRecordDto {
    pub(super) id: i64,
    pub(super) job: String,
    pub(super) run_id: Option<i64>,
    pub(super) scheduled_at: Option<DateTime<Utc>>,
    pub(super) action: String,
    pub(super) actor: String,
    pub(super) reason: String,
    pub(super) at: DateTime<Utc>,
}

impl From<&AuditRecord> for AuditRecordDto {
    fn from(record: &AuditRecord) -> Self {
        AuditRecordDto {
            id: record.id,
            job: record.job.clone(),
            run_id: record.run_id,
            scheduled_at: record.scheduled_at,
            action: record.entry.action.clone(),
            actor: record.entry.actor.clone(),
            reason: record.entry.reason.clone(),
            at: record.at,
        }
    }
}

#[derive(Serialize)]
pub(super) struct ReplicasDto {
    pub(super) replicas: Vec<ReplicaDto>,
}

/// A scheduler process as it recorded itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReplicaDto {
    pub(super) id: String,
    pub(super) host: String,
    pub(super) pid: u32,
    pub(super) version: String,
    pub(super) roles: Vec<String>,
    pub(super) jobs: Vec<String>,
    pub(super) runs_held: u32,
    pub(super) started_at: DateTime<Utc>,
    pub(super) heartbeat_at: DateTime<Utc>,
    pub(super) gone_after_ms: u64,
    pub(super) alive: bool,
}

impl From<&ReplicaRecord> for ReplicaDto {
    fn from(record: &ReplicaRecord) -> Self {
        let info = &record.info;
        ReplicaDto {
            id: info.id.clone(),
            host: info.host.clone(),
            pid: info.pid,
            version: info.version.clone(),
            roles: info.roles.clone(),
            jobs: info.jobs.clone(),
            runs_held: info.runs_held,
            started_at: record.started_at,
            heartbeat_at: record.heartbeat_at,
            gone_after_ms: u64::try_from(info.gone_after.as_millis()).unwrap_or(u64::MAX),
            alive: record.alive,
        }
    }
}

/// A schedule fingerprint as 16 hex digits: a `u64` does not survive a JavaScript number.
pub(super) fn fingerprint(value: u64) -> String {
    format!("{value:016x}")
}
