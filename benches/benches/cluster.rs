//! Exclusion on PostgreSQL: eight replicas as eight schedulers in one process, each with its own
//! `PgBackend` (its own pool and its own lock connection), on the shared server.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench cluster
//! ```
//!
//! Three scenarios, each in a fresh schema dropped afterwards:
//! 1. claim storm: 10,000 slots due in the same second across 8 replicas;
//! 2. start lag: 8 replicas, 100 jobs every second, for about 20 s;
//! 3. heartbeat cost: one replica holding 1,000 running attempts for about 10 s.
//!
//! Every store call goes through [`Counting`], a backend wrapper that forwards every method of every
//! store trait (no store trait has a default method, so a method it left out would not compile):
//! the slot work is counted per method with its items and timed, every other call is counted by
//! name, so the figures are the calls the runtime really makes. The storm also tallies the claims'
//! answers (won, taken, contended, failed); with `SG_BENCH_CLAIMS` set it prints every `try_lock`
//! and claim call to stderr (when, how long, how many, what came back).
//! Override the server with `SLOTGUARD_TEST_DATABASE_URL`: a 10,000-job storm needs a lock table
//! larger than the default one (`max_locks_per_transaction`, see docs/guards.md);
//! `benches/scripts/sized-postgres.sh start` makes a throwaway server with one and prints its URL.
//! `SG_BENCH_SPREAD_MS` sets every replica's `load_spread` (default: the builder's, 20 ms).

use slotguard_benches::quantile;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Timelike, Utc};
use slotguard::store::{
    AdminStore, AuditEntry, AuditRecord, Backend, CalendarOverride, CalendarStore, CheckpointStore,
    Claim, ClaimRequest, ClockStore, DueClaim, DueSpec, Enqueue, Finish, JobDefinition, JobRecord,
    Lease, LockLease, LockStore, OverrideChanges, OverrideSpec, PruneSpec, Pruned, QueueStore,
    ReplicaInfo, ReplicaRecord, ReplicaStore, RetentionStore, RunChange, RunCounts, RunFilter,
    RunRecord, ScheduleChanges, ScheduleSpec, ScheduleStore, ScheduleVersion, ScheduleWrite,
    SlotKey, SlotStore, StaleLock, StoreError,
};
use slotguard::{Job, JobContext, Scheduler, SchedulerHandle};
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema as Schema, database_url};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

const REPLICAS: usize = 8;
/// Connections in each replica's pool (the lock connection comes on top): 8 × 5 = 40 in all.
const POOL: u32 = 4;
const STORM_SLOTS: usize = 10_000;
const LAG_JOBS: usize = 100;
const LAG_RUN: Duration = Duration::from_secs(20);
/// Slots of the first seconds pay for opening connections; left out of the steady-state figures.
const LAG_WARMUP_SECS: i64 = 2;
const HB_JOBS: usize = 1_000;
const HB_BODY: Duration = Duration::from_secs(10);
const HB_STALE_AFTER: Duration = Duration::from_secs(3);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// The counting wrapper

/// The store methods, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Claim,
    ClaimDue,
    RecordSkipped,
    Heartbeat,
    Finish,
    TryLock,
    Unlock,
    RegisterKeys,
    DueJobs,
    ExistingSlots,
    StoreNow,
    BreakLocks,
}

const OPS: usize = 12;

/// One store call: when it started (wall clock), how long it took, how many items it carried.
#[derive(Debug, Clone, Copy)]
struct Call {
    at: DateTime<Utc>,
    took: Duration,
    items: usize,
}

/// Every call of one backend, per method: the slot work timed ([`Op`]), every other method counted
/// by name.
#[derive(Debug, Default)]
struct Stats {
    calls: [Mutex<Vec<Call>>; OPS],
    others: Mutex<HashMap<&'static str, usize>>,
    /// The claims' answers, by kind.
    answers: Mutex<HashMap<&'static str, usize>>,
}

/// The kind of a claim's answer.
fn answer_label(answer: &Claim) -> &'static str {
    match answer {
        Claim::Won(_) => "won",
        Claim::Taken { .. } => "taken",
        Claim::Contended => "contended",
        Claim::Busy => "busy",
        Claim::NotDue => "not_due",
        _ => "other",
    }
}

impl Stats {
    /// The calls of the methods outside [`Op`], by name, most called first.
    fn others(&self) -> Vec<(&'static str, usize)> {
        let mut others: Vec<_> = lock(&self.others).iter().map(|(k, v)| (*k, *v)).collect();
        others.sort_by_key(|(name, n)| (std::cmp::Reverse(*n), *name));
        others
    }

    fn record(&self, op: Op, call: Call) {
        lock(&self.calls[op as usize]).push(call);
    }

    fn calls(&self, op: Op) -> Vec<Call> {
        lock(&self.calls[op as usize]).clone()
    }

    fn count(&self, op: Op) -> usize {
        lock(&self.calls[op as usize]).len()
    }

    fn items(&self, op: Op) -> usize {
        lock(&self.calls[op as usize]).iter().map(|c| c.items).sum()
    }
}

/// A backend that delegates every call to `inner`: the slot work counted with its items and timed,
/// every other call counted. Each store trait is written out (none has a default), so a method
/// left out does not compile.
struct Counting<B> {
    inner: B,
    stats: Arc<Stats>,
}

