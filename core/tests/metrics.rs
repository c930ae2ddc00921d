//! The metrics the runtime emits through the `metrics` facade, read back with a debugging recorder.
//! One test per binary: the recorder is global.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use slotguard::{Calendar, Job, JobContext, JobError, MemoryBackend, Scheduler, TokioClock};

#[path = "support/scheduler_and_worker.rs"]
mod scheduler_and_worker;
use scheduler_and_worker::scheduler_and_worker;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

#[tokio::test(start_paused = true)]
async fn runs_skips_conflicts_and_overdue_slots_are_counted_per_job() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let mut handles = Vec::new();
    for id in ["a", "b"] {
        let ok = Job::new("ok", "* * * * * *", |_| async {});
        let broken = Job::new("broken", "*/2 * * * * *", |_: JobContext| async {
            Err::<(), _>(JobError::permanent("misconfigured"))
        })
        .deadline(Duration::from_secs(1));
        // A holiday on its calendar today: every slot is removed, none runs.
        let today = chrono::NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        let holiday = Calendar::builtin("KR")
            .unwrap()
            .with_holiday(today, "test day");
        let closed = Job::new("closed", "* * * * * *", |_| async {}).calendar(holiday);
        let scheduler = Scheduler::builder()
            .backend(store.clone())
            .clock(clock)
            .instance_id(id)
            .jobs([ok, broken, closed])
            .build()
            .unwrap();
        handles.push(scheduler.try_start().await.unwrap());
    }
    let queue = MemoryBackend::with_clock(Arc::new(clock));
    handles.extend(scheduler_and_worker(&queue, clock).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for h in handles {
        h.shutdown().await;
    }

    let snapshot = snapshotter.snapshot().into_vec();
    let value = |name: &str, labels: &[(&str, &str)]| -> Option<&DebugValue> {
        snapshot.iter().find_map(|(key, _, _, v)| {
            let k = key.key();
            let matches = k.name() == name
                && labels
                    .iter()
                    .all(|(l, want)| k.labels().any(|x| x.key() == *l && x.value() == *want));
            matches.then_some(v)
        })
    };
    let counter = |name: &str, labels: &[(&str, &str)]| match value(name, labels) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name} {labels:?}: {other:?}"),
    };
    // 5 slots of `ok`, each run once in the cluster; the other replica's claim is a conflict.
    let started = counter("job_run_started_total", &[("job_name", "ok")]);
    assert!((4..=5).contains(&started), "{started}");
    assert_eq!(
        counter(
            "job_run_completed_total",
            &[("job_name", "ok"), ("status", "succeeded")]
        ),
        started
    );
    assert_eq!(
        counter("job_claim_conflict_total", &[("job_name", "ok")]),
        started
    );
    assert!(
        counter(
            "job_run_completed_total",
            &[("job_name", "broken"), ("status", "failed")]
        ) >= 2
    );
    assert!(counter("job_overdue_total", &[("job_name", "broken")]) >= 2);
    assert!(
        matches!(value("job_overdue", &[("job_name", "broken")]), Some(DebugValue::Gauge(g)) if g.into_inner() == 1.0)
    );
    assert!(
        value("job_overdue_total", &[("job_name", "ok")]).is_none(),
        "`ok` has no deadline"
    );
    assert!(
        matches!(value("job_run_duration_seconds", &[("job_name", "ok")]), Some(DebugValue::Histogram(h)) if h.len() as u64 == started)
    );
    assert!(matches!(
        value("job_schedule_lag_seconds", &[("job_name", "ok")]),
        Some(DebugValue::Histogram(_))
    ));
    assert!(
        matches!(value("job_last_success_timestamp", &[("job_name", "ok")]), Some(DebugValue::Gauge(g)) if g.into_inner() > 1.7e9)
    );
    let gauge = |name: &str, job: &str| match value(name, &[("job_name", job)]) {
        Some(DebugValue::Gauge(g)) => g.into_inner(),
        other => panic!("{name} {job}: {other:?}"),
    };
    // What the shipped alert rules read (deploy/prometheus): starts, periods, pauses, dead runs.
    let last_start = gauge("job_last_start_timestamp", "ok");
    assert!(
        last_start >= gauge("job_last_success_timestamp", "ok") - 1.0 && last_start > 1.7e9,
        "{last_start}"
    );
    assert_eq!(gauge("job_period_seconds", "ok"), 1.0);
    assert_eq!(gauge("job_period_seconds", "broken"), 2.0);
    assert_eq!(gauge("job_paused", "ok"), 0.0);
    // The calendar's data ends in 2050; its removed slots are skips, not runs.
    assert_eq!(gauge("job_calendar_last_year", "closed"), 2050.0);
    assert!(value("job_calendar_last_year", &[("job_name", "ok")]).is_none());
    let removed = counter(
        "job_skipped_total",
        &[("job_name", "closed"), ("reason", "calendar")],
    );
    assert!(
        (8..=10).contains(&removed),
        "both replicas, 4–5 slots each: {removed}"
    );
    assert!(value("job_run_started_total", &[("job_name", "closed")]).is_none());
    // A permanent error makes the run `dead` at once: a person has to look.
    assert!(counter("job_run_dead_total", &[("job_name", "broken")]) >= 2);
    assert!(value("job_run_dead_total", &[("job_name", "ok")]).is_none());
    // Both replicas measured their clock against the store's: the same clock here, so no skew.
    assert!(
        matches!(value("scheduler_clock_skew_seconds", &[]), Some(DebugValue::Gauge(g)) if g.into_inner().abs() < 0.001)
    );
    // A worker's claim of a slot the scheduler queued is its normal start; a retry is a recovery.
    let queued = counter("job_run_started_total", &[("job_name", "queued")]);
    assert!(queued >= 4, "{queued}");
    assert!(
        value("job_run_recovered_total", &[("job_name", "queued")]).is_none(),
        "no recovery of `queued`"
    );
    let retried = counter("job_run_recovered_total", &[("job_name", "flaky")]);
    assert!((1..=2).contains(&retried), "{retried}");
    // No label carries a run id or a slot.
    for (key, _, _, _) in &snapshot {
        for label in key.key().labels() {
            assert!(
                ["job_name", "status", "reason"].contains(&label.key()),
                "{label:?}"
            );
        }
    }
}
