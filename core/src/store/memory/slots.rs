//! Slot rows in memory: the claim rules of [`rules`](crate::store::rules) carried out under the
//! backend's mutex, which plays the transaction.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Inner, MemoryBackend, Run, running_attempt};
use crate::store::rules::{
    self, Change, ClaimPlan, Event, Mode, NewRow, RowFacts, SlotPlan, reason,
};
use crate::store::{
    CheckpointStore, Claim, ClaimRequest, ClockStore, DueClaim, DueSpec, Finish, Lease, QueueStore,
    RunStatus, SlotKey, SlotStore, StoreError,
};

impl Run {
    /// The row as the rules see it.
    pub(super) fn facts(&self, key: &SlotKey) -> RowFacts {
        RowFacts {
            id: self.id,
            key: key.clone(),
            status: self.status,
            attempt: self.attempts.len() as u32,
            heartbeat_at: Some(self.heartbeat_at),
            stale_after: self.stale_after,
            next_attempt_at: self.next_attempt_at,
            trigger: self.trigger,
        }
    }

    /// Writes a change the rules decided.
    fn apply(&mut self, change: Change, now: DateTime<Utc>) {
        self.status = change.status();
        self.message = Some(change.message());
        self.next_attempt_at = change.next_attempt_at(now);
        self.updated_at = now;
        if change.finishes() {
            self.finished_at = Some(now);
        }
        self.end_attempt(RunStatus::Abandoned, change.attempt_message(), now);
    }
}

impl Inner {
    /// The active rows of `key`'s job and partition other than `key`'s own.
    fn siblings(&self, key: &SlotKey) -> Vec<RowFacts> {
        self.runs
            .iter()
            .filter(|(k, r)| {
                k.job == key.job
                    && k.partition == key.partition
                    && k.scheduled_at != key.scheduled_at
                    && matches!(r.status, RunStatus::Running | RunStatus::Pending)
            })
            .map(|(k, r)| r.facts(k))
            .collect()
    }

    /// Decides and writes one request.
    fn claim_one(
        &mut self,
        owner: &str,
        request: &ClaimRequest,
        mode: Mode,
        now: DateTime<Utc>,
    ) -> (ClaimPlan, Claim) {
        let existing = self.runs.get(&request.key).map(|r| r.facts(&request.key));
        let siblings = self.siblings(&request.key);
        let plan = rules::plan_claim(request, mode, existing.as_ref(), &siblings, now);
        for (id, change) in &plan.changes {
            if let Some(run) = self.run_by_id(*id) {
                run.apply(*change, now);
            }
        }
        let lease = match plan.slot {
            SlotPlan::TakeOver(id) => {
                let token = self.next_token();
                self.run_by_id(id).map(|run| {
                    run.stale_after = request.stale_after;
                    take_over(run, &request.key, owner, token, now)
                })
            }
            SlotPlan::Insert(row) => self.insert(owner, request, row, now),
            SlotPlan::NotDue | SlotPlan::Busy | SlotPlan::Taken(_) => None,
        };
        let answer = plan.answer(lease);
        (plan, answer)
    }

    /// A new row for `request`; the lease when it runs.
    fn insert(
        &mut self,
        owner: &str,
        request: &ClaimRequest,
        row: NewRow,
        now: DateTime<Utc>,
    ) -> Option<Lease> {
        self.next_run_id += 1;
        let id = self.next_run_id;
        let mut run = Run {
            status: row.status(),
            message: row.message().map(str::to_owned),
            finished_at: (row == NewRow::Skipped).then_some(now),
            next_attempt_at: (row == NewRow::Queued).then_some(request.key.scheduled_at),
            ..Run::new(id, request, now)
        };
        let lease = (row == NewRow::Running).then(|| {
            let token = self.next_token();
            run.owner = owner.to_owned();
            run.token = token;
            run.attempts = vec![running_attempt(1, owner, token, now)];
            Lease {
                run_id: id,
                attempt: 1,
                token,
                key: request.key.clone(),
            }
        });
        self.runs.insert(request.key.clone(), run);
        lease
    }

    /// Every active row of the jobs in `specs`, as the rules see them.
    fn active_rows(&self, specs: &[DueSpec]) -> Vec<RowFacts> {
        self.runs
            .iter()
            .filter(|(k, r)| {
                matches!(
                    r.status,
                    RunStatus::Pending | RunStatus::Abandoned | RunStatus::Running
                ) && specs.iter().any(|s| s.job == k.job)
            })
            .map(|(k, r)| r.facts(k))
            .collect()
    }

    /// Records one attempt's outcome if `owner` still holds it with its token.
    fn finish(&mut self, owner: &str, lease: &Lease, finish: &Finish, now: DateTime<Utc>) -> bool {
        let Some(run) = self.held(owner, lease) else {
            return false;
        };
        run.status = finish.status;
        run.message = finish.message.clone();
        run.error_class = finish.error_class;
        run.updated_at = now;
        // As on every store: when the attempt ended, even with a retry planned.
        run.finished_at = Some(now);
        run.next_attempt_at = finish.retry_in.map(|d| later(now, d));
        if let Some(last) = run.attempts.last_mut() {
            last.status = finish.attempt_status;
            last.message = finish.message.clone();
            last.finished_at = Some(now);
        }
        true
    }

