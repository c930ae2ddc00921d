//! The pure model: a list of rows and a logical clock, with every decision taken by
//! `slotguard::store::rules`. It is what every store is held to.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use slotguard::store::rules::{self, Change, Event, Mode, NewRow, RowFacts, SlotPlan, reason};
use slotguard::store::{
    Claim, ClaimRequest, DueSpec, Finish, Lease, RunStatus, SlotKey, Trigger, not_due,
};

/// A row of the model.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    key: SlotKey,
    status: RunStatus,
    owner: Option<String>,
    token: i64,
    heartbeat_at: Option<DateTime<Utc>>,
    stale_after: Duration,
    next_attempt_at: Option<DateTime<Utc>>,
    trigger: Trigger,
    message: Option<String>,
    finished: bool,
    attempts: Vec<(String, RunStatus, Option<String>)>,
}

/// The model store.
#[derive(Debug)]
pub(crate) struct Model {
    rows: Vec<Row>,
    pub(crate) now: DateTime<Utc>,
    next_id: i64,
    next_token: i64,
}

impl Row {
    fn facts(&self) -> RowFacts {
        RowFacts {
            id: self.id,
            key: self.key.clone(),
            status: self.status,
            attempt: self.attempts.len() as u32,
            heartbeat_at: self.heartbeat_at,
            stale_after: self.stale_after,
            next_attempt_at: self.next_attempt_at,
            trigger: self.trigger,
        }
    }

    fn close_attempt(&mut self, status: RunStatus, why: &str) {
        if let Some(last) = self.attempts.last_mut()
            && last.1 == RunStatus::Running
        {
            last.1 = status;
            last.2 = Some(why.to_owned());
        }
    }
}

impl Model {
    pub(crate) fn new(now: DateTime<Utc>) -> Self {
        Model {
            rows: Vec::new(),
            now,
            next_id: 0,
            next_token: 0,
        }
    }

    fn row(&mut self, id: i64) -> &mut Row {
        self.rows
            .iter_mut()
            .find(|r| r.id == id)
            .expect("a row the rules named")
    }

    fn change(&mut self, id: i64, change: Change) {
        let now = self.now;
        let row = self.row(id);
        row.status = change.status();
        row.message = Some(change.message());
        row.next_attempt_at = change.next_attempt_at(now);
        row.finished |= change.finishes();
        row.close_attempt(RunStatus::Abandoned, change.attempt_message());
    }

    fn take_over(&mut self, id: i64, owner: &str, stale_after: Option<Duration>) -> Lease {
        self.next_token += 1;
        let (now, token) = (self.now, self.next_token);
        let row = self.row(id);
        row.close_attempt(RunStatus::Abandoned, reason::HEARTBEAT_EXPIRED);
        row.status = RunStatus::Running;
        row.owner = Some(owner.to_owned());
        row.token = token;
        row.heartbeat_at = Some(now);
        row.stale_after = stale_after.unwrap_or(row.stale_after);
        row.next_attempt_at = None;
        row.finished = false;
        row.attempts
            .push((owner.to_owned(), RunStatus::Running, None));
        Lease {
            run_id: id,
            attempt: row.attempts.len() as u32,
            token,
            key: row.key.clone(),
        }
    }

    fn insert(&mut self, owner: &str, request: &ClaimRequest, new: NewRow) -> Option<Lease> {
        self.next_id += 1;
        let id = self.next_id;
        self.rows.push(Row {
            id,
            key: request.key.clone(),
            status: new.status(),
            owner: None,
            token: 0,
            heartbeat_at: None,
            stale_after: request.stale_after,
            next_attempt_at: (new == NewRow::Queued).then_some(request.key.scheduled_at),
            trigger: request.trigger,
            message: new.message().map(str::to_owned),
            finished: new == NewRow::Skipped,
            attempts: Vec::new(),
        });
        (new == NewRow::Running).then(|| self.take_over(id, owner, None))
    }

    /// `claim` or `enqueue_slots`, with the events the rules imply.
    pub(crate) fn claim(
        &mut self,
        owner: &str,
        requests: &[ClaimRequest],
        mode: Mode,
    ) -> (Vec<Claim>, Vec<&'static str>) {
        let mut answers = Vec::new();
        let mut events = Vec::new();
        for request in requests {
            let facts: Vec<RowFacts> = self.rows.iter().map(Row::facts).collect();
            let existing = facts.iter().find(|r| r.key == request.key);
            let plan = rules::plan_claim(request, mode, existing, &facts, self.now);
            for (id, change) in &plan.changes {
                self.change(*id, *change);
            }
            let lease = match plan.slot {
                SlotPlan::TakeOver(id) => {
                    Some(self.take_over(id, owner, Some(request.stale_after)))
                }
                SlotPlan::Insert(new) => self.insert(owner, request, new),
                SlotPlan::NotDue | SlotPlan::Busy | SlotPlan::Taken(_) => None,
            };
            answers.push(plan.answer(lease));
            events.extend(plan.events(request).iter().map(Event::name));
        }
        (answers, events)
    }

