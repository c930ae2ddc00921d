//! The builder that validates every job at start-up, and the scheduler it builds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use slotguard_cron::{
    DstPolicy, Schedule, ScheduleError, Tz, UnknownZone, check_job_name, parse_zone,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin::shown;
use crate::clock::{Clock, ClockSync, SharedClock, SystemClock};
use crate::entry::{JobEntry, Layers};
use crate::guard::local::LocalGuard;
use crate::guard::lock::{LockGuard, unlocker};
use crate::guard::slot::{Heartbeats, SlotGuard, finisher};
use crate::guard::{Guard, GuardLevel};
use crate::handle::SchedulerHandle;
use crate::job::{self, Job};
use crate::policy::{CatchUp, Overlap};
use crate::role::Role;
use crate::runtime::Runtime;
use crate::state::StateMap;
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

    /// The admin API over this scheduler's store, on its clock and staleness threshold; `None`
    /// without a backend.
    pub fn admin(&self) -> Option<crate::admin::Admin> {
        let backend = self.backend.as_ref()?;
        let mut admin =
            crate::admin::Admin::shared(Arc::clone(backend)).with_stale_after(self.stale_after);
        admin.set_clock(Arc::clone(&self.runtime.clock));
        Some(admin)
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
        let store_error = |e: crate::store::StoreError| crate::RunOnceError::Store(e.to_string());
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

/// A job as the scheduler validated it.
#[derive(Debug, Clone, Copy)]
pub struct JobInfo<'a> {
    /// The job's name.
    pub name: &'a str,
    /// Expression, zone and DST policy.
    pub schedule: &'a Schedule,
    /// The guard level in force.
    pub guard: GuardLevel,
    /// The lock key from the registry (used at the `lock` and `slot` levels).
    pub lock_key: i64,
}

/// Collects jobs and settings; [`build`](SchedulerBuilder::build) validates them all.
#[must_use]
pub struct SchedulerBuilder {
    jobs: Vec<Job>,
    discover: bool,
    backend: Option<Arc<dyn Backend>>,
    lock_store: Option<Arc<dyn LockStore>>,
    state: StateMap,
    default_tz: Option<String>,
    default_guard: Option<GuardLevel>,
    default_dst: DstPolicy,
    grace: Duration,
    kill_after: Duration,
    claim_ahead: Duration,
    stale_after: Duration,
    recovery_interval: Option<Duration>,
    external: Option<CancellationToken>,
    clock: SharedClock,
    /// Whether `clock` was injected (then `ClockSync::Observe` is the default).
    clock_injected: bool,
    clock_sync: Option<ClockSync>,
    clock_check: Duration,
    instance_id: Option<String>,
    namespace: String,
    catch_up_rate: f64,
    spread: Option<Duration>,
    retention: Duration,
    prune_interval: Duration,
    claim_ahead_set: bool,
    role: Role,
    max_runs: Option<usize>,
}

impl Default for SchedulerBuilder {
    fn default() -> Self {
        SchedulerBuilder {
            jobs: Vec::new(),
            discover: false,
            backend: None,
            lock_store: None,
            state: StateMap::default(),
            default_tz: None,
            default_guard: None,
            default_dst: DstPolicy::default(),
            grace: Duration::from_secs(30),
            kill_after: Duration::from_secs(5),
            claim_ahead: Duration::ZERO,
            stale_after: Duration::from_secs(30),
            recovery_interval: None,
            external: None,
            clock: Arc::new(SystemClock),
            clock_injected: false,
            clock_sync: None,
            clock_check: Duration::from_secs(10),
            instance_id: None,
            namespace: "default".to_owned(),
            catch_up_rate: 1.0,
            spread: None,
            retention: DEFAULT_RETENTION,
            prune_interval: Duration::from_secs(600),
            claim_ahead_set: false,
            role: Role::All,
            max_runs: None,
        }
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("jobs", &self.jobs)
            .field("discover", &self.discover)
            .field("backend", &self.backend.as_ref().map(|b| b.name()))
            .field("default_tz", &self.default_tz)
            .field("default_guard", &self.default_guard)
            .finish_non_exhaustive()
    }
}

