//! The rules of [`SlotStore::claim_due`](crate::store::SlotStore::claim_due): which runs that wait
//! for another attempt are handed out, and which have had all their attempts.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{Change, Event, RowFacts};
use crate::policy::Overlap;
use crate::store::{DueSpec, RunStatus};

/// The decision on one `claim_due` call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuePlan {
    /// Queued slots decided by their job's overlap policy because another run of their job and
    /// partition is running ([`Change::Skip`], [`Change::Wait`], [`Change::Supersede`]), and the
    /// running runs a queued slot stops ([`Change::Replace`]).
    pub decide: Vec<(i64, Change)>,
    /// For `replace`: the queued slot that stops the running runs of its job and partition, and
    /// how many it stops.
    pub replacing: Vec<(i64, usize)>,
    /// Runs that become `dead` (always [`Change::Bury`]), oldest slot first.
    pub bury: Vec<(i64, Change)>,
    /// Runs that get a new attempt for the caller, oldest slot first, each with a token above
    /// every token handed out before the call: `running`, attempt + 1, a fresh heartbeat, no next attempt; a still-running previous
    /// attempt is closed `abandoned` ([`reason::HEARTBEAT_EXPIRED`](super::reason::HEARTBEAT_EXPIRED)).
    pub claim: Vec<i64>,
    /// The other stale `running` runs of the job and partition of a run handed out (overlap not
    /// `allow`), fenced ([`Change::Fence`]) as a new slot fences them: their frozen holders'
    /// heartbeats and writes are refused from now on, so that a holder that wakes runs beside the
    /// new attempt for no longer than its body takes to notice.
    pub fence: Vec<(i64, Change)>,
}

impl DuePlan {
    /// The events the plan implies: the overlap decisions on queued slots, then one
    /// [`Event::Dead`] per buried run.
    pub fn events<'a>(&self, rows: &'a [RowFacts]) -> Vec<Event<'a>> {
        let row = |id: i64| rows.iter().find(|r| r.id == id);
        let superseded = |of: &RowFacts| {
            self.decide
                .iter()
                .filter(|(id, c)| {
                    *c == Change::Supersede && row(*id).is_some_and(|r| r.is_sibling_of(&of.key))
                })
                .count()
        };
        let mut events = Vec::new();
        for (id, change) in &self.decide {
            match (change, row(*id)) {
                (Change::Skip, Some(r)) => events.push(Event::Skipped { key: &r.key }),
                (Change::Wait, Some(r)) => events.push(Event::Buffered {
                    key: &r.key,
                    superseded: superseded(r),
                }),
                _ => {}
            }
        }
        for (id, replaced) in &self.replacing {
            if let Some(r) = row(*id) {
                events.push(Event::Replaced {
                    key: &r.key,
                    replaced: *replaced,
                });
            }
        }
        for (id, _) in &self.fence {
            if let Some(r) = row(*id) {
                events.push(Event::Fenced {
                    key: &r.key,
                    run_id: *id,
                });
            }
        }
        for (id, change) in &self.bury {
            if let (Some(r), Change::Bury { max_attempts, .. }) = (row(*id), change) {
                events.push(Event::Dead {
                    key: &r.key,
                    run_id: *id,
                    attempt: r.attempt,
                    max_attempts: *max_attempts,
                });
            }
        }
        events
    }
}

/// Changes to rows, by id.
type Changes = Vec<(i64, Change)>;

/// The overlap decisions on queued slots: a slot a scheduler queued is decided by its job's policy
/// when a worker picks it, as a tick decides it at the slot's instant. For each job and partition
/// with a run `running` fresh: under `skip` its queued slots are skipped; under `buffer_one` the
/// newest waits and the older ones, and a slot that waited already, give way; under `replace` the
/// running runs are stopped (the oldest queued slot then runs).
fn decide_queued(
    rows: &[(&RowFacts, &DueSpec)],
    now: DateTime<Utc>,
) -> (Changes, Vec<(i64, usize)>) {
    let mut decide = Vec::new();
    let mut replacing = Vec::new();
    for group in by_pair(rows) {
        let of_pair = || group.iter().copied();
        let Some((_, spec)) = of_pair().next() else {
            continue;
        };
        let queued: Vec<i64> = of_pair()
            .filter(|(r, _)| r.is_queued_slot(now))
            .map(|(r, _)| r.id)
            .collect();
        if queued.is_empty() || !of_pair().any(|(r, _)| r.is_fresh_running(now)) {
            continue;
        }
        match spec.overlap {
            Overlap::Allow => {}
            Overlap::Skip => decide.extend(queued.iter().map(|id| (*id, Change::Skip))),
            Overlap::BufferOne => {
                let (newest, older) = queued.split_last().expect("not empty");
                let waiting = of_pair().filter(|(r, _)| r.is_waiting()).map(|(r, _)| r.id);
                decide.extend(
                    waiting
                        .chain(older.iter().copied())
                        .map(|id| (id, Change::Supersede)),
                );
                decide.push((*newest, Change::Wait));
            }
            Overlap::Replace => {
                let running: Vec<i64> = of_pair()
                    .filter(|(r, _)| r.status == RunStatus::Running)
                    .map(|(r, _)| r.id)
                    .collect();
                replacing.push((queued[0], running.len()));
                decide.extend(running.into_iter().map(|id| (id, Change::Replace)));
            }
        }
    }
    (decide, replacing)
}

