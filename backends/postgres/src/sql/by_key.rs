//! A storm's claims and finishes read about as many rows as they were asked about, plus a walk or
//! two of the running runs, never a walk per row: checked with 10,000 runs `running` at one instant
//! and statistics that expect none, as they are when a storm starts, on the generic plans a pooled
//! connection settles on, made in the storm (a new install) or the day before and kept. The work is
//! counted from `EXPLAIN ANALYZE` (the rows every plan node produced or filtered out, times its
//! loops), in a transaction that is rolled back; nothing is timed.
//!
//! What it guards (each shown failing, with the day before's plans): the overlap check and the
//! second look walking every running run through a status-led index (`job_runs_status_scheduled_idx`
//! before migration 20: 3,000,000 rows for 300 slots) or the heartbeat index (dropped by migration
//! 20: 720,000 to 3,000,000), and `replaced`'s join driven from every running run although nothing
//! was decided `replace` (143,000); with a new install's plans, `FINISH_MANY` reading its input
//! once per running run unless its status test is `running!` (100,000). With them, 600 for the
//! finish and, for a claim, 3,761 (a new install's plans) or 23,153 (the day before's: `fenced`
//! and `upd` each start from every running run once).

use std::sync::Arc;
use std::time::Duration;

use slotguard::Overlap;
use slotguard::store::{ClaimRequest, Finish, Lease, SlotStore};
use slotguard_tests::pg::TestSchema;
use sqlx::{AssertSqlSafe, Connection as _, PgConnection, Row as _};

use crate::claims::ClaimArgs;
use crate::finishes::FinishArgs;

