//! Capabilities as types: a store given with [`Store`] that lacks a capability a role's tasks need
//! is refused by `build()`, naming the capability, the role and the task; a full backend builds and
//! starts in every role.

use std::sync::Arc;
use std::time::Duration;

use slotguard::store::{Capability, Store};
use slotguard::{
    BuildError, ClockSync, ConfigError, GuardLevel, Job, MemoryBackend, Role, Scheduler,
    SchedulerBuilder,
};

fn job(name: &str) -> Job {
    Job::new(name, "*/5 * * * * *", |_| async {})
}

/// The memory backend as a [`Store`] with every capability but those in `without`.
fn store_without(without: &[Capability]) -> Store {
    let memory = Arc::new(MemoryBackend::new());
    let mut store = Store::new("parts", Arc::clone(&memory) as _);
    for capability in Capability::EVERY {
        if without.contains(&capability) {
            continue;
        }
        let m = Arc::clone(&memory);
        store = match capability {
            Capability::Locks => store.with_locks(m),
            Capability::Queue => store.with_queue(m),
            Capability::Checkpoints => store.with_checkpoints(m),
            Capability::Clock => store.with_clock(m),
            Capability::Admin => store.with_admin(m),
            Capability::Replicas => store.with_replicas(m),
            Capability::Retention => store.with_retention(m),
            _ => store,
        };
    }
    store
}

fn problems(builder: SchedulerBuilder) -> Vec<ConfigError> {
    match builder.build() {
        Ok(_) => panic!("build should fail"),
        Err(BuildError { problems }) => problems,
    }
}

fn missing(role: Role, task: &'static str, capability: Capability) -> ConfigError {
    ConfigError::MissingCapability {
        store: "parts",
        role,
        task,
        capability,
    }
}

#[test]
fn schedulers_and_workers_need_the_queue() {
    for (role, task) in [(Role::Scheduler, "timer"), (Role::Worker, "worker loop")] {
        let found = problems(
            Scheduler::builder()
                .store(store_without(&[Capability::Queue]))
                .role(role)
                .job(job("a")),
        );
        assert_eq!(found, vec![missing(role, task, Capability::Queue)]);
    }
    let err = Scheduler::builder()
        .store(store_without(&[Capability::Queue]))
        .role(Role::Worker)
        .job(job("a"))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "store `parts`: the `worker` role's worker loop needs queue (QueueStore), which this store does not have"
    );
    // The `all` and `admin` roles never queue.
    for role in [Role::All, Role::Admin] {
        let built = Scheduler::builder()
            .store(store_without(&[Capability::Queue]))
            .role(role)
            .job(job("a"))
            .build();
        assert!(built.is_ok(), "{role}: {:?}", built.err());
    }
}

#[test]
fn checkpoints_are_needed_where_slot_bodies_run() {
    for (role, task) in [(Role::All, "timer"), (Role::Worker, "worker loop")] {
        let found = problems(
            Scheduler::builder()
                .store(store_without(&[Capability::Checkpoints]))
                .role(role)
                .job(job("a")),
        );
        assert_eq!(found, vec![missing(role, task, Capability::Checkpoints)]);
    }
    // No body of a `lock`-level job can save one; nor does a scheduler run bodies.
    let built = Scheduler::builder()
        .store(store_without(&[Capability::Checkpoints]))
        .job(job("a").guard(GuardLevel::Lock))
        .build();
    assert!(built.is_ok(), "{:?}", built.err());
    let built = Scheduler::builder()
        .store(store_without(&[Capability::Checkpoints]))
        .role(Role::Scheduler)
        .job(job("a"))
        .build();
    assert!(built.is_ok(), "{:?}", built.err());
}

#[test]
fn the_store_clock_is_needed_unless_clock_sync_is_off() {
    for role in Role::ALL {
        let found = problems(
            Scheduler::builder()
                .store(store_without(&[Capability::Clock]))
                .role(role)
                .job(job("a")),
        );
        assert_eq!(found, vec![missing(role, "clock watch", Capability::Clock)]);
        let built = Scheduler::builder()
            .store(store_without(&[Capability::Clock]))
            .clock_sync(ClockSync::Off)
            .role(role)
            .job(job("a"))
            .build();
        assert!(built.is_ok(), "{role}: {:?}", built.err());
    }
}

#[test]
fn every_role_needs_admin_replicas_retention_and_locks() {
    let cases = [
        (Capability::Admin, "job registration and pause watch"),
        (Capability::Replicas, "replica registry"),
        (Capability::Retention, "history retention"),
        (Capability::Locks, "history retention"),
    ];
    for role in Role::ALL {
        for (capability, task) in cases {
            let found = problems(
                Scheduler::builder()
                    .store(store_without(&[capability]))
                    .lock_store(MemoryBackend::new())
                    .role(role)
                    .job(job("a")),
            );
            assert_eq!(found, vec![missing(role, task, capability)], "{role}");
        }
    }
}

#[test]
fn each_missing_capability_is_named_once() {
    let found = problems(
        Scheduler::builder()
            .store(store_without(&Capability::EVERY))
            .lock_store(MemoryBackend::new())
            .role(Role::Worker)
            .job(job("a")),
    );
    let named: Vec<Capability> = found
        .iter()
        .map(|p| match p {
            ConfigError::MissingCapability { capability, .. } => *capability,
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        named,
        [
            Capability::Clock,
            Capability::Admin,
            Capability::Queue,
            Capability::Checkpoints,
            Capability::Replicas,
            Capability::Retention,
            Capability::Locks,
        ]
    );
}

/// A full backend has every capability: each role builds, starts, and shuts down (its registry row
/// removed after its runs).
#[tokio::test]
async fn a_full_backend_builds_and_starts_in_every_role() {
    for role in Role::ALL {
        let memory = MemoryBackend::new();
        let scheduler = Scheduler::builder()
            .backend(memory.clone())
            .role(role)
            .job(job("a"))
            .recovery_interval(Duration::from_millis(20))
            .build()
            .unwrap_or_else(|e| panic!("{role}: {e}"));
        assert!(scheduler.backend().is_some(), "{role}");
        let handle = scheduler.try_start().await.expect("start");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let admin = Store::full(Arc::new(memory.clone()))
            .backend()
            .cloned()
            .expect("a backend");
        assert_eq!(admin.replicas().await.expect("replicas").len(), 1, "{role}");
        handle.shutdown().await;
        assert!(
            admin.replicas().await.expect("replicas").is_empty(),
            "{role}"
        );
    }
}

/// A store put together from every capability works as a backend does, but the admin API needs
/// the backend itself.
#[test]
fn a_store_of_parts_builds_without_the_admin_api() {
    let scheduler = Scheduler::builder()
        .store(store_without(&[]))
        .job(job("a"))
        .build()
        .expect("every capability");
    assert!(scheduler.backend().is_none());
}