impl<B> Counting<B> {
    /// Counts one call of `method`, outside the timed slot work.
    async fn other<T>(&self, method: &'static str, call: impl Future<Output = T>) -> T {
        *lock(&self.stats.others).entry(method).or_default() += 1;
        call.await
    }

    async fn timed<T>(&self, op: Op, items: usize, call: impl Future<Output = T>) -> T {
        let at = Utc::now();
        let started = Instant::now();
        let result = call.await;
        self.stats.record(
            op,
            Call {
                at,
                took: started.elapsed(),
                items,
            },
        );
        result
    }
}

#[async_trait]
impl<B: Backend> SlotStore for Counting<B> {
    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        let at = Utc::now();
        let answers = self
            .timed(Op::Claim, requests.len(), self.inner.claim(owner, requests))
            .await;
        if let Err(e) = &answers {
            *lock(&self.stats.answers).entry("error").or_default() += 1;
            if std::env::var_os("SG_BENCH_CLAIMS").is_some() {
                eprintln!("claim {owner} at {} failed: {e}", at.format("%S%.3f"));
            }
        }
        if let Ok(answers) = &answers {
            let mut tally = lock(&self.stats.answers);
            for answer in answers {
                *tally.entry(answer_label(answer)).or_default() += 1;
            }
            if std::env::var_os("SG_BENCH_CLAIMS").is_some() {
                let won = answers
                    .iter()
                    .filter(|a| matches!(a, Claim::Won(_)))
                    .count();
                let cont = answers
                    .iter()
                    .filter(|a| matches!(a, Claim::Contended))
                    .count();
                let defer = requests.iter().filter(|r| r.defer_if_contended).count();
                eprintln!(
                    "claim {owner} at {} took {:?} n={} won={won} contended={cont} defer={defer}",
                    at.format("%S%.3f"),
                    (Utc::now() - at).to_std().unwrap_or_default(),
                    requests.len()
                );
            }
        }
        answers
    }

    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        self.timed(
            Op::ClaimDue,
            specs.len(),
            self.inner.claim_due(owner, specs, limit),
        )
        .await
    }

    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        self.timed(
            Op::RecordSkipped,
            requests.len(),
            self.inner.record_skipped(requests, reason),
        )
        .await
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        self.timed(
            Op::Heartbeat,
            tokens.len(),
            self.inner.heartbeat(owner, tokens),
        )
        .await
    }

    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError> {
        self.timed(
            Op::Finish,
            finishes.len(),
            self.inner.finish(owner, finishes),
        )
        .await
    }

    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError> {
        self.timed(Op::DueJobs, specs.len(), self.inner.due_jobs(specs))
            .await
    }

    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError> {
        self.timed(
            Op::ExistingSlots,
            keys.len(),
            self.inner.existing_slots(keys),
        )
        .await
    }
}

#[async_trait]
impl<B: Backend> QueueStore for Counting<B> {
    async fn enqueue_slots(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError> {
        self.other("enqueue_slots", self.inner.enqueue_slots(requests, traces))
            .await
    }

    async fn next_due(&self, specs: &[DueSpec]) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.other("next_due", self.inner.next_due(specs)).await
    }

    async fn due_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.other("due_signal", self.inner.due_signal()).await
    }
}

#[async_trait]
impl<B: Backend> CheckpointStore for Counting<B> {
    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError> {
        self.other(
            "save_checkpoint",
            self.inner.save_checkpoint(owner, lease, data),
        )
        .await
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        self.other("load_checkpoint", self.inner.load_checkpoint(run_id))
            .await
    }
}

#[async_trait]
impl<B: Backend> ClockStore for Counting<B> {
    async fn store_now(&self) -> Result<DateTime<Utc>, StoreError> {
        self.timed(Op::StoreNow, 0, self.inner.store_now()).await
    }
}

/// Counted by name with the other calls beside the slot work ([`Counting::other`]).
#[async_trait]
impl<B: Backend> AdminStore for Counting<B> {
    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), StoreError> {
        self.other("register_jobs", self.inner.register_jobs(jobs))
            .await
    }

    async fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.other("jobs", self.inner.jobs()).await
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        self.other("set_paused", self.inner.set_paused(job, paused, audit))
            .await
    }

    async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.other("runs", AdminStore::runs(&self.inner, filter))
            .await
    }

    async fn slot_times(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        self.other("slot_times", self.inner.slot_times(job, from, to))
            .await
    }

    async fn latest_slots(
        &self,
        jobs: &[String],
    ) -> Result<Vec<Option<DateTime<Utc>>>, StoreError> {
        self.other("latest_slots", self.inner.latest_slots(jobs))
            .await
    }

    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        self.other("retry", self.inner.retry(key, audit)).await
    }

    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        self.other("enqueue", self.inner.enqueue(runs, audit)).await
    }

    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        self.other("cancel", self.inner.cancel(key, audit)).await
    }

    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, StoreError> {
        self.other("slot_times_of", self.inner.slot_times_of(jobs, from, to))
            .await
    }

    async fn run_counts(&self, since: DateTime<Utc>) -> Result<Vec<RunCounts>, StoreError> {
        self.other("run_counts", self.inner.run_counts(since)).await
    }

    async fn latest_runs(&self, jobs: &[String]) -> Result<Vec<Option<RunRecord>>, StoreError> {
        self.other("latest_runs", self.inner.latest_runs(jobs))
            .await
    }

    async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        self.other("audit_page", self.inner.audit_page(job, before, limit))
            .await
    }
}

