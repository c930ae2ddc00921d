//! The replica registry, in paused tokio time on the memory backend: each scheduler records itself,
//! refreshes its heartbeat and the runs it holds on its recovery cadence, and removes itself on a
//! graceful shutdown; `jobs` calls a job active only while a live replica runs it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{AdminStore, JobDefinition, ReplicaInfo, ReplicaStore};
use slotguard::{Job, MemoryBackend, Scheduler, SchedulerHandle, TokioClock};
use slotguard_admin::{Admin, JobStatus};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn sleep_until(clock: TokioClock, when: &str) {
    use slotguard::Clock;
    let left = (at(when) - clock.now()).to_std().unwrap();
    tokio::time::sleep(left).await;
}

/// A job whose body takes 3 s, every 10 s.
fn slow() -> Job {
    Job::new("slow", "*/10 * * * * *", |_| async {
        tokio::time::sleep(Duration::from_secs(3)).await;
    })
}

async fn replica(
    store: &MemoryBackend,
    clock: TokioClock,
    id: &str,
    jobs: Vec<Job>,
) -> SchedulerHandle {
    Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id(id)
        .recovery_interval(Duration::from_secs(1))
        .jobs(jobs)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

fn active(jobs: &[JobStatus], name: &str) -> Vec<String> {
    jobs.iter()
        .find(|j| j.record.definition.name == name)
        .unwrap_or_else(|| panic!("{name} is registered"))
        .replicas
        .clone()
}

#[tokio::test(start_paused = true)]
async fn replicas_are_recorded_refreshed_and_removed_on_shutdown() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let admin = Admin::new(store.clone()).with_clock(clock);
    let a = replica(&store, clock, "a", vec![slow()]).await;
    let other = Job::new("other", "0 0 * * * *", |_| async {});
    let b = replica(&store, clock, "b", vec![slow(), other]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let replicas = admin.replicas().await.unwrap();
    let ids: Vec<&str> = replicas.iter().map(|r| r.info.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    for r in &replicas {
        assert!(r.alive);
        assert_eq!(r.info.roles, ["all"]);
        assert_eq!(r.info.pid, std::process::id());
        assert_eq!(r.info.version, env!("CARGO_PKG_VERSION"));
        assert!(!r.info.host.is_empty());
        assert_eq!(r.info.runs_held, 0);
        assert_eq!(
            r.info.gone_after,
            Duration::from_secs(30),
            "the default stale_after"
        );
    }
    assert_eq!(replicas[1].info.jobs, ["slow", "other"]);
    let started = replicas[0].started_at;

    // 01:00:10 starts a 3-second run on one of them; the next refresh shows it.
    sleep_until(clock, "2026-03-02T01:00:11.700Z").await;
    let replicas = admin.replicas().await.unwrap();
    let held: u32 = replicas.iter().map(|r| r.info.runs_held).sum();
    assert_eq!(held, 1, "{replicas:?}");
    assert_eq!(replicas[0].started_at, started, "a refresh keeps the start");
    assert!(replicas[0].heartbeat_at >= at("2026-03-02T01:00:11Z"));

    let jobs = admin.jobs().await.unwrap();
    assert_eq!(active(&jobs, "slow"), ["a", "b"]);
    assert_eq!(active(&jobs, "other"), ["b"]);

    b.shutdown().await;
    let ids: Vec<String> = admin
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.info.id)
        .collect();
    assert_eq!(ids, ["a"], "b removed itself");
    let jobs = admin.jobs().await.unwrap();
    assert_eq!(active(&jobs, "slow"), ["a"]);
    let other = jobs
        .iter()
        .find(|j| j.record.definition.name == "other")
        .unwrap();
    assert!(!other.active(), "no live replica runs it any more");

    a.shutdown().await;
    assert!(admin.replicas().await.unwrap().is_empty());
}

/// A replica that died without a shutdown stays listed, and is judged gone once its heartbeat is
/// older than its threshold: its jobs are no longer active.
#[tokio::test(start_paused = true)]
async fn a_replica_that_stops_refreshing_is_gone_and_its_jobs_inactive() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let admin = Admin::new(store.clone()).with_clock(clock);
    store
        .register_jobs(&[JobDefinition {
            name: "nightly".into(),
            cron: "0 2 * * *".into(),
            zone: "UTC".into(),
            dst: "vixie".into(),
            guard: "slot".into(),
            fingerprint: 1,
            calendar: None,
        }])
        .await
        .unwrap();
    let jobs = admin.jobs().await.unwrap();
    assert!(!jobs[0].active(), "no replica ever ran it");
    store
        .record_replica(&ReplicaInfo {
            id: "crashed".into(),
            host: "h".into(),
            pid: 1,
            version: "0".into(),
            roles: vec!["all".into()],
            jobs: vec!["nightly".into()],
            runs_held: 1,
            gone_after: Duration::from_secs(30),
        })
        .await
        .unwrap();
    assert_eq!(admin.jobs().await.unwrap()[0].replicas, ["crashed"]);
    tokio::time::sleep(Duration::from_secs(31)).await;
    let replicas = admin.replicas().await.unwrap();
    assert_eq!(replicas.len(), 1);
    assert!(!replicas[0].alive);
    assert!(!admin.jobs().await.unwrap()[0].active());
}

/// Each process records its role; an `admin` process runs no job, so it lists none.
#[tokio::test(start_paused = true)]
async fn each_process_records_its_role() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let admin = Admin::new(store.clone()).with_clock(clock);
    let mut handles = Vec::new();
    for (id, role) in [
        ("p-admin", slotguard::Role::Admin),
        ("p-scheduler", slotguard::Role::Scheduler),
        ("p-worker", slotguard::Role::Worker),
    ] {
        let scheduler = Scheduler::builder()
            .backend(store.clone())
            .clock(clock)
            .instance_id(id)
            .role(role)
            .job(slow())
            .build()
            .unwrap();
        handles.push(scheduler.try_start().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let listed: Vec<(String, Vec<String>, Vec<String>)> = admin
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.info.id, r.info.roles, r.info.jobs))
        .collect();
    let row = |id: &str, role: &str, jobs: &[&str]| {
        (
            id.to_owned(),
            vec![role.to_owned()],
            jobs.iter().map(|j| (*j).to_owned()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        listed,
        [
            row("p-admin", "admin", &[]),
            row("p-scheduler", "scheduler", &["slow"]),
            row("p-worker", "worker", &["slow"]),
        ]
    );
    let jobs = admin.jobs().await.unwrap();
    assert_eq!(
        active(&jobs, "slow"),
        ["p-worker"],
        "only the worker runs its bodies"
    );
    let [admin_only, scheduler_only, worker] = <[_; 3]>::try_from(handles).unwrap();
    worker.shutdown().await;
    let jobs = admin.jobs().await.unwrap();
    assert!(
        !jobs[0].active(),
        "a job only a scheduler queues is not active: nothing runs it"
    );
    scheduler_only.shutdown().await;
    admin_only.shutdown().await;
    assert!(admin.replicas().await.unwrap().is_empty());
}
