//! The admin-store contract ([`slotguard_tests::admin`]) against a live server, a schema per test,
//! and what only PostgreSQL shows: eight retries waiting on one row lock under READ COMMITTED, the
//! 10,000-row cap on a real table, the inherent listing, and every table surviving hostile names.

use slotguard::store::AdminStoreExt as _;
use std::sync::Arc;
use std::time::Duration;

use slotguard::store::{AdminStore, DueSpec, RunChange, RunStatus, SlotStore};
use slotguard_postgres::PgBackend;
use slotguard_tests::{admin, request};
use sqlx::{Connection, PgConnection};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::common::{Connect, TABLES, TestSchema, database_url, eventually, tables};

/// A backend in a schema of its own, dropped with it.
pub(crate) struct Fresh {
    pub(crate) backend: PgBackend,
    pub(crate) schema: TestSchema,
}

impl std::ops::Deref for Fresh {
    type Target = PgBackend;

    fn deref(&self) -> &PgBackend {
        &self.backend
    }
}

async fn fresh() -> Fresh {
    let schema = TestSchema::new();
    Fresh {
        backend: schema.backend().await,
        schema,
    }
}

fn specs(job: &str) -> [DueSpec; 1] {
    [DueSpec {
        job: job.to_owned(),
        max_attempts: 3,
        overlap: slotguard::Overlap::Allow,
        limit: None,
        cluster_limit: None,
        ahead: std::time::Duration::ZERO,
    }]
}

slotguard_tests::admin_contract!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    fresh
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_through_two_pools_are_done_once() {
    let fresh = fresh().await;
    let other = fresh.schema.backend().await;
    admin::concurrent_retries_are_done_once(&[fresh.backend.clone(), other]).await;
}

/// A NUL, which PostgreSQL refuses in a query, is bad input here too: never sent to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_outside_the_rule_are_bad_input() {
    let fresh = fresh().await;
    admin::names_outside_the_rule_are_bad_input(&fresh.backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_triggers_each_get_a_run() {
    let fresh = fresh().await;
    admin::concurrent_triggers_each_get_a_run(&fresh.backend).await;
}

/// The names include one that would drop the test's own schema; every table is still there after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_job_names_round_trip_through_every_operation() {
    let Fresh { backend, schema } = fresh().await;
    let mut names = admin::hostile_names();
    names.push(format!("\"; DROP SCHEMA {} CASCADE; --", schema.name));
    admin::hostile_job_names_round_trip_through_every_operation(&backend, &names).await;
    assert_eq!(tables(backend.pool(), &schema.name).await, TABLES);
    backend.close().await;
}

/// The admin listing and the inherent one read the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inherent_listing_reads_what_the_admin_listing_reads() {
    let Fresh {
        backend,
        schema: _schema,
    } = fresh().await;
    admin::runs_are_listed_newest_first_by_every_filter(&backend).await;
    let all = admin::list(&backend, &admin::filter(100)).await;
    assert_eq!(all.len(), 12);
    let mut inherent = backend.runs(None).await.expect("runs");
    inherent.sort_by_key(|r| std::cmp::Reverse((r.key.scheduled_at, r.id)));
    assert_eq!(all, inherent);
    backend.close().await;
}

/// More than 10,000 audit records and runs exist: one read returns at most 10,000, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_read_returns_at_most_10_000_rows() {
    let Fresh { backend, schema } = fresh().await;
    admin::the_audit_trail_is_newest_first_per_job_and_capped(&backend).await;
    // More than 10,000 records (and runs) exist: one read returns at most 10,000.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{s}\".job_run_audit (job_name, action, actor, reason)
         SELECT 'bulk', 'trigger', 'ops', g::text FROM generate_series(1, 10005) AS g;
         INSERT INTO \"{s}\".job_runs (job_name, scheduled_at, status, attempt, fencing_token,
             stale_after, zone, wall_time, business_date, \"trigger\", schedule_fingerprint)
         SELECT 'bulk', timestamptz '2026-01-01' + g * interval '1 minute', 'skipped', 0,
                nextval('\"{s}\".fencing_tokens'), interval '1 minute', 'UTC',
                timestamp '2026-01-01' + g * interval '1 minute', date '2026-01-01', 'schedule', 0
         FROM generate_series(1, 10005) AS g",
        s = schema.name
    )))
    .execute(backend.pool())
    .await
    .expect("bulk rows");
    let capped = backend.audit_log(None, usize::MAX).await.expect("audit");
    assert_eq!(capped.len(), 10_000);
    assert_eq!(capped[0].entry.reason, "10005");
    let runs = admin::list(&backend, &admin::filter(usize::MAX)).await;
    assert_eq!(runs.len(), 10_000);
    assert_eq!(
        runs[0].key.scheduled_at,
        admin::at("2026-01-01T00:00:00Z") + chrono::Duration::minutes(10_005)
    );
    backend.close().await;
}

