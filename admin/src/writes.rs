//! What operators change: retries, cancellations, manual runs, backfills, pauses. Each is audited
//! with its actor and reason; front ends reach them through [`Admin::execute`].

use chrono::{DateTime, NaiveDateTime, SubsecRound, Utc};
use slotguard::Overlap;
use slotguard::store::{
    ClaimRequest, Enqueue, JobRecord, RunChange, RunRecord, RunStatus, SlotKey, Trigger,
};
use slotguard_cron::parse_zone;

use crate::checks::{named, partition_key, since_epoch, since_first_seen};
use crate::reads::runners;
use crate::{
    Admin, AdminError, BackfillOptions, BackfillReport, ChangeRequest, MAX_BACKFILL_SLOTS, Retried,
    Triggered, rfc3339, shown,
};

/// How many milliseconds [`Admin::trigger`] tries, from now on, for one free of other manual runs.
const MAX_TRIGGER_TRIES: usize = 1_000;

impl Admin {
    /// Makes a finished slot run again: a new attempt of the same run (same slot, same idempotency
    /// key), claimed by a replica running the job within one recovery poll, or after the resume
    /// while the job is paused ([`Retried::outlook`]). Refused while the run is `running` or
    /// `pending`, and for a `succeeded` run. Of concurrent retries, exactly one is accepted.
    ///
    /// # Errors
    /// [`AdminError::Refused`] by the run's status; [`AdminError::UnknownJob`],
    /// [`AdminError::UnknownRun`]; [`AdminError::Invalid`] for the actor, reason or partition;
    /// [`AdminError::Store`].
    pub async fn retry(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<Retried, AdminError> {
        let audit = by.entry("retry")?;
        let job_paused = self.job(job).await?.paused;
        partition_key(partition)?;
        let key = SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        };
        let change = self.store.retry(&key, &audit).await?;
        let run = self.changed("retry", &key, change).await?;
        Ok(Retried { run, job_paused })
    }

    /// Cancels a `running` or `pending` run: it ends `failed` (permanent, with the reason); the
    /// replica running it finds out at its next heartbeat, tells the job through
    /// [`JobContext::lost`](slotguard::JobContext::lost), and its completion is refused.
    ///
    /// # Errors
    /// [`AdminError::Refused`] unless the run is `running` or `pending`; [`AdminError::UnknownJob`],
    /// [`AdminError::UnknownRun`]; [`AdminError::Invalid`] for the actor, reason or partition;
    /// [`AdminError::Store`].
    pub async fn cancel(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<RunRecord, AdminError> {
        let audit = by.entry("cancel")?;
        self.job(job).await?;
        partition_key(partition)?;
        let key = SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        };
        let change = self.store.cancel(&key, &audit).await?;
        self.changed("cancel", &key, change).await
    }

    async fn changed(
        &self,
        action: &'static str,
        key: &SlotKey,
        change: RunChange,
    ) -> Result<RunRecord, AdminError> {
        match change {
            RunChange::Done { .. } => {
                self.find_run(&key.job, key.scheduled_at, &key.partition)
                    .await
            }
            RunChange::NotFound => Err(AdminError::UnknownRun {
                job: shown(&key.job),
                slot: key.scheduled_at,
                partition: key.partition.clone(),
            }),
            RunChange::Refused { status } => Err(AdminError::Refused {
                action,
                job: shown(&key.job),
                slot: key.scheduled_at,
                status,
                hint: match (action, status) {
                    ("retry", RunStatus::Running) => "wait for it to end, or cancel it first",
                    ("retry", RunStatus::Pending) => "an attempt is already waiting",
                    ("retry", RunStatus::Succeeded) => {
                        "it already succeeded; trigger a manual run if it must run again"
                    }
                    _ => "only running or pending runs can be cancelled",
                },
            }),
        }
    }

    /// Runs the job now, on whichever replica running it polls first: a `manual` slot at the current
    /// millisecond, which cannot collide with a scheduled (whole-second) slot. Concurrent triggers
    /// each get a run: when the millisecond is taken, the next free one is used. A paused job's run
    /// waits for the resume ([`Triggered::paused`], [`Triggered::outlook`]); follow it with
    /// [`Admin::wait`].
    ///
    /// # Errors
    /// [`AdminError::UnknownJob`]; [`AdminError::Invalid`] for the actor or reason, or when a
    /// thousand manual runs in a row exist already; [`AdminError::Store`].
    pub async fn trigger(&self, job: &str, by: &ChangeRequest) -> Result<Triggered, AdminError> {
        let audit = by.entry("trigger")?;
        let record = self.job(job).await?;
        // Read before anything is written: a registry that cannot be read fails the trigger whole.
        let live = self.store.replicas().await?;
        let zone = parse_zone(&record.definition.zone).unwrap_or(chrono_tz::UTC);
        let mut at = self.clock.now().trunc_subsecs(3);
        for _ in 0..MAX_TRIGGER_TRIES {
            at = manual_slot(at);
            let wall = at.with_timezone(&zone).naive_local();
            let request = self.request(&record, at, wall, Trigger::Manual);
            let run = Enqueue {
                request,
                not_before: at,
            };
            let created = self.store.enqueue(&[run], &audit).await?;
            if let Some(run_id) = created.first().copied().flatten() {
                return Ok(Triggered {
                    run_id,
                    scheduled_at: at,
                    paused: record.paused,
                    replicas: runners(&live, job),
                });
            }
            at += chrono::Duration::milliseconds(1);
        }
        Err(AdminError::Invalid {
            field: "trigger",
            problem: format!(
                "{MAX_TRIGGER_TRIES} manual runs in a row exist already from {}; try again",
                rfc3339(&at)
            ),
        })
    }

