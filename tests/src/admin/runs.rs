//! What operators read: run listings, slot times and watermarks.

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use slotguard::ErrorClass;
use slotguard::store::{
    Backend, ClaimRequest, Finish, Lease, RunFilter, RunRecord, RunStatus, Trigger,
};

use super::{
    STALE, at, enqueue, entry, failed, filter, finished, list, request, run_of, spec, store_now,
    won,
};

/// A listed run as `(job, HH:MM, partition)`.
type Row = (String, String, String);

fn row(job: &str, time: &str, partition: &str) -> Row {
    (job.to_owned(), time.to_owned(), partition.to_owned())
}

fn row_of(request: &ClaimRequest) -> Row {
    let key = &request.key;
    row(
        &key.job,
        &key.scheduled_at.format("%H:%M").to_string(),
        &key.partition,
    )
}

async fn rows(backend: &dyn Backend, filter: RunFilter) -> Vec<Row> {
    list(backend, &filter)
        .await
        .iter()
        .map(|r| {
            let k = &r.key;
            row(
                &k.job,
                &k.scheduled_at.format("%H:%M").to_string(),
                &k.partition,
            )
        })
        .collect()
}

/// Runs are listed newest slot first (newest row first within a slot) by job, status, partition and
/// `[from, to)` (bounds between the instants a store keeps included), with a page size that is
/// capped rather than refused; names are not patterns; every field of a failed and a running run
/// reads back. Then, with runs of every status (a run retried, a skipped slot, partitions), every
/// filter selects what one rule selects from the full listing.
pub async fn runs_are_listed_newest_first_by_every_filter(backend: &dyn Backend) {
    let (requests, leases) = claim_reports(backend).await;
    // Newest slot first; within one slot, the newest row (highest id) first. (The ids of one batch
    // need not follow the order of its requests.)
    let mut by_age: Vec<_> = requests.iter().zip(&leases).collect();
    by_age.sort_by_key(|(r, l)| std::cmp::Reverse((r.key.scheduled_at, l.run_id)));
    let newest: Vec<Row> = by_age.iter().map(|(r, _)| row_of(r)).collect();
    assert_eq!(newest[0], row("report", "02:00", ""));
    assert_eq!(newest[4], row("report", "00:00", ""));
    filters_select_what_they_name(backend, &newest).await;
    failed_and_running_runs_read_back(backend, &requests, &leases).await;
    let retrying = add_runs_of_every_status(backend).await;
    every_filter_follows_one_rule(backend, &retrying).await;
}

/// Claims four reports and an other; the 01:00 report fails, the 02:00 one stays running, the others
/// succeed.
async fn claim_reports(backend: &dyn Backend) -> (Vec<ClaimRequest>, Vec<Lease>) {
    let mut eu = request("report", "2026-01-01T01:00:00Z", STALE);
    eu.key.partition = "eu".to_owned();
    let requests = vec![
        request("report", "2026-01-01T00:00:00Z", STALE),
        request("report", "2026-01-01T01:00:00Z", STALE),
        request("report", "2026-01-01T02:00:00Z", STALE),
        request("other", "2026-01-01T01:00:00Z", STALE),
        eu,
    ];
    let leases: Vec<Lease> = backend
        .claim("worker", &requests)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    for (i, lease) in leases.iter().enumerate() {
        let outcome = match i {
            1 => Finish::failed(ErrorClass::Transient, "timeout", None),
            2 => continue,
            _ => Finish::succeeded(),
        };
        assert!(
            backend
                .finish_one("worker", lease, &outcome)
                .await
                .expect("finish")
        );
    }
    (requests, leases)
}

