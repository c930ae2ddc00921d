//! Every change as one [`Command`] through [`Admin::execute`], on the memory store: each command
//! answers its own [`Outcome`], is audited under its name, and is refused as its method is.

use slotguard::store::{AdminStore, JobDefinition};
use slotguard::{MemoryBackend, Schedule};
use slotguard_admin::{Admin, AdminError, BackfillOptions, ChangeRequest, Command, Outcome, parse};

const JOB: &str = "daily-settlement";

async fn setup() -> Admin {
    let backend = MemoryBackend::new();
    let definition = JobDefinition {
        name: JOB.to_owned(),
        cron: "0 2 * * *".to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse("0 2 * * *", "Asia/Seoul")
            .unwrap()
            .fingerprint(),
        calendar: None,
    };
    backend.register_jobs(&[definition]).await.unwrap();
    Admin::new(backend)
}

fn by() -> ChangeRequest {
    ChangeRequest::new("alice", "commands test")
}

#[tokio::test]
async fn each_command_answers_its_outcome_and_is_audited_under_its_name() {
    let admin = setup().await;
    let job = JOB.to_owned();
    let pause = Command::Pause { job: job.clone() };
    assert_eq!((pause.job(), pause.name()), (JOB, "pause"));
    let paused = admin.execute(pause, &by()).await.unwrap();
    assert!(matches!(paused, Outcome::Paused(ref record) if record.paused));
    let resumed = admin
        .execute(Command::Resume { job: job.clone() }, &by())
        .await
        .unwrap();
    assert!(matches!(resumed, Outcome::Resumed(ref record) if !record.paused));
    let Outcome::Triggered(triggered) = admin
        .execute(Command::Trigger { job: job.clone() }, &by())
        .await
        .unwrap()
    else {
        panic!("a trigger answers Triggered");
    };
    let cancel = Command::Cancel {
        job: job.clone(),
        slot: triggered.scheduled_at,
        partition: String::new(),
    };
    assert!(matches!(
        admin.execute(cancel, &by()).await.unwrap(),
        Outcome::Cancelled(_)
    ));
    let backfill = Command::Backfill {
        job: job.clone(),
        from: triggered.scheduled_at - chrono::Duration::days(3),
        to: triggered.scheduled_at,
        options: BackfillOptions {
            before_first_seen: true,
            ..BackfillOptions::default()
        },
    };
    let Outcome::Backfilled(report) = admin.execute(backfill, &by()).await.unwrap() else {
        panic!("a backfill answers Backfilled");
    };
    assert!(report.dry_run && report.created == 0 && !report.slots.is_empty());
    let actions: Vec<String> = admin
        .audit(Some(JOB), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.entry.action)
        .collect();
    // A dry run changes nothing and writes nothing to the audit trail.
    assert_eq!(actions, ["cancel", "trigger", "resume", "pause"]);
}

#[tokio::test]
async fn commands_are_refused_as_their_methods_are() {
    let admin = setup().await;
    let unknown = Command::Pause {
        job: "nope".to_owned(),
    };
    assert!(matches!(
        admin.execute(unknown, &by()).await,
        Err(AdminError::UnknownJob { .. })
    ));
    let resume = Command::Resume {
        job: JOB.to_owned(),
    };
    assert!(matches!(
        admin.execute(resume, &by()).await,
        Err(AdminError::PauseState { .. })
    ));
    let slot = parse::instant("scheduleSlot", "2026-03-07T17:00").unwrap();
    let retry = Command::Retry {
        job: JOB.to_owned(),
        slot,
        partition: String::new(),
    };
    assert_eq!(retry.name(), "retry");
    assert!(matches!(
        admin.execute(retry, &by()).await,
        Err(AdminError::UnknownRun { .. })
    ));
    let range = Command::RetryFailed {
        job: JOB.to_owned(),
        from: slot,
        to: slot,
        partition: None,
    };
    assert!(matches!(
        admin.execute(range, &by()).await,
        Err(AdminError::Invalid { field: "range", .. })
    ));
    let nobody = ChangeRequest::new("", "no actor");
    let trigger = Command::Trigger {
        job: JOB.to_owned(),
    };
    assert!(matches!(
        admin.execute(trigger, &nobody).await,
        Err(AdminError::Invalid { field: "actor", .. })
    ));
}
