//! Schedules kept as data: added, changed, paused and removed at run time, each change checked as
//! `build()` checks a job, answered with the next slots it produces, refused when it was read at
//! an older version than the latest, and audited.

use chrono::{DateTime, Utc};
use slotguard::store::{JobRecord, ScheduleSpec, ScheduleVersion, ScheduleWrite};
use slotguard::timeline::{MAX_REMAINING_RUNS, SpecError, Timeline, compile};
use slotguard::{BusinessRule, Schedule};

use crate::checks::partition_key;
use crate::{Admin, AdminError, ChangeRequest, MAX_REASON_BYTES, shown};

/// How many upcoming slots a schedule is answered with.
pub const PREVIEW_SLOTS: usize = 5;

/// The fields of a schedule an operator writes. For a new schedule `job`, `cron` and `tz` are
/// required; for a change, a field left `None` keeps its value (`Some(None)` clears an optional
/// one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleFields {
    /// The job whose handler runs the slots (fixed once the schedule exists).
    pub job: Option<String>,
    /// The cron expression.
    pub cron: Option<String>,
    /// The IANA zone.
    pub tz: Option<String>,
    /// The DST policy's name (default `vixie`).
    pub dst: Option<String>,
    /// The partition (tenant); empty for the job's own.
    pub partition: Option<String>,
    /// No slot before.
    pub start_at: Option<Option<DateTime<Utc>>>,
    /// No slot after.
    pub end_at: Option<Option<DateTime<Utc>>>,
    /// At most this many slots from now on.
    pub remaining_runs: Option<Option<u32>>,
    /// Paused: no slots while it is.
    pub paused: Option<bool>,
    /// Why it is paused.
    pub note: Option<Option<String>>,
    /// Pause it when a run of it fails for good (retries spent, or a permanent error).
    pub pause_on_failure: Option<bool>,
}

/// A stored schedule: its latest version and its next slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedule {
    /// The latest version.
    pub version: ScheduleVersion,
    /// Its next [`PREVIEW_SLOTS`] slots, from now, under the versions in force at each.
    pub next: Vec<DateTime<Utc>>,
}

impl Admin {
    /// Adds schedule `id` of a registered `slot`-level job: its slots start at the first instant
    /// the expression names once the change takes effect (half a second after it is stored).
    ///
    /// # Errors
    /// [`AdminError::ScheduleExists`]; [`AdminError::UnknownJob`]; [`AdminError::Invalid`] naming
    /// the field (`id`, `job`, `cron`, `tz`, `dst`, `partition`, `startAt`, `endAt`,
    /// `remainingRuns`, `note`, `reason`, `actor`); [`AdminError::Store`].
    pub async fn add_schedule(
        &self,
        id: &str,
        fields: ScheduleFields,
        by: &ChangeRequest,
    ) -> Result<StoredSchedule, AdminError> {
        by.validate()?;
        check_id(id)?;
        let history = self.store.schedule_history(id).await?;
        let latest = history.last();
        if let Some(v) = latest.filter(|v| v.spec.is_some()) {
            return Err(AdminError::ScheduleExists {
                id: shown(id),
                version: v.version,
            });
        }
        let spec = new_spec(fields)?;
        let record = self.checked(&spec).await?;
        let expected = latest.map_or(0, |v| v.version);
        let written = self.write(id, expected, Some(&spec), by).await?;
        Ok(self.with_written(history, written, &record))
    }

    /// Changes schedule `id`, read at `version`: slots from the moment the change takes effect
    /// follow it; a slot already claimed or running is left as it is.
    ///
    /// # Errors
    /// [`AdminError::StaleVersion`] when `version` is not the latest; [`AdminError::UnknownSchedule`];
    /// [`AdminError::Invalid`] naming the field; [`AdminError::Store`].
    pub async fn change_schedule(
        &self,
        id: &str,
        version: i64,
        fields: ScheduleFields,
        by: &ChangeRequest,
    ) -> Result<StoredSchedule, AdminError> {
        by.validate()?;
        let history = self.current(id).await?;
        let latest = history.last().cloned().ok_or_else(|| unknown(id))?;
        stale(id, version, latest.version)?;
        let Some(base) = latest.spec.clone() else {
            return Err(unknown(id));
        };
        let carry = fields.remaining_runs.is_none();
        let mut spec = changed_spec(base, fields)?;
        let record = self.checked(&spec).await?;
        if carry && spec.remaining_runs.is_some() {
            spec.remaining_runs = Some(self.runs_left(&history, &record));
        }
        let written = self.write(id, version, Some(&spec), by).await?;
        Ok(self.with_written(history, written, &record))
    }