    /// `claim_due`: the slots and leases handed out, with the events.
    pub(crate) fn claim_due(
        &mut self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> (Vec<(SlotKey, Lease)>, Vec<&'static str>) {
        let facts: Vec<RowFacts> = self
            .rows
            .iter()
            .filter(|r| {
                matches!(
                    r.status,
                    RunStatus::Pending | RunStatus::Abandoned | RunStatus::Running
                )
            })
            .map(Row::facts)
            .collect();
        let plan = rules::plan_due(specs, &facts, self.now, limit);
        for (id, change) in plan.decide.iter().chain(&plan.bury).chain(&plan.fence) {
            self.change(*id, *change);
        }
        let claimed = plan
            .claim
            .iter()
            .map(|id| {
                let key = self.row(*id).key.clone();
                (key, self.take_over(*id, owner, None))
            })
            .collect();
        (
            claimed,
            plan.events(&facts).iter().map(Event::name).collect(),
        )
    }

    /// `Delay`: the slot's row, if `pending`, never attempted and due at a time, falls due `by`
    /// after now.
    pub(crate) fn delay(&mut self, key: &SlotKey, by: TimeDelta) {
        let at = self.now + by;
        for row in &mut self.rows {
            let queued = row.status == RunStatus::Pending && row.attempts.is_empty();
            if row.key == *key && queued && row.next_attempt_at.is_some() {
                row.next_attempt_at = Some(at);
            }
        }
    }

    /// `due_jobs`.
    pub(crate) fn due_jobs(&self, specs: &[DueSpec]) -> Vec<String> {
        let facts: Vec<RowFacts> = self.rows.iter().map(Row::facts).collect();
        rules::jobs_with_due_work(specs, &facts, self.now)
    }

    /// `record_skipped`.
    pub(crate) fn record_skipped(&mut self, requests: &[ClaimRequest], why: &str) {
        for request in requests {
            if self.rows.iter().any(|r| r.key == request.key) || not_due(request, self.now) {
                continue;
            }
            self.insert("", request, NewRow::Skipped);
            let row = self.rows.last_mut().expect("inserted");
            row.message = Some(why.to_owned());
        }
    }

    /// `heartbeat`: the tokens still held.
    pub(crate) fn heartbeat(&mut self, owner: &str, tokens: &[i64]) -> Vec<i64> {
        let now = self.now;
        let mut held = Vec::new();
        for row in &mut self.rows {
            let mine = row.owner.as_deref() == Some(owner) && tokens.contains(&row.token);
            if row.status == RunStatus::Running && mine {
                row.heartbeat_at = Some(now);
                held.push(row.token);
            }
        }
        held
    }

    /// `finish` of one attempt.
    pub(crate) fn finish(&mut self, owner: &str, lease: &Lease, finish: &Finish) -> bool {
        let now = self.now;
        let Some(row) = self.rows.iter_mut().find(|r| r.id == lease.run_id) else {
            return false;
        };
        let holds = row.owner.as_deref() == Some(owner) && row.token == lease.token;
        if row.status != RunStatus::Running || !holds {
            return false;
        }
        row.status = finish.status;
        row.message = finish.message.clone();
        row.finished = true;
        row.next_attempt_at = finish
            .retry_in
            .map(|d| now + TimeDelta::from_std(d).expect("a short delay"));
        if let Some(last) = row.attempts.last_mut() {
            last.1 = finish.attempt_status;
            last.2 = finish.message.clone();
        }
        true
    }

    /// Every row, as the stores are compared.
    pub(crate) fn snapshot(&self) -> Vec<super::stores::RowView> {
        let now = self.now;
        let mut rows: Vec<super::stores::RowView> = self
            .rows
            .iter()
            .map(|r| super::stores::RowView {
                key: r.key.clone(),
                status: r.status,
                attempt: r.attempts.len() as u32,
                owner: r.owner.clone().filter(|o| !o.is_empty()),
                message: r.message.clone(),
                due: r.next_attempt_at.map(|at| at <= now),
                finished: r.finished,
                stale: r.facts().is_stale(now),
                attempts: r.attempts.clone(),
            })
            .collect();
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        rows
    }
}
