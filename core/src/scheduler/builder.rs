//! [`SchedulerBuilder`]: every setting of a scheduler, and `build()`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use slotguard_cron::{DstPolicy, Schedule, Tz, check_job_name, parse_zone};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{Clock, ClockSync, SharedClock, SystemClock};
use crate::entry::JobEntry;
use crate::guard::heartbeats::Heartbeats;
use crate::guard::local::LocalGuard;
use crate::guard::lock::{LockGuard, unlocker};
use crate::guard::slot::{SlotGuard, finisher};
use crate::guard::{Guard, GuardLevel};
use crate::job::{self, Job};
use crate::monitor::Monitor;
use crate::role::Role;
use crate::runtime::Runtime;
use crate::state::StateMap;
use crate::store::{Backend, LockStore, Store};

use super::Scheduler;
use super::validate::{
    DEFAULT_LEAD, DEFAULT_RETENTION, DEFAULT_SPREAD, Defaults, SCHEDULER_LEAD, check_retention,
    default_instance_id, validate,
};
use super::{BuildError, ConfigError};

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
    store: Option<Store>,
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
    monitor: Option<Arc<dyn Monitor>>,
}

impl Default for SchedulerBuilder {
    fn default() -> Self {
        SchedulerBuilder {
            jobs: Vec::new(),
            discover: false,
            store: None,
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
            monitor: None,
        }
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("jobs", &self.jobs)
            .field("discover", &self.discover)
            .field("store", &self.store)
            .field("default_tz", &self.default_tz)
            .field("default_guard", &self.default_guard)
            .finish_non_exhaustive()
    }
}

impl SchedulerBuilder {
    /// Runs each slot's guard chain (flag, lock, claim) this long before the slot's instant, and
    /// starts the body at the instant: the claim's round trips no longer delay the start (default
    /// 100 ms with a store, 0 without one or with an injected [`clock`](Self::clock); at most 1 s,
    /// the shortest interval a schedule can have).
    ///
    /// An early claim never decides an overlap: when a layer finds another run of the job going
    /// (this process's flag up with its body running, the job's lock held elsewhere for a `lock`
    /// job, a `running` row for a `slot` job), nothing is recorded and the slot is offered again at
    /// its instant, where the overlap policy decides as it would have without the lead. A run
    /// that ends inside the lead therefore never makes the next slot skip. `Duration::ZERO` turns
    /// the lead off.
    ///
    /// The default grows with the slots due at one instant: 70 µs for each, when that is longer
    /// than 100 ms, at most 1 s (10,000 jobs due together are offered 700 ms ahead: on 8 replicas
    /// and 2 cores every row existed 7–21 ms after the instant instead of 0.45–0.75 s;
    /// docs/PERFORMANCE.md). A lead
    /// set here is kept whatever falls due. A pause or an override read after a slot was claimed
    /// does not reach that slot, as with any lead (calendar overrides hold a slot until they are
    /// read).
    ///
    /// A process of the [`Role::Scheduler`] role enqueues each slot this long before its instant
    /// (default 100 ms), so that workers have the row before it falls due. A process of the
    /// [`Role::Worker`] role claims queued slots this long before they fall due (default 100 ms,
    /// as above) when no run of their job and partition is going (or the overlap is `allow`), and
    /// starts each body at its slot's instant; a slot whose job has a run going is claimed at its
    /// instant, where the policy decides.
    pub fn claim_ahead(mut self, lead: Duration) -> Self {
        self.claim_ahead = lead;
        self.claim_ahead_set = true;
        self
    }

    /// The lead of [`claim_ahead`](Self::claim_ahead): as set, or the role's default.
    fn lead(&self) -> Duration {
        match self.role {
            _ if self.claim_ahead_set => self.claim_ahead,
            Role::Scheduler => SCHEDULER_LEAD,
            Role::All | Role::Worker if self.store.is_some() && !self.clock_injected => {
                DEFAULT_LEAD
            }
            _ => Duration::ZERO,
        }
    }

    /// The timer's lead: the default grows for many slots due together (`runtime::lead`); a lead
    /// the user set is kept as set.
    fn timer_lead(&self) -> crate::runtime::lead::Lead {
        use crate::runtime::lead::Lead;
        let lead = self.lead();
        if self.claim_ahead_set || lead.is_zero() {
            Lead::fixed(lead)
        } else {
            Lead::for_storms(lead)
        }
    }