#[async_trait]
impl<B: Backend> LockStore for Counting<B> {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        let at = Utc::now();
        let got = self
            .timed(Op::TryLock, keys.len(), self.inner.try_lock(owner, keys))
            .await;
        if std::env::var_os("SG_BENCH_CLAIMS").is_some() {
            let n = got.as_ref().map_or(0, |g| g.iter().flatten().count());
            eprintln!(
                "lock  {owner} at {} took {:?} n={} got={n}",
                at.format("%S%.3f"),
                (Utc::now() - at).to_std().unwrap_or_default(),
                keys.len()
            );
        }
        got
    }

    async fn break_stale_locks(
        &self,
        owner: &str,
        locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        self.timed(
            Op::BreakLocks,
            locks.len(),
            self.inner.break_stale_locks(owner, locks),
        )
        .await
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        self.timed(Op::Unlock, keys.len(), self.inner.unlock(owner, keys))
            .await
    }

    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        self.timed(
            Op::RegisterKeys,
            keys.len(),
            self.inner.register_lock_keys(namespace, keys),
        )
        .await
    }
}

/// Counted by name: one registry write per replica and recovery interval.
#[async_trait]
impl<B: Backend> ReplicaStore for Counting<B> {
    async fn record_replica(&self, replica: &ReplicaInfo) -> Result<(), StoreError> {
        self.other("record_replica", self.inner.record_replica(replica))
            .await
    }

    async fn remove_replica(&self, id: &str) -> Result<bool, StoreError> {
        self.other("remove_replica", self.inner.remove_replica(id))
            .await
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        self.other("replicas", self.inner.replicas()).await
    }

    async fn forget_replicas(&self, gone_for: Duration) -> Result<u64, StoreError> {
        self.other("forget_replicas", self.inner.forget_replicas(gone_for))
            .await
    }
}

/// Counted by name: a prune pass every ten minutes.
#[async_trait]
impl<B: Backend> RetentionStore for Counting<B> {
    async fn prune_runs(
        &self,
        specs: &[PruneSpec],
        limit: usize,
    ) -> Result<Vec<Pruned>, StoreError> {
        self.other("prune_runs", self.inner.prune_runs(specs, limit))
            .await
    }

    async fn prune_partitions(&self, specs: &[PruneSpec]) -> Result<Vec<Pruned>, StoreError> {
        self.other("prune_partitions", self.inner.prune_partitions(specs))
            .await
    }
}

/// Counted by name: every replica reads the stored schedules' changes each poll.
#[async_trait]
impl<B: Backend> ScheduleStore for Counting<B> {
    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &str,
        reason: &str,
    ) -> Result<ScheduleWrite, StoreError> {
        let write = self.inner.write_schedule(id, expected, spec, by, reason);
        self.other("write_schedule", write).await
    }

    async fn schedule_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<ScheduleChanges, StoreError> {
        let read = self.inner.schedule_changes(after, limit);
        self.other("schedule_changes", read).await
    }

    async fn schedules(
        &self,
        job: Option<&str>,
        after_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduleVersion>, StoreError> {
        let read = self.inner.schedules(job, after_id, limit);
        self.other("schedules", read).await
    }

    async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, StoreError> {
        self.other("schedule_history", self.inner.schedule_history(id))
            .await
    }

    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        self.other("skip_slot", self.inner.skip_slot(request, by, reason))
            .await
    }

    async fn unskip_slot(&self, key: &SlotKey, by: &str, reason: &str) -> Result<bool, StoreError> {
        self.other("unskip_slot", self.inner.unskip_slot(key, by, reason))
            .await
    }
}

/// Counted by name: every replica reads the holiday overrides each poll.
#[async_trait]
impl<B: Backend> CalendarStore for Counting<B> {
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError> {
        let write = self.inner.write_override(spec, by, reason);
        self.other("write_override", write).await
    }

    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError> {
        let read = self.inner.override_changes(after, limit);
        self.other("override_changes", read).await
    }
}

impl<B: Backend> Backend for Counting<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

// ---------------------------------------------------------------------------------------------
// Schemas and replicas

/// A fresh schema (`sg_bench_{tag}_<random>`), dropped with everything in it when this value is
/// dropped.
fn schema(tag: &str) -> Schema {
    Schema::with_prefix(&format!("sg_bench_{tag}"))
}

/// One replica: a scheduler with its own backend (own pool, own lock connection).
struct Replica {
    backend: PgBackend,
    stats: Arc<Stats>,
    handle: SchedulerHandle,
}

/// A replica's backend: its own pool and its own lock connection (made on first use).
async fn connect(schema: &Schema) -> PgBackend {
    PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .pool_size(POOL)
        .connect()
        .await
        .expect("connect to PostgreSQL (see SLOTGUARD_TEST_DATABASE_URL)")
}

