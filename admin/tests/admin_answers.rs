//! What the admin API answers in words, on the memory store: a manual run with no replica to run
//! it, and the names it quotes in its messages.

use std::time::Duration;

use slotguard::store::{AdminStore, JobDefinition, ReplicaInfo, ReplicaStore};
use slotguard::{MemoryBackend, Schedule};
use slotguard_admin::{Admin, ChangeRequest};

const JOB: &str = "daily-settlement";

fn definition(name: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: "0 2 * * *".to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse("0 2 * * *", "Asia/Seoul")
            .unwrap()
            .fingerprint(),
        calendar: None,
    }
}

async fn setup() -> (MemoryBackend, Admin) {
    let backend = MemoryBackend::new();
    backend.register_jobs(&[definition(JOB)]).await.unwrap();
    (backend.clone(), Admin::new(backend))
}

fn by() -> ChangeRequest {
    ChangeRequest::new("alice", "settle again")
}

/// Issue 21, point 8: with no live replica running the job, the answer to a trigger says so (the
/// replica registry knows), rather than promising a start within one recovery poll.
#[tokio::test]
async fn a_trigger_with_no_live_replica_says_that_none_runs_the_job() {
    let (backend, admin) = setup().await;
    let triggered = admin.trigger(JOB, &by()).await.unwrap();
    let outlook = triggered.outlook();
    assert!(!outlook.contains("recovery poll"), "{outlook}");
    assert!(
        outlook.contains("no live replica runs the job"),
        "{outlook}"
    );

    backend
        .record_replica(&ReplicaInfo {
            id: "web-1:42:abc".to_owned(),
            host: "web-1".to_owned(),
            pid: 42,
            version: "0.1.0".to_owned(),
            roles: vec!["all".to_owned()],
            jobs: vec![JOB.to_owned()],
            runs_held: 0,
            gone_after: Duration::from_secs(60),
        })
        .await
        .unwrap();
    let triggered = admin.trigger(JOB, &by()).await.unwrap();
    let outlook = triggered.outlook();
    assert!(outlook.contains("web-1:42:abc"), "{outlook}");
    assert!(outlook.contains("within one recovery poll"), "{outlook}");
}

/// Issue 21, point 8: names in messages are quoted as they are, not Rust-escaped (`x\'`); only
/// control and format characters (a bidi override) are made visible.
#[tokio::test]
async fn names_in_messages_are_quoted_plainly() {
    let (_backend, admin) = setup().await;
    let sql = "x'; DROP TABLE jobs; --";
    let message = admin.job(sql).await.unwrap_err().to_string();
    assert_eq!(
        message,
        "unknown job `x'; DROP TABLE jobs; --`: no scheduler has registered it"
    );
    let quoted = "say \"hi\" \\ 정산";
    let message = admin.job(quoted).await.unwrap_err().to_string();
    assert!(message.contains("`say \"hi\" \\ 정산`"), "{message}");
    let bidi = "txt\u{202e}exe.bat";
    let message = admin.job(bidi).await.unwrap_err().to_string();
    assert!(message.contains("txt\\u{202e}exe.bat"), "{message}");
    assert!(!message.contains('\u{202e}'), "{message}");
}
