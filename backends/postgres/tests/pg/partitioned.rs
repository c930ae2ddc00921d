//! Time-partitioned history (`PgBackendBuilder::partitioned_history`): both contracts on it, the
//! conversion of a plain table that holds runs (one of them running through it), the partitions
//! made ahead and for a backfill, and retention that drops whole partitions and never one holding
//! a run it keeps.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use slotguard::store::{Finish, PruneSpec, RetentionStore, RunStatus, SlotStore, SlotStoreExt};
use slotguard_postgres::{HistoryPartitions, PgBackend};
use slotguard_tests::request;
use sqlx::AssertSqlSafe;

use crate::common::{Connect, TestSchema, won};

/// The slot contract on a partitioned history.
mod slots {
    use super::*;

    async fn with_partitioned(check: impl AsyncFnOnce(&PgBackend)) {
        let schema = TestSchema::new();
        let backend = partitioned(&schema).await;
        check(&backend).await;
        backend.close().await;
    }

    slotguard_tests::contract!(
        slots,
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        with = with_partitioned,
        stale = Duration::from_secs(1),
    );
}

/// The admin contract on a partitioned history.
mod admin {
    use super::*;
    use crate::admin::Fresh;

    async fn fresh() -> Fresh {
        let schema = TestSchema::new();
        Fresh {
            backend: partitioned(&schema).await,
            schema,
        }
    }

    slotguard_tests::admin_contract!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        fresh
    );
}

async fn partitioned(schema: &TestSchema) -> PgBackend {
    schema
        .builder()
        .partitioned_history(HistoryPartitions::daily())
        .connect()
        .await
        .expect("connect with a partitioned history")
}

/// Runs `sql` with `{s}` standing for the schema; the first column of each row, as text.
async fn texts(backend: &PgBackend, sql: &str) -> Vec<String> {
    let sql = sql.replace("{s}", &format!("\"{}\"", backend.schema()));
    sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_all(backend.pool())
        .await
        .expect("query")
}

/// The partitions of `table`, by name.
async fn partitions_of(backend: &PgBackend, table: &str) -> Vec<String> {
    texts(
        backend,
        &format!(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = '{{s}}.{table}'::regclass ORDER BY 1"
        ),
    )
    .await
}

