//! The reads of a job's head of queue cannot walk the slot key: they name the job in the "C"
//! collation of `job_runs_active_idx` (migration 19), which `job_runs_slot_key`, in the database's
//! collation, cannot serve. Checked on the plans PostgreSQL makes with the index of active runs
//! gone (dropped in a transaction that is rolled back): a read that could still use the slot key
//! would then show it, as the statements before migration 19 did. `DECIDE_QUEUED` names the job
//! the same way, but its plan takes neither index here (it reads the pending rows through
//! `job_runs_due_idx`), so it is not checked: the check could not fail.

use slotguard_tests::pg::TestSchema;
use sqlx::{AssertSqlSafe, Connection as _, PgConnection};

/// The parameters a read takes.
#[derive(Clone, Copy)]
enum Params {
    /// `DUE_JOBS`: jobs, max attempts, overlaps, leads.
    Ask,
    /// The claims: owner, jobs, max attempts, limit, overlaps, limits, cluster limits, leads.
    Claim,
}

/// The plan of `sql` (`EXPLAIN`, nothing executed) with `params` bound.
async fn plan(conn: &mut PgConnection, sql: &str, params: Params) -> String {
    let explain = format!("EXPLAIN {sql}");
    let jobs = vec!["job".to_owned()];
    let query = sqlx::query_scalar::<_, String>(AssertSqlSafe(explain));
    let query = match params {
        Params::Ask => query
            .bind(jobs)
            .bind(vec![3_i32])
            .bind(vec!["skip"])
            .bind(vec![100_000_i64]),
        Params::Claim => query
            .bind("owner")
            .bind(jobs)
            .bind(vec![3_i32])
            .bind(16_i64)
            .bind(vec!["allow"])
            .bind(vec![None::<i32>])
            .bind(vec![None::<i32>])
            .bind(vec![100_000_i64]),
    };
    query.fetch_all(conn).await.expect("explain").join("\n")
}

#[tokio::test]
async fn head_of_queue_reads_cannot_walk_the_slot_key() {
    let schema = TestSchema::new();
    // A connection of its own, not the pool's: a failed assertion closes it, and its lock on the
    // dropped index goes with it, so the schema can be dropped after the test.
    let (backend, mut conn) = super::test_backend(&schema.name, 1).await;
    let s = &backend.inner.statements;
    let reads = [
        ("due_jobs", &s.due_jobs, Params::Ask),
        ("claim_due", &s.claim_due, Params::Claim),
        ("claim_due_free", &s.claim_due_free, Params::Claim),
    ];
    let mut tx = conn.begin().await.expect("begin");
    let drop = format!("DROP INDEX \"{}\".job_runs_active_idx", schema.name);
    sqlx::raw_sql(AssertSqlSafe(drop))
        .execute(&mut *tx)
        .await
        .expect("drop the index of active runs");
    for (name, sql, params) in reads {
        let plan = plan(&mut tx, sql, params).await;
        assert!(!plan.contains("job_runs_slot_key"), "{name}:\n{plan}");
    }
    tx.rollback().await.expect("rollback");
    backend.close().await;
}