    /// Removes schedule `id`, read at `version` (`None`: whatever its latest version is): it has no
    /// slots from the moment the change takes effect. Its history stays.
    ///
    /// # Errors
    /// [`AdminError::StaleVersion`]; [`AdminError::UnknownSchedule`]; [`AdminError::Invalid`] for
    /// the actor or reason; [`AdminError::Store`].
    pub async fn remove_schedule(
        &self,
        id: &str,
        version: Option<i64>,
        by: &ChangeRequest,
    ) -> Result<ScheduleVersion, AdminError> {
        by.validate()?;
        let history = self.current(id).await?;
        let latest = history.last().map_or(0, |v| v.version);
        let version = version.unwrap_or(latest);
        stale(id, version, latest)?;
        self.write(id, version, None, by).await
    }

    /// Schedule `id` with its next slots.
    ///
    /// # Errors
    /// [`AdminError::UnknownSchedule`]; [`AdminError::Store`].
    pub async fn schedule(&self, id: &str) -> Result<StoredSchedule, AdminError> {
        let history = self.current(id).await?;
        self.stored(history).await
    }

    /// Every version of schedule `id`, oldest first (a removed schedule's too).
    ///
    /// # Errors
    /// [`AdminError::UnknownSchedule`] when it never existed; [`AdminError::Store`].
    pub async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, AdminError> {
        check_id(id).map_err(|_| unknown(id))?;
        let history = self.store.schedule_history(id).await?;
        if history.is_empty() {
            return Err(unknown(id));
        }
        Ok(history)
    }

