//! An in-process backend: slot rows and locks in a mutex, with the same semantics as the database
//! backends. For tests and single-process applications.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::{
    AdminStore, AttemptRecord, AuditEntry, AuditRecord, Backend, Claim, ClaimRequest, DueClaim,
    DueSpec, Enqueue, Finish, JobDefinition, JobRecord, Lease, LockLease, LockStore, RunChange,
    RunFilter, RunRecord, RunStatus, SlotKey, SlotStore, StaleLock, StoreError, Trigger,
};
use crate::ErrorClass;
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::policy::Overlap;

mod registry;
mod retention;

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
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    checkpoint: Option<String>,
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
            created_at: now,
            updated_at: now,
            finished_at: None,
            checkpoint: None,
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
            return Err(StoreError::Unavailable(
                "memory backend switched off".into(),
            ));
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
impl SlotStore for MemoryBackend {
    async fn store_now(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.check(&self.lock())?;
        Ok(Some(self.clock.now()))
    }

    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            if super::not_due(request, now) {
                answers.push(Claim::NotDue);
                continue;
            }
            let answer = match inner.runs.get(&request.key) {
                Some(run) if run.status == RunStatus::Running && is_stale(run, now) => {
                    let token = inner.next_token();
                    let run = inner.runs.get_mut(&request.key).expect("present");
                    run.stale_after = request.stale_after;
                    Claim::Won(take_over(run, owner, token, now, "heartbeat expired"))
                }
                Some(run) => Claim::Taken { status: run.status },
                None => inner.claim_new(owner, request, now, false),
            };
            answers.push(answer);
        }
        Ok(answers)
    }

    async fn enqueue_slots(&self, requests: &[ClaimRequest]) -> Result<Vec<Claim>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let answers: Vec<Claim> = requests
            .iter()
            .map(|request| match inner.runs.get(&request.key) {
                _ if super::not_due(request, now) => Claim::NotDue,
                Some(run) => Claim::Taken { status: run.status },
                None => inner.claim_new("", request, now, true),
            })
            .collect();
        drop(inner);
        if answers.contains(&Claim::Queued) {
            self.queued.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(answers)
    }

    async fn next_due(&self, specs: &[DueSpec]) -> Result<Option<DateTime<Utc>>, StoreError> {
        let now = self.clock.now();
        let inner = self.lock();
        self.check(&inner)?;
        Ok(inner
            .runs
            .iter()
            .filter(|(k, r)| r.status == RunStatus::Pending && specs.iter().any(|s| s.job == k.job))
            .filter_map(|(_, r)| r.next_attempt_at)
            .filter(|at| *at > now)
            .min())
    }

    async fn due_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.queued.subscribe())
    }

    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let due = inner.due(specs, now);
        let mut claimed: Vec<DueClaim> = Vec::new();
        let mut taken: HashSet<(String, String)> = HashSet::new();
        for (key, spec) in due {
            if claimed.len() >= limit {
                break;
            }
            let mine = claimed.iter().filter(|c| c.key.job == key.job).count();
            if spec.is_full(mine, inner.fresh_running(&key.job, now)) {
                continue;
            }
            let exclusive = spec.overlap != Overlap::Allow;
            let pair = (key.job.clone(), key.partition.clone());
            if exclusive && (taken.contains(&pair) || inner.has_fresh_running(&key, now)) {
                continue;
            }
            let token = inner.next_token();
            let run = inner.runs.get_mut(&key).expect("present");
            let attempts = run.attempts.len() as u32;
            if attempts >= spec.max_attempts && run.status != RunStatus::Pending {
                run.end_attempt(RunStatus::Abandoned, "heartbeat expired", now);
                run.status = RunStatus::Dead;
                run.updated_at = now;
                run.finished_at = Some(now);
                run.next_attempt_at = None;
                run.message = Some(format!(
                    "attempts exhausted ({attempts} of {})",
                    spec.max_attempts
                ));
                continue;
            }
            let lease = take_over(run, owner, token, now, "heartbeat expired");
            taken.insert(pair);
            claimed.push(DueClaim {
                key,
                lease,
                trigger: run.trigger,
                zone: run.zone.clone(),
                wall: run.wall,
                business_date: run.business_date,
            });
        }
        Ok(claimed)
    }

    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(keys.iter().map(|k| inner.runs.contains_key(k)).collect())
    }

    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError> {
        let now = self.clock.now();
        let inner = self.lock();
        self.check(&inner)?;
        let mut jobs: Vec<String> = inner
            .due(specs, now)
            .into_iter()
            .map(|(key, _)| key.job)
            .collect();
        jobs.sort();
        jobs.dedup();
        Ok(jobs)
    }

    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        for request in requests {
            if inner.runs.contains_key(&request.key) || super::not_due(request, now) {
                continue;
            }
            inner.next_run_id += 1;
            let id = inner.next_run_id;
            inner.runs.insert(
                request.key.clone(),
                Run {
                    status: RunStatus::Skipped,
                    owner: String::new(),
                    token: 0,
                    message: Some(reason.to_owned()),
                    finished_at: Some(now),
                    attempts: Vec::new(),
                    ..Run::new(id, request, now)
                },
            );
        }
        Ok(())
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let mut held = Vec::with_capacity(tokens.len());
        for run in inner.runs.values_mut() {
            if run.status == RunStatus::Running && run.owner == owner && tokens.contains(&run.token)
            {
                run.heartbeat_at = now;
                held.push(run.token);
            }
        }
        Ok(held)
    }

    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        Ok(finishes
            .iter()
            .map(|(lease, finish)| inner.finish(owner, lease, finish, now))
            .collect())
    }

    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.run_by_id(lease.run_id) else {
            return Ok(false);
        };
        if run.status != RunStatus::Running || run.token != lease.token || run.owner != owner {
            return Ok(false);
        }
        run.checkpoint = Some(data.to_owned());
        Ok(true)
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        Ok(inner.run_by_id(run_id).and_then(|r| r.checkpoint.clone()))
    }
}

