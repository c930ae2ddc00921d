//! [`Store`]: which capabilities a store has, each as a trait object, and [`Capability`], the name
//! a `build()` error gives to a missing one.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AdminStore, AuditRecord, Backend, CalendarStore, CheckpointStore, ClockStore, Finish, Lease,
    LockStore, QueueStore, ReplicaStore, RetentionStore, ScheduleStore, SlotStore, StoreError,
};

/// One thing a store may or may not do, beside its slot rows. The builder requires each for the
/// roles and settings that need it ([`ConfigError::MissingCapability`](crate::ConfigError)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Cluster-wide locks ([`LockStore`]).
    Locks,
    /// The slot table as a queue ([`QueueStore`]).
    Queue,
    /// Checkpoints of runs ([`CheckpointStore`]).
    Checkpoints,
    /// The store's clock ([`ClockStore`]).
    Clock,
    /// Job definitions, pauses, listings and operators' changes ([`AdminStore`]).
    Admin,
    /// The replica registry ([`ReplicaStore`]).
    Replicas,
    /// History retention ([`RetentionStore`]).
    Retention,
    /// Schedules kept as data ([`ScheduleStore`]).
    Schedules,
}

impl Capability {
    /// The capability's name and trait, as a `build()` error shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Locks => "locks (LockStore)",
            Capability::Queue => "queue (QueueStore)",
            Capability::Checkpoints => "checkpoints (CheckpointStore)",
            Capability::Clock => "the store's clock (ClockStore)",
            Capability::Admin => "admin (AdminStore)",
            Capability::Replicas => "replicas (ReplicaStore)",
            Capability::Retention => "retention (RetentionStore)",
            Capability::Schedules => "schedules (ScheduleStore)",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A store as the scheduler sees it: its slot rows ([`SlotStore`], always) and each capability it
/// has. A [`Backend`] has them all ([`Store::full`], which
/// [`SchedulerBuilder::backend`](crate::SchedulerBuilder::backend) calls); a store that does only
/// some is put together with [`Store::new`] and the `with_*` methods and given to
/// [`SchedulerBuilder::store`](crate::SchedulerBuilder::store), whose `build()` names any
/// capability a role or setting needs that the store lacks.
///
/// ```
/// use std::sync::Arc;
/// use slotguard::store::{Capability, Store};
/// use slotguard::{ClockSync, ConfigError, Job, MemoryBackend, Role, Scheduler};
///
/// let memory = Arc::new(MemoryBackend::new());
/// // Everything but the queue and a clock of its own.
/// let store = || {
///     Store::new("mine", memory.clone())
///         .with_locks(memory.clone())
///         .with_checkpoints(memory.clone())
///         .with_admin(memory.clone())
///         .with_replicas(memory.clone())
///         .with_retention(memory.clone())
/// };
/// let job = || Job::new("report", "0 * * * *", |_| async {});
/// let builder = || Scheduler::builder().store(store()).clock_sync(ClockSync::Off).job(job());
/// assert!(builder().build().is_ok());
/// let refused = builder().role(Role::Worker).build().unwrap_err();
/// assert!(matches!(
///     refused.problems[..],
///     [ConfigError::MissingCapability { capability: Capability::Queue, role: Role::Worker, .. }]
/// ));
/// ```
#[derive(Clone)]
pub struct Store {
    name: &'static str,
    pub(crate) slots: Arc<dyn SlotStore>,
    pub(crate) locks: Option<Arc<dyn LockStore>>,
    pub(crate) queue: Option<Arc<dyn QueueStore>>,
    pub(crate) checkpoints: Option<Arc<dyn CheckpointStore>>,
    pub(crate) clock: Option<Arc<dyn ClockStore>>,
    pub(crate) admin: Option<Arc<dyn AdminStore>>,
    pub(crate) replicas: Option<Arc<dyn ReplicaStore>>,
    pub(crate) retention: Option<Arc<dyn RetentionStore>>,
    pub(crate) schedules: Option<Arc<dyn ScheduleStore>>,
    /// Operators' holiday overrides: not a capability `build()` asks for; without them a job's
    /// calendar is the one its code gives.
    pub(crate) calendars: Option<Arc<dyn CalendarStore>>,
    /// The whole backend, when the store is one: the admin API takes it.
    pub(crate) backend: Option<Arc<dyn Backend>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let has: Vec<Capability> = Capability::EVERY
            .into_iter()
            .filter(|c| self.has(*c))
            .collect();
        f.debug_struct("Store")
            .field("name", &self.name)
            .field("capabilities", &has)
            .finish()
    }
}

impl Capability {
    /// Every capability, in the order of the documentation.
    pub const EVERY: [Capability; 8] = [
        Capability::Locks,
        Capability::Queue,
        Capability::Checkpoints,
        Capability::Clock,
        Capability::Admin,
        Capability::Replicas,
        Capability::Retention,
        Capability::Schedules,
    ];
}

impl Store {
    /// A store of slot rows and nothing else, named `name` in logs.
    pub fn new(name: &'static str, slots: Arc<dyn SlotStore>) -> Self {
        Store {
            name,
            slots,
            locks: None,
            queue: None,
            checkpoints: None,
            clock: None,
            admin: None,
            replicas: None,
            retention: None,
            schedules: None,
            calendars: None,
            backend: None,
        }
    }