fn day(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_table_with_runs_is_converted_and_a_running_run_goes_on() {
    let schema = TestSchema::new();
    let plain = schema.backend().await;
    let stale = Duration::from_secs(60);
    let claims = plain
        .claim(
            "a",
            &[
                request("conv", "2026-01-01T00:00:00Z", stale),
                request("conv", "2026-01-02T00:00:00Z", stale),
            ],
        )
        .await
        .expect("claim");
    let (done, running) = (won(&claims[0]), won(&claims[1]));
    plain
        .finish_one("a", &done, &Finish::succeeded())
        .await
        .expect("finish");
    let before = plain.runs(Some("conv")).await.expect("runs");
    // As attempts written before migration 17: no slot time.
    texts(
        &plain,
        "WITH u AS (UPDATE {s}.job_run_attempts SET scheduled_at = NULL RETURNING 1)
         SELECT count(*)::text FROM u",
    )
    .await;
    plain.close().await;

    let backend = partitioned(&schema).await;
    assert_eq!(backend.runs(Some("conv")).await.expect("runs"), before);
    let now = Utc::now();
    let runs = partitions_of(&backend, "job_runs").await;
    assert!(runs.contains(&"job_runs_legacy".to_owned()), "{runs:?}");
    assert!(runs.contains(&"job_runs_default".to_owned()), "{runs:?}");
    let attempts = partitions_of(&backend, "job_run_attempts").await;
    assert!(
        attempts.contains(&"job_run_attempts_legacy".to_owned()),
        "{attempts:?}"
    );
    assert_eq!(
        texts(
            &backend,
            "SELECT count(*)::text FROM {s}.job_run_attempts a JOIN {s}.job_runs r
             ON r.id = a.run_id AND r.scheduled_at = a.scheduled_at"
        )
        .await,
        ["2"],
        "every attempt has its run's slot time"
    );

    // The run that was running when the table was converted heartbeats and finishes as before.
    let beat = backend
        .heartbeat("a", &[running.token])
        .await
        .expect("heartbeat");
    assert_eq!(beat, [running.token]);
    backend
        .finish_one("a", &running, &Finish::succeeded())
        .await
        .expect("finish");
    // A new slot goes on in a partition of its own day, with an id above the old ones.
    let fresh = backend
        .claim("a", &[request("conv", &now.to_rfc3339(), stale)])
        .await
        .expect("claim");
    let lease = won(&fresh[0]);
    assert!(lease.run_id > running.run_id && lease.token > running.token);
    let runs = backend.runs(Some("conv")).await.expect("runs");
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r.attempts.len() == 1), "{runs:?}");
    let newest = texts(
        &backend,
        "SELECT tableoid::regclass::text FROM {s}.job_runs ORDER BY scheduled_at DESC LIMIT 1",
    )
    .await;
    // The old table holds every slot up to the end of the day after the latest one it held.
    assert!(
        newest[0].ends_with("job_runs_legacy") || newest[0].ends_with(&day(now)),
        "{newest:?}"
    );

    // Connecting again, with or without the option, keeps the layout and converts nothing.
    let again = schema.backend().await;
    assert_eq!(again.runs(Some("conv")).await.expect("runs").len(), 3);
    assert_eq!(
        partitions_of(&again, "job_runs").await,
        partitions_of(&backend, "job_runs").await
    );
    again.close().await;
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_schema_gets_partitions_ahead_and_a_backfill_its_own() {
    let schema = TestSchema::new();
    let backend = schema
        .builder()
        .partitioned_history(HistoryPartitions::daily().ahead(3))
        .connect()
        .await
        .expect("connect");
    let now = Utc::now();
    let want = |today: DateTime<Utc>| {
        let mut want: Vec<String> = (0..=3)
            .map(|d| format!("job_runs_p{}", day(today + TimeDelta::days(d))))
            .collect();
        want.push("job_runs_default".to_owned());
        want.sort();
        want
    };
    let got = partitions_of(&backend, "job_runs").await;
    // Near midnight UTC the connect may have seen the day before.
    assert!(
        got == want(now) || got == want(now - TimeDelta::minutes(1)),
        "{got:?} {:?}",
        want(now)
    );

    // A backfill of last year waits in the default partition until its partitions are made, and
    // then moves in with its attempts.
    let stale = Duration::from_secs(60);
    let claims = backend
        .claim("a", &[request("old", "2025-03-04T05:00:00Z", stale)])
        .await
        .expect("claim");
    let lease = won(&claims[0]);
    assert_eq!(
        texts(
            &backend,
            "SELECT tableoid::regclass::text FROM {s}.job_runs WHERE job_name = 'old'"
        )
        .await,
        [format!("{}.job_runs_default", schema.name)]
    );
    let from = DateTime::parse_from_rfc3339("2025-03-03T12:00:00Z")
        .unwrap()
        .to_utc();
    let until = DateTime::parse_from_rfc3339("2025-03-05T00:00:00Z")
        .unwrap()
        .to_utc();
    let made = backend
        .make_history_partitions(from, until)
        .await
        .expect("make");
    assert_eq!(made, 2);
    assert_eq!(
        texts(
            &backend,
            "SELECT tableoid::regclass::text FROM {s}.job_runs WHERE job_name = 'old'"
        )
        .await,
        [format!("{}.job_runs_p20250304", schema.name)]
    );
    assert_eq!(
        texts(
            &backend,
            "SELECT tableoid::regclass::text FROM {s}.job_run_attempts"
        )
        .await,
        [format!("{}.job_run_attempts_p20250304", schema.name)]
    );
    backend
        .finish_one("a", &lease, &Finish::succeeded())
        .await
        .expect("the run moved with its row");
    assert_eq!(
        backend.runs(Some("old")).await.expect("runs")[0].status,
        RunStatus::Succeeded
    );
    backend.close().await;
}

/// Makes the partition of `day` (UTC, `YYYY-MM-DD`).
async fn one_day(backend: &PgBackend, day: &str) {
    let from = DateTime::parse_from_rfc3339(&format!("{day}T00:00:00Z"))
        .expect("a day")
        .to_utc();
    let made = backend
        .make_history_partitions(from, from + TimeDelta::hours(1))
        .await
        .expect("make");
    assert_eq!(made, 1);
}

/// Seeds `n` finished runs of `job` on day `day` (UTC, `YYYY-MM-DD`), each with an attempt and an
/// audit record, finished `age` ago.
async fn seed(backend: &PgBackend, job: &str, day: &str, n: u32, age: &str) {
    let sql = format!(
        "INSERT INTO {{s}}.job_runs (job_name, scheduled_at, status, attempt, owner, fencing_token,
             stale_after, finished_at, zone, wall_time, business_date, \"trigger\",
             schedule_fingerprint)
         SELECT '{job}', timestamptz '{day} 00:00:00+00' + g * interval '1 minute', 'succeeded', 1,
                'w', nextval('{{s}}.fencing_tokens'), interval '30 seconds',
                now() - interval '{age}', 'UTC', timestamp '{day}' + g * interval '1 minute',
                date '{day}', 'manual', 1
         FROM generate_series(1, {n}) AS g;
         INSERT INTO {{s}}.job_run_attempts (run_id, attempt, owner, fencing_token, status, scheduled_at)
         SELECT id, 1, 'w', fencing_token, 'succeeded', scheduled_at FROM {{s}}.job_runs
         WHERE job_name = '{job}' AND scheduled_at::date = date '{day}';
         INSERT INTO {{s}}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
         SELECT job_name, id, scheduled_at, 'trigger', 'ops', 'seed' FROM {{s}}.job_runs
         WHERE job_name = '{job}' AND scheduled_at::date = date '{day}';"
    )
    .replace("{s}", &format!("\"{}\"", backend.schema()));
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(backend.pool())
        .await
        .expect("seed");
}