    /// Creates runs for the slots of `[from, to)` that have no row, spread at `per_second`. A dry run
    /// (the default) only reports them. A range with more than 1,000 missing slots is refused, to be
    /// split: a backfill never turns into a storm. Instants before 1970 are refused, and so is a
    /// range that starts before the job was first registered unless
    /// [`BackfillOptions::before_first_seen`] says so; both refusals name the first slot accepted.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the actor, reason, rate or range (empty, before 1970, before the
    /// job was first registered, too many slots); [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn backfill(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        options: BackfillOptions,
        by: &ChangeRequest,
    ) -> Result<BackfillReport, AdminError> {
        let audit = by.entry("backfill")?;
        options.validate()?;
        let record = self.job(job).await?;
        since_epoch(&record, from, to)?;
        if !options.before_first_seen {
            since_first_seen(&record, from)?;
        }
        let to = self.settled_end(from, to)?;
        let (total, slots) = self.scan(&record, from, to).await?;
        // Slots that had a row before the backfill looked; those that got one meanwhile are added
        // below.
        let had_rows = total - slots.len();
        if slots.len() > MAX_BACKFILL_SLOTS {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "{} slots are missing in it, more than {MAX_BACKFILL_SLOTS} per backfill; split the range",
                    slots.len()
                ),
            });
        }
        if options.dry_run || slots.is_empty() {
            return Ok(BackfillReport {
                dry_run: options.dry_run,
                slots,
                created: 0,
                existing: had_rows,
                last_due: None,
            });
        }
        let now = self.clock.now();
        let runs = slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                Ok(Enqueue {
                    request: self.request(&record, slot.scheduled_at, slot.wall, Trigger::Backfill),
                    not_before: options.due(now, i)?,
                })
            })
            .collect::<Result<Vec<Enqueue>, AdminError>>()?;
        let answers = self.store.enqueue(&runs, &audit).await?;
        let created = answers.iter().filter(|a| a.is_some()).count();
        let last_due = runs
            .iter()
            .zip(&answers)
            .filter(|(_, a)| a.is_some())
            .map(|(r, _)| r.not_before)
            .max();
        Ok(BackfillReport {
            dry_run: false,
            existing: had_rows + slots.len() - created,
            slots,
            created,
            last_due,
        })
    }

    /// Pauses a job: every replica stops claiming its slots and retries within one recovery poll,
    /// recording the slots `skipped` with reason `paused`. Runs already going are not stopped (cancel
    /// them). A job already paused is refused ([`AdminError::PauseState`], naming who paused it):
    /// the first pause keeps its operator and reason until a resume.
    ///
    /// # Errors
    /// [`AdminError::PauseState`] when the job is paused already; [`AdminError::UnknownJob`];
    /// [`AdminError::Invalid`] for the actor or reason; [`AdminError::Store`].
    pub async fn pause(&self, job: &str, by: &ChangeRequest) -> Result<JobRecord, AdminError> {
        self.set_paused(job, true, by).await
    }

    /// Resumes a paused job. Refused ([`AdminError::PauseState`]) when the job is not paused:
    /// nothing is written to the audit trail then.
    ///
    /// # Errors
    /// [`AdminError::PauseState`] when the job is not paused; [`AdminError::UnknownJob`];
    /// [`AdminError::Invalid`] for the actor or reason; [`AdminError::Store`].
    pub async fn resume(&self, job: &str, by: &ChangeRequest) -> Result<JobRecord, AdminError> {
        self.set_paused(job, false, by).await
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        by: &ChangeRequest,
    ) -> Result<JobRecord, AdminError> {
        let action = if paused { "pause" } else { "resume" };
        let audit = by.entry(action)?;
        named(job)?;
        if self.store.set_paused(job, paused, &audit).await? {
            return self.job(job).await;
        }
        // Nothing was written: the job is unknown, or already as asked.
        let record = self.job(job).await?;
        let state = if record.paused {
            format!(
                "it is already paused by {}{}: {}; resume it first to pause it again",
                shown(record.paused_by.as_deref().unwrap_or("?")),
                record
                    .paused_at
                    .map(|at| format!(" since {}", rfc3339(&at)))
                    .unwrap_or_default(),
                shown(record.paused_reason.as_deref().unwrap_or(""))
            )
        } else {
            "it is not paused".to_owned()
        };
        Err(AdminError::PauseState {
            action,
            job: shown(job),
            state,
        })
    }

    fn request(
        &self,
        record: &JobRecord,
        at: DateTime<Utc>,
        wall: NaiveDateTime,
        trigger: Trigger,
    ) -> ClaimRequest {
        ClaimRequest {
            key: SlotKey {
                job: record.definition.name.clone(),
                scheduled_at: at,
                partition: String::new(),
            },
            trigger,
            zone: record.definition.zone.clone(),
            wall,
            business_date: wall.date(),
            fingerprint: record.definition.fingerprint,
            stale_after: self.stale_after,
            overlap: Overlap::Allow,
            calendar: None,
            ahead: false,
            defer_if_contended: false,
        }
    }
}

/// `at`, or the next millisecond if `at` is on a whole second (a scheduled slot's instant).
fn manual_slot(at: DateTime<Utc>) -> DateTime<Utc> {
    if at.timestamp_subsec_millis() == 0 {
        at + chrono::Duration::milliseconds(1)
    } else {
        at
    }
}