impl SchedulerBuilder {
    /// Runs each slot's guard chain (flag, lock, claim) this long before the slot's instant, and
    /// starts the body at the instant: the claim's round trips no longer delay the start (default 0,
    /// at most 1 s). The overlap check happens that much earlier too, so keep it well under the
    /// shortest interval and the shortest run: a run that ends inside the lead still counts as
    /// running for the next slot.
    ///
    /// A process of the [`Role::Scheduler`] role enqueues each slot this long before its instant
    /// (default 100 ms), so that workers have the row and wake at the instant.
    pub fn claim_ahead(mut self, lead: Duration) -> Self {
        self.claim_ahead = lead;
        self.claim_ahead_set = true;
        self
    }

    /// What this process does with its jobs (default [`Role::All`]: it computes slots and runs
    /// them). [`Role::Scheduler`] enqueues slots for workers, [`Role::Worker`] runs queued slots,
    /// [`Role::Admin`] does neither. The scheduler and worker roles need a backend and every job at
    /// the `slot` level: the slot table is their queue. See `docs/workers.md`.
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// At most `runs` bodies of work claimed from the store (queued slots, retries, recovery,
    /// catch-up, manual runs) run at once in this process; a worker claims no more than it has room
    /// for and leaves the rest to other workers (default: no limit, 32 claimed per round). At least 1.
    pub fn max_concurrent_runs(mut self, runs: usize) -> Self {
        self.max_runs = Some(runs);
        self
    }

    /// How many catch-up runs per second the cluster starts after an outage (default 1; from
    /// [`MIN_PER_SECOND`](crate::admin::MIN_PER_SECOND) to
    /// [`MAX_PER_SECOND`](crate::admin::MAX_PER_SECOND), as backfills). Each run is
    /// also offset by a jitter, the same on every replica, within its 1/rate window, so any window of
    /// `t` seconds holds at most `rate × t + 1` catch-up starts.
    pub fn catch_up_rate(mut self, per_second: f64) -> Self {
        self.catch_up_rate = per_second;
        self
    }

    /// How much load spreading delays this replica's claims, at most (default 20 ms with a backend;
    /// none without one, or with an injected [`clock`](Self::clock)). Replicas whose timers fire
    /// together otherwise see the fastest one claim every slot of every tick; with a spread, each
    /// replica waits one of four steps of it, chosen per job and slot by a hash of its instance id,
    /// so each job's slot goes to a different replica. The delay is before the claim: with
    /// [`claim_ahead`](Self::claim_ahead) at least as long, bodies still start at their instant.
    /// `Duration::ZERO` turns it off; at most 1 s.
    pub fn load_spread(mut self, spread: Duration) -> Self {
        self.spread = Some(spread);
        self
    }

    /// How long finished runs are kept, with their attempts, checkpoints and audit records, for
    /// jobs that do not set their own [`Job::retention`] (default 30 days; from 1 s to 100 years).
    /// Runs that may still run again (`pending`, `running`, `abandoned` with a next attempt) are
    /// kept whatever their age, and so is each job's newest scheduled slot.
    pub fn retention(mut self, keep: Duration) -> Self {
        self.retention = keep;
        self
    }

    /// How often a replica tries to prune history past its retention (default 10 minutes; at
    /// least 100 ms). Replicas take turns through a lock: one prunes, the others skip the round.
    pub fn prune_interval(mut self, every: Duration) -> Self {
        self.prune_interval = every.max(Duration::from_millis(100));
        self
    }

    /// Adds one job.
    pub fn job(mut self, job: Job) -> Self {
        self.jobs.push(job);
        self
    }

    /// Adds jobs, for example `jobs![a, b]`.
    pub fn jobs(mut self, jobs: impl IntoIterator<Item = Job>) -> Self {
        self.jobs.extend(jobs);
        self
    }

    /// Adds every `#[scheduled]` function linked into the binary. A function listed explicitly as well
    /// is added once.
    pub fn discover(mut self) -> Self {
        self.discover = true;
        self
    }

    /// The store for the `lock` and `slot` levels. With a backend the default level is `slot`.
    pub fn backend(mut self, backend: impl Backend) -> Self {
        self.backend = Some(Arc::new(backend));
        self
    }