async fn count(backend: &PgBackend, sql: &str) -> i64 {
    let sql = sql.replace("{s}", &format!("\"{}\"", backend.schema()));
    sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_one(backend.pool())
        .await
        .expect("count")
}

fn keep(job: &str, days: u64) -> PruneSpec {
    PruneSpec {
        job: job.to_owned(),
        keep: Duration::from_secs(days * 24 * 3600),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_a_partition_only_when_it_keeps_none_of_its_rows() {
    let schema = TestSchema::new();
    let backend = partitioned(&schema).await;
    let from = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let until = DateTime::parse_from_rfc3339("2026-01-06T00:00:00Z")
        .unwrap()
        .to_utc();
    assert_eq!(
        backend
            .make_history_partitions(from, until)
            .await
            .expect("make"),
        5
    );
    // Day 1: old enough everywhere. Day 2: one run still pending. Day 3: a job retention does
    // not know. Day 4: finished too recently for a 30-day keep. Day 5: old enough, behind three
    // partitions that are kept.
    seed(&backend, "tick", "2026-01-01", 50, "40 days").await;
    seed(&backend, "tick", "2026-01-02", 50, "40 days").await;
    let retried = count(
        &backend,
        "WITH u AS (UPDATE {s}.job_runs SET status = 'pending', finished_at = NULL
                    WHERE job_name = 'tick' AND scheduled_at = '2026-01-02 00:30:00+00'
                    RETURNING 1) SELECT count(*) FROM u",
    )
    .await;
    assert_eq!(retried, 1, "one run retried");
    seed(&backend, "other", "2026-01-03", 10, "40 days").await;
    seed(&backend, "tick", "2026-01-04", 50, "2 days").await;
    seed(&backend, "tick", "2026-01-05", 10, "40 days").await;

    let pruned = backend
        .prune_partitions(&[keep("tick", 30)])
        .await
        .expect("prune partitions");
    assert_eq!(pruned.len(), 1, "{pruned:?}");
    assert_eq!((pruned[0].job.as_str(), pruned[0].runs), ("tick", 60));
    let runs = partitions_of(&backend, "job_runs").await;
    assert!(!runs.contains(&"job_runs_p20260101".to_owned()), "{runs:?}");
    assert!(!runs.contains(&"job_runs_p20260105".to_owned()), "{runs:?}");
    for kept in [
        "job_runs_p20260102",
        "job_runs_p20260103",
        "job_runs_p20260104",
    ] {
        assert!(runs.contains(&kept.to_owned()), "{kept} in {runs:?}");
    }
    let attempts = partitions_of(&backend, "job_run_attempts").await;
    assert!(
        !attempts.contains(&"job_run_attempts_p20260101".to_owned()),
        "{attempts:?}"
    );
    assert_eq!(
        count(
            &backend,
            "SELECT count(*) FROM {s}.job_runs WHERE scheduled_at < '2026-01-02'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &backend,
            "SELECT count(*) FROM {s}.job_run_audit WHERE scheduled_at < '2026-01-02'"
        )
        .await,
        0
    );
    assert_eq!(
        count(&backend, "SELECT count(*) FROM {s}.job_runs").await,
        110
    );
    assert_eq!(
        count(&backend, "SELECT count(*) FROM {s}.job_run_attempts").await,
        110
    );

    // The kept partition's other rows go one by one, as on a plain table.
    let pruned = backend
        .prune_runs(&[keep("tick", 30)], 500)
        .await
        .expect("prune runs");
    assert_eq!(pruned[0].runs, 49);
    assert_eq!(
        count(
            &backend,
            "SELECT count(*) FROM {s}.job_run_attempts WHERE scheduled_at < '2026-01-03'"
        )
        .await,
        1,
        "the attempts went with their runs"
    );
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_stopped_after_its_detach_is_finished_and_gives_back_what_it_keeps() {
    let schema = TestSchema::new();
    let backend = partitioned(&schema).await;
    one_day(&backend, "2026-02-01").await;
    seed(&backend, "tick", "2026-02-01", 20, "40 days").await;
    // The drop checked the partition, then an operator retried a run, then the drop detached it
    // and stopped.
    let retried = count(
        &backend,
        "WITH u AS (UPDATE {s}.job_runs SET status = 'pending', finished_at = NULL,
                        next_attempt_at = now()
                    WHERE scheduled_at = '2026-02-01 00:05:00+00' RETURNING 1)
         SELECT count(*) FROM u",
    )
    .await;
    assert_eq!(retried, 1, "one run retried");
    sqlx::raw_sql(AssertSqlSafe(
        "ALTER TABLE {s}.job_runs DETACH PARTITION {s}.job_runs_p20260201;
         ALTER TABLE {s}.job_run_attempts DETACH PARTITION {s}.job_run_attempts_p20260201;"
            .replace("{s}", &format!("\"{}\"", schema.name)),
    ))
    .execute(backend.pool())
    .await
    .expect("detach");

    let pruned = backend
        .prune_partitions(&[keep("tick", 30)])
        .await
        .expect("prune partitions");
    assert_eq!(pruned[0].runs, 19, "{pruned:?}");
    let left = backend.runs(Some("tick")).await.expect("runs");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].status, RunStatus::Pending);
    assert_eq!(left[0].attempts.len(), 1, "its attempt came back with it");
    assert_eq!(
        texts(
            &backend,
            "SELECT relname::text FROM pg_class WHERE relname LIKE 'job_run%_p20260201'
             AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = '{n}')"
                .replace("{n}", &schema.name)
                .as_str()
        )
        .await,
        Vec::<String>::new(),
        "both tables dropped"
    );
    backend.close().await;
}