    /// The stored schedules, of `job` if given, by id, those after `after`, at most `limit`
    /// (1 to [`MAX_PAGE`](crate::MAX_PAGE)).
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the limit; [`AdminError::Store`].
    pub async fn schedules(
        &self,
        job: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredSchedule>, AdminError> {
        crate::check_page(limit)?;
        let latest = self.store.schedules(job, after, limit).await?;
        let jobs = self.store.jobs().await?;
        let now = self.clock.now();
        let mut out = Vec::with_capacity(latest.len());
        for version in latest {
            // A version in force already decides every slot from now on; only a change still to
            // take effect needs the one before it.
            let history = if version.effective_at <= now {
                vec![version]
            } else {
                self.store.schedule_history(&version.id).await?
            };
            out.push(upcoming(history, &jobs, now)?);
        }
        Ok(out)
    }

    /// The next `n` slots (at most 1,000) `fields` would produce as a new schedule, without storing
    /// anything.
    ///
    /// # Errors
    /// As [`Admin::add_schedule`] for the fields.
    pub async fn preview_schedule(
        &self,
        fields: ScheduleFields,
        n: usize,
    ) -> Result<Vec<DateTime<Utc>>, AdminError> {
        crate::check_page(n)?;
        let spec = new_spec(fields)?;
        let record = self.checked(&spec).await?;
        let now = self.clock.now();
        let version = ScheduleVersion {
            id: String::new(),
            version: 1,
            spec: Some(spec),
            effective_at: slotguard::store::schedules::effective_at(now, None),
            changed_by: String::new(),
            changed_at: now,
            reason: String::new(),
            seq: 0,
        };
        let timeline = Timeline::new(&[version], calendar(&record).as_ref());
        Ok(slots(&timeline, now, n))
    }

    /// The schedule's versions, when it exists and is not removed.
    async fn current(&self, id: &str) -> Result<Vec<ScheduleVersion>, AdminError> {
        check_id(id).map_err(|_| unknown(id))?;
        let history = self.store.schedule_history(id).await?;
        match history.last() {
            Some(v) if v.spec.is_some() => Ok(history),
            _ => Err(unknown(id)),
        }
    }

    /// Stores the version, or says why not.
    async fn write(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &ChangeRequest,
    ) -> Result<ScheduleVersion, AdminError> {
        let written = self
            .store
            .write_schedule(id, expected, spec, &by.actor, &by.reason)
            .await?;
        match written {
            ScheduleWrite::Written(version) => Ok(version),
            ScheduleWrite::Stale { current } => Err(AdminError::StaleVersion {
                id: shown(id),
                asked: expected,
                current,
            }),
        }
    }

    /// The schedule `history` (read before the write, at the version the write expected) makes
    /// once `written` follows it: nothing can have come between them, so nothing is read again.
    fn with_written(
        &self,
        mut history: Vec<ScheduleVersion>,
        written: ScheduleVersion,
        record: &JobRecord,
    ) -> StoredSchedule {
        history.push(written.clone());
        let timeline = Timeline::new(&history, calendar(record).as_ref());
        StoredSchedule {
            next: slots(&timeline, self.clock.now(), PREVIEW_SLOTS),
            version: written,
        }
    }

    /// The latest version of `history` with its next slots.
    async fn stored(&self, history: Vec<ScheduleVersion>) -> Result<StoredSchedule, AdminError> {
        let jobs = self.store.jobs().await?;
        upcoming(history, &jobs, self.clock.now())
    }

    /// The job's record, when the spec fits it: a registered `slot`-level job, and an expression,
    /// zone and DST policy that make a schedule.
    async fn checked(&self, spec: &ScheduleSpec) -> Result<JobRecord, AdminError> {
        let record = self.job(&spec.job).await?;
        if record.definition.guard != "slot" {
            return Err(invalid(
                "job",
                format!(
                    "job `{}` runs at the `{}` level; a stored schedule needs the `slot` level (its slot rows keep an edit from running a slot twice)",
                    shown(&spec.job),
                    record.definition.guard
                ),
            ));
        }
        check_spec(spec)?;
        Ok(record)
    }

    /// How many runs a schedule with remaining runs has left once a change made now takes effect.
    fn runs_left(&self, history: &[ScheduleVersion], record: &JobRecord) -> u32 {
        let Some(latest) = history.last() else {
            return 0;
        };
        let total = latest
            .spec
            .as_ref()
            .and_then(|s| s.remaining_runs)
            .unwrap_or(0);
        let until = slotguard::store::schedules::effective_at(self.clock.now(), None);
        let timeline = Timeline::new(history, calendar(record).as_ref());
        let mut used = 0u32;
        let mut from = latest.effective_at - chrono::TimeDelta::nanoseconds(1);
        while let Some((slot, version)) = timeline.next_after(from) {
            if slot.scheduled_at >= until || used >= total {
                break;
            }
            used += u32::from(version == latest.version);
            from = slot.scheduled_at;
        }
        total - used
    }
}

/// The latest version of `history` (one schedule's versions, oldest first) with its next slots
/// after `now`, on its job's calendar (one of `jobs`).
fn upcoming(
    history: Vec<ScheduleVersion>,
    jobs: &[JobRecord],
    now: DateTime<Utc>,
) -> Result<StoredSchedule, AdminError> {
    let latest = history.last().cloned().ok_or_else(|| unknown(""))?;
    let job = history.iter().rev().find_map(|v| v.spec.as_ref());
    let record = job.and_then(|spec| jobs.iter().find(|r| r.definition.name == spec.job));
    let timeline = Timeline::new(&history, record.and_then(calendar).as_ref());
    Ok(StoredSchedule {
        next: slots(&timeline, now, PREVIEW_SLOTS),
        version: latest,
    })
}

/// Up to `n` slots after `now`.
fn slots(timeline: &Timeline, now: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    timeline
        .upcoming(now, n)
        .into_iter()
        .map(|s| s.scheduled_at)
        .collect()
}

/// The job's business calendar, when this version can read it.
fn calendar(record: &JobRecord) -> Option<BusinessRule> {
    record.definition.calendar.as_ref()?.rule()
}

fn unknown(id: &str) -> AdminError {
    AdminError::UnknownSchedule { id: shown(id) }
}

fn invalid(field: &'static str, problem: String) -> AdminError {
    AdminError::Invalid { field, problem }
}

fn stale(id: &str, asked: i64, current: i64) -> Result<(), AdminError> {
    if asked == current {
        return Ok(());
    }
    Err(AdminError::StaleVersion {
        id: shown(id),
        asked,
        current,
    })
}

/// A schedule id: the rule of job names (1 to 200 characters, no control character or `:`).
fn check_id(id: &str) -> Result<(), AdminError> {
    slotguard::check_job_name(id)
        .map_err(|problem| invalid("id", format!("`{}`: {}", shown(id), problem.reason())))
}

/// A new schedule from its fields.
fn new_spec(fields: ScheduleFields) -> Result<ScheduleSpec, AdminError> {
    let required = |field: &'static str, value: Option<String>| {
        value.ok_or_else(|| invalid(field, "is required for a new schedule".into()))
    };
    let base = ScheduleSpec::new(
        required("job", fields.job.clone())?,
        required("cron", fields.cron.clone())?,
        required("tz", fields.tz.clone())?,
        String::new(),
    );
    merge(base, fields)
}

