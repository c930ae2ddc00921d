//! The contract every admin store passes: registered jobs and pauses, run listings, slot times and
//! watermarks, retries (raced from several tasks), operator runs, cancellation and the audit trail.
//!
//! Each check takes a fresh, empty backend of its own. Times an operator gives (`not_before`) are
//! read from the store's clock ([`store_now`]), so that they mean the same against the memory
//! backend in paused time and against a database.

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::{
    AdminStore, AuditEntry, Backend, ClaimRequest, Enqueue, Finish, JobDefinition, Lease,
    RunFilter, RunRecord, SlotKey, Trigger,
};

pub(crate) use crate::{request, spec, won};

/// Declares one test per admin-contract check (all but [`concurrent_retries_are_done_once`],
/// [`hostile_job_names_round_trip_through_every_operation`] and
/// [`names_outside_the_rule_are_bad_input`] and [`concurrent_triggers_each_get_a_run`], which take
/// more than a backend), each
/// with the test attribute given and a fresh backend from `fresh().await`, which may return anything
/// that dereferences to the backend (a guard that also holds its file or schema).
///
/// ```ignore
/// slotguard_tests::admin_contract!(#[tokio::test(start_paused = true)] fresh);
/// ```
#[macro_export]
macro_rules! admin_contract {
    (#[$test:meta] $fresh:ident) => {
        $crate::admin_contract!(@each #[$test] $fresh;
            jobs_are_registered_and_keep_their_pause_state,
            runs_are_listed_newest_first_by_every_filter,
            the_newest_run_of_each_job_is_read_at_once,
            runs_are_counted_per_job_and_status,
            slot_times_and_watermarks,
            a_retried_run_is_due_again_and_claimed_with_the_next_attempt,
            a_retried_dead_run_gets_an_attempt_beyond_the_maximum,
            enqueued_runs_are_created_once_and_claimed_once_due,
            cancelling_takes_the_run_from_its_holder_or_the_queue,
            the_audit_trail_is_newest_first_per_job_and_capped,
            replicas_record_themselves_go_stale_and_leave,
            finished_runs_past_their_retention_are_pruned,
            schedule_versions_are_written_once_and_in_order,
            operator_skips_hold_until_undone,
            calendar_overrides_are_appended_in_order_and_audited,
            runs_keep_the_calendar_they_were_planned_on);
    };
    (@each #[$test:meta] $fresh:ident; $($check:ident),+) => {
        $(
            #[$test]
            async fn $check() {
                let backend = $fresh().await;
                $crate::admin::$check(&*backend).await;
            }
        )+
    };
}

mod audit;
mod calendars;
mod cancel;
mod enqueue;
mod jobs;
mod replicas;
mod retention;
mod retry;
mod runs;
mod schedules;

pub use audit::the_audit_trail_is_newest_first_per_job_and_capped;
pub use calendars::{
    calendar_overrides_are_appended_in_order_and_audited, override_spec,
    runs_keep_the_calendar_they_were_planned_on,
};
pub use cancel::cancelling_takes_the_run_from_its_holder_or_the_queue;
pub use enqueue::{
    concurrent_triggers_each_get_a_run, enqueued_runs_are_created_once_and_claimed_once_due,
};
pub use jobs::{
    hostile_job_names_round_trip_through_every_operation, hostile_names,
    jobs_are_registered_and_keep_their_pause_state, names_outside_the_rule_are_bad_input,
};
pub use replicas::{replica, replicas_record_themselves_go_stale_and_leave};
pub use retention::finished_runs_past_their_retention_are_pruned;
pub use retry::{
    a_retried_dead_run_gets_an_attempt_beyond_the_maximum,
    a_retried_run_is_due_again_and_claimed_with_the_next_attempt, concurrent_retries_are_done_once,
};
pub use runs::{
    runs_are_counted_per_job_and_status, runs_are_listed_newest_first_by_every_filter,
    slot_times_and_watermarks, the_newest_run_of_each_job_is_read_at_once,
};
pub use schedules::{
    operator_skips_hold_until_undone, schedule_spec,
    schedule_versions_are_written_once_and_in_order,
};