/// The operators of [`eight_concurrent_retries_of_one_run_are_done_once`].
const OPERATORS: usize = 8;

/// A session of its own holding the row lock of `run_id`, in a transaction left open.
async fn lock_the_row(schema: &TestSchema, run_id: i64) -> PgConnection {
    let mut blocker = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut blocker)
        .await
        .expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT 1 FROM \"{}\".job_runs WHERE id = $1 FOR UPDATE",
        schema.name
    )))
    .bind(run_id)
    .execute(&mut blocker)
    .await
    .expect("lock the row");
    blocker
}

/// Whether, within 10 s, `sessions` statements of `schema` touching the audit table wait for a
/// lock at once.
async fn all_wait_for_a_lock(backend: &PgBackend, schema: &TestSchema, sessions: usize) -> bool {
    eventually(Duration::from_secs(10), || {
        let pool = backend.pool().clone();
        let pattern = format!("%{}%job_run_audit%", schema.name);
        async move {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE $1",
            )
            .bind(pattern)
            .fetch_one(&pool)
            .await
            .expect("pg_stat_activity");
            waiting == sessions as i64
        }
    })
    .await
}

/// 8 operators retry one failed run at once, each on a connection of its own, under READ
/// COMMITTED: one is done, the others find it `pending`, and the run gets exactly one new attempt.
/// The pool has 9 connections: 8 for the operators, one to watch them wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_retries_of_one_run_are_done_once() {
    let schema = TestSchema::new();
    let backend = schema
        .builder()
        .pool_size(OPERATORS as u32 + 1)
        .connect()
        .await
        .expect("connect");
    let req = request("race_retry", "2026-01-01T00:00:00Z", admin::STALE);
    let run_id = admin::finished(&backend, "a", &req, &admin::failed()).await;

    // Another session holds the run's row lock, so that all 8 retries are in flight at once, each
    // on a connection of its own, waiting for it; then it lets go and they race.
    let mut blocker = lock_the_row(&schema, run_id).await;

    let barrier = Arc::new(Barrier::new(OPERATORS));
    let mut set = JoinSet::new();
    for operator in 0..OPERATORS {
        let backend = backend.clone();
        let key = req.key.clone();
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            barrier.wait().await;
            let audit = admin::entry("retry", &format!("operator-{operator}"), "race");
            backend.retry(&key, &audit).await.expect("retry")
        });
    }
    let waiting = all_wait_for_a_lock(&backend, &schema, OPERATORS).await;
    sqlx::query("COMMIT")
        .execute(&mut blocker)
        .await
        .expect("commit");
    assert!(waiting, "all 8 retries wait for the row lock at once");
    blocker.close().await.expect("close");

    let mut answers = Vec::new();
    while let Some(answer) = set.join_next().await {
        answers.push(answer.expect("operator panicked"));
    }
    let done = answers
        .iter()
        .filter(|a| **a == RunChange::Done { run_id })
        .count();
    let refused = answers
        .iter()
        .filter(|a| {
            **a == RunChange::Refused {
                status: RunStatus::Pending,
            }
        })
        .count();
    assert_eq!((done, refused), (1, OPERATORS - 1), "{answers:?}");

    let due = backend
        .claim_due("b", &specs("race_retry"), 10)
        .await
        .expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].lease.run_id, due[0].lease.attempt), (run_id, 2));
    assert!(
        backend
            .claim_due("c", &specs("race_retry"), 10)
            .await
            .expect("due")
            .is_empty()
    );
    let run = admin::run_of(&backend, &req.key).await;
    assert_eq!(run.attempts.len(), 2);
    assert_eq!(run.status, RunStatus::Running);
    let log = backend
        .audit_log(Some("race_retry"), 100)
        .await
        .expect("audit");
    assert_eq!(log.len(), 1, "one retry audited: {log:?}");
    backend.close().await;
}

