//! An in-process backend: slot rows and locks in a mutex, with the same semantics as the database
//! backends. For tests and single-process applications.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::{
    AdminStore, AttemptRecord, AuditEntry, AuditRecord, Backend, ClaimRequest, Enqueue,
    JobDefinition, JobRecord, LockLease, LockStore, RunChange, RunCounts, RunFilter, RunRecord,
    RunStatus, SlotKey, StaleLock, StoreError, Trigger,
};
use crate::ErrorClass;
use crate::clock::{Clock, SharedClock, SystemClock};

mod calendars;
mod registry;
mod retention;
mod schedules;
mod slots;

/// The in-process backend. Clones share the same rows and locks, so several schedulers in one process
/// (standing in for replicas) can race on it.
///
/// Its clock plays the database clock: staleness is judged by it, never by the caller's.
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    inner: Arc<Mutex<Inner>>,
    clock: SharedClock,
    /// Counts enqueues that queued something: workers in this process wake on it.
    queued: Arc<tokio::sync::watch::Sender<u64>>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<SlotKey, Run>,
    next_run_id: i64,
    next_token: i64,
    locks: HashMap<i64, (String, CancellationToken)>,
    lock_keys: HashMap<i64, (String, String)>,
    jobs: std::collections::BTreeMap<String, JobRecord>,
    audit: Vec<AuditRecord>,
    replicas: std::collections::BTreeMap<String, registry::Replica>,
    /// Stored schedules' versions, in the order they were written.
    schedules: Vec<super::ScheduleVersion>,
    /// Operators' holiday overrides, in the order they were written.
    overrides: Vec<super::CalendarOverride>,
    unavailable: bool,
}

#[derive(Debug, Clone)]
struct Run {
    id: i64,
    status: RunStatus,
    owner: String,
    token: i64,
    heartbeat_at: DateTime<Utc>,
    stale_after: Duration,
    trigger: Trigger,
    zone: String,
    wall: NaiveDateTime,
    business_date: NaiveDate,
    next_attempt_at: Option<DateTime<Utc>>,
    message: Option<String>,
    error_class: Option<ErrorClass>,
    fingerprint: u64,
    calendar: Option<super::CalendarStamp>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    checkpoint: Option<String>,
    /// The `traceparent` of the span that queued the run, if any.
    trace_parent: Option<String>,
    attempts: Vec<AttemptRecord>,
}

impl Run {
    /// A `running` row for `request` with no owner, token or attempt yet.
    fn new(id: i64, request: &ClaimRequest, now: DateTime<Utc>) -> Self {
        Run {
            id,
            status: RunStatus::Running,
            owner: String::new(),
            token: 0,
            heartbeat_at: now,
            stale_after: request.stale_after,
            trigger: request.trigger,
            zone: request.zone.clone(),
            wall: request.wall,
            business_date: request.business_date,
            next_attempt_at: None,
            message: None,
            error_class: None,
            fingerprint: request.fingerprint,
            calendar: request.calendar.clone(),
            created_at: now,
            updated_at: now,
            finished_at: None,
            checkpoint: None,
            trace_parent: None,
            attempts: Vec::new(),
        }
    }

    fn record(&self, key: &SlotKey) -> RunRecord {
        let last = self.attempts.last();
        RunRecord {
            id: self.id,
            key: key.clone(),
            status: self.status,
            attempt: self.attempts.len() as u32,
            owner: (!self.owner.is_empty()).then(|| self.owner.clone()),
            token: self.token,
            heartbeat_at: last.map(|_| self.heartbeat_at),
            stale_after: self.stale_after,
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            started_at: last.map(|a| a.started_at),
            finished_at: self.finished_at,
            error_class: self.error_class.map(|c| c.as_str().to_owned()),
            error_message: self.message.clone(),
            zone: self.zone.clone(),
            wall_time: self.wall,
            business_date: self.business_date,
            trigger: self.trigger,
            fingerprint: self.fingerprint,
            calendar: self.calendar.clone(),
            attempts: self.attempts.clone(),
        }
    }

