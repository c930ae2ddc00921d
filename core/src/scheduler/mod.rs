//! The builder that validates every job at start-up, and the scheduler it builds: the scheduler
//! and its start-up here, the builder in `builder.rs`, the checks of every job in `validate.rs`,
//! and the errors `build()` answers in `error.rs`.

mod builder;
mod error;
mod validate;

pub use builder::{JobInfo, SchedulerBuilder};
pub use error::{BuildError, ConfigError};
pub use validate::{DEFAULT_RETENTION, derive_lock_key};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::guard::GuardLevel;
use crate::guard::slot::SlotGuard;
use crate::handle::SchedulerHandle;
use crate::role::Role;
use crate::runtime::Runtime;
use crate::store::{Backend, LockStore};

/// The longest job name accepted, in characters.
pub const MAX_JOB_NAME_CHARS: usize = slotguard_cron::MAX_NAME_CHARS;

/// A scheduler with every job validated, ready to [`start`](Scheduler::start).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), slotguard::BuildError> {
/// use slotguard::{Job, Scheduler};
///
/// let scheduler = Scheduler::builder()
///     .job(Job::new("heartbeat", "*/10 * * * * *", |_| async {}))
///     .build()?;
/// let handle = scheduler.start();
/// handle.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Scheduler {
    runtime: Arc<Runtime>,
    backend: Option<Arc<dyn Backend>>,
    /// The explicit lock store, when the locks are not the backend's.
    lock_store: Option<Arc<dyn LockStore>>,
    recovery_interval: Duration,
    external: Option<CancellationToken>,
    namespace: String,
    catch_up_rate: f64,
    stale_after: Duration,
    clock_check: Duration,
    prune_interval: Duration,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("instance_id", &self.runtime.owner)
            .field("jobs", &self.runtime.jobs.len())
            .field("backend", &self.backend.as_ref().map(|b| b.name()))
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A builder with no jobs, no backend, UTC as the default zone and a 30-second grace period.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::default()
    }

    /// The jobs, with their validated schedules and guard levels.
    pub fn jobs(&self) -> impl Iterator<Item = JobInfo<'_>> {
        self.runtime.jobs.iter().map(|j| JobInfo {
            name: &j.name,
            schedule: &j.schedule,
            guard: j.level,
            lock_key: j.lock_key,
        })
    }

    /// This process's instance id: the owner recorded on its locks and attempts.
    pub fn instance_id(&self) -> &str {
        &self.runtime.owner
    }

    /// Checks the store, then starts: registers this binary's lock keys in the store's key table (so two
    /// binaries sharing a database cannot give one key to two jobs silently), and fails before claiming
    /// anything if the store is unreachable or a key belongs to another job. The recommended way to
    /// start with a database backend.
    ///
    /// # Errors
    /// [`StoreError`](crate::store::StoreError) from the store, naming the colliding jobs.
    pub async fn try_start(self) -> Result<SchedulerHandle, crate::store::StoreError> {
        let keys: Vec<(i64, String)> = self
            .runtime
            .jobs
            .iter()
            .filter(|j| j.level >= GuardLevel::Lock)
            .map(|j| (j.lock_key, j.name.to_string()))
            .collect();
        if let Some(backend) = &self.backend {
            sync_clock(&self.runtime, &**backend).await;
            if !keys.is_empty() {
                backend.register_lock_keys(&self.namespace, &keys).await?;
            }
        }
        if let Some(locks) = &self.lock_store
            && !keys.is_empty()
        {
            locks.register_lock_keys(&self.namespace, &keys).await?;
        }
        let prepared = match (&self.backend, &self.runtime.slots) {
            (Some(backend), slots) => {
                crate::runtime::control::register(&self.runtime, &**backend).await?;
                match slots {
                    Some(slots) if self.runtime.role.schedules() => {
                        crate::runtime::catchup::plan(&self.runtime, slots, self.catch_up_rate)
                            .await?
                    }
                    _ => Vec::new(),
                }
            }
            (None, _) => Vec::new(),
        };
        Ok(self.launch(Some(prepared)))
    }

    /// Starts the timer. Must be called inside a tokio runtime. With a backend, the jobs are
    /// registered, their pause state read and catch-up planned in the background (failures are
    /// logged); [`try_start`](Scheduler::try_start) does it first and reports failures.
    ///
    /// # Panics
    /// Outside a tokio runtime, like `tokio::spawn`.
    pub fn start(self) -> SchedulerHandle {
        self.launch(None)
    }

    /// The store this scheduler was built with, shared: what the admin API
    /// (`slotguard_admin::Admin::of`) and an application's own tools read and change. `None`
    /// without a backend.
    pub fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.as_ref().map(Arc::clone)
    }

    /// The clock this scheduler reads "now" from ([`TokioClock`](crate::TokioClock) in tests in
    /// paused time, the system clock otherwise).
    pub fn clock(&self) -> Arc<dyn crate::Clock> {
        Arc::clone(&self.runtime.clock)
    }

    /// How long a run's heartbeat may be silent before another replica takes it over
    /// ([`SchedulerBuilder::stale_after`](crate::SchedulerBuilder::stale_after)).
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// Starts the upkeep of the store: the heartbeats of the runs this process executes and its row
    /// in the replica registry until `done` (after a shutdown's runs; the row is then removed), and
    /// pruning of history past its retention until shutdown. The registry task is returned: the
    /// shutdown waits for its removal.
    fn upkeep(&self, done: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        let backend = self.backend.as_ref()?;
        if self.runtime.role.executes() {
            spawn_heartbeats(&self.runtime, backend, done);
        }
        self.runtime.tracker.spawn(crate::runtime::retention::prune(
            Arc::clone(&self.runtime),
            Arc::clone(backend),
            self.prune_interval,
        ));
        let every = self.recovery_interval;
        Some(tokio::spawn(crate::runtime::registry::keep(
            Arc::clone(&self.runtime),
            Arc::clone(backend),
            every,
            crate::runtime::registry::gone_after(every, self.stale_after),
            done.clone(),
        )))
    }

    /// Runs one slot of `job` through its guard chain, then stops: the way to run slotguard under an
    /// external trigger (a Kubernetes CronJob, a systemd timer) that starts a process per slot.
    /// The slot comes from `source` ([`SlotSource::from_env`](crate::SlotSource::from_env) reads
    /// `SLOTGUARD_SLOT`, the CronJob's annotation through the downward API, or takes the latest
    /// slot). Of several processes started for one slot (controller retries, the same CronJob in
    /// a second cluster) one runs the body; the others follow the slot's row while it runs and
    /// return [`RunOnce::Suppressed`](crate::RunOnce::Suppressed) naming its owner. A process
    /// started again for a slot whose runner died (a pod retried by `backoffLimit`) claims it again
    /// as its next attempt once its heartbeat is stale; one started again after the body failed
    /// waits for the run's retry (its backoff, up to 15 minutes) and runs it. A slot older than the job's catch-up window
    /// is refused and recorded `skipped`. [`RunOnce::exit_code`](crate::RunOnce::exit_code) says
    /// what to exit with; `docs/workers.md` has the Kubernetes and systemd set-ups.
    ///
    /// # Errors
    /// [`RunOnceError`](crate::RunOnceError): unknown job, not a slot of its schedule, not due
    /// yet, no slot, or the store could not be asked.
    pub async fn run_once(
        self,
        job: &str,
        source: crate::SlotSource,
    ) -> Result<crate::RunOnce, crate::RunOnceError> {
        let store_error = crate::RunOnceError::Store;
        if let Some(backend) = &self.backend {
            sync_clock(&self.runtime, &**backend).await;
            crate::runtime::control::register(&self.runtime, &**backend)
                .await
                .map_err(store_error)?;
        }
        let entry = self.runtime.jobs.iter().find(|j| *j.name == *job);
        let slot = match entry {
            Some(entry) => source.resolve(&entry.schedule, self.runtime.clock.now())?,
            None => {
                return Err(crate::RunOnceError::UnknownJob(
                    slotguard_cron::shown_within(job, 64),
                ));
            }
        };
        let (rt, backend) = (Arc::clone(&self.runtime), self.backend.clone());
        let heartbeat_done = CancellationToken::new();
        if let Some(backend) = &backend {
            spawn_heartbeats(&rt, backend, &heartbeat_done);
        }
        let handle = SchedulerHandle::new(Arc::clone(&rt), None, heartbeat_done);
        shut_down_on(self.external, &handle);
        let done = crate::once::run(&rt, backend.as_ref(), job, slot).await;
        handle.shutdown().await;
        done
    }

    /// `prepared`: the catch-up due times when registration and planning already happened.
    fn launch(self, prepared: Option<Vec<chrono::DateTime<chrono::Utc>>>) -> SchedulerHandle {
        let heartbeat_done = CancellationToken::new();
        let role = self.runtime.role;
        let registry = self.upkeep(&heartbeat_done);
        let handle = SchedulerHandle::new(Arc::clone(&self.runtime), registry, heartbeat_done);
        let rt = &self.runtime;
        if let (Some(synced), Some(backend)) = (&rt.synced, &self.backend) {
            // `try_start` measured before it registered; `start` measures before the timer plans.
            let first = prepared.is_none().then(|| Arc::clone(backend));
            let (rt, synced, backend) = (Arc::clone(rt), Arc::clone(synced), Arc::clone(backend));
            let every = self.clock_check;
            self.runtime.tracker.spawn(async move {
                if let Some(store) = first {
                    sync_clock(&rt, &*store).await;
                }
                if role.schedules() {
                    rt.tracker
                        .spawn(crate::runtime::timer::drive(Arc::clone(&rt)));
                }
                crate::runtime::clock_sync::watch(synced, backend, every, rt.stop.clone()).await;
            });
        } else if role.schedules() {
            rt.tracker
                .spawn(crate::runtime::timer::drive(Arc::clone(rt)));
        }
        if let Some(backend) = self.backend {
            let (rt, slots, every, rate) = (
                Arc::clone(rt),
                self.runtime.slots.clone(),
                self.recovery_interval,
                self.catch_up_rate,
            );
            self.runtime.tracker.spawn(async move {
                let due = match prepared {
                    Some(due) => due,
                    None => prepare(&rt, &*backend, slots.as_deref(), rate).await,
                };
                // A scheduler's catch-up rows wait in the queue for workers.
                if slots.is_some() && !due.is_empty() && role == Role::All {
                    rt.tracker
                        .spawn(crate::runtime::catchup::pump(Arc::clone(&rt), due));
                }
                crate::runtime::control::watch(rt, backend, every).await;
            });
        }
        if self.runtime.slots.is_some() {
            let (rt, every) = (Arc::clone(&self.runtime), self.recovery_interval);
            match role {
                Role::All => self
                    .runtime
                    .tracker
                    .spawn(crate::runtime::recover::recover(rt, every)),
                Role::Worker => self
                    .runtime
                    .tracker
                    .spawn(crate::runtime::worker::work(rt, every)),
                _ => self.runtime.tracker.spawn(async {}),
            };
        }
        shut_down_on(self.external, &handle);
        tracing::info!(
            instance_id = %self.runtime.owner,
            jobs = self.runtime.jobs.len(),
            role = %role,
            "scheduler started"
        );
        handle
    }
}

