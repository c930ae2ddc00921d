//! How fast a prune deletes a large backlog, for docs/PERFORMANCE.md: 100,000 finished runs past
//! their retention (each with an attempt and an audit record) beside 100,000 recent ones, deleted
//! 500 per statement. Ignored by default (it seeds 200,000 runs); run it with
//! `cargo test -p slotguard-postgres --test pg -- retention --ignored --nocapture`.

use std::time::{Duration, Instant};

use slotguard::store::{PRUNE_BATCH, PruneSpec, RetentionStore};

use crate::common::{Connect, TestSchema};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: seeds 200,000 runs"]
async fn a_backlog_of_100_000_runs_is_pruned_in_batches_of_500() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{s}\".job_runs (job_name, scheduled_at, status, attempt, owner, fencing_token,
             stale_after, finished_at, zone, wall_time, business_date, \"trigger\",
             schedule_fingerprint)
         SELECT 'tick', timestamptz '2026-01-01' + g * interval '1 second', 'succeeded', 1, 'w',
                nextval('\"{s}\".fencing_tokens'), interval '30 seconds',
                CASE WHEN g <= 100000 THEN now() - interval '40 days' ELSE now() END,
                'UTC', timestamp '2026-01-01' + g * interval '1 second', date '2026-01-01',
                'schedule', 1
         FROM generate_series(1, 200000) AS g;
         INSERT INTO \"{s}\".job_run_attempts (run_id, attempt, owner, fencing_token, status)
         SELECT id, 1, 'w', fencing_token, 'succeeded' FROM \"{s}\".job_runs;
         INSERT INTO \"{s}\".job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
         SELECT job_name, id, scheduled_at, 'retry', 'ops', 'seed' FROM \"{s}\".job_runs;
         ANALYZE \"{s}\".job_runs; ANALYZE \"{s}\".job_run_attempts; ANALYZE \"{s}\".job_run_audit;",
        s = schema.name
    )))
    .execute(backend.pool())
    .await
    .expect("seed");
    let specs = [PruneSpec {
        job: "tick".into(),
        keep: Duration::from_secs(30 * 24 * 3600),
    }];
    let started = Instant::now();
    let mut batches = Vec::new();
    loop {
        let one = Instant::now();
        let pruned = backend
            .prune_runs(&specs, PRUNE_BATCH)
            .await
            .expect("prune");
        batches.push(one.elapsed());
        let runs: u64 = pruned.iter().map(|p| p.runs).sum();
        if runs < PRUNE_BATCH as u64 {
            break;
        }
    }
    let total = started.elapsed();
    let left: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".job_runs",
        schema.name
    )))
    .fetch_one(backend.pool())
    .await
    .expect("count");
    assert_eq!(left, 100_000, "the recent half is kept");
    batches.sort();
    println!(
        "pruned 100,000 runs in {} batches, {:.2} s in all; per batch median {:.1} ms, max {:.1} ms",
        batches.len(),
        total.as_secs_f64(),
        batches[batches.len() / 2].as_secs_f64() * 1e3,
        batches[batches.len() - 1].as_secs_f64() * 1e3
    );
    backend.close().await;
}