/// The `claim_ahead` of the replicas a scenario starts; [`DEFAULT_AHEAD`]: the builder's default.
static CLAIM_AHEAD_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// [`CLAIM_AHEAD_MS`] that leaves `claim_ahead` to the builder's default (100 ms with a store).
const DEFAULT_AHEAD: u64 = u64::MAX;

/// Sets the `claim_ahead` of the replicas started from now on; `None`: the builder's default.
fn set_lead(lead: Option<Duration>) {
    CLAIM_AHEAD_MS.store(
        lead.map_or(DEFAULT_AHEAD, |d| d.as_millis() as u64),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// The `claim_ahead` of the replicas started from now on, as shown in a heading.
fn lead_shown() -> String {
    match CLAIM_AHEAD_MS.load(std::sync::atomic::Ordering::Relaxed) {
        DEFAULT_AHEAD => "default".to_owned(),
        ms => format!("{ms} ms"),
    }
}

async fn start_replica(
    schema: &Schema,
    index: usize,
    jobs: Vec<Job>,
    stale_after: Option<Duration>,
) -> Replica {
    let backend = connect(schema).await;
    start_on(backend, index, jobs, stale_after).await
}

async fn start_on(
    backend: PgBackend,
    index: usize,
    jobs: Vec<Job>,
    stale_after: Option<Duration>,
) -> Replica {
    let stats = Arc::new(Stats::default());
    let mut builder = Scheduler::builder()
        .backend(Counting {
            inner: backend.clone(),
            stats: Arc::clone(&stats),
        })
        .instance_id(format!("replica-{index}"))
        .jobs(jobs);
    if let Some(stale) = stale_after {
        builder = builder.stale_after(stale);
    }
    if let Ok(ms) = std::env::var("SG_BENCH_SPREAD_MS") {
        builder = builder.load_spread(Duration::from_millis(ms.parse().expect("ms")));
    }
    let ahead = CLAIM_AHEAD_MS.load(std::sync::atomic::Ordering::Relaxed);
    if ahead != DEFAULT_AHEAD {
        builder = builder.claim_ahead(Duration::from_millis(ahead));
    }
    let handle = builder
        .build()
        .expect("valid jobs")
        .try_start()
        .await
        .expect("start");
    Replica {
        backend,
        stats,
        handle,
    }
}

async fn stop_all(replicas: &[Replica]) {
    for r in replicas {
        r.handle.shutdown().await;
    }
    for r in replicas {
        r.backend.close().await;
    }
}

/// A cron expression that fires once a day, at `at`'s second.
fn once_at(at: DateTime<Utc>) -> String {
    format!("{} {} {} * * *", at.second(), at.minute(), at.hour())
}

/// The first whole second at least `lead` from now.
fn upcoming_second(lead: Duration) -> DateTime<Utc> {
    let t = Utc::now() + chrono::Duration::from_std(lead).expect("lead");
    t.with_nanosecond(0).expect("whole second") + chrono::Duration::seconds(1)
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(wait) = (at - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "{:>8.2} {:>8.2} {:>8.2}  (n={})",
        quantile(&values, 0.5),
        quantile(&values, 0.99),
        values.last().copied().unwrap_or(f64::NAN),
        values.len()
    )
}

/// Executions per slot, counted from what the bodies did.
type Ledger = Arc<Mutex<HashMap<(usize, i64), u32>>>;

/// Each execution of a storm job, by job: who ran it, under which run, attempt and token.
type Details = Arc<Mutex<HashMap<usize, Vec<String>>>>;

fn duplicates(ledger: &Ledger) -> u32 {
    lock(ledger).values().map(|n| n - 1).sum()
}

// ---------------------------------------------------------------------------------------------
// 1. Claim storm

async fn claim_storm(schema: &Schema) {
    println!(
        "\n== 1. Claim storm: {STORM_SLOTS} slots due in one second, {REPLICAS} replicas, guard `slot`, claim_ahead {} ==",
        lead_shown()
    );
    let setup = Instant::now();
    let mut backends = Vec::new();
    for _ in 0..REPLICAS {
        backends.push(connect(schema).await);
    }
    let connected = setup.elapsed();
    // `try_start` registers every lock key; its cost decides how far ahead the slots must be.
    let keys: Vec<(i64, String)> = (0..STORM_SLOTS)
        .map(|j| {
            let name = format!("storm_{j}");
            (slotguard::derive_lock_key("default", &name), name)
        })
        .collect();
    let registering = Instant::now();
    backends[0]
        .register_lock_keys("default", &keys)
        .await
        .expect("register lock keys");
    let registered = registering.elapsed();
    let setup = Instant::now();
    let due = upcoming_second(Duration::from_secs(2) + registered.mul_f64(3.0 * REPLICAS as f64));
    let ledger: Ledger = Arc::default();
    let details: Details = Arc::default();
    let won: Arc<Vec<AtomicUsize>> = Arc::new((0..REPLICAS).map(|_| AtomicUsize::new(0)).collect());
    let cron = once_at(due);
    let mut replicas = Vec::new();
    let mut starts = Vec::new();
    for (r, backend) in backends.into_iter().enumerate() {
        let jobs = (0..STORM_SLOTS)
            .map(|j| {
                let (ledger, won) = (Arc::clone(&ledger), Arc::clone(&won));
                let details = Arc::clone(&details);
                Job::new(
                    format!("storm_{j}"),
                    cron.clone(),
                    move |ctx: JobContext| {
                        *lock(&ledger)
                            .entry((j, ctx.scheduled_at().timestamp()))
                            .or_insert(0) += 1;
                        lock(&details).entry(j).or_default().push(format!(
                            "replica {r} run {:?} attempt {} token {:?} trigger {:?}",
                            ctx.run_id(),
                            ctx.attempt(),
                            ctx.fencing_token(),
                            ctx.trigger()
                        ));
                        won[r].fetch_add(1, Ordering::Relaxed);
                        async {}
                    },
                )
            })
            .collect();
        let t = Instant::now();
        replicas.push(start_on(backend, r, jobs, None).await);
        starts.push(ms(t.elapsed()));
    }
    println!(
        "set-up: 8 × connect + migrate {:.0} ms; one register_lock_keys of 10,000 keys {:.0} ms; \
         8 × build + try_start {:.0} ms; due at {due}",
        ms(connected),
        ms(registered),
        ms(setup.elapsed())
    );
    println!(
        "  build + try_start per replica (registers its 10,000 lock keys): {:.0}–{:.0} ms",
        starts.iter().copied().fold(f64::INFINITY, f64::min),
        starts.iter().copied().fold(0.0_f64, f64::max)
    );
    assert!(Utc::now() < due, "set-up took too long: the slots are past");

    let mut probe = PgConnection::connect(&database_url())
        .await
        .expect("probe connection");
    let query = format!(
        "SELECT count(*)::bigint, count(*) FILTER (WHERE status <> 'running')::bigint FROM \"{}\".job_runs",
        schema.name
    );
    sleep_until(due).await;
    let (mut claimed_at, mut finished_at) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        let (rows, done): (i64, i64) = sqlx::query_as(AssertSqlSafe(query.clone()))
            .fetch_one(&mut probe)
            .await
            .expect("poll job_runs");
        let since = (Utc::now() - due).to_std().unwrap_or_default();
        if claimed_at.is_none() && rows as usize >= STORM_SLOTS {
            claimed_at = Some(since);
        }
        if done as usize >= STORM_SLOTS {
            finished_at = Some(since);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = probe.close().await;
    // Let any late tick of a slower replica finish before counting duplicates.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_all(&replicas).await;

    let executed = lock(&ledger).len();
    let show = |d: Option<Duration>| {
        d.map_or("not reached in 90 s".to_owned(), |d| {
            format!("{:.0} ms", ms(d))
        })
    };
    println!(
        "all {STORM_SLOTS} slots claimed (rows exist) after: {}",
        show(claimed_at)
    );
    println!(
        "all {STORM_SLOTS} runs finished after:            {}",
        show(finished_at)
    );
    println!(
        "slots executed: {executed} / {STORM_SLOTS}; duplicate executions: {}",
        duplicates(&ledger)
    );
    for (j, runs) in lock(&details).iter().filter(|(_, v)| v.len() > 1).take(5) {
        println!("  storm_{j} ran {} times: {}", runs.len(), runs.join("; "));
    }
    println!();
    println!(
        "{:<10} {:>6} | {:>14} {:>16} | {:>8} {:>8} {:>10} {:>10} | {:>10} {:>10}",
        "replica",
        "ran",
        "try_lock calls",
        "claim calls",
        "unlock",
        "finish",
        "heartbeat",
        "claim_due",
        "lock ms",
        "claim ms"
    );
    println!(
        "{:<10} {:>6} | {:>14} {:>16} | {:>8} {:>8} {:>10} {:>10} | {:>10} {:>10}",
        "", "", "(keys)", "(slots)", "calls", "calls", "calls", "calls", "(max)", "(max)"
    );
    let mut totals = [0usize; OPS];
    let mut others: HashMap<&'static str, usize> = HashMap::new();
    let mut answers: HashMap<&'static str, usize> = HashMap::new();
    for (r, replica) in replicas.iter().enumerate() {
        let s = &replica.stats;
        for (kind, n) in lock(&s.answers).iter() {
            *answers.entry(kind).or_default() += n;
        }
        for (method, n) in s.others() {
            *others.entry(method).or_default() += n;
        }
        let max_ms = |op| {
            s.calls(op)
                .iter()
                .map(|c| ms(c.took))
                .fold(0.0_f64, f64::max)
        };
        println!(
            "{:<10} {:>6} | {:>5} ({:>6}) {:>6} ({:>7}) | {:>8} {:>8} {:>10} {:>10} | {:>10.1} {:>10.1}",
            format!("replica-{r}"),
            won[r].load(Ordering::Relaxed),
            s.count(Op::TryLock),
            s.items(Op::TryLock),
            s.count(Op::Claim),
            s.items(Op::Claim),
            s.count(Op::Unlock),
            s.count(Op::Finish),
            s.count(Op::Heartbeat),
            s.count(Op::ClaimDue),
            max_ms(Op::TryLock),
            max_ms(Op::Claim),
        );
        for op in [
            Op::TryLock,
            Op::Claim,
            Op::Unlock,
            Op::Finish,
            Op::Heartbeat,
            Op::ClaimDue,
            Op::DueJobs,
            Op::ExistingSlots,
            Op::StoreNow,
            Op::BreakLocks,
        ] {
            totals[op as usize] += s.count(op);
        }
    }
    let per_slot = |op: Op| totals[op as usize] as f64 / STORM_SLOTS as f64;
    let per_slot_replica = |op: Op| per_slot(op) / REPLICAS as f64;
    println!();
    println!("calls per slot (all replicas) / per slot per replica:");
    for (label, op) in [
        ("try_lock", Op::TryLock),
        ("claim", Op::Claim),
        ("unlock", Op::Unlock),
        ("finish", Op::Finish),
        ("heartbeat", Op::Heartbeat),
        ("claim_due", Op::ClaimDue),
        ("due_jobs", Op::DueJobs),
        ("existing_slots", Op::ExistingSlots),
        ("store_now", Op::StoreNow),
        ("break_stale_locks", Op::BreakLocks),
    ] {
        println!(
            "  {label:<10} {:>6} calls  {:>8.4} per slot  {:>8.5} per slot per replica",
            totals[op as usize],
            per_slot(op),
            per_slot_replica(op)
        );
    }
    let mut others: Vec<_> = others.into_iter().collect();
    others.sort_by_key(|(method, n)| (std::cmp::Reverse(*n), *method));
    let others: Vec<String> = others.iter().map(|(m, n)| format!("{m} {n}")).collect();
    println!("other calls, all replicas: {}", others.join(", "));
    let mut answers: Vec<_> = answers.into_iter().collect();
    answers.sort_by_key(|(kind, n)| (std::cmp::Reverse(*n), *kind));
    let answers: Vec<String> = answers.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("claim answers, all replicas: {}", answers.join(", "));
}

// ---------------------------------------------------------------------------------------------
// 2. Start lag

/// `claim_ahead`: `None` leaves it to the builder's default.
async fn start_lag(schema: &Schema, claim_ahead: Option<Duration>) {
    set_lead(claim_ahead);
    println!(
        "\n== 2. Start lag: {REPLICAS} replicas × {LAG_JOBS} jobs `* * * * * *`, guard `slot`, claim_ahead {}, {} s ==",
        lead_shown(),
        LAG_RUN.as_secs()
    );
    // (job, slot) -> executions, and every execution's lag.
    let ledger: Ledger = Arc::default();
    let lags: Arc<Mutex<Vec<(i64, Duration)>>> = Arc::default();
    let mut replicas = Vec::new();
    for r in 0..REPLICAS {
        let jobs = (0..LAG_JOBS)
            .map(|j| {
                let (ledger, lags) = (Arc::clone(&ledger), Arc::clone(&lags));
                Job::new(format!("lag_{j}"), "* * * * * *", move |ctx: JobContext| {
                    let slot = ctx.scheduled_at();
                    let lag = (Utc::now() - slot).to_std().unwrap_or_default();
                    lock(&lags).push((slot.timestamp(), lag));
                    *lock(&ledger).entry((j, slot.timestamp())).or_insert(0) += 1;
                    async {}
                })
            })
            .collect();
        replicas.push(start_replica(schema, r, jobs, None).await);
    }
    let started = Utc::now();
    tokio::time::sleep(LAG_RUN).await;
    let stopped = Utc::now();
    stop_all(&replicas).await;

    // Slots every replica's timer had for sure: after the last start, at least 1 s before the stop.
    let first = started.timestamp() + 1;
    let last = stopped.timestamp() - 1;
    let seconds = (last - first + 1).max(0) as usize;
    let expected = seconds * LAG_JOBS;
    let (in_window, dups) = {
        let ledger = lock(&ledger);
        let in_window = ledger
            .keys()
            .filter(|(_, s)| (first..=last).contains(s))
            .count();
        (in_window, ledger.values().map(|n| n - 1).sum::<u32>())
    };
    let steady_from = first + LAG_WARMUP_SECS;
    let lags = lock(&lags).clone();
    let steady: Vec<f64> = lags
        .iter()
        .filter(|(s, _)| (steady_from..=last).contains(s))
        .map(|(_, l)| ms(*l))
        .collect();
    let warmup_max = lags
        .iter()
        .filter(|(s, _)| *s < steady_from)
        .map(|(_, l)| ms(*l))
        .fold(0.0_f64, f64::max);
    println!(
        "slots in the window ({seconds} s × {LAG_JOBS} jobs): expected {expected}, executed {in_window}; \
         executions in all {}, duplicate executions {dups}",
        lags.len()
    );
    println!(
        "{:<46} {:>8} {:>8} {:>8}",
        "figure (ms)", "p50", "p99", "max"
    );
    println!(
        "{:<46} {}",
        "start lag: body start − scheduled_at",
        summary(steady)
    );
    println!(
        "{:<46} {:>8} {:>8} {:>8.2}",
        format!("  (first {LAG_WARMUP_SECS} s, connections opening)"),
        "",
        "",
        warmup_max
    );

    // Where the time goes: every tick of every replica, from the counting wrapper.
    let in_steady = |c: &Call| {
        (steady_from..=last).contains(&c.at.timestamp()) && c.took < Duration::from_secs(1)
    };
    let offset = |c: &Call| f64::from(c.at.timestamp_subsec_micros()) / 1e3;
    let mut lock_entry = Vec::new();
    let mut lock_took = Vec::new();
    let mut claim_entry = Vec::new();
    let mut claim_took = Vec::new();
    let mut unlock_took = Vec::new();
    let mut finish_took = Vec::new();
    let mut lock_keys = Vec::new();
    let mut claim_items = Vec::new();
    let (mut calls_lock, mut calls_claim, mut calls_unlock, mut calls_finish) = (0, 0, 0, 0);
    for replica in &replicas {
        for c in replica
            .stats
            .calls(Op::TryLock)
            .iter()
            .filter(|c| in_steady(c))
        {
            lock_entry.push(offset(c));
            lock_took.push(ms(c.took));
            lock_keys.push(c.items as f64);
            calls_lock += 1;
        }
        for c in replica
            .stats
            .calls(Op::Claim)
            .iter()
            .filter(|c| in_steady(c))
        {
            claim_entry.push(offset(c));
            claim_took.push(ms(c.took));
            claim_items.push(c.items as f64);
            calls_claim += 1;
        }
        for c in replica
            .stats
            .calls(Op::Unlock)
            .iter()
            .filter(|c| in_steady(c))
        {
            unlock_took.push(ms(c.took));
            calls_unlock += 1;
        }
        for c in replica
            .stats
            .calls(Op::Finish)
            .iter()
            .filter(|c| in_steady(c))
        {
            finish_took.push(ms(c.took));
            calls_finish += 1;
        }
    }
    let secs = (last - steady_from + 1).max(1) as f64;
    println!(
        "{:<46} {}",
        "try_lock call starts (after the second)",
        summary(lock_entry)
    );
    println!("{:<46} {}", "try_lock call takes", summary(lock_took));
    println!(
        "{:<46} {}",
        "claim call starts (after the second)",
        summary(claim_entry)
    );
    println!("{:<46} {}", "claim call takes", summary(claim_took));
    println!(
        "{:<46} {}",
        "unlock call takes (batched per release)",
        summary(unlock_took)
    );
    println!(
        "{:<46} {}",
        "finish call takes (batched per release)",
        summary(finish_took)
    );
    println!(
        "calls per second, all replicas: try_lock {:.1} (keys/call p50 {:.0}), claim {:.1} (slots/call p50 {:.0}), unlock {:.1}, finish {:.1}",
        calls_lock as f64 / secs,
        quantile(&sorted(lock_keys), 0.5),
        calls_claim as f64 / secs,
        quantile(&sorted(claim_items), 0.5),
        calls_unlock as f64 / secs,
        calls_finish as f64 / secs,
    );
    claim_in_isolation(schema).await;
}

/// The claim statement alone, on an otherwise idle schema: what a tick's claim costs without the
/// other replicas' lock, unlock and finish calls around it. With a round trip and a one-row
/// committed insert (one WAL flush) as baselines.
async fn claim_in_isolation(schema: &Schema) {
    const ROUNDS: usize = 15;
    let backend = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .pool_size(1)
        .connect()
        .await
        .expect("connect");
    let mut conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let table = format!("\"{}\".bench_probe", schema.name);
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE TABLE {table} (x int)")))
        .execute(&mut conn)
        .await
        .expect("probe table");
    let (mut trip, mut commit) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        sqlx::raw_sql("SELECT 1")
            .execute(&mut conn)
            .await
            .expect("select");
        trip.push(ms(t.elapsed()));
        let t = Instant::now();
        sqlx::raw_sql(AssertSqlSafe(format!("INSERT INTO {table} VALUES (1)")))
            .execute(&mut conn)
            .await
            .expect("insert");
        commit.push(ms(t.elapsed()));
    }
    let base = upcoming_second(Duration::from_secs(3600));
    // A job of its own per slot, so that no overlap check finds a running predecessor.
    let request = |job: usize, round: usize| {
        let at = base + chrono::Duration::seconds(round as i64);
        ClaimRequest {
            key: slotguard::store::SlotKey {
                job: format!("probe_{round}_{job}"),
                scheduled_at: at,
                partition: String::new(),
            },
            trigger: slotguard::store::Trigger::Schedule,
            zone: "UTC".to_owned(),
            wall: at.naive_utc(),
            business_date: at.date_naive(),
            fingerprint: 1,
            stale_after: Duration::from_secs(30),
            overlap: slotguard::Overlap::Skip,
            calendar: None,
            ahead: false,
            defer_if_contended: false,
        }
    };
    // Opens the pool's connection, so that no timed claim pays for it.
    backend
        .claim("probe", &[request(0, 0)])
        .await
        .expect("claim");
    let mut claims = Vec::new();
    for size in [1, LAG_JOBS] {
        let mut took = Vec::new();
        for round in 0..ROUNDS {
            let batch: Vec<ClaimRequest> = (0..size).map(|j| request(j, round + size)).collect();
            let t = Instant::now();
            backend.claim("probe", &batch).await.expect("claim");
            took.push(ms(t.elapsed()));
        }
        claims.push((size, took));
    }
    let _ = conn.close().await;
    backend.close().await;
    println!("isolated, one connection, nothing else running (ms):");
    println!("{:<46} {}", "  round trip (SELECT 1)", summary(trip));
    println!(
        "{:<46} {}",
        "  one-row INSERT, committed (WAL flush)",
        summary(commit)
    );
    for (size, took) in claims {
        println!(
            "{:<46} {}",
            format!("  claim of {size} slot(s)"),
            summary(took)
        );
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

// ---------------------------------------------------------------------------------------------
// 3. Heartbeat cost

async fn heartbeat_cost(schema: &Schema) {
    println!(
        "\n== 3. Heartbeat cost: 1 replica, {HB_JOBS} attempts running {} s, stale_after {} s ==",
        HB_BODY.as_secs(),
        HB_STALE_AFTER.as_secs()
    );
    let backend = connect(schema).await;
    let due = upcoming_second(Duration::from_secs(2));
    let done = Arc::new(AtomicUsize::new(0));
    let cron = once_at(due);
    let jobs = (0..HB_JOBS)
        .map(|j| {
            let done = Arc::clone(&done);
            Job::new(
                format!("long_{j}"),
                cron.clone(),
                move |_ctx: JobContext| {
                    let done = Arc::clone(&done);
                    async move {
                        tokio::time::sleep(HB_BODY).await;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                },
            )
        })
        .collect();
    let replica = start_on(backend, 0, jobs, Some(HB_STALE_AFTER)).await;
    assert!(Utc::now() < due, "set-up took too long: the slots are past");
    sleep_until(due).await;
    let deadline = Instant::now() + HB_BODY + Duration::from_secs(20);
    while done.load(Ordering::Relaxed) < HB_JOBS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ended = Utc::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let replicas = [replica];
    stop_all(&replicas).await;
    let s = &replicas[0].stats;

    let beats = s.calls(Op::Heartbeat);
    let interval = HB_STALE_AFTER / 3;
    let held = (ended - due).to_std().unwrap_or_default();
    let intervals = held.as_secs_f64() / interval.as_secs_f64();
    let tokens: Vec<f64> = beats.iter().map(|c| c.items as f64).collect();
    let gaps: Vec<f64> = beats
        .windows(2)
        .map(|w| ms((w[1].at - w[0].at).to_std().unwrap_or_default()))
        .collect();
    println!(
        "bodies finished: {} / {HB_JOBS}; attempts held for {:.1} s = {:.1} heartbeat intervals of {} ms",
        done.load(Ordering::Relaxed),
        held.as_secs_f64(),
        intervals,
        interval.as_millis()
    );
    println!(
        "heartbeat calls: {} ({:.2} per interval); tokens per call p50 {:.0}, min {:.0}, max {:.0}",
        beats.len(),
        beats.len() as f64 / intervals,
        quantile(&sorted(tokens.clone()), 0.5),
        tokens.iter().copied().fold(f64::INFINITY, f64::min),
        tokens.iter().copied().fold(0.0_f64, f64::max)
    );
    println!(
        "{:<46} {}",
        "heartbeat call takes (ms)",
        summary(beats.iter().map(|c| ms(c.took)).collect())
    );
    println!(
        "{:<46} {}",
        "gap between heartbeat calls (ms)",
        summary(gaps)
    );
    println!(
        "other calls: claim {} ({} slots), try_lock {} ({} keys), unlock {}, finish {}, claim_due {}",
        s.count(Op::Claim),
        s.items(Op::Claim),
        s.count(Op::TryLock),
        s.items(Op::TryLock),
        s.count(Op::Unlock),
        s.count(Op::Finish),
        s.count(Op::ClaimDue)
    );
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    println!(
        "slotguard on PostgreSQL: {REPLICAS} in-process replicas, each a Scheduler with its own PgBackend \
         (pool of {POOL} + 1 lock connection)"
    );
    // `cargo bench -p slotguard-benches --bench cluster -- lag` runs only the named parts
    // (`storm` and `lag` with the defaults, `storm-off` and `lag-off` without a lead, `lag-ahead` at
    // 100 ms, `hb`); no name runs them all.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    if wanted("storm") {
        let schema = schema("storm");
        set_lead(None);
        runtime.block_on(claim_storm(&schema));
    }
    if wanted("storm-off") {
        let schema = schema("stormoff");
        set_lead(Some(Duration::ZERO));
        runtime.block_on(claim_storm(&schema));
    }
    if wanted("lag") {
        let schema = schema("lag");
        runtime.block_on(start_lag(&schema, None));
    }
    if wanted("lag-ahead") {
        let schema = schema("lagahead");
        runtime.block_on(start_lag(&schema, Some(Duration::from_millis(100))));
    }
    if wanted("lag-off") {
        let schema = schema("lagoff");
        runtime.block_on(start_lag(&schema, Some(Duration::ZERO)));
    }
    // The heartbeat scenario claims at the instant, as it always did.
    set_lead(Some(Duration::ZERO));
    if wanted("hb") {
        let schema = schema("hb");
        runtime.block_on(heartbeat_cost(&schema));
    }
    println!("\nharness total: {:.0} s", started.elapsed().as_secs_f64());
}