async fn filters_select_what_they_name(backend: &dyn Backend, newest: &[Row]) {
    let report = || Some("report".to_owned());
    let of = |keep: &dyn Fn(&Row) -> bool| newest.iter().filter(|r| keep(r)).cloned().collect();
    let cases: [(RunFilter, Vec<Row>); 9] = [
        (filter(100), newest.to_vec()),
        (
            RunFilter {
                job: report(),
                partition: Some(String::new()),
                ..filter(100)
            },
            of(&|r| r.0 == "report" && r.2.is_empty()),
        ),
        (
            RunFilter {
                status: Some(RunStatus::Failed),
                ..filter(100)
            },
            vec![row("report", "01:00", "")],
        ),
        (
            RunFilter {
                partition: Some("eu".into()),
                ..filter(100)
            },
            vec![row("report", "01:00", "eu")],
        ),
        // `from` is inclusive, `to` exclusive.
        (
            RunFilter {
                job: report(),
                from: Some(at("2026-01-01T01:00:00Z")),
                to: Some(at("2026-01-01T02:00:00Z")),
                ..filter(100)
            },
            of(&|r| r.0 == "report" && r.1 == "01:00"),
        ),
        // Bounds between milliseconds keep their meaning: just after 01:00 excludes it, just after
        // 02:00 includes it.
        (
            RunFilter {
                job: report(),
                from: Some(at("2026-01-01T01:00:00.000000001Z")),
                to: Some(at("2026-01-01T02:00:00.000000001Z")),
                ..filter(100)
            },
            vec![row("report", "02:00", "")],
        ),
        (filter(2), newest[..2].to_vec()),
        // No limit at all is capped by the store, not refused.
        (filter(usize::MAX), newest.to_vec()),
        (filter(0), Vec::new()),
    ];
    for (case, want) in cases {
        assert_eq!(rows(backend, case.clone()).await, want, "{case:?}");
    }
    let pattern = RunFilter {
        job: Some("%".into()),
        ..filter(100)
    };
    assert!(
        rows(backend, pattern).await.is_empty(),
        "names are not patterns"
    );
}

/// Every field of the record, for the failed and the running report.
async fn failed_and_running_runs_read_back(
    backend: &dyn Backend,
    requests: &[ClaimRequest],
    leases: &[Lease],
) {
    let failed = run_of(backend, &requests[1].key).await;
    assert_eq!(failed.id, leases[1].run_id);
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!((failed.attempt, failed.token), (1, leases[1].token));
    assert_eq!(failed.owner.as_deref(), Some("worker"));
    assert_eq!(failed.error_class.as_deref(), Some("transient"));
    assert_eq!(failed.error_message.as_deref(), Some("timeout"));
    assert_eq!(failed.stale_after, STALE);
    assert_eq!(failed.trigger, Trigger::Schedule);
    assert_eq!(failed.zone, "UTC");
    assert_eq!(failed.wall_time, requests[1].wall);
    assert_eq!(failed.business_date, requests[1].business_date);
    assert_eq!(failed.fingerprint, 7);
    assert_eq!(failed.next_attempt_at, None);
    let started = failed.started_at.expect("started_at");
    let finished = failed.finished_at.expect("finished_at");
    assert!(failed.created_at <= started && started <= finished);
    assert_eq!(failed.updated_at, finished);
    assert!(failed.heartbeat_at.is_some());
    assert_eq!(failed.attempts.len(), 1);
    let attempt = &failed.attempts[0];
    assert_eq!(
        (
            attempt.attempt,
            attempt.owner.as_str(),
            attempt.token,
            attempt.status
        ),
        (1, "worker", leases[1].token, RunStatus::Failed)
    );
    assert_eq!(attempt.started_at, started);
    assert_eq!(attempt.finished_at, Some(finished));
    assert_eq!(attempt.message.as_deref(), Some("timeout"));

    let running = run_of(backend, &requests[2].key).await;
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.finished_at, None);
    assert_eq!(running.attempts[0].status, RunStatus::Running);
    assert_eq!(running.attempts[0].finished_at, None);
}