/// Runs `running` at one instant.
const RUNNING: usize = 10_000;
/// Rows each checked statement is asked about.
const ASKED: usize = 300;
/// Rows of plan work allowed per asked row (the good plans do about 10; the bad ones, `RUNNING`).
const WORK_PER_ROW: usize = 60;
/// Walks of every running run allowed per statement (a join that reads them once, not per row).
const WALKS: usize = 3;

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
) -> Arc<str> {
    let prepare = format!("PREPARE {name} AS {statement}");
    sqlx::raw_sql(AssertSqlSafe(prepare))
        .execute(&mut *conn)
        .await
        .expect("prepare");
    let quoted: Vec<String> = (1..=params)
        .map(|i| format!("quote_nullable(${i})"))
        .collect();
    Arc::from(format!("SELECT concat_ws(', ', {})", quoted.join(", ")))
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

/// The work of `CLAIM`'s generic plan (prepared as `sg_claim`, quoted by `quote`) for `requests`
/// of `owner`.
async fn claim_work(
    conn: &mut PgConnection,
    quote: &Arc<str>,
    requests: &[ClaimRequest],
    owner: &str,
) -> usize {
    let args = ClaimArgs::new(requests);
    let literals: String = args
        .query(AssertSqlSafe(Arc::clone(quote)), owner, false)
        .fetch_one(&mut *conn)
        .await
        .expect("quote")
        .get(0);
    work(&run_generic(conn, "sg_claim", &literals).await)
}

/// `RUNNING` slots at `at` claimed by owner `a` of `backend`: their requests and leases.
async fn storm(backend: &crate::PgBackend, at: &str) -> (Vec<ClaimRequest>, Vec<Lease>) {
    let requests: Vec<_> = (0..RUNNING).map(|j| request(j, at)).collect();
    let claims = backend.claim("a", &requests).await.expect("claim");
    // Every slot is won: `won` panics, naming the answer, on any other.
    let leases = claims.iter().map(slotguard_tests::won).collect();
    (requests, leases)
}

/// A request for `job_{job}`'s slot at `at`, under `skip`.
fn request(job: usize, at: &str) -> ClaimRequest {
    let request = slotguard_tests::request(&format!("job_{job}"), at, Duration::from_secs(60));
    slotguard_tests::with_overlap(request, Overlap::Skip)
}

/// Each run of `leases` succeeded.
fn succeeded(leases: &[Lease]) -> Vec<(Lease, Finish)> {
    leases
        .iter()
        .map(|l| (l.clone(), Finish::succeeded()))
        .collect()
}

/// The work of `FINISH_MANY`'s generic plan (prepared as `sg_finish_many`, quoted by `quote`) for
/// `finishes` of owner `a`.
async fn finish_work(
    conn: &mut PgConnection,
    quote: &Arc<str>,
    finishes: &[(Lease, Finish)],
) -> usize {
    let args = FinishArgs::new(finishes);
    let literals: String = args
        .query(AssertSqlSafe(Arc::clone(quote)), "a")
        .fetch_one(&mut *conn)
        .await
        .expect("quote");
    work(&run_generic(conn, "sg_finish_many", &literals).await)
}

/// When the statistics and the plans were made, before the storm.
#[derive(Clone, Copy, PartialEq)]
enum Before {
    /// A new install: statistics of the empty table; the plans made in the storm.
    Nothing,
    /// Yesterday's storm, finished: statistics that know the table and no running run; the
    /// plans made before today's storm and kept, as a pooled connection keeps them.
    Yesterday,
}

/// The work of a second look at `ASKED` slots of a storm, of the next slots of their jobs while
/// the storm's runs go on, and of their finish, with statistics and plans from `before`.
async fn storm_work(before: Before) -> [(&'static str, usize); 3] {
    let schema = TestSchema::new();
    let (backend, mut conn) = super::test_backend(&schema.name, 2).await;
    let history = if before == Before::Yesterday {
        let (_, leases) = storm(&backend, "2026-01-04T02:00:00Z").await;
        let finishes = succeeded(&leases);
        backend.finish("a", &finishes).await.expect("finish");
        finishes
    } else {
        Vec::new()
    };
    let table = format!("\"{}\".job_runs", schema.name);
    let setup = format!(
        "ALTER TABLE {table} SET (autovacuum_enabled = false); ANALYZE {table}; \
         SET plan_cache_mode = force_generic_plan;"
    );
    sqlx::raw_sql(AssertSqlSafe(setup))
        .execute(&mut conn)
        .await
        .expect("statistics");
    let statements = &backend.inner.statements;
    let claim = prepare(&mut conn, "sg_claim", &statements.claim, 17).await;
    let finish = prepare(&mut conn, "sg_finish_many", &statements.finish_many, 11).await;
    if before == Before::Yesterday {
        let mut tx = conn.begin().await.expect("begin");
        claim_work(&mut tx, &claim, &[request(0, "2026-01-05T01:00:00Z")], "b").await;
        finish_work(&mut tx, &finish, &history[..1]).await;
        tx.rollback().await.expect("rollback");
    }

    let (requests, leases) = storm(&backend, "2026-01-05T02:00:00Z").await;
    let mut tx = conn.begin().await.expect("begin");
    // A second look at slots another replica runs: `CLAIM`'s `stale` looks each one up.
    let looked = claim_work(&mut tx, &claim, &requests[..ASKED], "b").await;
    // The next slot of the same jobs while these run: `decided` asks, per slot, whether a run of
    // its job is going.
    let next: Vec<_> = (0..ASKED)
        .map(|j| request(j, "2026-01-05T02:01:00Z"))
        .collect();
    let decided = claim_work(&mut tx, &claim, &next, "b").await;
    // The runs end together: one `FINISH_MANY`.
    let finished = finish_work(&mut tx, &finish, &succeeded(&leases[..ASKED])).await;
    tx.rollback().await.expect("rollback");
    backend.close().await;
    [
        ("second look", looked),
        ("next slots", decided),
        ("finish", finished),
    ]
}

/// Rows asked about, and a few walks of the running runs per statement (not one per row).
fn assert_bounded(work: [(&str, usize); 3]) {
    let bound = WORK_PER_ROW * ASKED + WALKS * RUNNING;
    for (what, rows) in work {
        assert!(
            rows <= bound,
            "{what}: {rows} rows of work for {ASKED} rows asked about"
        );
    }
}

#[tokio::test]
async fn on_a_new_install_a_storms_statements_read_the_rows_asked_for() {
    assert_bounded(storm_work(Before::Nothing).await);
}

#[tokio::test]
async fn with_yesterdays_plans_a_storms_statements_read_the_rows_asked_for() {
    assert_bounded(storm_work(Before::Yesterday).await);
}