    /// Marks the run's running attempt ended with `status`.
    fn end_attempt(&mut self, status: RunStatus, why: &str, now: DateTime<Utc>) {
        if let Some(last) = self.attempts.last_mut()
            && last.status == RunStatus::Running
        {
            last.status = status;
            last.message = Some(why.to_owned());
            last.finished_at = Some(now);
        }
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend::new()
    }
}

impl MemoryBackend {
    /// An empty backend on the system clock.
    pub fn new() -> Self {
        MemoryBackend::with_clock(Arc::new(SystemClock))
    }

    /// An empty backend judging staleness by `clock` (use a [`TokioClock`](crate::TokioClock) in paused
    /// time).
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryBackend {
            inner: Arc::default(),
            clock,
            queued: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the mutex cannot leave a half-written row: every write is a single
        // assignment after all checks, so the data is usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check(&self, inner: &Inner) -> Result<(), StoreError> {
        if inner.unavailable {
            return Err(StoreError::unavailable("memory backend switched off"));
        }
        Ok(())
    }

    /// Every run, ordered by job, slot and partition.
    pub fn runs(&self) -> Vec<RunRecord> {
        let inner = self.lock();
        let mut runs: Vec<RunRecord> = inner
            .runs
            .iter()
            .map(|(key, run)| run.record(key))
            .collect();
        runs.sort_by(|a, b| a.key.cmp(&b.key));
        runs
    }

    /// Simulates the store going away (`true`) and coming back (`false`): while away every call fails
    /// with [`StoreError::Unavailable`].
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().unavailable = unavailable;
    }

    /// Simulates the loss of a held lock (its database session died): the lock is released and its
    /// holder's [`LockLease::lost`] is cancelled. Returns whether the key was held.
    pub fn break_lock(&self, key: i64) -> bool {
        match self.lock().locks.remove(&key) {
            Some((_, lost)) => {
                lost.cancel();
                true
            }
            None => false,
        }
    }

    /// Simulates a slot queued ahead of its instant: the run of `key`, if it is `pending`, was
    /// never attempted and is due at a time, falls due at `at` instead. Returns whether it moved.
    /// For tests of the rules that read `next_attempt_at` ([`DueSpec::ahead`](super::DueSpec::ahead)).
    pub fn delay_queued(&self, key: &SlotKey, at: DateTime<Utc>) -> bool {
        let mut inner = self.lock();
        match inner.runs.get_mut(key) {
            Some(run)
                if run.status == RunStatus::Pending
                    && run.attempts.is_empty()
                    && run.next_attempt_at.is_some() =>
            {
                run.next_attempt_at = Some(at);
                true
            }
            _ => false,
        }
    }

    /// The owners of the locks currently held, by key.
    pub fn lock_holders(&self) -> HashMap<i64, String> {
        self.lock()
            .locks
            .iter()
            .map(|(k, (owner, _))| (*k, owner.clone()))
            .collect()
    }
}

#[async_trait]
impl LockStore for MemoryBackend {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        Ok(keys
            .iter()
            .map(|&key| {
                if inner.locks.contains_key(&key) {
                    return None;
                }
                let lost = CancellationToken::new();
                inner.locks.insert(key, (owner.to_owned(), lost.clone()));
                Some(LockLease {
                    key,
                    lost,
                    token: None,
                    deadline: None,
                })
            })
            .collect())
    }

    async fn break_stale_locks(
        &self,
        owner: &str,
        locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let mut freed = Vec::new();
        for lock in locks {
            let Some((holder, _)) = inner.locks.get(&lock.key) else {
                continue;
            };
            let runs = || {
                inner
                    .runs
                    .iter()
                    .filter(|(k, r)| k.job == lock.job && r.status == RunStatus::Running)
            };
            let holder_stale = runs().any(|(_, r)| r.owner == *holder && is_stale(r, now));
            let any_fresh = runs().any(|(_, r)| !is_stale(r, now));
            if holder != owner && holder_stale && !any_fresh {
                // As PostgreSQL ends the holder's session: the lock goes, and its holder hears it.
                if let Some((_, lost)) = inner.locks.remove(&lock.key) {
                    lost.cancel();
                }
                freed.push(lock.key);
            }
        }
        Ok(freed)
    }

    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        for (key, job) in keys {
            if let Some((ns, other)) = inner.lock_keys.get(key)
                && (ns != namespace || other != job)
            {
                return Err(StoreError::rejected(format!(
                    "lock key {key} of job `{job}` (namespace `{namespace}`) is registered to job `{other}` (namespace `{ns}`)"
                )));
            }
        }
        for (key, job) in keys {
            inner
                .lock_keys
                .insert(*key, (namespace.to_owned(), job.clone()));
        }
        Ok(())
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        for key in keys {
            if inner.locks.get(key).is_some_and(|(o, _)| o == owner) {
                inner.locks.remove(key);
            }
        }
        Ok(())
    }
}

impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }
}

fn is_stale(run: &Run, now: DateTime<Utc>) -> bool {
    let limit = chrono::Duration::from_std(run.stale_after).unwrap_or(chrono::Duration::MAX);
    run.heartbeat_at
        .checked_add_signed(limit)
        .is_some_and(|deadline| deadline < now)
}

fn running_attempt(attempt: u32, owner: &str, token: i64, now: DateTime<Utc>) -> AttemptRecord {
    AttemptRecord {
        attempt,
        owner: owner.to_owned(),
        token,
        status: RunStatus::Running,
        started_at: now,
        finished_at: None,
        message: None,
    }
}

/// The most runs one admin read returns.
const MAX_LIST: usize = 10_000;

impl Inner {
    fn audit(
        &mut self,
        job: &str,
        run: Option<(i64, DateTime<Utc>)>,
        entry: &AuditEntry,
        now: DateTime<Utc>,
    ) {
        let id = self.audit.len() as i64 + 1;
        self.audit.push(AuditRecord {
            id,
            job: job.to_owned(),
            run_id: run.map(|r| r.0),
            scheduled_at: run.map(|r| r.1),
            entry: entry.clone(),
            at: now,
        });
    }
}

#[async_trait]
impl AdminStore for MemoryBackend {
    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        for job in jobs {
            let record = inner
                .jobs
                .entry(job.name.clone())
                .or_insert_with(|| JobRecord {
                    definition: job.clone(),
                    paused: false,
                    paused_by: None,
                    paused_reason: None,
                    paused_at: None,
                    registered_at: now,
                    seen_at: now,
                });
            record.definition = job.clone();
            record.seen_at = now;
        }
        Ok(())
    }

    async fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(inner.jobs.values().cloned().collect())
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(record) = inner.jobs.get_mut(job).filter(|r| r.paused != paused) else {
            return Ok(false);
        };
        record.paused = paused;
        // A resume keeps the pause it ends on show; the resume itself is in the audit trail.
        if paused {
            record.paused_by = Some(audit.actor.clone());
            record.paused_reason = Some(audit.reason.clone());
            record.paused_at = Some(now);
        }
        inner.audit(job, None, audit, now);
        Ok(true)
    }

    async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        let mut runs: Vec<RunRecord> = inner
            .runs
            .iter()
            .filter(|(key, run)| {
                filter.job.as_ref().is_none_or(|j| *j == key.job)
                    && filter.status.is_none_or(|s| s == run.status)
                    && filter
                        .partition
                        .as_ref()
                        .is_none_or(|p| *p == key.partition)
                    && filter.from.is_none_or(|f| key.scheduled_at >= f)
                    && filter.to.is_none_or(|t| key.scheduled_at < t)
            })
            .map(|(key, run)| run.record(key))
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse((r.key.scheduled_at, r.id)));
        runs.truncate(filter.limit.min(MAX_LIST));
        Ok(runs)
    }

    async fn slot_times(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        let mut times: Vec<DateTime<Utc>> = inner
            .runs
            .keys()
            .filter(|k| k.job == job && k.scheduled_at >= from && k.scheduled_at < to)
            .map(|k| k.scheduled_at)
            .collect();
        times.sort();
        times.dedup();
        Ok(times)
    }

    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, StoreError> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            out.push(self.slot_times(job, from, to).await?);
        }
        Ok(out)
    }

    async fn run_counts(&self, failed_since: DateTime<Utc>) -> Result<Vec<RunCounts>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        let mut counts: BTreeMap<&str, RunCounts> = BTreeMap::new();
        for (key, run) in &inner.runs {
            let failed = RunCounts::is_failure(run.status) && key.scheduled_at >= failed_since;
            if !(failed || matches!(run.status, RunStatus::Running | RunStatus::Pending)) {
                continue;
            }
            let entry = counts.entry(&key.job).or_insert_with(|| RunCounts {
                job: key.job.clone(),
                ..RunCounts::default()
            });
            match run.status {
                RunStatus::Running => entry.running += 1,
                RunStatus::Pending => entry.queued += 1,
                _ => entry.failed += 1,
            }
        }
        Ok(counts.into_values().collect())
    }

    async fn latest_runs(&self, jobs: &[String]) -> Result<Vec<Option<RunRecord>>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(jobs
            .iter()
            .map(|job| {
                inner
                    .runs
                    .iter()
                    .filter(|(k, _)| k.job == *job)
                    .max_by_key(|(k, run)| (k.scheduled_at, run.id))
                    .map(|(key, run)| run.record(key))
            })
            .collect())
    }

    async fn latest_slots(
        &self,
        jobs: &[String],
    ) -> Result<Vec<Option<DateTime<Utc>>>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(jobs
            .iter()
            .map(|job| {
                inner
                    .runs
                    .iter()
                    .filter(|(k, r)| k.job == *job && r.trigger != Trigger::Manual)
                    .map(|(k, _)| k.scheduled_at)
                    .max()
            })
            .collect())
    }

    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.runs.get_mut(key) else {
            return Ok(RunChange::NotFound);
        };
        match run.status {
            RunStatus::Failed | RunStatus::Dead | RunStatus::Abandoned | RunStatus::Skipped => {}
            status => return Ok(RunChange::Refused { status }),
        }
        run.status = RunStatus::Pending;
        run.next_attempt_at = Some(now);
        run.finished_at = None;
        run.updated_at = now;
        let run_id = run.id;
        inner.audit(&key.job, Some((run_id, key.scheduled_at)), audit, now);
        Ok(RunChange::Done { run_id })
    }

    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let mut answers = Vec::with_capacity(runs.len());
        for run in runs {
            let key = &run.request.key;
            if inner.runs.contains_key(key) {
                answers.push(None);
                continue;
            }
            inner.next_run_id += 1;
            let id = inner.next_run_id;
            // A fresh token, as the database backends give it: tokens rise in the order rows are made.
            let token = inner.next_token();
            inner.runs.insert(
                key.clone(),
                Run {
                    status: RunStatus::Pending,
                    token,
                    next_attempt_at: Some(run.not_before),
                    ..Run::new(id, &run.request, now)
                },
            );
            inner.audit(&key.job, Some((id, key.scheduled_at)), audit, now);
            answers.push(Some(id));
        }
        Ok(answers)
    }

    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.runs.get_mut(key) else {
            return Ok(RunChange::NotFound);
        };
        match run.status {
            RunStatus::Running | RunStatus::Pending => {}
            status => return Ok(RunChange::Refused { status }),
        }
        let message = format!("cancelled by {}: {}", audit.actor, audit.reason);
        run.end_attempt(RunStatus::Abandoned, &message, now);
        run.status = RunStatus::Failed;
        run.error_class = Some(ErrorClass::Permanent);
        run.message = Some(message);
        run.next_attempt_at = None;
        run.finished_at = Some(now);
        run.updated_at = now;
        let run_id = run.id;
        inner.audit(&key.job, Some((run_id, key.scheduled_at)), audit, now);
        Ok(RunChange::Done { run_id })
    }

    async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(inner
            .audit
            .iter()
            .rev()
            .filter(|a| job.is_none_or(|j| j == a.job) && before.is_none_or(|b| a.id < b))
            .take(limit.min(MAX_LIST))
            .cloned()
            .collect())
    }
}
