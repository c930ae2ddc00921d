//! The whole backend through a transaction-mode pooler (`PgBackendBuilder::transaction_pooler`):
//! a real PgBouncer in transaction mode, started by each test on a free port. The schema is
//! migrated through it too; nothing here connects to the database directly except to look at it
//! and to end the pooler's server sessions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slotguard::store::{LockStore, QueueStore, RunStatus, SlotKey, SlotStore, Store};
use slotguard::{GuardLevel, Job, JobContext, Role, Scheduler, SchedulerHandle};
use slotguard_postgres::{PgBackend, PgLeaseLocks};

use slotguard_process_tests::pgbouncer::end_sessions;

use crate::bouncer::{Bouncer, start};
use crate::common::{TestSchema, database_url};

/// A backend in `schema` through the pooler at `url`, under application name `app`.
async fn pooled(schema: &TestSchema, url: &str, app: &str) -> PgBackend {
    PgBackend::builder(&format!("{url}?application_name={app}"))
        .schema(schema.name.clone())
        .pool_size(4)
        .transaction_pooler(true)
        .connect()
        .await
        .expect("connect through the pooler")
}

async fn with_pooled(check: impl AsyncFnOnce(&PgBackend)) {
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let backend = pooled(&schema, &bouncer.url(), "pooled_contract").await;
    check(&backend).await;
    backend.close().await;
}

// The slot checks of the contract, every one through the pooler. (Its lock checks are
// `PgLeaseLocks`'s, in `lease.rs`: this backend refuses session locks there, below.)
slotguard_tests::contract!(
    slot_rows,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    with = with_pooled,
    stale = Duration::from_secs(1),
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_statements_at_once_through_the_pooler_all_work() {
    with_pooled(async |backend| {
        // The load that fails without `transaction_pooler` (`pooler.rs`): 8 tasks, 5 reads each.
        let mut set = tokio::task::JoinSet::new();
        for task in 0..8 {
            let backend = backend.clone();
            set.spawn(async move {
                for read in 0..5 {
                    let key = SlotKey {
                        job: format!("pooled_{task}"),
                        scheduled_at: Utc::now(),
                        partition: read.to_string(),
                    };
                    let found = backend.existing_slots(&[key]).await?;
                    assert_eq!(found, [false]);
                }
                Ok::<(), slotguard::store::StoreError>(())
            });
        }
        for answer in set.join_all().await {
            answer.expect("a statement through the pooler failed");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_needs_a_session_of_its_own_is_refused_or_polled() {
    with_pooled(async |backend| {
        let refused = backend
            .try_lock("a", &[7])
            .await
            .expect_err("a session lock");
        let text = refused.to_string();
        assert!(text.contains("transaction-mode pooler"), "{text}");
        assert!(text.contains("PgLeaseLocks"), "{text}");
        assert!(
            backend.due_signal().await.is_none(),
            "a LISTEN through a transaction pooler"
        );
    })
    .await;
}

/// One body's run: its slot, start, end and fencing token.
type Ran = Arc<Mutex<Vec<(DateTime<Utc>, Instant, Instant, i64)>>>;

/// A slot-level job every second whose 300 ms bodies record themselves in `ran`.
fn ticking(ran: &Ran) -> Job {
    let ran = ran.clone();
    Job::new("pooled_tick", "* * * * * *", move |ctx: JobContext| {
        let ran = ran.clone();
        async move {
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let token = ctx.fencing_token().expect("a slot token");
            ran.lock()
                .unwrap()
                .push((ctx.scheduled_at(), start, Instant::now(), token));
        }
    })
    .guard(GuardLevel::Slot)
}

/// A replica named `id` in `role` through the pooler: slot rows from a pooled backend, locks
/// from lease rows.
async fn replica(
    schema: &TestSchema,
    bouncer: &Bouncer,
    id: &str,
    role: Role,
    ran: &Ran,
) -> SchedulerHandle {
    let url = bouncer.url();
    let app = format!("{}_{id}", schema.name);
    let backend = pooled(schema, &url, &app).await;
    let locks = PgLeaseLocks::builder(&format!("{url}?application_name={app}_locks"))
        .schema(schema.name.clone())
        .lease_ttl(Duration::from_secs(3))
        .connect()
        .await
        .expect("lease locks through the pooler");
    let store = Store::full(Arc::new(backend)).with_locks(Arc::new(locks));
    Scheduler::builder()
        .instance_id(id)
        .role(role)
        .store(store)
        .job(ticking(ran))
        .grace_period(Duration::from_secs(5))
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start")
}

/// Ends every server session PgBouncer holds for the replicas in `schema` (their application
/// names start with the schema's); the number ended.
async fn kill_pooled_servers(schema: &TestSchema) -> i64 {
    end_sessions(&database_url(), &format!("{}_", schema.name)).await
}

/// What every test of a shape checks once its replicas stopped: no two bodies at once, no slot
/// twice, tokens rising, each body's slot recorded `succeeded`, and work done after the faults.
async fn check_runs(schema: &TestSchema, ran: &Ran, faults_over: Instant) {
    let mut ran = ran.lock().unwrap().clone();
    ran.sort_by_key(|(_, start, ..)| *start);
    assert!(ran.len() >= 4, "{} runs", ran.len());
    for pair in ran.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "two bodies overlapped: {pair:?}");
        assert!(pair[0].0 < pair[1].0, "a slot ran twice: {pair:?}");
        assert!(pair[0].3 < pair[1].3, "tokens not rising: {pair:?}");
    }
    assert!(
        ran.iter()
            .filter(|(_, start, ..)| *start > faults_over)
            .count()
            >= 2,
        "nothing ran after the faults: {ran:?}"
    );
    let direct = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .connect()
        .await
        .expect("direct");
    let runs = direct.runs(Some("pooled_tick")).await.expect("runs");
    for (slot, ..) in &ran {
        let run = runs.iter().find(|r| r.key.scheduled_at == *slot);
        let status = run.map(|r| r.status);
        assert_eq!(status, Some(RunStatus::Succeeded), "slot {slot}");
    }
    direct.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_run_each_slot_once_across_a_pgbouncer_restart() {
    let Some(mut bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let ran = Ran::default();
    let a = replica(&schema, &bouncer, "a", Role::All, &ran).await;
    let b = replica(&schema, &bouncer, "b", Role::All, &ran).await;
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    bouncer.restart();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        kill_pooled_servers(&schema).await > 0,
        "no pooler session to end"
    );
    let faults_over = Instant::now();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    a.shutdown().await;
    b.shutdown().await;
    check_runs(&schema, &ran, faults_over).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_poll_the_queue_through_the_pooler_and_run_each_slot_once() {
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let ran = Ran::default();
    let scheduler = replica(&schema, &bouncer, "s", Role::Scheduler, &ran).await;
    let w1 = replica(&schema, &bouncer, "w1", Role::Worker, &ran).await;
    let w2 = replica(&schema, &bouncer, "w2", Role::Worker, &ran).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(
        kill_pooled_servers(&schema).await > 0,
        "no pooler session to end"
    );
    let faults_over = Instant::now();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    scheduler.shutdown().await;
    w1.shutdown().await;
    w2.shutdown().await;
    check_runs(&schema, &ran, faults_over).await;
}