    /// The store of the cluster-wide locks of the `lock` level (and of the lock in front of the slot
    /// row at the `slot` level), in place of the [`backend`](Self::backend)'s own locks: for example
    /// `slotguard_redis::RedisLocks`. Without a backend it gives a real `lock` level on its own
    /// (then the default level is `lock`); with one, the slot rows stay in the backend and only the
    /// lock moves. Without a lock store, the backend's locks are used.
    pub fn lock_store(mut self, locks: impl LockStore) -> Self {
        self.lock_store = Some(Arc::new(locks));
        self
    }

    /// The lock store the `lock` layer uses: the explicit one, else the backend's own locks.
    fn locks(&self) -> Option<Arc<dyn LockStore>> {
        self.lock_store.clone().or_else(|| {
            self.backend
                .as_ref()
                .map(|b| Arc::clone(b) as Arc<dyn LockStore>)
        })
    }

    /// Application state, looked up by type with [`JobContext::state`](crate::JobContext::state).
    /// One value per type; a second call with the same type replaces the first.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The zone for jobs that do not name one (default UTC).
    pub fn default_tz(mut self, zone: impl Into<String>) -> Self {
        self.default_tz = Some(zone.into());
        self
    }

    /// The guard level for jobs that do not name one (default: `slot` with a backend, else `local`).
    pub fn default_guard(mut self, level: GuardLevel) -> Self {
        self.default_guard = Some(level);
        self
    }

    /// The DST policy for jobs that do not name one (default `vixie`).
    pub fn default_dst(mut self, policy: DstPolicy) -> Self {
        self.default_dst = policy;
        self
    }

    /// How long shutdown waits for running jobs before telling them to stop (default 30 s).
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// After the grace period, how long a job gets to return once told to stop before it is dropped
    /// and recorded `abandoned` (default 5 s).
    pub fn kill_after(mut self, kill_after: Duration) -> Self {
        self.kill_after = kill_after;
        self
    }

