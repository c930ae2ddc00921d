//! The role start-up as one table: the tasks each role starts ([`TASK_SETS`]), what each needs of
//! the store ([`Task::needs`], checked by `build()`), and their start, every one on one of the
//! runtime's trackers: the work tracker (stopped and drained first at shutdown) or the upkeep
//! tracker (heartbeats and the registry row, kept until the runs have ended).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::role::Role;
use crate::runtime::Runtime;
use crate::store::{Capability, Store};

use super::ConfigError;

/// One long-lived task of a started scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Task {
    /// Computes slots: offers them to the guard chain (`all`) or enqueues them (`scheduler`).
    Timer,
    /// Follows the schedules kept in the store and fires their slots as the timer does.
    Schedules,
    /// Reads operators' holiday overrides of the jobs' calendars for the timer.
    Calendars,
    /// After registration, creates the runs of slots missed while no replica ran; `all` paces them.
    CatchUp,
    /// Claims due work: retries, hand-overs, stale and buffered runs.
    Recovery,
    /// Claims queued slots and due work, within the process's room, and runs them.
    WorkerLoop,
    /// Keeps the heartbeats of the attempts this process holds, until its runs have ended.
    Heartbeats,
    /// Registers the jobs, reads their pause state, and follows it.
    Control,
    /// Measures this replica's clock against the store's, first before the timer starts.
    ClockWatch,
    /// This process's row in the replica registry, removed after its runs have ended.
    Registry,
    /// Prunes history past its retention, one replica at a time.
    Retention,
}

use Task::{
    Calendars, CatchUp, ClockWatch, Control, Heartbeats, Recovery, Registry, Retention, Schedules,
    Timer, WorkerLoop,
};

/// The tasks each role starts. Without a store only the timer runs; the clock watch runs when
/// the clock is measured ([`ClockSync`](crate::ClockSync) not `Off`).
#[rustfmt::skip]
pub(crate) const TASK_SETS: [(Role, &[Task]); 4] = [
    (Role::All,       &[ClockWatch, Control, Timer, Schedules, Calendars, CatchUp, Recovery, Heartbeats, Registry, Retention]),
    (Role::Scheduler, &[ClockWatch, Control, Timer, Schedules, Calendars, CatchUp, Registry, Retention]),
    (Role::Worker,    &[ClockWatch, Control, WorkerLoop, Heartbeats, Registry, Retention]),
    (Role::Admin,     &[ClockWatch, Control, Registry, Retention]),
];

/// The task set of `role`.
pub(crate) fn task_set(role: Role) -> &'static [Task] {
    TASK_SETS
        .iter()
        .find(|(r, _)| *r == role)
        .map_or(&[], |(_, tasks)| *tasks)
}

impl Task {
    /// The task's name, as a `build()` error gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Timer => "timer",
            Schedules => "stored schedules",
            Calendars => "calendar overrides",
            CatchUp => "catch-up",
            Recovery => "recovery",
            WorkerLoop => "worker loop",
            Heartbeats => "heartbeats",
            Control => "job registration and pause watch",
            ClockWatch => "clock watch",
            Registry => "replica registry",
            Retention => "history retention",
        }
    }

    /// What the task needs of the store in `role`, beyond its slot rows. Checkpoints are for the
    /// tasks that run `slot`-level bodies (a body may save one).
    pub(crate) fn needs(self, role: Role) -> &'static [Capability] {
        match self {
            Timer if role == Role::Scheduler => &[Capability::Queue],
            Timer | Recovery => &[Capability::Checkpoints],
            WorkerLoop => &[Capability::Queue, Capability::Checkpoints],
            CatchUp | Control => &[Capability::Admin],
            ClockWatch => &[Capability::Clock],
            Registry => &[Capability::Replicas],
            // The prune lock is the store's own; gone replicas are forgotten by the same pass.
            Retention => &[
                Capability::Retention,
                Capability::Locks,
                Capability::Replicas,
            ],
            // A store without stored schedules has only the code's.
            // Likewise without overrides: the jobs' calendars are the code's.
            Heartbeats | Schedules | Calendars => &[],
        }
    }
}

