//! The metrics slotguard emits, through the [`metrics`](https://docs.rs/metrics) facade: install any
//! recorder (Prometheus, StatsD, ...) in the application and they appear. Labels are low-cardinality
//! only (`job_name`, `status`, `reason`); run ids and slots go in logs, never in labels.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `job_run_started_total` | counter | `job_name` | attempts this process started |
//! | `job_run_completed_total` | counter | `job_name`, `status` | attempts ended: `succeeded`, `failed`, `abandoned` |
//! | `job_run_duration_seconds` | histogram | `job_name` | how long attempts ran |
//! | `job_schedule_lag_seconds` | histogram | `job_name` | start of a scheduled run minus its slot |
//! | `job_last_success_timestamp` | gauge | `job_name` | Unix time of this process's last success |
//! | `job_last_start_timestamp` | gauge | `job_name` | Unix time this process last started an attempt |
//! | `job_period_seconds` | gauge | `job_name` | the longest gap between the job's next ten slots, from start-up |
//! | `job_scheduled_since_timestamp` | gauge | `job_name` | Unix time this process started timing the job |
//! | `job_calendar_last_year` | gauge | `job_name` | the last year the holiday data of the job's business calendar covers (set at start-up; absent for a calendar built in code) |
//! | `job_paused` | gauge | `job_name` | 1 while the job is paused, as this replica last read it |
//! | `job_run_dead_total` | counter | `job_name` | runs that became `dead`: attempts exhausted, or a permanent error |
//! | `job_run_fenced_total` | counter | `job_name` | stale runs (their owner gone or frozen) fenced when a newer slot of the job was claimed |
//! | `job_claim_conflict_total` | counter | `job_name` | slots another replica had claimed or locked |
//! | `job_skipped_total` | counter | `job_name`, `reason` | slots not run here, by reason |
//! | `job_slots_missed_total` | counter | `job_name` | slots the timer could not fire (process suspended or starved) |
//! | `job_run_recovered_total` | counter | `job_name` | attempts claimed by recovery: retries, hand-overs, stale runs, catch-up, manual runs (not a worker's first attempt of a queued slot) |
//! | `job_ownership_lost_total` | counter | `job_name` | runs told they lost their lease or lock |
//! | `job_overdue` | gauge | `job_name` | 1 while a slot has not succeeded by its deadline |
//! | `job_overdue_total` | counter | `job_name` | slots that passed their deadline without success |
//! | `job_slots_enqueued_total` | counter | `job_name` | slots this `scheduler`-role process queued for workers |
//! | `job_runs_pruned_total` | counter | `job_name` | finished runs this process deleted past their retention (with their attempts and audit records) |
//! | `scheduler_clock_skew_seconds` | gauge | none | this replica's clock minus the store's, at the last measurement ([`ClockSync`](crate::ClockSync)) |

use std::time::Duration;

use metrics::{counter, gauge, histogram};

pub(crate) fn run_started(job: &str, lag: Option<Duration>, now_unix: f64) {
    counter!("job_run_started_total", "job_name" => job.to_owned()).increment(1);
    gauge!("job_last_start_timestamp", "job_name" => job.to_owned()).set(now_unix);
    if let Some(lag) = lag {
        histogram!("job_schedule_lag_seconds", "job_name" => job.to_owned())
            .record(lag.as_secs_f64());
    }
}

pub(crate) fn run_completed(job: &str, status: &'static str, took: Duration, now_unix: f64) {
    counter!("job_run_completed_total", "job_name" => job.to_owned(), "status" => status)
        .increment(1);
    histogram!("job_run_duration_seconds", "job_name" => job.to_owned()).record(took.as_secs_f64());
    if status == "succeeded" {
        gauge!("job_last_success_timestamp", "job_name" => job.to_owned()).set(now_unix);
        gauge!("job_overdue", "job_name" => job.to_owned()).set(0.0);
    }
}

pub(crate) fn skipped(job: &str, reason: &'static str) {
    if matches!(reason, "already_claimed" | "locked_elsewhere") {
        counter!("job_claim_conflict_total", "job_name" => job.to_owned()).increment(1);
    }
    counter!("job_skipped_total", "job_name" => job.to_owned(), "reason" => reason).increment(1);
}

pub(crate) fn slots_missed(job: &str, count: u64) {
    counter!("job_slots_missed_total", "job_name" => job.to_owned()).increment(count);
}

pub(crate) fn enqueued(job: &str) {
    counter!("job_slots_enqueued_total", "job_name" => job.to_owned()).increment(1);
}

pub(crate) fn recovered(job: &str) {
    counter!("job_run_recovered_total", "job_name" => job.to_owned()).increment(1);
}

pub(crate) fn ownership_lost(job: &str) {
    counter!("job_ownership_lost_total", "job_name" => job.to_owned()).increment(1);
}

/// A run that became `dead`: a person has to look.
pub(crate) fn run_dead(job: &str) {
    counter!("job_run_dead_total", "job_name" => job.to_owned()).increment(1);
}

/// A stale run fenced by a newer slot of its job.
pub(crate) fn run_fenced(job: &str) {
    counter!("job_run_fenced_total", "job_name" => job.to_owned()).increment(1);
}

/// Whether the job is paused, as this replica read it.
pub(crate) fn paused(job: &str, paused: bool) {
    gauge!("job_paused", "job_name" => job.to_owned()).set(if paused { 1.0 } else { 0.0 });
}

/// The longest gap between the job's upcoming slots (how long a silent job is normal), and since
/// when this process times it.
pub(crate) fn period(job: &str, longest_gap: Duration, now_unix: f64) {
    gauge!("job_period_seconds", "job_name" => job.to_owned()).set(longest_gap.as_secs_f64());
    gauge!("job_scheduled_since_timestamp", "job_name" => job.to_owned()).set(now_unix);
}

/// The last year the job's calendar covers.
pub(crate) fn calendar_last_year(job: &str, year: i32) {
    gauge!("job_calendar_last_year", "job_name" => job.to_owned()).set(f64::from(year));
}

pub(crate) fn overdue(job: &str) {
    counter!("job_overdue_total", "job_name" => job.to_owned()).increment(1);
    gauge!("job_overdue", "job_name" => job.to_owned()).set(1.0);
}

pub(crate) fn runs_pruned(job: &str, count: u64) {
    counter!("job_runs_pruned_total", "job_name" => job.to_owned()).increment(count);
}

pub(crate) fn clock_skew(skew: chrono::TimeDelta) {
    let seconds = skew.num_microseconds().map_or_else(
        || skew.num_milliseconds() as f64 / 1e3,
        |us| us as f64 / 1e6,
    );
    gauge!("scheduler_clock_skew_seconds").set(seconds);
}
