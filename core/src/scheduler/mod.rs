//! The builder that validates every job at start-up, and the scheduler it builds: the scheduler
//! and its start-up here, the builder in `builder.rs`, the checks of every job in `validate.rs`,
//! and the errors `build()` answers in `error.rs`.

mod builder;
mod error;
mod tasks;
mod validate;

pub use builder::{JobInfo, SchedulerBuilder};
pub use error::{BuildError, ConfigError};
pub use validate::{DEFAULT_RETENTION, derive_lock_key};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::guard::GuardLevel;
use crate::handle::SchedulerHandle;
use crate::runtime::Runtime;
use crate::store::{LockStore, Store};

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
    /// The store and its capabilities (`build()` checked them against the role's tasks).
    store: Option<Store>,
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
            .field("store", &self.store.as_ref().map(Store::name))
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
        if let Some(store) = &self.store {
            sync_clock(&self.runtime, store).await;
            if let Some(locks) = &store.locks
                && !keys.is_empty()
            {
                locks.register_lock_keys(&self.namespace, &keys).await?;
            }
        }
        if let Some(locks) = &self.lock_store
            && !keys.is_empty()
        {
            locks.register_lock_keys(&self.namespace, &keys).await?;
        }
        let prepared = match (&self.store, &self.runtime.slots) {
            (Some(store), slots) => {
                crate::runtime::control::register(&self.runtime, &**store.admin()?).await?;
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
    pub fn backend(&self) -> Option<Arc<dyn crate::store::Backend>> {
        self.store.as_ref()?.backend().map(Arc::clone)
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
        if let Some(store) = &self.store {
            sync_clock(&self.runtime, store).await;
            let admin = store.admin().map_err(store_error)?;
            crate::runtime::control::register(&self.runtime, &**admin)
                .await
                .map_err(store_error)?;
        }
        if !crate::runtime::calendars::read_once(&self.runtime).await {
            return Err(store_error(crate::store::StoreError::unavailable(
                "the calendar overrides cannot be read",
            )));
        }
        let entry = self.runtime.jobs.iter().position(|j| *j.name == *job);
        let slot = match entry {
            Some(i) => {
                let schedule = self.runtime.schedule_of(i);
                source.resolve(&schedule, self.runtime.clock.now())?
            }
            None => {
                return Err(crate::RunOnceError::UnknownJob(
                    slotguard_cron::shown_within(job, 64),
                ));
            }
        };
        let rt = Arc::clone(&self.runtime);
        let heartbeat_done = CancellationToken::new();
        if let Some(store) = &self.store {
            tasks::spawn_heartbeats(&rt, store, &heartbeat_done);
        }
        let handle = SchedulerHandle::new(Arc::clone(&rt), heartbeat_done);
        shut_down_on(self.external, &handle);
        let admin = self.store.as_ref().and_then(|s| s.admin.as_ref());
        let done = crate::once::run(&rt, admin, job, slot).await;
        handle.shutdown().await;
        done
    }

    /// Starts the role's task set ([`tasks::TASK_SETS`]). `prepared`: the catch-up due times when
    /// registration and planning already happened.
    fn launch(self, prepared: Option<Vec<chrono::DateTime<chrono::Utc>>>) -> SchedulerHandle {
        let heartbeat_done = CancellationToken::new();
        let handle = SchedulerHandle::new(Arc::clone(&self.runtime), heartbeat_done.clone());
        tasks::Start {
            rt: &self.runtime,
            store: self.store.as_ref(),
            prepared,
            done: heartbeat_done,
            recovery_interval: self.recovery_interval,
            stale_after: self.stale_after,
            clock_check: self.clock_check,
            prune_interval: self.prune_interval,
            catch_up_rate: self.catch_up_rate,
        }
        .spawn_all();
        shut_down_on(self.external, &handle);
        tracing::info!(
            instance_id = %self.runtime.owner,
            jobs = self.runtime.jobs.len(),
            role = %self.runtime.role,
            "scheduler started"
        );
        handle
    }
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
async fn sync_clock(rt: &Runtime, store: &Store) {
    let (Some(synced), Some(clock)) = (&rt.synced, &store.clock) else {
        return;
    };
    match tokio::time::timeout(Duration::from_secs(2), synced.measure(&**clock)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not read the store's clock; slots follow this replica's clock until it can")
        }
        Err(_) => tracing::warn!(
            "the store's clock did not answer within 2 s; slots follow this replica's clock until it does"
        ),
    }
}