/// The scheduler's own retention pass drops the partition: nothing calls the store directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedulers_retention_pass_drops_a_partition_past_its_keep() {
    let schema = TestSchema::new();
    let backend = partitioned(&schema).await;
    one_day(&backend, "2026-01-01").await;
    seed(&backend, "tick", "2026-01-01", 30, "40 days").await;
    let tick = slotguard::Job::new("tick", "* * * * * *", |_| async {})
        .retention(Duration::from_secs(30 * 24 * 3600));
    let scheduler = slotguard::Scheduler::builder()
        .backend(backend.clone())
        .prune_interval(Duration::from_millis(200))
        .job(tick)
        .build()
        .expect("build");
    let handle = scheduler.try_start().await.expect("start");
    let gone = crate::common::eventually(Duration::from_secs(10), || async {
        !partitions_of(&backend, "job_runs")
            .await
            .contains(&"job_runs_p20260101".to_owned())
    })
    .await;
    let ran = crate::common::eventually(Duration::from_secs(5), || async {
        count(
            &backend,
            "SELECT count(*) FROM {s}.job_runs WHERE job_name = 'tick'",
        )
        .await
            > 0
    })
    .await;
    handle.shutdown().await;
    assert!(gone, "the partition is still there");
    assert!(ran, "the scheduler's own runs are there");
    assert_eq!(
        count(
            &backend,
            "SELECT count(*) FROM {s}.job_runs WHERE scheduled_at < '2026-01-02'"
        )
        .await,
        0
    );
    backend.close().await;
}

/// Migrations 18 and 19 on a history partitioned before them: the queue's index is widened, and
/// keyed in the "C" collation, on the parent and on every partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_migrations_rebuild_a_partitioned_historys_index() {
    let schema = TestSchema::new();
    let backend = partitioned(&schema).await;
    let s = format!("\"{}\"", backend.schema());
    // As migration 17 left it.
    let undo = format!(
        "DROP INDEX {s}.job_runs_active_idx;
         CREATE INDEX job_runs_active_idx ON {s}.job_runs (job_name, scheduled_at)
             WHERE status IN ('pending', 'abandoned', 'running');
         DELETE FROM {s}.migrations WHERE version IN (18, 19);"
    );
    sqlx::raw_sql(AssertSqlSafe(undo))
        .execute(backend.pool())
        .await
        .expect("undo migrations 18 and 19");
    backend.close().await;
    let indexes = |columns: &str| {
        format!(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = '{}' \
             AND indexdef LIKE '%USING btree ({columns}) WHERE%' ORDER BY 1",
            schema.name
        )
    };

    let backend = partitioned(&schema).await;
    let partitions = partitions_of(&backend, "job_runs").await;
    let rebuilt = indexes(r#"job_name COLLATE "C", scheduled_at, partition_key COLLATE "C""#);
    let rebuilt = texts(&backend, &rebuilt).await;
    assert_eq!(rebuilt.len(), partitions.len() + 1, "{rebuilt:?}");
    assert!(rebuilt.contains(&"job_runs_active_idx".to_owned()));
    for old in [
        "job_name, scheduled_at",
        "job_name, scheduled_at, partition_key",
    ] {
        assert_eq!(texts(&backend, &indexes(old)).await, Vec::<String>::new());
    }
    backend.close().await;
}
