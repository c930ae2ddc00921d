//! An in-process backend: slot rows and locks in a mutex, with the same semantics as the database
//! backends. For tests and single-process applications.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::{
    Backend, Claim, ClaimRequest, DueClaim, DueSpec, Finish, Lease, LockLease, LockStore,
    RunStatus, SlotKey, SlotStore, StoreError, Trigger,
};
use crate::clock::{Clock, SharedClock, SystemClock};
use crate::policy::Overlap;

/// The in-process backend. Clones share the same rows and locks, so several schedulers in one process
/// (standing in for replicas) can race on it.
///
/// Its clock plays the database clock: staleness is judged by it, never by the caller's.
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    inner: Arc<Mutex<Inner>>,
    clock: SharedClock,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<SlotKey, Run>,
    next_run_id: i64,
    next_token: i64,
    locks: HashMap<i64, (String, CancellationToken)>,
    lock_keys: HashMap<i64, (String, String)>,
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
            attempts: Vec::new(),
        }
    }
}

/// One attempt of a run, as the memory backend recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// From 1.
    pub attempt: u32,
    /// The process that held it.
    pub owner: String,
    /// Its fencing token.
    pub token: i64,
    /// `running` until it ends.
    pub status: RunStatus,
    /// The error or the reason, when it did not succeed.
    pub message: Option<String>,
}

/// A run, as the memory backend recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The slot.
    pub key: SlotKey,
    /// The run's id.
    pub id: i64,
    /// Its status.
    pub status: RunStatus,
    /// Why it exists.
    pub trigger: Trigger,
    /// The slot's business date.
    pub business_date: NaiveDate,
    /// The current fencing token.
    pub token: i64,
    /// The run's last error or reason (a skip's, a replacement's, the last failure's).
    pub message: Option<String>,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
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
            .map(|(key, run)| RunRecord {
                key: key.clone(),
                id: run.id,
                status: run.status,
                trigger: run.trigger,
                business_date: run.business_date,
                token: run.token,
                message: run.message.clone(),
                attempts: run.attempts.clone(),
            })
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
            let answer = match inner.runs.get(&request.key) {
                Some(run) if run.status == RunStatus::Running && is_stale(run, now) => {
                    let token = inner.next_token();
                    let run = inner.runs.get_mut(&request.key).expect("present");
                    run.stale_after = request.stale_after;
                    Claim::Won(take_over(run, owner, token, now, "heartbeat expired"))
                }
                Some(run) => Claim::Taken { status: run.status },
                None => inner.claim_new(owner, request, now),
            };
            answers.push(answer);
        }
        Ok(answers)
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
        let mut due: Vec<(SlotKey, u32)> = inner
            .runs
            .iter()
            .filter_map(|(key, run)| {
                let spec = specs.iter().find(|s| s.job == key.job)?;
                let eligible = match run.status {
                    RunStatus::Pending | RunStatus::Abandoned => match run.next_attempt_at {
                        Some(at) => at <= now,
                        None => {
                            run.status == RunStatus::Pending && !inner.has_fresh_running(key, now)
                        }
                    },
                    RunStatus::Running => is_stale(run, now),
                    _ => false,
                };
                eligible.then(|| (key.clone(), spec.max_attempts))
            })
            .collect();
        due.sort_by(|a, b| a.0.scheduled_at.cmp(&b.0.scheduled_at).then(a.0.cmp(&b.0)));
        let mut claimed = Vec::new();
        for (key, max_attempts) in due {
            if claimed.len() >= limit {
                break;
            }
            let token = inner.next_token();
            let run = inner.runs.get_mut(&key).expect("present");
            let attempts = run.attempts.len() as u32;
            if attempts >= max_attempts && run.status != RunStatus::Pending {
                if let Some(last) = run.attempts.last_mut()
                    && last.status == RunStatus::Running
                {
                    last.status = RunStatus::Abandoned;
                    last.message = Some("heartbeat expired".into());
                }
                run.status = RunStatus::Dead;
                run.next_attempt_at = None;
                run.message = Some(format!("attempts exhausted ({attempts} of {max_attempts})"));
                continue;
            }
            let lease = take_over(run, owner, token, now, "heartbeat expired");
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

    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        for request in requests {
            if inner.runs.contains_key(&request.key) {
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
        lease: &Lease,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.runs.values_mut().find(|r| r.id == lease.run_id) else {
            return Ok(false);
        };
        if run.status != RunStatus::Running || run.token != lease.token || run.owner != owner {
            return Ok(false);
        }
        run.status = finish.status;
        run.message = finish.message.clone();
        run.next_attempt_at = finish
            .retry_in
            .map(|d| now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2));
        if let Some(last) = run.attempts.last_mut() {
            last.status = finish.attempt_status;
            last.message = finish.message.clone();
        }
        Ok(true)
    }
}

impl Inner {
    fn next_token(&mut self) -> i64 {
        self.next_token += 1;
        self.next_token
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

    fn claim_new(&mut self, owner: &str, request: &ClaimRequest, now: DateTime<Utc>) -> Claim {
        let key = &request.key;
        let busy = request.overlap != Overlap::Allow && self.has_fresh_running(key, now);
        let status = match (busy, request.overlap) {
            (true, Overlap::Skip) => Some((
                RunStatus::Skipped,
                "overlap: a previous run is still running",
            )),
            (true, Overlap::BufferOne) => {
                for (k, run) in self.runs.iter_mut() {
                    if k.job == key.job
                        && k.partition == key.partition
                        && run.status == RunStatus::Pending
                        && run.next_attempt_at.is_none()
                    {
                        run.status = RunStatus::Skipped;
                        run.message = Some("overlap: superseded by a newer slot".into());
                    }
                }
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
                        if let Some(last) = run.attempts.last_mut() {
                            last.status = RunStatus::Abandoned;
                            last.message = Some("replaced by a newer slot".into());
                        }
                    }
                }
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
            attempts: vec![running_attempt(1, owner, token)],
            ..Run::new(id, request, now)
        };
        if let Some((status, message)) = status {
            run.status = status;
            run.owner = String::new();
            run.message = Some(message.to_owned());
            run.attempts.clear();
            self.runs.insert(key.clone(), run);
            return Claim::Taken { status };
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
    if let Some(last) = run.attempts.last_mut()
        && last.status == RunStatus::Running
    {
        last.status = RunStatus::Abandoned;
        last.message = Some(why.to_owned());
    }
    run.status = RunStatus::Running;
    run.token = token;
    run.owner = owner.to_owned();
    run.heartbeat_at = now;
    run.next_attempt_at = None;
    let attempt = run.attempts.len() as u32 + 1;
    run.attempts.push(running_attempt(attempt, owner, token));
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
                Some(LockLease { key, lost })
            })
            .collect())
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

fn running_attempt(attempt: u32, owner: &str, token: i64) -> AttemptRecord {
    AttemptRecord {
        attempt,
        owner: owner.to_owned(),
        token,
        status: RunStatus::Running,
        message: None,
    }
}
