//! The replica registry.

use std::time::Duration;

use slotguard::store::{Backend, ReplicaInfo, ReplicaRecord};

/// A replica as a scheduler records it.
pub fn replica(id: &str, jobs: &[&str], gone_after: Duration) -> ReplicaInfo {
    ReplicaInfo {
        id: id.to_owned(),
        host: "host-1".to_owned(),
        pid: 4242,
        version: "0.1.0".to_owned(),
        roles: vec!["all".to_owned()],
        jobs: jobs.iter().map(|j| (*j).to_owned()).collect(),
        runs_held: 0,
        gone_after,
    }
}

async fn listed(backend: &dyn Backend) -> Vec<ReplicaRecord> {
    backend.replicas().await.expect("replicas")
}

/// Replicas record themselves (listed by id with what they recorded), refresh their heartbeat
/// keeping their start, are judged gone by the store's clock once their heartbeat is older than
/// their own threshold, are forgotten once gone long enough, and leave on a graceful shutdown.
pub async fn replicas_record_themselves_go_stale_and_leave(backend: &dyn Backend) {
    assert!(listed(backend).await.is_empty());
    let long = replica("replica-b", &["report", "a,b"], Duration::from_secs(3600));
    let mut short = replica("replica-a", &["report"], Duration::from_secs(1));
    short.roles = vec!["scheduler".to_owned(), "worker".to_owned()];
    backend.record_replica(&long).await.expect("record");
    backend.record_replica(&short).await.expect("record");
    let first = listed(backend).await;
    let infos: Vec<&ReplicaInfo> = first.iter().map(|r| &r.info).collect();
    assert_eq!(infos, [&short, &long], "by id, as recorded");
    assert!(first.iter().all(|r| r.alive), "{first:?}");
    assert!(first.iter().all(|r| r.started_at == r.heartbeat_at));

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let later = listed(backend).await;
    assert!(!later[0].alive, "a heartbeat 1.5 s old is past 1 s: gone");
    assert!(later[1].alive, "within its hour");

    let mut busy = long.clone();
    busy.runs_held = 3;
    busy.jobs = vec!["report".to_owned()];
    backend.record_replica(&busy).await.expect("refresh");
    let refreshed = listed(backend).await;
    assert_eq!(
        refreshed[1].info, busy,
        "the refresh replaces what it recorded"
    );
    assert_eq!(refreshed[1].started_at, first[1].started_at, "start kept");
    assert!(refreshed[1].heartbeat_at > first[1].heartbeat_at);

    assert_eq!(
        backend
            .forget_replicas(Duration::from_secs(3600))
            .await
            .expect("forget"),
        0,
        "gone for less than an hour"
    );
    assert_eq!(
        backend
            .forget_replicas(Duration::ZERO)
            .await
            .expect("forget"),
        1
    );
    let ids: Vec<String> = listed(backend)
        .await
        .into_iter()
        .map(|r| r.info.id)
        .collect();
    assert_eq!(ids, ["replica-b"]);

    assert!(backend.remove_replica("replica-b").await.expect("remove"));
    assert!(!backend.remove_replica("replica-b").await.expect("remove"));
    assert!(listed(backend).await.is_empty());
}
