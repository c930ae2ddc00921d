//! Registered jobs, pauses, and hostile names through every operation.

use slotguard::store::AdminStoreExt as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{AuditEntry, Backend, JobDefinition, JobRecord, RunChange, Trigger};

use super::{at, definition, enqueue, entry, filter, list, run_of, store_now};

/// Every bit of the u64 survives a signed column.
const BIG: u64 = u64::MAX - 3;

fn pause() -> AuditEntry {
    entry("pause", "alice", "upstream outage")
}

async fn job(backend: &dyn Backend, name: &str) -> JobRecord {
    backend
        .jobs()
        .await
        .expect("jobs")
        .into_iter()
        .find(|j| j.definition.name == name)
        .expect("registered")
}

/// Jobs are listed by name in byte order, a job named twice in one call keeps its last definition;
/// pausing an unknown job changes nothing; registering again changes the definition and `seen_at`
/// but keeps the pause and its instant; pause and resume are audited, newest first.
pub async fn jobs_are_registered_and_keep_their_pause_state(backend: &dyn Backend) {
    let first_seen = register(backend).await;
    let paused_at = pause_and_register_again(backend, first_seen).await;

    let resume = entry("resume", "bob", "fixed");
    assert!(
        backend
            .set_paused("zeta", false, &resume)
            .await
            .expect("resume")
    );
    // Resuming an active job writes nothing and audits nothing (issue 21).
    assert!(
        !backend
            .set_paused("zeta", false, &resume)
            .await
            .expect("resume")
    );
    // The pause stays on show as it was; the resume is in the audit trail.
    let zeta = job(backend, "zeta").await;
    assert!(!zeta.paused);
    assert_eq!(zeta.paused_by.as_deref(), Some("alice"));
    assert_eq!(zeta.paused_reason.as_deref(), Some("upstream outage"));
    assert_eq!(zeta.paused_at, Some(paused_at));

    let audit = backend.audit_log(None, 100).await.expect("audit");
    let seen: Vec<_> = audit
        .iter()
        .map(|a| (a.job.as_str(), a.run_id, a.scheduled_at, &a.entry))
        .collect();
    assert_eq!(
        seen,
        [
            ("zeta", None, None, &resume),
            ("zeta", None, None, &pause())
        ]
    );
    assert!(audit[0].id > audit[1].id);
    assert_eq!(
        audit[1].at, paused_at,
        "the pause and its record share one instant"
    );
    // Registering nothing touches nothing.
    backend.register_jobs(&[]).await.expect("register");
    assert_eq!(job(backend, "zeta").await, zeta);
}

/// Registers `Report`, `alpha` and `zeta` (twice); the instant they were seen.
async fn register(backend: &dyn Backend) -> DateTime<Utc> {
    assert!(backend.jobs().await.expect("jobs").is_empty());
    backend.register_jobs(&[]).await.expect("register nothing");
    assert!(backend.jobs().await.expect("jobs").is_empty());
    backend
        .register_jobs(&[
            definition("zeta", "0 2 * * *", BIG),
            definition("alpha", "*/5 * * * *", BIG),
            definition("Report", "*/5 * * * *", 7),
            // Named twice in one call: the last definition wins.
            definition("zeta", "0 1 * * *", BIG),
        ])
        .await
        .expect("register");
    let jobs = backend.jobs().await.expect("jobs");
    let names: Vec<&str> = jobs.iter().map(|j| j.definition.name.as_str()).collect();
    assert_eq!(names, ["Report", "alpha", "zeta"], "by name, byte order");
    assert_eq!(jobs[1].definition, definition("alpha", "*/5 * * * *", BIG));
    assert_eq!(jobs[2].definition, definition("zeta", "0 1 * * *", BIG));
    for job in &jobs {
        assert!(!job.paused);
        assert_eq!(
            (&job.paused_by, &job.paused_reason, job.paused_at),
            (&None, &None, None)
        );
    }
    jobs[2].seen_at
}