    /// How old an attempt's heartbeat may grow (by the store's clock) before the attempt is treated as
    /// abandoned and another process may take the slot over (default 30 s). Heartbeats are sent every
    /// third of it.
    pub fn stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }

    /// How often this process looks for runs that fell due outside the timer: retries, attempts of
    /// processes that died (stale heartbeats), hand-overs from a replica that shut down, and buffered
    /// slots (default: a third of [`stale_after`](Self::stale_after)). One store call per interval for
    /// all jobs; only with a backend and `slot`-level jobs.
    pub fn recovery_interval(mut self, every: Duration) -> Self {
        self.recovery_interval = Some(every);
        self
    }

    /// Shuts the scheduler down gracefully when `token` is cancelled: the application's own shutdown
    /// signal.
    pub fn cancellation_token(mut self, token: CancellationToken) -> Self {
        self.external = Some(token);
        self
    }

    /// The wall clock slots are computed from (default: the system clock). An injected clock is
    /// taken as the truth: its skew against the store is measured, not corrected (see
    /// [`clock_sync`](Self::clock_sync)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self.clock_injected = true;
        self
    }

    /// Whether this replica measures its clock against the store's and follows the store's when
    /// they disagree (default [`ClockSync::FOLLOW`], 100 ms of tolerance; [`ClockSync::Observe`]
    /// with an injected [`clock`](Self::clock)). Only with a backend that has a clock (SQLite,
    /// PostgreSQL, memory).
    pub fn clock_sync(mut self, sync: ClockSync) -> Self {
        self.clock_sync = Some(sync);
        self
    }

    /// How often the clock is measured against the store's (default 10 s; at least 100 ms). Each
    /// measurement is three short queries. A jump of this replica's clock is noticed at its next
    /// reading whatever this is; it bounds how long a drift goes unmeasured.
    pub fn clock_check_interval(mut self, every: Duration) -> Self {
        self.clock_check = every.max(Duration::from_millis(100));
        self
    }

    /// The owner recorded on this process's locks and attempts (default: `host:pid:random`).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// The namespace lock keys are derived from (default `default`): two applications sharing a
    /// database give different namespaces so that their jobs' locks never collide.
    pub fn lock_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Validates every job and setting.
    ///
    /// # Errors
    /// A [`BuildError`] listing every problem found, each naming its job.
    pub fn build(mut self) -> Result<Scheduler, BuildError> {
        let mut problems = self.check_settings();
        let jobs = self.all_jobs();
        let default_zone = match self.default_tz.as_deref().map(parse_zone).transpose() {
            Ok(zone) => zone.unwrap_or(Tz::UTC),
            Err(e) => {
                problems.push(ConfigError::DefaultZone(e));
                Tz::UTC
            }
        };
        let defaults = Defaults {
            zone: default_zone,
            level: self.default_guard.unwrap_or(if self.backend.is_some() {
                GuardLevel::Slot
            } else if self.lock_store.is_some() {
                GuardLevel::Lock
            } else {
                GuardLevel::Local
            }),
            dst: self.default_dst,
            has_backend: self.backend.is_some(),
            has_locks: self.backend.is_some() || self.lock_store.is_some(),
            stale_after: self.stale_after,
            namespace: &self.namespace,
            retention: self.retention,
        };
        let mut entries: Vec<Arc<JobEntry>> = Vec::with_capacity(jobs.len());
        let mut names: HashMap<&str, ()> = HashMap::with_capacity(jobs.len());
        let mut keys: HashMap<i64, String> = HashMap::with_capacity(jobs.len());
        for job in &jobs {
            if check_job_name(&job.name).is_ok() && names.insert(&job.name, ()).is_some() {
                problems.push(ConfigError::DuplicateName {
                    job: job.name.clone(),
                });
                continue;
            }
            match validate(job, &defaults) {
                Ok(entry) if entry.level >= GuardLevel::Lock && !self.role_refuses(&entry) => {
                    if let Some(other) = keys.insert(entry.lock_key, job.name.clone()) {
                        problems.push(ConfigError::LockKeyCollision {
                            key: entry.lock_key,
                            first: other,
                            second: job.name.clone(),
                        });
                        continue;
                    }
                    entries.push(Arc::new(entry));
                }
                Ok(entry) if self.role_refuses(&entry) => {
                    problems.push(ConfigError::NeedsSlotLevel {
                        job: job.name.clone(),
                        what: self.role.queue_needs(),
                    });
                }
                Ok(entry) => entries.push(Arc::new(entry)),
                Err(found) => problems.extend(found),
            }
        }
        if !problems.is_empty() {
            return Err(BuildError { problems });
        }
        let runtime = self.runtime(entries);
        Ok(self.scheduler(runtime))
    }

    /// The scheduler-wide settings that are out of range.
    fn check_settings(&self) -> Vec<ConfigError> {
        let mut problems = Vec::new();
        let mut setting = |setting: &'static str, problem: String| {
            problems.push(ConfigError::Setting { setting, problem });
        };
        if self.claim_ahead > Duration::from_secs(1) {
            setting(
                "claim_ahead",
                format!("{:?} is longer than the 1 s allowed", self.claim_ahead),
            );
        }
        if self.spread.is_some_and(|s| s > Duration::from_secs(1)) {
            setting(
                "load_spread",
                format!(
                    "{:?} is longer than the 1 s allowed",
                    self.spread.unwrap_or_default()
                ),
            );
        }
        if let Err(problem) = check_retention(self.retention) {
            setting("retention", problem);
        }
        if self.max_runs == Some(0) {
            setting(
                "max_concurrent_runs",
                "0 would run nothing: expected 1 or more".to_owned(),
            );
        }
        if matches!(self.role, Role::Scheduler | Role::Worker) && self.backend.is_none() {
            setting(
                "role",
                format!(
                    "the `{}` role needs a backend: the slot table is the queue between schedulers and workers",
                    self.role
                ),
            );
        }
        let rates = crate::admin::MIN_PER_SECOND..=crate::admin::MAX_PER_SECOND;
        if !rates.contains(&self.catch_up_rate) {
            setting(
                "catch_up_rate",
                format!(
                    "{} is out of range: expected {} to {} runs per second",
                    self.catch_up_rate,
                    rates.start(),
                    rates.end()
                ),
            );
        }
        problems
    }

    /// Whether this process's role cannot take `job`: the scheduler and worker roles pass every
    /// slot through the store, so they need its rows.
    fn role_refuses(&self, job: &JobEntry) -> bool {
        matches!(self.role, Role::Scheduler | Role::Worker)
            && self.backend.is_some()
            && job.level != GuardLevel::Slot
    }

    /// The listed jobs, then the discovered ones not listed.
    fn all_jobs(&mut self) -> Vec<Job> {
        let mut jobs = std::mem::take(&mut self.jobs);
        if self.discover {
            for found in job::discovered() {
                let listed = jobs
                    .iter()
                    .any(|j| j.name == found.name && Arc::ptr_eq(&j.handler, &found.handler));
                if !listed {
                    jobs.push(found);
                }
            }
        }
        jobs
    }

    /// The runtime of validated `jobs`: the guard layers this scheduler has, its clock and owner.
    fn runtime(&mut self, jobs: Vec<Arc<JobEntry>>) -> Runtime {
        let owner: Arc<str> =
            Arc::from(self.instance_id.take().unwrap_or_else(default_instance_id));
        let mut guards: Vec<Arc<dyn Guard>> = vec![Arc::new(LocalGuard)];
        let mut slots = None;
        if let Some(locks) = self.locks() {
            guards.push(Arc::new(LockGuard {
                unlocker: Arc::new(unlocker(Arc::clone(&locks), Arc::clone(&owner))),
                store: locks,
                owner: Arc::clone(&owner),
            }));
        }
        if let Some(backend) = &self.backend {
            let beats = Arc::new(Heartbeats::new(self.stale_after / 3));
            let slot_guard = Arc::new(SlotGuard {
                store: Arc::clone(backend),
                owner: Arc::clone(&owner),
                heartbeats: beats,
                finisher: Arc::new(finisher(Arc::clone(backend), Arc::clone(&owner))),
            });
            guards.push(Arc::clone(&slot_guard) as Arc<dyn Guard>);
            slots = Some(slot_guard);
        }
        let sync = self.clock_sync.unwrap_or(if self.clock_injected {
            ClockSync::Observe
        } else {
            ClockSync::FOLLOW
        });
        let synced = (self.backend.is_some() && sync != ClockSync::Off).then(|| {
            Arc::new(crate::runtime::clock_sync::SyncedClock::new(
                Arc::clone(&self.clock),
                sync,
            ))
        });
        let clock: SharedClock = match &synced {
            Some(synced) => Arc::clone(synced) as SharedClock,
            None => Arc::clone(&self.clock),
        };
        let spread = self
            .spread
            .unwrap_or(if self.backend.is_some() && !self.clock_injected {
                DEFAULT_SPREAD
            } else {
                Duration::ZERO
            });
        Runtime {
            jobs,
            guards,
            state: Arc::new(std::mem::take(&mut self.state)),
            clock,
            owner,
            stop: CancellationToken::new(),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            grace: self.grace,
            kill_after: self.kill_after,
            claim_ahead: if self.role == Role::Scheduler && !self.claim_ahead_set {
                SCHEDULER_LEAD
            } else {
                self.claim_ahead
            },
            spread: if self.role == Role::All {
                spread
            } else {
                Duration::ZERO
            },
            role: self.role,
            run_refill: self
                .max_runs
                .map_or(1, |n| u32::try_from(n / 2).unwrap_or(u32::MAX).max(1)),
            run_limit: self
                .max_runs
                .map(|n| Arc::new(tokio::sync::Semaphore::new(n))),
            running: AtomicUsize::new(0),
            abandoned: AtomicUsize::new(0),
            slots,
            synced,
            due_wake: tokio::sync::Notify::new(),
        }
    }

    fn scheduler(self, runtime: Runtime) -> Scheduler {
        Scheduler {
            runtime: Arc::new(runtime),
            backend: self.backend,
            lock_store: self.lock_store,
            recovery_interval: self
                .recovery_interval
                .unwrap_or(self.stale_after / 3)
                .max(Duration::from_millis(10)),
            external: self.external,
            namespace: self.namespace,
            catch_up_rate: self.catch_up_rate,
            stale_after: self.stale_after,
            clock_check: self.clock_check,
            prune_interval: self.prune_interval,
        }
    }
}