/// What `role`'s tasks need of `store` and it lacks, once per capability. `slot_jobs`: some job is
/// at the `slot` level (else no body can checkpoint); `clock_measured`: the clock watch runs.
pub(crate) fn missing(
    role: Role,
    store: &Store,
    slot_jobs: bool,
    clock_measured: bool,
) -> Vec<ConfigError> {
    let mut problems: Vec<ConfigError> = Vec::new();
    for &task in task_set(role) {
        if task == ClockWatch && !clock_measured {
            continue;
        }
        for &capability in task.needs(role) {
            let named = problems.iter().any(|p| {
                matches!(p, ConfigError::MissingCapability { capability: c, .. } if *c == capability)
            });
            if store.has(capability)
                || named
                || (capability == Capability::Checkpoints && !slot_jobs)
            {
                continue;
            }
            problems.push(ConfigError::MissingCapability {
                store: store.name(),
                role,
                task: task.name(),
                capability,
            });
        }
    }
    problems
}

/// Everything the tasks of one start need.
pub(super) struct Start<'a> {
    pub(super) rt: &'a Arc<Runtime>,
    pub(super) store: Option<&'a Store>,
    /// The catch-up due times, when `try_start` registered and planned already.
    pub(super) prepared: Option<Vec<DateTime<Utc>>>,
    /// Cancelled once the runs have ended at shutdown: heartbeats stop, the registry row goes.
    pub(super) done: CancellationToken,
    pub(super) recovery_interval: Duration,
    pub(super) stale_after: Duration,
    pub(super) clock_check: Duration,
    pub(super) prune_interval: Duration,
    pub(super) catch_up_rate: f64,
}

/// One-shot signals between tasks of one start: the timer waits for the first clock measurement,
/// catch-up for the jobs' registration (it skips paused jobs).
#[derive(Clone, Default)]
struct Latches {
    clock_measured: CancellationToken,
    registered: CancellationToken,
}