/// `base` changed by `fields`; the job cannot change.
fn changed_spec(base: ScheduleSpec, fields: ScheduleFields) -> Result<ScheduleSpec, AdminError> {
    if fields.job.as_ref().is_some_and(|j| *j != base.job) {
        return Err(invalid(
            "job",
            "a schedule's job cannot change: remove the schedule and add one for the other job"
                .into(),
        ));
    }
    merge(base, fields)
}

fn merge(mut spec: ScheduleSpec, fields: ScheduleFields) -> Result<ScheduleSpec, AdminError> {
    spec.cron = fields.cron.unwrap_or(spec.cron);
    spec.zone = fields.tz.unwrap_or(spec.zone);
    spec.dst = fields.dst.unwrap_or(spec.dst);
    spec.partition = fields.partition.unwrap_or(spec.partition);
    spec.start_at = fields.start_at.unwrap_or(spec.start_at);
    spec.end_at = fields.end_at.unwrap_or(spec.end_at);
    spec.remaining_runs = fields.remaining_runs.unwrap_or(spec.remaining_runs);
    spec.paused = fields.paused.unwrap_or(spec.paused);
    spec.note = fields.note.unwrap_or(spec.note);
    spec.pause_on_failure = fields.pause_on_failure.unwrap_or(spec.pause_on_failure);
    Ok(spec)
}

/// Everything `build()` would check of the schedule, each problem naming its field.
fn check_spec(spec: &ScheduleSpec) -> Result<Schedule, AdminError> {
    partition_key(&spec.partition)?;
    if let (Some(start), Some(end)) = (spec.start_at, spec.end_at)
        && start >= end
    {
        return Err(invalid("endAt", "must be after startAt".into()));
    }
    if spec.remaining_runs.is_some_and(|n| n > MAX_REMAINING_RUNS) {
        return Err(invalid(
            "remainingRuns",
            format!("at most {MAX_REMAINING_RUNS}"),
        ));
    }
    if spec
        .note
        .as_ref()
        .is_some_and(|n| n.len() > MAX_REASON_BYTES)
    {
        return Err(invalid("note", format!("at most {MAX_REASON_BYTES} bytes")));
    }
    compile(spec, None).map_err(|e| match e {
        SpecError::Schedule(slotguard::ScheduleError::Zone(e)) => invalid("tz", e.to_string()),
        SpecError::Schedule(e) => invalid("cron", e.to_string()),
        SpecError::Dst(e) => invalid("dst", e.to_string()),
        _ => invalid("cron", e.to_string()),
    })
}