    /// What this process does with its jobs (default [`Role::All`]: it computes slots and runs
    /// them). [`Role::Scheduler`] enqueues slots for workers, [`Role::Worker`] runs queued slots,
    /// [`Role::Admin`] does neither. The scheduler and worker roles need a backend (or a
    /// [`store`](Self::store) with the queue) and every job at the `slot` level: the slot table is
    /// their queue. See `docs/workers.md`.
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
    /// [`MIN_PER_SECOND`](crate::operate::MIN_PER_SECOND) to
    /// [`MAX_PER_SECOND`](crate::operate::MAX_PER_SECOND), as backfills). Each run is
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

    /// Sends the check-ins of every job that has no [monitor](Job::monitor) of its own to
    /// `monitor` (see [`monitor`](crate::monitor)).
    pub fn monitor(mut self, monitor: Arc<dyn Monitor>) -> Self {
        self.monitor = Some(monitor);
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

    /// The store for the `lock` and `slot` levels, with every capability: every role and setting
    /// can use it. With a backend the default level is `slot`.
    pub fn backend(mut self, backend: impl Backend) -> Self {
        self.store = Some(Store::full(Arc::new(backend)));
        self
    }

    /// A store that has only some capabilities ([`Store::new`] and its `with_*` methods), in place
    /// of a [`backend`](Self::backend). `build()` names each capability the role's tasks need and
    /// the store lacks ([`ConfigError::MissingCapability`]): the queue for the `scheduler` and
    /// `worker` roles, checkpoints where `slot`-level bodies run, the store's clock unless
    /// [`clock_sync`](Self::clock_sync) is `Off`, and admin, replicas, retention and locks for every
    /// role (registration and pauses, the registry, pruning). [`Scheduler::admin`] needs a backend.
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
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
        self.lock_store
            .clone()
            .or_else(|| self.store.as_ref().and_then(|s| s.locks.clone()))
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
            level: self.default_guard.unwrap_or(if self.store.is_some() {
                GuardLevel::Slot
            } else if self.lock_store.is_some() {
                GuardLevel::Lock
            } else {
                GuardLevel::Local
            }),
            dst: self.default_dst,
            has_backend: self.store.is_some(),
            has_locks: self.locks().is_some(),
            stale_after: self.stale_after,
            namespace: &self.namespace,
            retention: self.retention,
            monitor: self.monitor.clone(),
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
        if let Some(store) = &self.store {
            let slot_jobs = entries.iter().any(|e| e.level == GuardLevel::Slot);
            let measured = self.clock_sync_mode() != ClockSync::Off;
            problems.extend(super::tasks::missing(self.role, store, slot_jobs, measured));
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
        if self.claim_ahead > crate::runtime::lead::MAX_LEAD {
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
        if matches!(self.role, Role::Scheduler | Role::Worker) && self.store.is_none() {
            setting(
                "role",
                format!(
                    "the `{}` role needs a backend: the slot table is the queue between schedulers and workers",
                    self.role
                ),
            );
        }
        let rates = crate::operate::MIN_PER_SECOND..=crate::operate::MAX_PER_SECOND;
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
            && self.store.is_some()
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

    /// Whether and how the clock follows the store's: as set, else `FOLLOW` (`Observe` with an
    /// injected clock).
    fn clock_sync_mode(&self) -> ClockSync {
        self.clock_sync.unwrap_or(if self.clock_injected {
            ClockSync::Observe
        } else {
            ClockSync::FOLLOW
        })
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
        if let Some(store) = &self.store {
            let beats = Arc::new(Heartbeats::new(self.stale_after));
            let slot_guard = Arc::new(SlotGuard {
                store: store.clone(),
                owner: Arc::clone(&owner),
                heartbeats: beats,
                finisher: Arc::new(finisher(Arc::clone(&store.slots), Arc::clone(&owner))),
            });
            guards.push(Arc::clone(&slot_guard) as Arc<dyn Guard>);
            slots = Some(slot_guard);
        }
        let sync = self.clock_sync_mode();
        let synced = (self.store.is_some() && sync != ClockSync::Off).then(|| {
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
            .unwrap_or(if self.store.is_some() && !self.clock_injected {
                DEFAULT_SPREAD
            } else {
                Duration::ZERO
            });
        let follows_overrides = self.store.as_ref().is_some_and(|s| s.calendars.is_some());
        let calendars = follows_overrides
            .then(|| crate::runtime::calendars::Overrides::new(&jobs).map(Arc::new))
            .flatten();
        Runtime {
            calendars,
            jobs,
            guards,
            state: Arc::new(std::mem::take(&mut self.state)),
            clock,
            owner,
            stop: CancellationToken::new(),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            upkeep: TaskTracker::new(),
            grace: self.grace,
            kill_after: self.kill_after,
            lead: self.timer_lead(),
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
            store: self.store,
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