/// `f1`: succeeded, failed (two attempts), running, skipped; `f2`: two partitions at one instant, one
/// of them again later. The request of the run that failed twice.
async fn add_runs_of_every_status(backend: &dyn Backend) -> ClaimRequest {
    let succeeded = request("f1", "2026-01-01T00:00:00Z", STALE);
    finished(backend, "a", &succeeded, &Finish::succeeded()).await;
    let retrying = request("f1", "2026-01-01T00:01:00Z", STALE);
    let again = Finish::failed(ErrorClass::Transient, "503", Some(Duration::ZERO));
    finished(backend, "a", &retrying, &again).await;
    let due = backend
        .claim_due("b", &[spec("f1", 3)], 10)
        .await
        .expect("due");
    assert!(
        backend
            .finish_one("b", &due[0].lease, &failed())
            .await
            .expect("finish")
    );
    backend
        .claim("a", &[request("f1", "2026-01-01T00:02:00Z", STALE)])
        .await
        .expect("claim");
    backend
        .record_skipped(&[request("f1", "2026-01-01T00:03:00Z", STALE)], "busy")
        .await
        .expect("skip");
    let part = |p: &str, slot: &str| {
        let mut r = request("f2", slot, STALE);
        r.key.partition = p.to_owned();
        r
    };
    let both = [
        part("b", "2026-01-01T00:01:00Z"),
        part("a", "2026-01-01T00:01:00Z"),
    ];
    backend.claim("c", &both).await.expect("claim");
    let later = part("a", "2026-01-01T00:02:00Z");
    finished(backend, "c", &later, &Finish::succeeded()).await;
    retrying
}

/// The filters of the listing's cases, with what one rule says each selects.
fn cases() -> [RunFilter; 12] {
    let job = |name: &str| Some(name.to_owned());
    [
        RunFilter {
            job: job("f1"),
            ..filter(100)
        },
        RunFilter {
            status: Some(RunStatus::Running),
            ..filter(100)
        },
        RunFilter {
            status: Some(RunStatus::Succeeded),
            job: job("f2"),
            ..filter(100)
        },
        RunFilter {
            partition: Some("a".into()),
            ..filter(100)
        },
        RunFilter {
            partition: Some(String::new()),
            ..filter(100)
        },
        RunFilter {
            from: Some(at("2026-01-01T00:01:00Z")),
            ..filter(100)
        },
        RunFilter {
            to: Some(at("2026-01-01T00:02:00Z")),
            ..filter(100)
        },
        RunFilter {
            from: Some(at("2026-01-01T00:01:00Z")),
            to: Some(at("2026-01-01T00:02:00Z")),
            job: job("f2"),
            ..filter(100)
        },
        filter(3),
        RunFilter {
            job: job("f1"),
            ..filter(2)
        },
        RunFilter {
            job: job("nobody"),
            ..filter(100)
        },
        filter(0),
    ]
}

fn selects(case: &RunFilter, r: &RunRecord) -> bool {
    case.job.as_ref().is_none_or(|j| *j == r.key.job)
        && case.status.is_none_or(|s| s == r.status)
        && case
            .partition
            .as_ref()
            .is_none_or(|p| *p == r.key.partition)
        && case.from.is_none_or(|f| r.key.scheduled_at >= f)
        && case.to.is_none_or(|t| r.key.scheduled_at < t)
}

async fn every_filter_follows_one_rule(backend: &dyn Backend, retrying: &ClaimRequest) {
    // Everything, newest slot first, ties by id descending, attempts in order.
    let all = list(backend, &filter(100)).await;
    assert_eq!(all.len(), 12);
    assert!(
        all.windows(2)
            .all(|w| (w[0].key.scheduled_at, w[0].id) > (w[1].key.scheduled_at, w[1].id)),
        "{all:?}"
    );
    let failed_run = all
        .iter()
        .find(|r| r.key == retrying.key)
        .expect("failed run");
    assert_eq!(
        (failed_run.status, failed_run.attempt),
        (RunStatus::Failed, 2)
    );
    let attempts: Vec<_> = failed_run
        .attempts
        .iter()
        .map(|a| (a.attempt, a.owner.as_str(), a.status))
        .collect();
    assert_eq!(
        attempts,
        [(1, "a", RunStatus::Failed), (2, "b", RunStatus::Failed)]
    );
    let skipped = all.iter().find(|r| r.status == RunStatus::Skipped);
    assert!(skipped.expect("skipped").attempts.is_empty());
    // Each filter, against the same rule applied to the full listing.
    let cases = cases();
    for case in &cases {
        let want: Vec<RunRecord> = all
            .iter()
            .filter(|r| selects(case, r))
            .take(case.limit)
            .cloned()
            .collect();
        assert_eq!(list(backend, case).await, want, "{case:?}");
    }
    // Spot checks of the rule itself: f2's two partitions at 00:01, newest row first; the running
    // 02:00 report, f1's 00:02 run and f2's two partitions.
    let window = list(backend, &cases[7]).await;
    assert_eq!(window.len(), 2);
    assert!(window[0].id > window[1].id);
    assert_eq!(list(backend, &cases[1]).await.len(), 4);
}