impl Inner {
    /// Records one attempt's outcome if `owner` still holds it with its token.
    fn finish(&mut self, owner: &str, lease: &Lease, finish: &Finish, now: DateTime<Utc>) -> bool {
        let Some(run) = self.run_by_id(lease.run_id) else {
            return false;
        };
        if run.status != RunStatus::Running || run.token != lease.token || run.owner != owner {
            return false;
        }
        run.status = finish.status;
        run.message = finish.message.clone();
        run.error_class = finish.error_class;
        run.updated_at = now;
        run.finished_at = (finish.retry_in.is_none()).then_some(now);
        run.next_attempt_at = finish
            .retry_in
            .map(|d| now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2));
        if let Some(last) = run.attempts.last_mut() {
            last.status = finish.attempt_status;
            last.message = finish.message.clone();
            last.finished_at = Some(now);
        }
        true
    }

    /// The runs of `specs`' jobs due for another attempt (before the exclusivity rule), oldest slot
    /// first, each with its job's spec.
    fn due<'a>(&self, specs: &'a [DueSpec], now: DateTime<Utc>) -> Vec<(SlotKey, &'a DueSpec)> {
        let mut due: Vec<(SlotKey, &DueSpec)> = self
            .runs
            .iter()
            .filter_map(|(key, run)| {
                let spec = specs.iter().find(|s| s.job == key.job)?;
                let eligible = match run.status {
                    RunStatus::Pending | RunStatus::Abandoned => match run.next_attempt_at {
                        Some(at) => at <= now,
                        None => {
                            run.status == RunStatus::Pending && !self.has_fresh_running(key, now)
                        }
                    },
                    RunStatus::Running => is_stale(run, now),
                    _ => false,
                };
                eligible.then(|| (key.clone(), spec))
            })
            .collect();
        due.sort_by(|a, b| a.0.scheduled_at.cmp(&b.0.scheduled_at).then(a.0.cmp(&b.0)));
        due
    }

    /// Fences the other runs of `key`'s job and partition that are `running` with a stale
    /// heartbeat: their holders are frozen or dead, and a newer slot is about to run.
    fn fence_stale(&mut self, key: &SlotKey, now: DateTime<Utc>) {
        for (k, run) in self.runs.iter_mut() {
            if k.job == key.job
                && k.partition == key.partition
                && k != key
                && run.status == RunStatus::Running
                && is_stale(run, now)
            {
                run.status = RunStatus::Abandoned;
                run.next_attempt_at = Some(now);
                run.updated_at = now;
                run.message = Some("heartbeat expired".into());
                run.end_attempt(RunStatus::Abandoned, "heartbeat expired", now);
            }
        }
    }

    /// The run with `run_id`: a scan (the memory backend keeps runs by slot key).
    fn run_by_id(&mut self, run_id: i64) -> Option<&mut Run> {
        self.runs.values_mut().find(|r| r.id == run_id)
    }

    fn next_token(&mut self) -> i64 {
        self.next_token += 1;
        self.next_token
    }

    /// How many runs of `job` are running with a fresh heartbeat.
    fn fresh_running(&self, job: &str, now: DateTime<Utc>) -> usize {
        self.runs
            .iter()
            .filter(|(k, r)| k.job == job && r.status == RunStatus::Running && !is_stale(r, now))
            .count()
    }

    /// Another run of the same job and partition is running with a fresh heartbeat.
    fn has_fresh_running(&self, key: &SlotKey, now: DateTime<Utc>) -> bool {
        self.runs.iter().any(|(k, r)| {
            k.job == key.job
                && k.partition == key.partition
                && k != key
                && r.status == RunStatus::Running
                && !is_stale(r, now)
        })
    }

    /// buffer_one: the slots of `key`'s job and partition that were waiting give way to a newer one.
    fn supersede_waiting(&mut self, key: &SlotKey, now: DateTime<Utc>) {
        for (k, run) in self.runs.iter_mut() {
            if k.job == key.job
                && k.partition == key.partition
                && run.status == RunStatus::Pending
                && run.next_attempt_at.is_none()
            {
                run.status = RunStatus::Skipped;
                run.message = Some("overlap: superseded by a newer slot".into());
                run.finished_at = Some(now);
            }
        }
    }

    /// A new slot under its overlap policy: claimed for `owner`, or with `queue` written `pending`
    /// and due at its instant for a worker.
    fn claim_new(
        &mut self,
        owner: &str,
        request: &ClaimRequest,
        now: DateTime<Utc>,
        queue: bool,
    ) -> Claim {
        let key = &request.key;
        let busy = request.overlap != Overlap::Allow && self.has_fresh_running(key, now);
        let status = match (busy, request.overlap) {
            (true, Overlap::Skip) => Some((
                RunStatus::Skipped,
                "overlap: a previous run is still running",
            )),
            (true, Overlap::BufferOne) => {
                self.supersede_waiting(key, now);
                Some((RunStatus::Pending, "overlap: waiting for the running slot"))
            }
            (true, Overlap::Replace) => {
                for (k, run) in self.runs.iter_mut() {
                    if k.job == key.job
                        && k.partition == key.partition
                        && run.status == RunStatus::Running
                    {
                        run.status = RunStatus::Abandoned;
                        run.next_attempt_at = None;
                        run.message = Some("replaced by a newer slot".into());
                        run.finished_at = Some(now);
                        run.end_attempt(RunStatus::Abandoned, "replaced by a newer slot", now);
                    }
                }
                None
            }
            (false, Overlap::Skip | Overlap::BufferOne) if !queue => {
                self.fence_stale(key, now);
                None
            }
            _ => None,
        };
        let token = self.next_token();
        self.next_run_id += 1;
        let id = self.next_run_id;
        let mut run = Run {
            owner: owner.to_owned(),
            token,
            attempts: vec![running_attempt(1, owner, token, now)],
            ..Run::new(id, request, now)
        };
        if let Some((status, message)) = status {
            run.status = status;
            run.owner = String::new();
            run.message = Some(message.to_owned());
            run.finished_at = (status == RunStatus::Skipped).then_some(now);
            run.attempts.clear();
            self.runs.insert(key.clone(), run);
            return Claim::Taken { status };
        }
        if queue {
            run.status = RunStatus::Pending;
            run.owner = String::new();
            run.attempts.clear();
            run.next_attempt_at = Some(key.scheduled_at);
            self.runs.insert(key.clone(), run);
            return Claim::Queued;
        }
        self.runs.insert(key.clone(), run);
        Claim::Won(Lease {
            run_id: id,
            attempt: 1,
            token,
        })
    }
}

/// A new attempt of an existing run for `owner`.
fn take_over(run: &mut Run, owner: &str, token: i64, now: DateTime<Utc>, why: &str) -> Lease {
    run.end_attempt(RunStatus::Abandoned, why, now);
    run.status = RunStatus::Running;
    run.updated_at = now;
    run.finished_at = None;
    run.token = token;
    run.owner = owner.to_owned();
    run.heartbeat_at = now;
    run.next_attempt_at = None;
    let attempt = run.attempts.len() as u32 + 1;
    run.attempts
        .push(running_attempt(attempt, owner, token, now));
    Lease {
        run_id: run.id,
        attempt,
        token,
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
                return Err(StoreError::Rejected(format!(
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
        let Some(record) = inner.jobs.get_mut(job) else {
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
