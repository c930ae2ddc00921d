//! Stored schedules: versions written once each, stale writes refused, every change read back in
//! the order it was written and in force no sooner than the fence; operators' skips of upcoming
//! slots, undone until a claim.

use chrono::{DateTime, Utc};
use slotguard::store::schedules::SKIPPED_BY_OPERATOR;
use slotguard::store::{
    AdminStoreExt as _, Backend, Claim, RunStatus, SCHEDULE_FENCE, ScheduleSpec, ScheduleVersion,
    ScheduleWrite,
};

use super::{STALE, filter, request, store_now};

/// A schedule of `job` on `cron` for `partition`.
pub fn schedule_spec(job: &str, cron: &str, partition: &str) -> ScheduleSpec {
    ScheduleSpec {
        job: job.to_owned(),
        cron: cron.to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        partition: partition.to_owned(),
        start_at: None,
        end_at: None,
        remaining_runs: Some(3),
        paused: false,
        note: None,
        pause_on_failure: false,
    }
}

fn written(answer: ScheduleWrite) -> ScheduleVersion {
    match answer {
        ScheduleWrite::Written(v) => v,
        ScheduleWrite::Stale { current } => panic!("expected a write, found version {current}"),
    }
}

fn fence() -> chrono::Duration {
    chrono::Duration::from_std(SCHEDULE_FENCE).expect("small")
}

/// A schedule is created once, changed only at the version it was read at, removed and created
/// again; every version is kept, read back in order and takes effect after the fence, never
/// before the version it follows; every change is in the job's audit trail with its reason.
pub async fn schedule_versions_are_written_once_and_in_order(backend: &dyn Backend) {
    let before = store_now(backend).await;
    let mut spec = schedule_spec("tenant_report", "0 2 * * *", "acme");
    let v1 = written(
        (backend.write_schedule("acme-daily", 0, Some(&spec), "ops", "onboarding"))
            .await
            .expect("create"),
    );
    assert_eq!((v1.version, v1.spec.as_ref()), (1, Some(&spec)));
    assert!(v1.effective_at >= before + fence(), "{v1:?}");
    assert!(v1.effective_at >= v1.changed_at + fence() - chrono::Duration::milliseconds(1));
    let again = backend
        .write_schedule("acme-daily", 0, Some(&spec), "ops", "twice")
        .await
        .expect("create again");
    assert_eq!(again, ScheduleWrite::Stale { current: 1 });

    spec.cron = "0 3 * * *".to_owned();
    spec.paused = true;
    spec.note = Some("month-end freeze".to_owned());
    spec.pause_on_failure = true;
    spec.start_at = Some(before);
    spec.end_at = Some(before + chrono::Duration::days(30));
    let v2 = written(
        backend
            .write_schedule("acme-daily", 1, Some(&spec), "kim", "03:00 from now on")
            .await
            .expect("change"),
    );
    assert_eq!((v2.version, v2.spec.as_ref()), (2, Some(&spec)));
    assert!(v2.effective_at >= v1.effective_at && v2.seq > v1.seq);
    let stale = backend
        .write_schedule("acme-daily", 1, None, "lee", "read at v1")
        .await
        .expect("stale change");
    assert_eq!(stale, ScheduleWrite::Stale { current: 2 });
    assert_eq!(
        backend
            .write_schedule("never-made", 3, None, "lee", "no such schedule")
            .await
            .expect("stale remove"),
        ScheduleWrite::Stale { current: 0 }
    );

    let other = schedule_spec("tenant_report", "*/5 * * * *", "");
    let o1 = written(
        backend
            .write_schedule("zz-other", 0, Some(&other), "ops", "second")
            .await
            .expect("other"),
    );
    let listed = backend
        .schedules(Some("tenant_report"), None, 10)
        .await
        .expect("list");
    assert_eq!(listed, vec![v2.clone(), o1.clone()]);
    let paged = backend
        .schedules(None, Some("acme-daily"), 10)
        .await
        .expect("page");
    assert_eq!(paged, vec![o1.clone()]);
    assert!(
        backend
            .schedules(Some("another_job"), None, 10)
            .await
            .expect("list")
            .is_empty()
    );

    let v3 = written(
        backend
            .write_schedule("acme-daily", 2, None, "kim", "tenant left")
            .await
            .expect("remove"),
    );
    assert_eq!((v3.version, v3.spec.as_ref()), (3, None));
    let listed = backend.schedules(None, None, 10).await.expect("list");
    assert_eq!(listed, vec![o1.clone()], "a removed schedule is not listed");
    let v4 = written(
        backend
            .write_schedule("acme-daily", 3, Some(&spec), "kim", "tenant is back")
            .await
            .expect("create again"),
    );
    assert_eq!(v4.version, 4);

    let history = backend
        .schedule_history("acme-daily")
        .await
        .expect("history");
    assert_eq!(
        history,
        vec![v1.clone(), v2.clone(), v3.clone(), v4.clone()]
    );
    let all = backend.schedule_changes(0, 100).await.expect("changes");
    let seqs: Vec<i64> = all.versions.iter().map(|v| v.seq).collect();
    assert_eq!(seqs, vec![v1.seq, v2.seq, o1.seq, v3.seq, v4.seq]);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert!(all.fresh_at >= v4.changed_at, "{all:?}");
    let since = backend
        .schedule_changes(o1.seq, 100)
        .await
        .expect("changes");
    assert_eq!(since.versions, vec![v3, v4]);
    let one = backend.schedule_changes(0, 1).await.expect("changes");
    assert_eq!(one.versions, vec![v1]);

    let audit = backend
        .audit_log(Some("tenant_report"), 10)
        .await
        .expect("audit");
    let actions: Vec<(&str, &str)> = audit
        .iter()
        .map(|a| (a.entry.action.as_str(), a.entry.actor.as_str()))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("schedule_add", "kim"),
            ("schedule_remove", "kim"),
            ("schedule_add", "ops"),
            ("schedule_change", "kim"),
            ("schedule_add", "ops"),
        ]
    );
    assert!(audit[1].entry.reason.contains("tenant left"), "{audit:?}");
}