/// Slot times are distinct and ascending in `[from, to)` (two partitions at one instant count once,
/// skipped rows count, bounds between the instants a store keeps keep their meaning); the latest
/// slot (the watermark) counts scheduled, caught-up and backfilled runs but not manual ones, and
/// answers in the order of the jobs asked for.
pub async fn slot_times_and_watermarks(backend: &dyn Backend) {
    hourly_slots(backend).await;
    partitions_and_catch_up(backend).await;
}

/// `hourly` and `other`, with a skipped slot and operator runs due now.
/// Claims, skips and enqueues the runs of `hourly` and `other`.
async fn add_hourly_runs(backend: &dyn Backend) {
    let mut requests = vec![
        request("hourly", "2026-01-01T00:00:00Z", STALE),
        request("hourly", "2026-01-01T01:00:00Z", STALE),
        request("hourly", "2026-01-01T03:00:00Z", STALE),
        request("other", "2026-01-01T02:00:00Z", STALE),
    ];
    requests[2].trigger = Trigger::CatchUp;
    let mut partitioned = request("hourly", "2026-01-01T01:00:00Z", STALE);
    partitioned.key.partition = "eu".to_owned();
    requests.push(partitioned);
    backend.claim("worker", &requests).await.expect("claim");
    // A skipped row counts as a slot with a row.
    backend
        .record_skipped(
            &[request("hourly", "2026-01-01T02:00:00Z", STALE)],
            "still running",
        )
        .await
        .expect("skip");
    // A manual run far ahead is a row, but not the watermark.
    let now = store_now(backend).await;
    let created = backend
        .enqueue(
            &[
                enqueue("hourly", "2026-01-01T09:00:00Z", Trigger::Manual, now),
                enqueue("other", "2026-01-01T05:00:00Z", Trigger::Backfill, now),
            ],
            &entry("trigger", "ops", "by hand"),
        )
        .await
        .expect("enqueue");
    assert!(created.iter().all(Option::is_some));
}

async fn hourly_slots(backend: &dyn Backend) {
    add_hourly_runs(backend).await;
    let times = backend
        .slot_times(
            "hourly",
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T03:00:00Z"),
        )
        .await
        .expect("slot times");
    assert_eq!(
        times,
        [
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            at("2026-01-01T02:00:00Z"),
        ],
        "distinct, ascending, `to` excluded"
    );
    // Bounds between the instants a store keeps keep their meaning.
    let between = backend
        .slot_times(
            "hourly",
            at("2026-01-01T00:00:00.000000001Z"),
            at("2026-01-01T03:00:00.000000001Z"),
        )
        .await
        .expect("slot times");
    assert_eq!(
        between,
        [
            at("2026-01-01T01:00:00Z"),
            at("2026-01-01T02:00:00Z"),
            at("2026-01-01T03:00:00Z"),
        ]
    );
    let all = backend
        .slot_times(
            "hourly",
            at("2025-01-01T00:00:00Z"),
            at("2027-01-01T00:00:00Z"),
        )
        .await
        .expect("slot times");
    assert_eq!(all.len(), 5);
    assert_eq!(all.last(), Some(&at("2026-01-01T09:00:00Z")));
    assert!(
        backend
            .slot_times(
                "nope",
                at("2025-01-01T00:00:00Z"),
                at("2027-01-01T00:00:00Z")
            )
            .await
            .expect("slot times")
            .is_empty()
    );
    slot_times_of_many(backend).await;
    hourly_watermarks(backend).await;
}