/// The default of [`SchedulerBuilder::retention`]: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The longest retention accepted: a century, "forever" in practice.
const MAX_RETENTION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A retention from 1 s to [`MAX_RETENTION`], or what is wrong with it.
fn check_retention(keep: Duration) -> Result<(), String> {
    if (Duration::from_secs(1)..=MAX_RETENTION).contains(&keep) {
        Ok(())
    } else {
        Err(format!(
            "{keep:?} is out of range: expected 1 s to 100 years"
        ))
    }
}

/// How long before a slot's instant a `scheduler`-role process enqueues it, unless
/// [`SchedulerBuilder::claim_ahead`] says otherwise.
const SCHEDULER_LEAD: Duration = Duration::from_millis(100);

/// The default of [`SchedulerBuilder::load_spread`] with a backend.
const DEFAULT_SPREAD: Duration = Duration::from_millis(20);

/// What jobs take from the scheduler when they do not say.
struct Defaults<'a> {
    zone: Tz,
    level: GuardLevel,
    dst: DstPolicy,
    has_backend: bool,
    /// A backend or a lock store: what the `lock` level needs.
    has_locks: bool,
    stale_after: Duration,
    namespace: &'a str,
    retention: Duration,
}

/// Whether a job asks for a setting.
type AsksFor = fn(&Job) -> bool;