/// An operator's skip records an upcoming slot `skipped` once; it is undone until a claim, and a
/// claim of a skipped slot does not run it; a claimed slot cannot be skipped.
pub async fn operator_skips_hold_until_undone(backend: &dyn Backend) {
    let now = store_now(backend).await;
    let at = |offset: i64| -> String {
        let t: DateTime<Utc> = now + chrono::Duration::seconds(offset);
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    };
    let upcoming = request("skipper", &at(3600), STALE);
    assert!(
        backend
            .skip_slot(&upcoming, "kim", "holiday")
            .await
            .expect("skip")
    );
    assert!(
        !backend
            .skip_slot(&upcoming, "kim", "again")
            .await
            .expect("skip")
    );
    let runs = backend.runs(&filter(10)).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Skipped);
    let message = runs[0].error_message.clone().unwrap_or_default();
    assert!(
        message.starts_with(SKIPPED_BY_OPERATOR) && message.ends_with("holiday"),
        "{message}"
    );
    assert!(
        backend
            .unskip_slot(&upcoming.key, "kim", "undo")
            .await
            .expect("unskip")
    );
    assert!(
        !backend
            .unskip_slot(&upcoming.key, "kim", "undo")
            .await
            .expect("unskip")
    );
    assert!(backend.runs(&filter(10)).await.expect("runs").is_empty());

    // A skipped slot that falls due is not run.
    let due = request("skipper", &at(-5), STALE);
    assert!(
        backend
            .skip_slot(&due, "kim", "not today")
            .await
            .expect("skip")
    );
    let claim = backend.claim("replica", std::slice::from_ref(&due)).await;
    assert_eq!(
        claim.expect("claim"),
        vec![Claim::Taken {
            status: RunStatus::Skipped
        }]
    );

    // A claimed slot is neither skipped nor undone.
    let claimed = request("skipper", &at(-65), STALE);
    let won = backend
        .claim("replica", std::slice::from_ref(&claimed))
        .await;
    assert!(matches!(won.expect("claim")[..], [Claim::Won(_)]));
    assert!(
        !backend
            .skip_slot(&claimed, "kim", "late")
            .await
            .expect("skip")
    );
    assert!(
        !backend
            .unskip_slot(&claimed.key, "kim", "late")
            .await
            .expect("unskip")
    );
    // An overlap skip is not an operator's and is not undone.
    backend
        .record_skipped(
            std::slice::from_ref(&request("skipper", &at(-125), STALE)),
            "overlap",
        )
        .await
        .expect("record");
    let key = request("skipper", &at(-125), STALE).key;
    assert!(
        !backend
            .unskip_slot(&key, "kim", "not mine")
            .await
            .expect("unskip")
    );

    let audit = backend.audit_log(Some("skipper"), 10).await.expect("audit");
    let actions: Vec<&str> = audit.iter().map(|a| a.entry.action.as_str()).collect();
    assert_eq!(actions, vec!["skip", "unskip", "skip"]);
}