/// Keeps the heartbeats of the attempts this process holds, until `done`.
fn spawn_heartbeats(rt: &Runtime, backend: &Arc<dyn Backend>, done: &CancellationToken) {
    let Some(slots) = &rt.slots else { return };
    let heartbeats = Arc::clone(&slots.heartbeats);
    let (owner, done, backend) = (Arc::clone(&rt.owner), done.clone(), Arc::clone(backend));
    tokio::spawn(async move { heartbeats.run(backend, owner, done).await });
}

/// Shuts `handle` down when the application's `external` token is cancelled
/// ([`SchedulerBuilder::cancellation_token`]).
fn shut_down_on(external: Option<CancellationToken>, handle: &SchedulerHandle) {
    let Some(external) = external else { return };
    let handle = handle.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = external.cancelled() => { handle.shutdown().await; }
            () = handle.stopped() => {}
        }
    });
}

/// Measures the clock against the store's once, before slots are planned; a failure is logged (the
/// next measurement comes with the clock check interval).
async fn sync_clock(rt: &Runtime, backend: &dyn Backend) {
    let Some(synced) = &rt.synced else { return };
    match tokio::time::timeout(Duration::from_secs(2), synced.measure(backend)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not read the store's clock; slots follow this replica's clock until it can")
        }
        Err(_) => tracing::warn!(
            "the store's clock did not answer within 2 s; slots follow this replica's clock until it does"
        ),
    }
}

/// Registration and catch-up planning for [`Scheduler::start`], which cannot report failures.
async fn prepare(
    rt: &Runtime,
    backend: &dyn Backend,
    slots: Option<&SlotGuard>,
    rate: f64,
) -> Vec<chrono::DateTime<chrono::Utc>> {
    if let Err(e) = crate::runtime::control::register(rt, backend).await {
        tracing::warn!(error = %e, "could not register jobs or read their pause state");
    }
    let Some(slots) = slots.filter(|_| rt.role.schedules()) else {
        return Vec::new();
    };
    crate::runtime::catchup::plan(rt, slots, rate)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not plan catch-up; missed slots stay missed");
            Vec::new()
        })
}