/// Pauses `zeta` and registers it again with a new expression; the instant of the pause.
async fn pause_and_register_again(
    backend: &dyn Backend,
    first_seen: DateTime<Utc>,
) -> DateTime<Utc> {
    assert!(
        backend
            .set_paused("zeta", true, &pause())
            .await
            .expect("pause")
    );
    // An unknown job: nothing changes, nothing is audited.
    assert!(
        !backend
            .set_paused("nope", true, &pause())
            .await
            .expect("pause")
    );
    // A second pause (issue 21): nothing changes, the first pause keeps its operator and reason.
    assert!(
        !backend
            .set_paused("zeta", true, &entry("pause", "mallory", "mine now"))
            .await
            .expect("pause")
    );
    let paused = job(backend, "zeta").await;
    assert!(paused.paused);
    assert_eq!(paused.paused_by.as_deref(), Some("alice"));
    assert_eq!(paused.paused_reason.as_deref(), Some("upstream outage"));
    let paused_at = paused.paused_at.expect("paused_at");
    assert!(paused_at >= first_seen);

    // A new deployment registers again, with a new expression and a business calendar (a name
    // with a line break and a backslash, kept as written): the definition and `seen_at` change,
    // the pause stays.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut changed = definition("zeta", "0 3 * * *", 42);
    changed.calendar = Some(slotguard::CalendarDefinition {
        name: "acme\nshutdown\\2026\n".to_owned(),
        version: "holidays 0.109; KR".to_owned(),
        digest: BIG,
        adjust: "modified-preceding".to_owned(),
        shift: -2,
    });
    backend
        .register_jobs(std::slice::from_ref(&changed))
        .await
        .expect("register again");
    let zeta = job(backend, "zeta").await;
    assert_eq!(zeta.definition, changed);
    assert!(zeta.paused);
    assert_eq!(zeta.paused_by.as_deref(), Some("alice"));
    assert_eq!(zeta.paused_reason.as_deref(), Some("upstream outage"));
    assert_eq!(zeta.paused_at, Some(paused_at));
    assert!(zeta.seen_at > first_seen, "seen_at is refreshed");
    assert!(zeta.seen_at >= paused_at);
    assert_eq!(
        job(backend, "alpha").await.seen_at,
        first_seen,
        "alpha was not registered again"
    );
    paused_at
}

/// Job names full of SQL, markup, non-ASCII text, format directives and control characters.
pub fn hostile_names() -> Vec<String> {
    [
        "x'; DROP TABLE jobs; --",
        "x'; DROP TABLE slotguard_jobs; --",
        "<script>alert('x')</script>",
        "\"); DELETE FROM slotguard_job_run_audit; --",
        "\"; DROP SCHEMA slotguard CASCADE; --",
        "정산 · 日次バッチ 🦀",
        "정산 🚀 $1 %s \\ \t",
    ]
    .map(String::from)
    .to_vec()
}

/// Each of `names` is registered (with hostile text in its expression and zone), paused, enqueued,
/// cancelled, retried, listed, read back by slot time and audited verbatim, with hostile actors and
/// reasons.
pub async fn hostile_job_names_round_trip_through_every_operation(
    backend: &dyn Backend,
    names: &[String],
) {
    let definitions: Vec<JobDefinition> = names
        .iter()
        .map(|n| JobDefinition {
            cron: format!("{n} cron"),
            zone: format!("{n} zone"),
            ..definition(n, "", u64::MAX)
        })
        .collect();
    backend.register_jobs(&definitions).await.expect("register");
    let hostile = entry(
        "pause",
        "o'Brien\"; --<b>",
        "<b>because</b> '); DELETE FROM job_run_audit;--<script>reason</script>'",
    );
    for name in names {
        one_hostile_name(backend, name, &hostile).await;
    }
    let jobs = backend.jobs().await.expect("jobs");
    let mut want = definitions.clone();
    want.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let stored: Vec<JobDefinition> = jobs.iter().map(|j| j.definition.clone()).collect();
    assert_eq!(stored, want);
    assert!(jobs.iter().all(|j| j.paused));
    assert!(
        jobs.iter()
            .all(|j| j.paused_by.as_deref() == Some(hostile.actor.as_str()))
    );
    assert_eq!(
        backend.audit_log(None, 100).await.expect("audit").len(),
        4 * names.len()
    );
}