/// Several jobs in one call answer what one call per job does, in the order asked.
async fn slot_times_of_many(backend: &dyn Backend) {
    let (from, to) = (
        at("2026-01-01T00:00:00.000000001Z"),
        at("2026-01-01T05:00:00.000000001Z"),
    );
    let jobs: Vec<String> = ["other", "nope", "hourly", "other"]
        .map(String::from)
        .to_vec();
    let many = backend
        .slot_times_of(&jobs, from, to)
        .await
        .expect("slot times of many");
    assert_eq!(
        many,
        [
            vec![at("2026-01-01T02:00:00Z"), at("2026-01-01T05:00:00Z")],
            vec![],
            vec![
                at("2026-01-01T01:00:00Z"),
                at("2026-01-01T02:00:00Z"),
                at("2026-01-01T03:00:00Z"),
            ],
            vec![at("2026-01-01T02:00:00Z"), at("2026-01-01T05:00:00Z")],
        ]
    );
    for (job, times) in jobs.iter().zip(&many) {
        let one = backend.slot_times(job, from, to).await.expect("slot times");
        assert_eq!(&one, times, "{job}");
    }
    assert!(
        backend
            .slot_times_of(&[], from, to)
            .await
            .expect("none asked")
            .is_empty()
    );
}

async fn hourly_watermarks(backend: &dyn Backend) {
    let latest = backend
        .latest_slots(&["hourly".into(), "nope".into(), "other".into()])
        .await
        .expect("latest");
    assert_eq!(
        latest,
        [
            Some(at("2026-01-01T03:00:00Z")),
            None,
            Some(at("2026-01-01T05:00:00Z")),
        ]
    );
    assert!(backend.latest_slots(&[]).await.expect("latest").is_empty());
}

/// `w` with partitions and a skipped catch-up slot, `m` with a manual run only, `b` with a backfill
/// run only, both due later.
async fn partitions_and_catch_up(backend: &dyn Backend) {
    let mut p = request("w", "2026-01-01T00:01:00Z", STALE);
    p.key.partition = "eu".into();
    backend
        .claim(
            "a",
            &[
                request("w", "2026-01-01T00:00:00Z", STALE),
                request("w", "2026-01-01T00:01:00Z", STALE),
                p,
                request("w", "2026-01-01T00:05:00Z", STALE),
            ],
        )
        .await
        .expect("claim");
    let mut catch_up = request("w", "2026-01-01T00:02:00Z", STALE);
    catch_up.trigger = Trigger::CatchUp;
    backend
        .record_skipped(&[catch_up], "catch-up skipped")
        .await
        .expect("skip");

    // Distinct instants (two partitions at 00:01 count once), [from, to).
    let times = backend
        .slot_times("w", at("2026-01-01T00:00:00Z"), at("2026-01-01T00:05:00Z"))
        .await
        .expect("slot_times");
    assert_eq!(
        times,
        [
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:01:00Z"),
            at("2026-01-01T00:02:00Z")
        ]
    );
    assert!(
        backend
            .slot_times(
                "unknown",
                at("2026-01-01T00:00:00Z"),
                at("2026-01-02T00:00:00Z")
            )
            .await
            .expect("slot_times")
            .is_empty()
    );

    // Manual runs do not move the watermark; backfill runs do.
    let later = store_now(backend).await + chrono::Duration::hours(1);
    backend
        .enqueue(
            &[
                enqueue("w", "2026-01-01T09:00:00Z", Trigger::Manual, later),
                enqueue("m", "2026-01-01T09:00:00Z", Trigger::Manual, later),
                enqueue("b", "2025-12-31T00:00:00Z", Trigger::Backfill, later),
            ],
            &entry("trigger", "ops", "test"),
        )
        .await
        .expect("enqueue");
    let jobs = ["b", "w", "m", "unknown", "w"].map(String::from);
    assert_eq!(
        backend.latest_slots(&jobs).await.expect("latest"),
        [
            Some(at("2025-12-31T00:00:00Z")),
            Some(at("2026-01-01T00:05:00Z")),
            None,
            None,
            Some(at("2026-01-01T00:05:00Z")),
        ]
    );
    assert!(backend.latest_slots(&[]).await.expect("latest").is_empty());
}