/// The settings only the `slot` level can give, and whether a job asks for them.
const NEEDS_SLOT: &[(&str, AsksFor)] = &[
    ("an overlap policy other than `skip`", |j| {
        j.overlap.is_some_and(|o| o != Overlap::Skip)
    }),
    ("retries", |j| j.retry.is_some_and(|r| r.max_attempts > 1)),
    ("a catch-up policy", |j| {
        j.catch_up.is_some_and(|c| c != CatchUp::Skip)
    }),
    ("partitions", |j| j.partitions.is_some()),
    ("a deadline", |j| j.deadline.is_some()),
    ("a retention", |j| j.retention.is_some()),
    ("a process or cluster limit", |j| {
        j.limits.0.is_some() || j.limits.1.is_some()
    }),
];

/// A job's own settings out of range: its retention, its process and cluster limits.
fn job_settings(job: &Job, problems: &mut Vec<ConfigError>) {
    if let Some(Err(problem)) = job.retention.map(check_retention) {
        problems.push(ConfigError::Setting {
            setting: "retention",
            problem: format!("job `{}`: {problem}", job.name),
        });
    }
    for (setting, limit) in [
        ("process_limit", job.limits.0),
        ("cluster_limit", job.limits.1),
    ] {
        if limit == Some(0) {
            problems.push(ConfigError::Setting {
                setting,
                problem: format!(
                    "job `{}`: 0 would never run it; expected 1 or more",
                    job.name
                ),
            });
        }
    }
}

/// The problems of a job's guard level: a backend or lock store it needs, and every setting that
/// only the `slot` level can give.
fn level_problems(job: &Job, level: GuardLevel, defaults: &Defaults<'_>) -> Vec<ConfigError> {
    let missing = match level {
        GuardLevel::Slot => !defaults.has_backend,
        GuardLevel::Lock => !defaults.has_locks,
        _ => false,
    };
    if missing {
        return vec![ConfigError::NeedsBackend {
            job: job.name.clone(),
            level,
        }];
    }
    if level == GuardLevel::Slot {
        return Vec::new();
    }
    NEEDS_SLOT
        .iter()
        .filter(|(_, asks)| asks(job))
        .map(|(what, _)| ConfigError::NeedsSlotLevel {
            job: job.name.clone(),
            what,
        })
        .collect()
}