    /// The run of `lease`'s slot while `owner` holds it with the lease's run id and token and it
    /// is `running`: the check of every fenced write.
    pub(super) fn held(&mut self, owner: &str, lease: &Lease) -> Option<&mut Run> {
        self.runs.get_mut(&lease.key).filter(|run| {
            run.id == lease.run_id
                && run.token == lease.token
                && run.owner == owner
                && run.status == RunStatus::Running
        })
    }

    /// The run with `run_id`: a scan (the memory backend keeps runs by slot key).
    pub(super) fn run_by_id(&mut self, run_id: i64) -> Option<&mut Run> {
        self.runs.values_mut().find(|r| r.id == run_id)
    }

    pub(super) fn next_token(&mut self) -> i64 {
        self.next_token += 1;
        self.next_token
    }
}

/// `now + d`, saturating far in the future.
fn later(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2)
}

/// A new attempt of an existing run for `owner`; a still-running previous attempt is abandoned.
fn take_over(run: &mut Run, key: &SlotKey, owner: &str, token: i64, now: DateTime<Utc>) -> Lease {
    run.end_attempt(RunStatus::Abandoned, reason::HEARTBEAT_EXPIRED, now);
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
        key: key.clone(),
    }
}

impl MemoryBackend {
    /// Keeps each queued row's `traceparent` (see [`QueueStore::enqueue_slots`]).
    fn keep_traces(&self, requests: &[ClaimRequest], traces: &[Option<String>], answers: &[Claim]) {
        let mut inner = self.lock();
        for ((request, trace), answer) in requests.iter().zip(traces).zip(answers) {
            if let (Some(trace), Claim::Queued) = (trace, answer)
                && let Some(run) = inner.runs.get_mut(&request.key)
            {
                run.trace_parent = Some(trace.clone());
            }
        }
    }

    /// `claim` or `enqueue_slots`: decides and writes every request, then logs what the rules
    /// imply.
    fn claim_all(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        mode: Mode,
    ) -> Result<Vec<Claim>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let decided: Vec<(ClaimPlan, Claim)> = requests
            .iter()
            .map(|request| inner.claim_one(owner, request, mode, now))
            .collect();
        drop(inner);
        for ((plan, _), request) in decided.iter().zip(requests) {
            Event::emit_all(&plan.events(request));
        }
        Ok(decided.into_iter().map(|(_, answer)| answer).collect())
    }
}

#[async_trait]
impl SlotStore for MemoryBackend {
    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_all(owner, requests, Mode::Claim)
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
        let rows = inner.active_rows(specs);
        let plan = rules::plan_due(specs, &rows, now, limit);
        for (id, change) in plan.decide.iter().chain(&plan.bury).chain(&plan.fence) {
            if let Some(run) = inner.run_by_id(*id) {
                run.apply(*change, now);
            }
        }
        let mut claimed = Vec::with_capacity(plan.claim.len());
        for id in &plan.claim {
            let Some(key) = rows.iter().find(|r| r.id == *id).map(|r| r.key.clone()) else {
                continue;
            };
            let token = inner.next_token();
            let Some(run) = inner.run_by_id(*id) else {
                continue;
            };
            let lease = take_over(run, &key, owner, token, now);
            let (trigger, zone, wall, business_date) =
                (run.trigger, run.zone.clone(), run.wall, run.business_date);
            let trace_parent = run.trace_parent.clone();
            claimed.push(DueClaim {
                key,
                lease,
                trigger,
                zone,
                wall,
                business_date,
                trace_parent,
            });
        }
        drop(inner);
        Event::emit_all(&plan.events(&rows));
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
        let rows = inner.active_rows(specs);
        Ok(rules::jobs_with_due_work(specs, &rows, now))
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
            if inner.runs.contains_key(&request.key) || crate::store::not_due(request, now) {
                continue;
            }
            inner.next_run_id += 1;
            let id = inner.next_run_id;
            inner.runs.insert(
                request.key.clone(),
                Run {
                    status: RunStatus::Skipped,
                    message: Some(reason.to_owned()),
                    finished_at: Some(now),
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
}

#[async_trait]
impl QueueStore for MemoryBackend {
    async fn enqueue_slots(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError> {
        let answers = self.claim_all("", requests, Mode::Enqueue)?;
        self.keep_traces(requests, traces, &answers);
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
}

#[async_trait]
impl CheckpointStore for MemoryBackend {
    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.held(owner, lease) else {
            return Ok(false);
        };
        run.checkpoint = Some(data.to_owned());
        Ok(true)
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        Ok(inner.run_by_id(run_id).and_then(|r| r.checkpoint.clone()))
    }
}

#[async_trait]
impl ClockStore for MemoryBackend {
    async fn store_now(&self) -> Result<DateTime<Utc>, StoreError> {
        self.check(&self.lock())?;
        Ok(self.clock.now())
    }
}