/// `rows` grouped by job and partition, in the order each pair first appears (one pass).
fn by_pair<'a>(rows: &[(&'a RowFacts, &'a DueSpec)]) -> Vec<Vec<(&'a RowFacts, &'a DueSpec)>> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut groups: Vec<Vec<(&RowFacts, &DueSpec)>> = Vec::new();
    for &(row, spec) in rows {
        let pair = (row.key.job.as_str(), row.key.partition.as_str());
        let at = *index.entry(pair).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push((row, spec));
    }
    groups
}

/// How many rows of each job and partition are `running` with a fresh heartbeat.
fn fresh_running_per_pair<'a>(
    rows: &[(&'a RowFacts, &DueSpec)],
    now: DateTime<Utc>,
) -> HashMap<(&'a str, &'a str), usize> {
    let mut running: HashMap<(&str, &str), usize> = HashMap::new();
    for (row, _) in rows {
        if row.is_fresh_running(now) {
            let pair = (row.key.job.as_str(), row.key.partition.as_str());
            *running.entry(pair).or_default() += 1;
        }
    }
    running
}

/// `row` as it is once `change` is written.
fn changed(row: &RowFacts, change: Change, now: DateTime<Utc>) -> RowFacts {
    RowFacts {
        status: change.status(),
        next_attempt_at: change.next_attempt_at(now),
        ..row.clone()
    }
}

/// Decides a `claim_due` call at `now` (the store's clock) over `rows`: the `pending`, `abandoned`
/// and `running` rows of the jobs in `specs` (others are ignored). A job's first spec counts.
///
/// 0. Queued slots (attempt 0, from the schedule) of a job and partition with a run
///    `running` fresh are decided by the job's overlap policy, as a tick decides a new slot: under
///    `skip` they are skipped; under `buffer_one` the newest waits and the older ones, and a slot
///    that waited already, give way; under `replace` the running runs are stopped. The rest reads
///    the rows as decided.
/// 1. Stale `running` runs and `abandoned` runs due again that have had `max_attempts` attempts
///    become `dead`, oldest first, at most `limit`; they do not count towards it. A `pending` run
///    is never buried: one an operator enqueued or retried runs whatever its count.
/// 2. A run is due when it is `pending` and due again, `pending` and waiting while no other run
///    of its job and partition is `running` with a fresh heartbeat, or `abandoned` and due again or
///    `running` and stale with attempts left; and so is a queued slot that falls due within its
///    spec's `ahead` (claimed early; 3 keeps it while its job and partition has a run going).
/// 3. Unless its job's overlap is `allow`, a run is not handed out while another run of its job
///    and partition is `running` with a fresh heartbeat, and only the oldest due run of each job
///    and partition is handed out.
/// 4. A job gets at most its spec's `limit`, and at most `cluster_limit` minus its runs already
///    `running` fresh; the call hands out at most `limit` runs, oldest slot first.
/// 5. Unless its job's overlap is `allow`, the other stale `running` runs of the job and partition
///    of a run handed out (not handed out nor buried themselves) are fenced: `abandoned`, due again
///    at once, their attempts closed.
pub fn plan_due(specs: &[DueSpec], rows: &[RowFacts], now: DateTime<Utc>, limit: usize) -> DuePlan {
    let rows = with_specs(specs, rows);
    let (decide, replacing) = decide_queued(&rows, now);
    let decided: HashMap<i64, Change> = decide.iter().copied().collect();
    let after: Vec<RowFacts> = rows
        .iter()
        .map(|(row, _)| match decided.get(&row.id) {
            Some(change) => changed(row, *change, now),
            None => (*row).clone(),
        })
        .collect();
    let rows: Vec<(&RowFacts, &DueSpec)> = after
        .iter()
        .zip(rows.iter().map(|(_, spec)| *spec))
        .collect();
    // Another run of the row's job and partition is running fresh: the pair's count, less the
    // row itself.
    let fresh_in_pair = fresh_running_per_pair(&rows, now);
    let busy = |row: &RowFacts| {
        let pair = (row.key.job.as_str(), row.key.partition.as_str());
        let fresh = fresh_in_pair.get(&pair).copied().unwrap_or(0);
        fresh > usize::from(row.is_fresh_running(now))
    };
    let exhausted = |row: &RowFacts, spec: &DueSpec| {
        row.attempt >= spec.max_attempts && (row.is_stale(now) || is_abandoned_due(row, now))
    };
    let bury: Changes = rows
        .iter()
        .filter(|(row, spec)| exhausted(row, spec))
        .take(limit)
        .map(|(row, spec)| {
            let change = Change::Bury {
                attempt: row.attempt,
                max_attempts: spec.max_attempts,
            };
            (row.id, change)
        })
        .collect();
    let due = |row: &RowFacts, spec: &DueSpec| match row.status {
        RunStatus::Pending if row.is_waiting() => !busy(row),
        RunStatus::Pending => row.is_due_again(now) || row.is_queued_ahead(now, spec.lead()),
        _ => row.attempt < spec.max_attempts && (row.is_stale(now) || is_abandoned_due(row, now)),
    };
    let running = fresh_running_per_job(&rows, now);
    let mut claim = Vec::new();
    let mut handed: HashMap<&str, usize> = HashMap::new();
    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (row, spec) in &rows {
        if claim.len() >= limit {
            break;
        }
        let exclusive = spec.overlap != Overlap::Allow;
        if !due(row, spec) || (exclusive && busy(row)) {
            continue;
        }
        let pair = (row.key.job.as_str(), row.key.partition.as_str());
        if exclusive && !pairs.insert(pair) {
            continue;
        }
        let mine = handed.entry(pair.0).or_default();
        if spec.is_full(*mine, running.get(pair.0).copied().unwrap_or(0) + *mine) {
            continue;
        }
        *mine += 1;
        claim.push(row.id);
    }
    let fence = fenced(&rows, &claim, &bury, now);
    DuePlan {
        decide,
        replacing,
        bury,
        claim,
        fence,
    }
}

/// The stale `running` runs of the job and partition of a run `claim` hands out (overlap not
/// `allow`), other than the runs handed out or buried.
fn fenced(
    rows: &[(&RowFacts, &DueSpec)],
    claim: &[i64],
    bury: &[(i64, Change)],
    now: DateTime<Utc>,
) -> Changes {
    let pair = |row: &RowFacts| (row.key.job.clone(), row.key.partition.clone());
    let claimed: HashSet<(String, String)> = rows
        .iter()
        .filter(|(row, spec)| spec.overlap != Overlap::Allow && claim.contains(&row.id))
        .map(|(row, _)| pair(row))
        .collect();
    rows.iter()
        .filter(|(row, _)| row.status == RunStatus::Running && row.is_stale(now))
        .filter(|(row, _)| !claim.contains(&row.id) && !bury.iter().any(|(id, _)| *id == row.id))
        .filter(|(row, _)| claimed.contains(&pair(row)))
        .map(|(row, _)| (row.id, Change::Fence))
        .collect()
}

/// The rows of `specs`' jobs, each with its job's first spec, oldest slot first.
fn with_specs<'a>(specs: &'a [DueSpec], rows: &'a [RowFacts]) -> Vec<(&'a RowFacts, &'a DueSpec)> {
    let mut spec_of: HashMap<&str, &DueSpec> = HashMap::new();
    for spec in specs {
        spec_of.entry(spec.job.as_str()).or_insert(spec);
    }
    let mut rows: Vec<(&RowFacts, &DueSpec)> = rows
        .iter()
        .filter_map(|row| Some((row, *spec_of.get(row.key.job.as_str())?)))
        .collect();
    rows.sort_by(|a, b| slot_order(a.0, b.0));
    rows
}