/// Holiday overrides followed by two schedulers on one schema, in real time
/// ([`slotguard_tests::overrides`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_follow_an_added_and_removed_holiday() {
    let fresh = fresh().await;
    slotguard_tests::overrides::two_replicas_follow_an_added_and_removed_holiday(
        fresh.backend.clone(),
    )
    .await;
}

/// History retention and the replica registry through two schedulers on one schema, in real time
/// ([`slotguard_tests::history`]); attempts went with their runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_second_jobs_old_runs_are_pruned_while_replicas_are_listed() {
    let fresh = fresh().await;
    slotguard_tests::history::a_per_second_jobs_old_runs_are_pruned_while_replicas_are_listed(
        fresh.backend.clone(),
    )
    .await;
    let orphans: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {0}.job_run_attempts a \
         WHERE NOT EXISTS (SELECT 1 FROM {0}.job_runs r WHERE r.id = a.run_id)",
        fresh.schema.name
    )))
    .fetch_one(fresh.backend.pool())
    .await
    .expect("count");
    assert_eq!(orphans, 0);
}

/// The first half of the schedules' advisory-lock key (ASCII `schd`), as the backend takes it with
/// `hashtext(schema)`.
const SCHEDULE_LOCK_CLASS: i32 = 0x7363_6864;

/// A read of the changes holds the schedules' lock shared until it commits: a write waits for it,
/// and reads the clock after it, so it takes effect after the read's `fresh_at` plus the fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_write_waits_for_a_read_of_the_changes() {
    use slotguard::store::{SCHEDULE_FENCE, ScheduleStore, ScheduleWrite};

    let Fresh { backend, schema } = fresh().await;
    let mut reader = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut reader)
        .await
        .expect("begin");
    let fresh_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT clock_timestamp() FROM pg_advisory_xact_lock_shared($1, hashtext($2))",
    )
    .bind(SCHEDULE_LOCK_CLASS)
    .bind(&schema.name)
    .fetch_one(&mut reader)
    .await
    .expect("lock shared");
    let writer = {
        let backend = backend.clone();
        tokio::spawn(async move {
            let spec = admin::schedule_spec("tenant_report", "0 2 * * *", "acme");
            backend
                .write_schedule("acme-daily", 0, Some(&spec), "ops", "onboarding")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the write waits for the read");
    sqlx::query("COMMIT")
        .execute(&mut reader)
        .await
        .expect("commit");
    let written = writer.await.expect("writer").expect("write");
    let ScheduleWrite::Written(v1) = written else {
        panic!("expected a write, found {written:?}");
    };
    assert!(v1.changed_at > fresh_at, "{v1:?} {fresh_at}");
    let fence = chrono::Duration::from_std(SCHEDULE_FENCE).expect("small");
    assert!(v1.effective_at > fresh_at + fence, "{v1:?} {fresh_at}");
    reader.close().await.expect("close");
    backend.close().await;
}

/// Eight operators create one schedule at once, each on a connection of its own: one version is
/// written, the others are told it exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creations_of_one_schedule_write_one_version() {
    use slotguard::store::{ScheduleStore, ScheduleWrite};

    let schema = TestSchema::new();
    let backend = schema
        .builder()
        .pool_size(OPERATORS as u32)
        .connect()
        .await
        .expect("connect");
    let barrier = Arc::new(Barrier::new(OPERATORS));
    let mut set = JoinSet::new();
    for operator in 0..OPERATORS {
        let (backend, barrier) = (backend.clone(), Arc::clone(&barrier));
        set.spawn(async move {
            let spec = admin::schedule_spec("tenant_report", &format!("{operator} 2 * * *"), "");
            barrier.wait().await;
            let by = format!("operator-{operator}");
            backend
                .write_schedule("race", 0, Some(&spec), &by, "race")
                .await
        });
    }
    let mut written = 0;
    while let Some(answer) = set.join_next().await {
        match answer.expect("operator panicked").expect("write") {
            ScheduleWrite::Written(v) => {
                assert_eq!(v.version, 1);
                written += 1;
            }
            ScheduleWrite::Stale { current } => assert_eq!(current, 1),
        }
    }
    assert_eq!(written, 1);
    let history = backend.schedule_history("race").await.expect("history");
    assert_eq!(history.len(), 1);
    let audit = backend
        .audit_log(Some("tenant_report"), 100)
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1, "{audit:?}");
    backend.close().await;
}
