//! History retention and the replica registry through real schedulers on a real store, in real
//! time: what the SQLite and PostgreSQL tests run.

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{Backend, Claim, Finish, RunFilter, RunRecord, RunStatus};
use slotguard::{Job, Scheduler};
use slotguard_admin::Admin;

use crate::request;

/// How long the per-second job keeps its finished runs.
const KEEP: Duration = Duration::from_secs(2);
/// How often each replica tries to prune.
const EVERY: Duration = Duration::from_millis(500);

async fn seeded(backend: &dyn Backend, slot: &str, finish: Finish) {
    let req = request("tick", slot, Duration::from_secs(30));
    let claims = backend.claim("old-replica", &[req]).await.expect("claim");
    let Claim::Won(lease) = claims[0].clone() else {
        panic!("{claims:?}")
    };
    assert!(
        backend
            .finish_one("old-replica", &lease, &finish)
            .await
            .expect("finish")
    );
}

/// The runs of job `tick`, newest first.
pub(crate) async fn runs(backend: &dyn Backend) -> Vec<RunRecord> {
    let filter = RunFilter {
        job: Some("tick".into()),
        limit: 1_000,
        ..RunFilter::default()
    };
    slotguard::store::AdminStore::runs(backend, &filter)
        .await
        .expect("runs")
}

/// Two replicas run a per-second job with a 2 s retention for 6 s: they list themselves as
/// replicas running it; finished runs older than the retention (a seeded one included) are gone
/// while newer ones are kept; an old run waiting for its next attempt is kept; a graceful shutdown
/// removes both replicas.
pub async fn a_per_second_jobs_old_runs_are_pruned_while_replicas_are_listed<B>(backend: B)
where
    B: Backend + Clone,
{
    let handed = Finish::abandoned("shutdown", Some(Duration::from_secs(3600)));
    seeded(&backend, "2026-01-01T00:00:00Z", handed).await;
    seeded(&backend, "2026-01-01T00:00:01Z", Finish::succeeded()).await;
    let admin = Admin::new(backend.clone());
    let mut handles = Vec::new();
    for id in ["history-a", "history-b"] {
        let tick = Job::new("tick", "* * * * * *", |_| async {}).retention(KEEP);
        let scheduler = Scheduler::builder()
            .backend(backend.clone())
            .instance_id(id)
            .recovery_interval(EVERY)
            .prune_interval(EVERY)
            .job(tick)
            .build()
            .expect("build");
        handles.push(scheduler.try_start().await.expect("start"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let replicas = admin.replicas().await.expect("replicas");
    let listed: Vec<(&str, bool, &[String])> = replicas
        .iter()
        .map(|r| (r.info.id.as_str(), r.alive, r.info.jobs.as_slice()))
        .collect();
    let tick = ["tick".to_owned()];
    assert_eq!(
        listed,
        [
            ("history-a", true, &tick[..]),
            ("history-b", true, &tick[..])
        ]
    );

    tokio::time::sleep(Duration::from_secs(5)).await;
    let now: DateTime<Utc> = backend.store_now().await.expect("store clock");
    let kept = runs(&backend).await;
    let old: Vec<&RunRecord> = kept
        .iter()
        .filter(|r| r.key.scheduled_at < crate::admin::at("2026-01-02T00:00:00Z"))
        .collect();
    assert_eq!(old.len(), 1, "only the retriable old run is left: {old:?}");
    assert_eq!(old[0].status, RunStatus::Abandoned);
    let finished: Vec<DateTime<Utc>> = kept
        .iter()
        .filter(|r| r.status == RunStatus::Succeeded)
        .filter_map(|r| r.finished_at)
        .collect();
    assert!(!finished.is_empty(), "the newest runs are kept");
    let oldest = finished.iter().min().copied().expect("one");
    let bound =
        chrono::Duration::from_std(KEEP + EVERY + Duration::from_millis(700)).expect("bound");
    assert!(
        now - oldest <= bound,
        "a run finished at {oldest} is left at {now}"
    );
    assert!(
        finished.len() <= 5,
        "about 2 s of per-second runs: {}",
        finished.len()
    );

    for handle in handles {
        handle.shutdown().await;
    }
    assert!(admin.replicas().await.expect("replicas").is_empty());
}