/// Validates one job: its name, zone, expression, level and the settings its level allows. Every
/// problem is listed, not only the first one found.
fn validate(job: &Job, defaults: &Defaults<'_>) -> Result<JobEntry, Vec<ConfigError>> {
    let mut problems = Vec::new();
    if let Err(problem) = check_job_name(&job.name) {
        problems.push(ConfigError::InvalidName {
            job: shown(&job.name),
            reason: problem.reason(),
        });
    }
    let schedule_error = |source: ScheduleError| ConfigError::Schedule {
        job: job.name.clone(),
        source,
    };
    let zone = match job.tz.as_deref().map(parse_zone).transpose() {
        Ok(zone) => Some(zone.unwrap_or(defaults.zone)),
        Err(e) => {
            problems.push(schedule_error(e.into()));
            None
        }
    };
    let expr = job
        .cron
        .parse()
        .map_err(|e| problems.push(schedule_error(ScheduleError::Cron(e))))
        .ok();
    let level = job.guard.unwrap_or(defaults.level);
    problems.extend(level_problems(job, level, defaults));
    job_settings(job, &mut problems);
    let (Some(zone), Some(expr), true) = (zone, expr, problems.is_empty()) else {
        return Err(problems);
    };
    let overlap = job.overlap.unwrap_or_default();
    Ok(JobEntry {
        name: Arc::from(job.name.as_str()),
        schedule: Schedule::new(expr, zone, job.dst.unwrap_or(defaults.dst)),
        level,
        layers: Layers::for_job(level, overlap, job.partitions.is_some()),
        lock_key: job
            .lock_key
            .unwrap_or_else(|| derive_lock_key(defaults.namespace, &job.name)),
        running: AtomicBool::new(false),
        handler: Arc::clone(&job.handler),
        stale_after: defaults.stale_after,
        retry: job.retry.unwrap_or_default(),
        overlap,
        catch_up: job.catch_up.unwrap_or_default(),
        deadline: job.deadline,
        retention: job.retention.unwrap_or(defaults.retention),
        partitions: job.partitions.clone(),
        paused: AtomicBool::new(false),
        backlog: AtomicBool::new(false),
        look_again: AtomicBool::new(false),
        in_body: AtomicBool::new(false),
        limits: job.limits,
        bodies: AtomicUsize::new(0),
    })
}

/// One or more jobs or settings were rejected by [`SchedulerBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BuildError {
    /// Every problem found, in the order the jobs were given.
    pub problems: Vec<ConfigError>,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(
                    f,
                    "{} problems in the scheduler's configuration:",
                    many.len()
                )?;
                for p in many {
                    write!(f, "\n  - {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// One problem found by [`SchedulerBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The job's expression or zone is invalid.
    #[error("job `{job}`: {source}")]
    Schedule {
        /// The job's name.
        job: String,
        /// What is wrong.
        source: ScheduleError,
    },
    /// The job's name cannot be stored or shown safely.
    #[error("job `{job}`: invalid name: {reason}")]
    InvalidName {
        /// The name, shortened and escaped.
        job: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Two jobs share a name; names identify slots, so they must be unique.
    #[error("job `{job}`: registered twice (job names must be unique)")]
    DuplicateName {
        /// The name.
        job: String,
    },
    /// The job needs a store and the scheduler has none.
    #[error("job `{job}`: guard level `{level}` needs {}", needed(*.level))]
    NeedsBackend {
        /// The job's name.
        job: String,
        /// Its level.
        level: GuardLevel,
    },
    /// Two jobs would share a lock.
    #[error("jobs `{first}` and `{second}` both use lock key {key}; give one an explicit lock_key")]
    LockKeyCollision {
        /// The key.
        key: i64,
        /// The job registered first.
        first: String,
        /// The job registered second.
        second: String,
    },
    /// The job asks for something only the `slot` level can give.
    #[error("job `{job}`: {what} needs the `slot` guard level")]
    NeedsSlotLevel {
        /// The job's name.
        job: String,
        /// What it asked for.
        what: &'static str,
    },
    /// The default zone is invalid.
    #[error("default zone: {0}")]
    DefaultZone(UnknownZone),
    /// A scheduler setting is out of range.
    #[error("setting `{setting}`: {problem}")]
    Setting {
        /// The builder method.
        setting: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// What a level needs that the scheduler lacks, for [`ConfigError::NeedsBackend`].
fn needed(level: GuardLevel) -> &'static str {
    match level {
        GuardLevel::Lock => {
            "a backend or a lock store (SchedulerBuilder::backend or SchedulerBuilder::lock_store)"
        }
        _ => "a backend (SchedulerBuilder::backend)",
    }
}

/// The lock key of a job without an explicit one: FNV-1a 64 of `namespace/job`, stable across builds,
/// platforms and Rust versions.
pub fn derive_lock_key(namespace: &str, job: &str) -> i64 {
    crate::policy::fnv1a(namespace.bytes().chain([b'/']).chain(job.bytes())) as i64
}

fn default_instance_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    let host = crate::runtime::registry::host();
    let random = RandomState::new().hash_one(std::process::id()) & 0xffff;
    format!("{host}:{}:{random:04x}", std::process::id())
}