/// The staleness threshold of the checks' runs: long enough that nothing goes stale by accident.
pub const STALE: Duration = Duration::from_secs(60);

/// An RFC 3339 instant.
pub fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .expect("valid RFC 3339")
        .with_timezone(&Utc)
}

/// What an operator did, who, and why.
pub fn entry(action: &str, actor: &str, reason: &str) -> AuditEntry {
    AuditEntry::new(action, actor, reason)
}

/// A job as a scheduler registers it.
pub fn definition(name: &str, cron: &str, fingerprint: u64) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "Europe/Berlin".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint,
        calendar: None,
    }
}

/// Every run, newest slot first, at most `limit`.
pub fn filter(limit: usize) -> RunFilter {
    RunFilter {
        limit,
        ..RunFilter::default()
    }
}

/// A run an operator asks for, due at `not_before`.
pub fn enqueue(job: &str, slot: &str, trigger: Trigger, not_before: DateTime<Utc>) -> Enqueue {
    let mut request = request(job, slot, STALE);
    request.trigger = trigger;
    Enqueue {
        request,
        not_before,
    }
}

/// The admin listing.
pub async fn list(backend: &dyn Backend, filter: &RunFilter) -> Vec<RunRecord> {
    AdminStore::runs(backend, filter).await.expect("runs")
}

/// The one run of `key`, through the admin listing.
pub async fn run_of(backend: &dyn Backend, key: &SlotKey) -> RunRecord {
    let runs = list(
        backend,
        &RunFilter {
            job: Some(key.job.clone()),
            partition: Some(key.partition.clone()),
            from: Some(key.scheduled_at),
            to: Some(key.scheduled_at + chrono::Duration::seconds(1)),
            limit: 10,
            ..RunFilter::default()
        },
    )
    .await;
    assert_eq!(runs.len(), 1, "{key:?}: {runs:?}");
    runs.into_iter().next().expect("one run")
}

/// Claims `request` for `owner`, which must win it.
pub async fn claim_one(backend: &dyn Backend, owner: &str, request: &ClaimRequest) -> Lease {
    won(&backend
        .claim(owner, std::slice::from_ref(request))
        .await
        .expect("claim")[0])
}

/// Claims `request` for `owner` and finishes it with `finish`; the run's id.
pub async fn finished(
    backend: &dyn Backend,
    owner: &str,
    request: &ClaimRequest,
    finish: &Finish,
) -> i64 {
    let lease = claim_one(backend, owner, request).await;
    assert!(
        backend
            .finish_one(owner, &lease, finish)
            .await
            .expect("finish")
    );
    lease.run_id
}

/// A transient failure with no retry planned.
pub fn failed() -> Finish {
    Finish::failed(ErrorClass::Transient, "503", None)
}

/// A failed run of `job` at `instant`: claimed by `worker` and finished with a transient error and no
/// retry.
pub async fn failed_run(backend: &dyn Backend, job: &str, instant: &str) -> SlotKey {
    let req = request(job, instant, STALE);
    let lease = claim_one(backend, "worker", &req).await;
    let failed = Finish::failed(ErrorClass::Transient, "connection reset", None);
    assert!(
        backend
            .finish_one("worker", &lease, &failed)
            .await
            .expect("finish")
    );
    req.key
}

/// The store's clock ([`ClockStore::store_now`](slotguard::store::ClockStore::store_now)).
pub async fn store_clock(backend: &dyn Backend) -> DateTime<Utc> {
    backend.store_now().await.expect("store clock")
}

/// The store's clock cut to the millisecond, the coarsest precision a store keeps: an instant to
/// give the store and compare with what it reads back.
pub async fn store_now(backend: &dyn Backend) -> DateTime<Utc> {
    let now = store_clock(backend).await;
    DateTime::from_timestamp_millis(now.timestamp_millis()).expect("in range")
}