/// Each job's newest run (by slot) comes back in the order the jobs were asked for, with its
/// attempts, as the listing of that job with a page of one has it; a job without runs is `None`.
pub async fn the_newest_run_of_each_job_is_read_at_once(backend: &dyn Backend) {
    let _ = finished(
        backend,
        "worker",
        &request("report", "2026-01-01T00:00:00Z", STALE),
        &Finish::succeeded(),
    )
    .await;
    let newest = super::failed_run(backend, "report", "2026-01-01T02:00:00Z").await;
    let other = request("other", "2026-01-01T01:00:00Z", STALE);
    let _ = super::claim_one(backend, "worker", &other).await;
    let jobs = ["nobody", "report", "other"].map(String::from);
    let latest = backend.latest_runs(&jobs).await.expect("latest runs");
    assert_eq!(latest.len(), 3);
    assert!(latest[0].is_none(), "a job without runs: {:?}", latest[0]);
    let report = latest[1].as_ref().expect("report's newest run");
    assert_eq!(report.key, newest);
    assert_eq!(report.status, RunStatus::Failed);
    assert_eq!(report.attempts.len(), 1);
    let mut one = filter(1);
    one.job = Some("report".to_owned());
    assert_eq!(Some(report), list(backend, &one).await.first());
    let other_run = latest[2].as_ref().expect("other's newest run");
    assert_eq!(other_run.key, other.key);
    assert_eq!(other_run.status, RunStatus::Running);
    assert!(backend.latest_runs(&[]).await.expect("none").is_empty());
}

/// Per job, in one read: runs running and queued whatever their slot, and runs failed (`failed`,
/// `dead`, `abandoned`) only from the instant asked about; a job with none of them is left out.
pub async fn runs_are_counted_per_job_and_status(backend: &dyn Backend) {
    let since = at("2026-01-01T00:00:00Z");
    let _ = super::failed_run(backend, "report", "2025-12-31T23:59:59Z").await;
    let _ = super::failed_run(backend, "report", "2026-01-01T00:00:00Z").await;
    let _ = super::failed_run(backend, "report", "2026-01-01T03:00:00Z").await;
    let running = request("report", "2025-06-01T00:00:00Z", STALE);
    let _ = super::claim_one(backend, "worker", &running).await;
    let quiet = request("quiet", "2026-01-01T04:00:00Z", STALE);
    let _ = finished(backend, "worker", &quiet, &Finish::succeeded()).await;
    let now = store_now(backend).await;
    let queued = [
        enqueue("report", "2024-01-01T00:00:00Z", Trigger::Manual, now),
        enqueue("other", "2026-02-01T00:00:00Z", Trigger::Backfill, now),
        enqueue("other", "2026-02-02T00:00:00Z", Trigger::Backfill, now),
    ];
    let audit = entry("trigger", "alice", "counted");
    let created = backend.enqueue(&queued, &audit).await.expect("enqueue");
    assert!(created.iter().all(Option::is_some), "{created:?}");
    let mut counts = backend.run_counts(since).await.expect("counts");
    counts.sort_by(|a, b| a.job.cmp(&b.job));
    let shown: Vec<(&str, u64, u64, u64)> = counts
        .iter()
        .map(|c| (c.job.as_str(), c.running, c.queued, c.failed))
        .collect();
    assert_eq!(shown, [("other", 0, 2, 0), ("report", 1, 1, 2)]);
    let everything = backend
        .run_counts(at("2000-01-01T00:00:00Z"))
        .await
        .expect("counts");
    let report = everything
        .iter()
        .find(|c| c.job == "report")
        .expect("report");
    assert_eq!(report.failed, 3, "{everything:?}");
}