    /// A backend, with every capability.
    pub fn full(backend: Arc<dyn Backend>) -> Self {
        Store {
            name: backend.name(),
            slots: Arc::clone(&backend) as _,
            locks: Some(Arc::clone(&backend) as _),
            queue: Some(Arc::clone(&backend) as _),
            checkpoints: Some(Arc::clone(&backend) as _),
            clock: Some(Arc::clone(&backend) as _),
            admin: Some(Arc::clone(&backend) as _),
            replicas: Some(Arc::clone(&backend) as _),
            retention: Some(Arc::clone(&backend) as _),
            schedules: Some(Arc::clone(&backend) as _),
            calendars: Some(Arc::clone(&backend) as _),
            backend: Some(backend),
        }
    }

    /// The same store with cluster-wide locks.
    pub fn with_locks(mut self, locks: Arc<dyn LockStore>) -> Self {
        self.locks = Some(locks);
        self
    }

    /// The same store with the queue of the `scheduler` and `worker` roles.
    pub fn with_queue(mut self, queue: Arc<dyn QueueStore>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// The same store with checkpoints.
    pub fn with_checkpoints(mut self, checkpoints: Arc<dyn CheckpointStore>) -> Self {
        self.checkpoints = Some(checkpoints);
        self
    }

    /// The same store with a clock of its own.
    pub fn with_clock(mut self, clock: Arc<dyn ClockStore>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The same store with job definitions, pauses and operators' changes.
    pub fn with_admin(mut self, admin: Arc<dyn AdminStore>) -> Self {
        self.admin = Some(admin);
        self
    }

    /// The same store with a replica registry.
    pub fn with_replicas(mut self, replicas: Arc<dyn ReplicaStore>) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// The same store with history retention.
    pub fn with_retention(mut self, retention: Arc<dyn RetentionStore>) -> Self {
        self.retention = Some(retention);
        self
    }

    /// The same store with schedules kept as data.
    pub fn with_schedules(mut self, schedules: Arc<dyn ScheduleStore>) -> Self {
        self.schedules = Some(schedules);
        self
    }

    /// The same store with operators' holiday overrides, which the jobs' calendars then follow.
    pub fn with_calendars(mut self, calendars: Arc<dyn CalendarStore>) -> Self {
        self.calendars = Some(calendars);
        self
    }

    /// The name for logs.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the store has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::Locks => self.locks.is_some(),
            Capability::Queue => self.queue.is_some(),
            Capability::Checkpoints => self.checkpoints.is_some(),
            Capability::Clock => self.clock.is_some(),
            Capability::Admin => self.admin.is_some(),
            Capability::Replicas => self.replicas.is_some(),
            Capability::Retention => self.retention.is_some(),
            Capability::Schedules => self.schedules.is_some(),
        }
    }

    /// The whole backend, when the store was made from one ([`Store::full`]).
    pub fn backend(&self) -> Option<&Arc<dyn Backend>> {
        self.backend.as_ref()
    }

    /// The queue; [`build`](crate::SchedulerBuilder::build) made sure the roles that ask have it.
    pub(crate) fn queue(&self) -> Result<&Arc<dyn QueueStore>, StoreError> {
        self.queue
            .as_ref()
            .ok_or_else(|| missing(Capability::Queue))
    }

    /// Checkpoints; [`build`](crate::SchedulerBuilder::build) made sure the roles that run
    /// `slot`-level bodies have them.
    pub(crate) fn checkpoints(&self) -> Result<&Arc<dyn CheckpointStore>, StoreError> {
        self.checkpoints
            .as_ref()
            .ok_or_else(|| missing(Capability::Checkpoints))
    }

    /// Job definitions and listings; [`build`](crate::SchedulerBuilder::build) made sure of it.
    pub(crate) fn admin(&self) -> Result<&Arc<dyn AdminStore>, StoreError> {
        self.admin
            .as_ref()
            .ok_or_else(|| missing(Capability::Admin))
    }
}

/// The error of a call to a capability `build()` did not require (it cannot happen through the
/// builder).
fn missing(capability: Capability) -> StoreError {
    StoreError::rejected(format!("this store has no {capability}"))
}

/// Shorthands over [`SlotStore`] for every store: not methods a store writes.
#[async_trait]
pub trait SlotStoreExt: SlotStore {
    /// [`finish`](SlotStore::finish) for one attempt.
    ///
    /// # Cancel safety
    /// As [`finish`](SlotStore::finish).
    async fn finish_one(
        &self,
        owner: &str,
        lease: &Lease,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        let answers = self
            .finish(owner, &[(lease.clone(), finish.clone())])
            .await?;
        Ok(answers.first().copied().unwrap_or(false))
    }
}

impl<T: SlotStore + ?Sized> SlotStoreExt for T {}

/// Shorthands over [`AdminStore`] for every store: not methods a store writes.
#[async_trait]
pub trait AdminStoreExt: AdminStore {
    /// The audit trail's first page, newest first, optionally for one job
    /// ([`audit_page`](AdminStore::audit_page) from the newest record).
    async fn audit_log(
        &self,
        job: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        self.audit_page(job, None, limit).await
    }
}

impl<T: AdminStore + ?Sized> AdminStoreExt for T {}