/// How many runs of each job are `running` with a fresh heartbeat.
fn fresh_running_per_job<'a>(
    rows: &[(&'a RowFacts, &DueSpec)],
    now: DateTime<Utc>,
) -> HashMap<&'a str, usize> {
    let mut running: HashMap<&str, usize> = HashMap::new();
    for (row, _) in rows {
        if row.is_fresh_running(now) {
            *running.entry(row.key.job.as_str()).or_default() += 1;
        }
    }
    running
}

/// `abandoned` and due again.
fn is_abandoned_due(row: &RowFacts, now: DateTime<Utc>) -> bool {
    row.status == RunStatus::Abandoned && row.is_due_again(now)
}

/// Oldest slot first, then job, then partition.
fn slot_order(a: &RowFacts, b: &RowFacts) -> std::cmp::Ordering {
    (a.key.scheduled_at, &a.key.job, &a.key.partition).cmp(&(
        b.key.scheduled_at,
        &b.key.job,
        &b.key.partition,
    ))
}

/// Which jobs of `specs` have work waiting for `claim_due` among `rows` at `now`, sorted: runs due
/// again (retries, hand-overs, manual and backfill runs), stale attempts, waiting slots, and
/// queued slots that fall due within a spec's `ahead` of the job. Work
/// that must wait for a running run of its job counts: the caller looks again when that run ends.
pub fn jobs_with_due_work(specs: &[DueSpec], rows: &[RowFacts], now: DateTime<Utc>) -> Vec<String> {
    let mut jobs: Vec<String> = rows
        .iter()
        .filter(|row| specs.iter().any(|s| s.job == row.key.job))
        .filter(|row| {
            row.is_due_again(now)
                || row.is_stale(now)
                || row.is_waiting()
                || specs
                    .iter()
                    .any(|s| s.job == row.key.job && row.is_queued_ahead(now, s.lead()))
        })
        .map(|row| row.key.job.clone())
        .collect();
    jobs.sort();
    jobs.dedup();
    jobs
}