impl Start<'_> {
    /// Starts every task of the role's set that applies.
    pub(super) fn spawn_all(self) {
        let latches = Latches::default();
        if self.store.is_none() || self.rt.synced.is_none() {
            latches.clock_measured.cancel();
        }
        if self.store.is_none() {
            latches.registered.cancel();
        }
        for &task in task_set(self.rt.role) {
            self.spawn(task, &latches);
        }
    }

    fn spawn(&self, task: Task, latches: &Latches) {
        let rt = Arc::clone(self.rt);
        if task == Timer {
            let ready = latches.clock_measured.clone();
            self.rt.tracker.spawn(async move {
                ready.cancelled().await;
                crate::runtime::timer::drive(rt).await;
            });
            return;
        }
        let Some(store) = self.store.cloned() else {
            return;
        };
        match task {
            Timer => {}
            Schedules => {
                let (Some(schedules), true) = (store.schedules.clone(), rt.slots.is_some()) else {
                    return;
                };
                let ready = latches.clock_measured.clone();
                let span = tracing::debug_span!("stored_schedules", replica = %rt.owner);
                let drive = async move {
                    ready.cancelled().await;
                    crate::runtime::schedules::drive(rt, schedules).await;
                };
                self.rt
                    .tracker
                    .spawn(tracing::Instrument::instrument(drive, span));
            }
            Calendars => {
                let (Some(store), Some(book)) = (store.calendars.clone(), rt.calendars.clone())
                else {
                    return;
                };
                let ready = latches.clock_measured.clone();
                let drive = async move {
                    ready.cancelled().await;
                    crate::runtime::calendars::drive(rt, store, book).await;
                };
                self.rt.tracker.spawn(drive);
            }
            ClockWatch => self.clock_watch(rt, store, latches.clock_measured.clone()),
            Control => self.control(rt, store, latches.registered.clone()),
            CatchUp => self.catch_up(rt, latches.registered.clone()),
            Recovery if rt.slots.is_some() => {
                let every = self.recovery_interval;
                self.rt
                    .tracker
                    .spawn(crate::runtime::recover::recover(rt, every));
            }
            WorkerLoop if rt.slots.is_some() => {
                let every = self.recovery_interval;
                self.rt
                    .tracker
                    .spawn(crate::runtime::worker::work(rt, every));
            }
            Recovery | WorkerLoop => {}
            Heartbeats => spawn_heartbeats(&rt, &store, &self.done),
            Registry => self.registry(rt, store),
            Retention => {
                let every = self.prune_interval;
                self.rt
                    .tracker
                    .spawn(crate::runtime::retention::prune(rt, store, every));
            }
        }
    }

    /// The first measurement (unless `try_start` made it), then one every clock check interval.
    fn clock_watch(&self, rt: Arc<Runtime>, store: Store, measured: CancellationToken) {
        let (Some(synced), Some(clock)) = (rt.synced.clone(), store.clock.clone()) else {
            measured.cancel();
            return;
        };
        let (first, every) = (self.prepared.is_none(), self.clock_check);
        self.rt.tracker.spawn(async move {
            if first {
                super::sync_clock(&rt, &store).await;
            }
            measured.cancel();
            crate::runtime::clock_sync::watch(synced, clock, every, rt.stop.clone()).await;
        });
    }

    /// Registration (unless `try_start` did it), then the pause watch.
    fn control(&self, rt: Arc<Runtime>, store: Store, registered: CancellationToken) {
        let Some(admin) = store.admin.clone() else {
            registered.cancel();
            return;
        };
        let (first, every) = (self.prepared.is_none(), self.recovery_interval);
        self.rt.tracker.spawn(async move {
            if first && let Err(e) = crate::runtime::control::register(&rt, &*admin).await {
                tracing::warn!(error = %e, "could not register jobs or read their pause state");
            }
            registered.cancel();
            crate::runtime::control::watch(rt, admin, every).await;
        });
    }

    /// Catch-up planning (unless `try_start` did it); the `all` role paces the runs itself, a
    /// scheduler's wait in the queue for workers.
    fn catch_up(&self, rt: Arc<Runtime>, registered: CancellationToken) {
        let Some(slots) = rt.slots.clone() else {
            return;
        };
        let (prepared, rate) = (self.prepared.clone(), self.catch_up_rate);
        self.rt.tracker.spawn(async move {
            registered.cancelled().await;
            let due = match prepared {
                Some(due) => due,
                None => crate::runtime::catchup::plan(&rt, &slots, rate)
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "could not plan catch-up; missed slots stay missed");
                        Vec::new()
                    }),
            };
            if !due.is_empty() && rt.role == Role::All {
                crate::runtime::catchup::pump(rt, due).await;
            }
        });
    }

    /// The registry row, on the upkeep tracker: shutdown removes it after the runs have ended.
    fn registry(&self, rt: Arc<Runtime>, store: Store) {
        let Some(replicas) = store.replicas.clone() else {
            return;
        };
        let every = self.recovery_interval;
        let gone_after = crate::runtime::registry::gone_after(every, self.stale_after);
        let done = self.done.clone();
        self.rt.upkeep.spawn(crate::runtime::registry::keep(
            rt, replicas, every, gone_after, done,
        ));
    }
}

/// Keeps the heartbeats of the attempts this process holds, until `done`, on the upkeep tracker.
pub(super) fn spawn_heartbeats(rt: &Runtime, store: &Store, done: &CancellationToken) {
    let Some(slots) = &rt.slots else { return };
    let heartbeats = Arc::clone(&slots.heartbeats);
    let (owner, done, store) = (
        Arc::clone(&rt.owner),
        done.clone(),
        Arc::clone(&store.slots),
    );
    rt.upkeep
        .spawn(async move { heartbeats.run(&*store, &owner, done).await });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every role has one task set; the roles that schedule have the timer, those that execute
    /// the heartbeats, and every role keeps its registry row and prunes.
    #[test]
    fn every_role_has_one_task_set() {
        for role in Role::ALL {
            assert_eq!(TASK_SETS.iter().filter(|(r, _)| *r == role).count(), 1);
            let tasks = task_set(role);
            assert_eq!(tasks.contains(&Timer), role.schedules(), "{role}");
            assert_eq!(tasks.contains(&Heartbeats), role.executes(), "{role}");
            assert!(
                tasks.contains(&Registry) && tasks.contains(&Retention),
                "{role}"
            );
        }
    }
}
