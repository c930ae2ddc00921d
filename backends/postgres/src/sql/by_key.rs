//! The statements that find rows by key and then test `running!` read about as many rows as they
//! were asked about, however many runs are `running`: checked on a storm's shape (10,000 running
//! runs at one instant) with statistics taken while `job_runs` was empty, as they are at the start
//! of a storm, and on the generic plans a pooled connection settles on. The work is counted from
//! `EXPLAIN ANALYZE` (the rows every plan node produced or filtered out, times its loops), in a
//! transaction that is rolled back; nothing is timed. With a plain `status = 'running'` the second
//! look's `CLAIM` walks every running run of the instant through `job_runs_status_scheduled_idx`
//! once per slot (about 3,000,000 rows for 300 slots) and `FINISH_MANY` re-reads its input once per
//! running run of the owner (about 100,000); with `running!`, about 2,900 and 600.

use std::sync::Arc;
use std::time::Duration;

use slotguard::store::{Claim, Finish, Lease, SlotStore};
use slotguard_tests::pg::TestSchema;
use slotguard_tests::request;
use sqlx::{AssertSqlSafe, Connection as _, PgConnection, Row as _};

use crate::claims::ClaimArgs;
use crate::finishes::FinishArgs;

/// Runs `running` at one instant.
const RUNNING: usize = 10_000;
/// Rows each checked statement is asked about.
const ASKED: usize = 300;
/// Rows of plan work allowed per asked row (the good plans do about 10; the bad ones, `RUNNING`).
const WORK_PER_ROW: usize = 60;

/// The rows every node of `plan` (`EXPLAIN ANALYZE` text) produced or filtered out, times its loops.
fn work(plan: &[String]) -> usize {
    let number = |line: &str, key: &str| -> Option<f64> {
        let from = line.find(key)? + key.len();
        let digits: String = line[from..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        digits.parse().ok()
    };
    let (mut total, mut loops) = (0.0, 1.0);
    for line in plan {
        if line.contains("(actual time=") {
            loops = number(line, " loops=").unwrap_or(1.0);
            total += number(line, " rows=").unwrap_or(0.0) * loops;
        } else if let Some(removed) = number(line, "Rows Removed by Filter: ") {
            total += removed * loops;
        }
    }
    total as usize
}

/// Prepares `statement` as `name` (on a connection that makes generic plans) and answers the
/// text of a query that quotes `params` bound parameters as literals, for [`run_generic`].
async fn prepare(
    conn: &mut PgConnection,
    name: &str,
    statement: &Arc<str>,
    params: usize,
) -> AssertSqlSafe<Arc<str>> {
    let prepare = format!("PREPARE {name} AS {statement}");
    sqlx::raw_sql(AssertSqlSafe(prepare))
        .execute(&mut *conn)
        .await
        .expect("prepare");
    let quoted: Vec<String> = (1..=params)
        .map(|i| format!("quote_nullable(${i})"))
        .collect();
    let text = format!("SELECT concat_ws(', ', {})", quoted.join(", "));
    AssertSqlSafe(Arc::from(text))
}

/// `EXPLAIN (ANALYZE)` of prepared statement `name` run with `literals` (from [`prepare`]'s
/// query): the generic plan, the one a pooled connection settles on after a few executions, made
/// without the parameters' values (array lengths included).
async fn run_generic(conn: &mut PgConnection, name: &str, literals: &str) -> Vec<String> {
    let explain = format!("EXPLAIN (ANALYZE) EXECUTE {name}({literals})");
    let rows = sqlx::raw_sql(AssertSqlSafe(explain))
        .fetch_all(conn)
        .await
        .expect("explain");
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn lookups_by_key_read_the_rows_asked_for_not_every_running_one() {
    let schema = TestSchema::new();
    let (backend, mut conn) = super::test_backend(&schema.name, 2).await;
    let table = format!("\"{}\".job_runs", schema.name);
    let stats = format!("ALTER TABLE {table} SET (autovacuum_enabled = false); ANALYZE {table};");
    sqlx::raw_sql(AssertSqlSafe(stats))
        .execute(&mut conn)
        .await
        .expect("statistics of the empty table");

    let requests: Vec<_> = (0..RUNNING)
        .map(|j| {
            request(
                &format!("job_{j}"),
                "2026-01-05T02:00:00Z",
                Duration::from_secs(60),
            )
        })
        .collect();
    let leases: Vec<Lease> = backend
        .claim("a", &requests)
        .await
        .expect("claim")
        .into_iter()
        .filter_map(|c| match c {
            Claim::Won(lease) => Some(lease),
            _ => None,
        })
        .collect();
    assert_eq!(leases.len(), RUNNING);

    let statements = &backend.inner.statements;
    let mut tx = conn.begin().await.expect("begin");
    sqlx::raw_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        .execute(&mut *tx)
        .await
        .expect("generic plans");
    let claim = prepare(&mut tx, "sg_claim", &statements.claim, 17).await;
    let finish = prepare(&mut tx, "sg_finish_many", &statements.finish_many, 11).await;
    // A second look at slots another replica runs: `CLAIM`'s `stale` looks each one up.
    let asked = &requests[..ASKED];
    let args = ClaimArgs::new(asked);
    let literals: String = args
        .query(claim, "b", false)
        .fetch_one(&mut *tx)
        .await
        .expect("quote")
        .get(0);
    let plan = run_generic(&mut tx, "sg_claim", &literals).await;
    let claimed = work(&plan);
    // The runs end together: one `FINISH_MANY`.
    let finishes: Vec<(Lease, Finish)> = leases[..ASKED]
        .iter()
        .map(|l| (l.clone(), Finish::succeeded()))
        .collect();
    let args = FinishArgs::new(&finishes);
    let literals: String = args
        .query(finish, "a")
        .fetch_one(&mut *tx)
        .await
        .expect("quote");
    let plan = run_generic(&mut tx, "sg_finish_many", &literals).await;
    let finished = work(&plan);
    tx.rollback().await.expect("rollback");
    backend.close().await;

    let bound = WORK_PER_ROW * ASKED;
    assert!(
        claimed <= bound,
        "claim: {claimed} rows of work for {ASKED} slots"
    );
    assert!(
        finished <= bound,
        "finish: {finished} rows of work for {ASKED} runs:\n{}",
        plan.join("\n")
    );
}