async fn one_hostile_name(backend: &dyn Backend, name: &str, hostile: &AuditEntry) {
    assert!(
        backend
            .set_paused(name, true, hostile)
            .await
            .expect("pause")
    );
    let mut run = enqueue(
        name,
        "2026-01-01T00:00:00Z",
        Trigger::Manual,
        store_now(backend).await,
    );
    run.request.key.partition = format!("{name}/p");
    let key = run.request.key.clone();
    let trigger = entry("trigger", "'; --", name);
    let created = backend.enqueue(&[run], &trigger).await.expect("enqueue");
    assert!(created[0].is_some(), "{name}");
    assert_eq!(run_of(backend, &key).await.key, key);
    let cancel = entry("cancel", name, name);
    assert!(matches!(
        backend.cancel(&key, &cancel).await.expect("cancel"),
        RunChange::Done { .. }
    ));
    let message = format!("cancelled by {name}: {name}");
    assert_eq!(
        run_of(backend, &key).await.error_message.as_deref(),
        Some(message.as_str())
    );
    let retry = entry("retry", &hostile.actor, &hostile.reason);
    assert!(matches!(
        backend.retry(&key, &retry).await.expect("retry"),
        RunChange::Done { .. }
    ));
    let by_job = super::RunFilter {
        job: Some(name.to_owned()),
        ..filter(10)
    };
    let runs = list(backend, &by_job).await;
    assert_eq!(runs.len(), 1, "{name}");
    assert_eq!(runs[0].key, key);
    assert_eq!(
        runs[0].error_message.as_deref(),
        Some(message.as_str()),
        "a retry keeps the last error"
    );
    let trail = backend.audit_log(Some(name), 10).await.expect("audit");
    let entries: Vec<&AuditEntry> = trail.iter().map(|a| &a.entry).collect();
    assert_eq!(entries, [&retry, &cancel, &trigger, hostile]);
    assert!(trail.iter().all(|a| a.job == name));
    assert_eq!(
        backend
            .slot_times(name, at("2025-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))
            .await
            .expect("slot_times"),
        [at("2026-01-01T00:00:00Z")]
    );
}

/// Names that break the rule of [`slotguard::check_job_name`] (a NUL, a newline, a `:`, 201
/// characters, blank) name no job, and partition keys that break [`slotguard::check_partition`] are
/// invalid, through every operation of [`Admin`](slotguard_admin::Admin) and on every store: bad
/// input is never a store error (PostgreSQL refuses a NUL in a query).
pub async fn names_outside_the_rule_are_bad_input<B: Backend + Clone>(backend: &B) {
    use slotguard_admin::{Admin, AdminError, BackfillOptions, ChangeRequest};

    backend
        .register_jobs(&[definition("report", "0 * * * *", 7)])
        .await
        .expect("register");
    let admin = Admin::new(backend.clone());
    let by = ChangeRequest::new("ops", "names");
    let (from, to) = (at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"));
    let long = "x".repeat(slotguard::MAX_JOB_NAME_CHARS + 1);
    for name in ["a\0b", "\0", "a\nb", "a:b", " ", "", long.as_str()] {
        let unknown = |result: Result<(), AdminError>, op: &str| match result {
            Err(AdminError::UnknownJob { .. }) => {}
            other => panic!("{op} of {name:?}: {other:?}"),
        };
        let filter = slotguard::store::RunFilter {
            job: Some(name.to_owned()),
            ..filter(10)
        };
        unknown(admin.job(name).await.map(drop), "job");
        unknown(admin.runs(filter).await.map(drop), "runs");
        unknown(admin.run(name, from, "").await.map(drop), "run");
        unknown(admin.missed(name, from, to).await.map(drop), "missed");
        unknown(admin.retry(name, from, "", &by).await.map(drop), "retry");
        unknown(admin.cancel(name, from, "", &by).await.map(drop), "cancel");
        unknown(admin.trigger(name, &by).await.map(drop), "trigger");
        let options = BackfillOptions::default();
        unknown(
            admin.backfill(name, from, to, options, &by).await.map(drop),
            "backfill",
        );
        unknown(admin.pause(name, &by).await.map(drop), "pause");
        unknown(admin.resume(name, &by).await.map(drop), "resume");
        unknown(admin.audit(Some(name), 10).await.map(drop), "audit");
    }
    for partition in ["a\0b", "\0", "a\rb", long.as_str()] {
        let invalid = |result: Result<(), AdminError>, op: &str| match result {
            Err(AdminError::Invalid {
                field: "partition", ..
            }) => {}
            other => panic!("{op} of partition {partition:?}: {other:?}"),
        };
        let filter = slotguard::store::RunFilter {
            job: Some("report".to_owned()),
            partition: Some(partition.to_owned()),
            ..filter(10)
        };
        invalid(admin.runs(filter).await.map(drop), "runs");
        invalid(admin.run("report", from, partition).await.map(drop), "run");
        invalid(
            admin.retry("report", from, partition, &by).await.map(drop),
            "retry",
        );
        invalid(
            admin.cancel("report", from, partition, &by).await.map(drop),
            "cancel",
        );
    }
    assert!(backend.audit_log(None, 10).await.expect("audit").is_empty());
    assert!(!job(backend, "report").await.paused);
}
