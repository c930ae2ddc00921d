//! The floor: the least SQL a correct queue needs for the drain's work, as bare statements, on the
//! drain's own tables and rows. slotguard's drain is reported as a fraction of it (issue 25).
//!
//! Set-up as the drain's: a fresh schema migrated by a `PgBackend` (so `job_runs` and
//! `job_run_attempts` carry every index slotguard's do: eleven on `job_runs`, five of them
//! partial, two on `job_run_attempts`), `N` slots of `drain` queued with `enqueue_slots` in batches
//! of 1,000, then `ANALYZE`. Then [`WORKERS`] connections (not processes) each loop, in autocommit:
//! [`CLAIM`] takes up to [`ROOM`] pending due rows, oldest slot first, with `FOR UPDATE SKIP
//! LOCKED`, sets them `running` with owner, attempt + 1, a new fencing token, heartbeat and start,
//! and inserts their attempt rows, in one statement; [`FINISH`] then records them `succeeded`
//! (run rows and attempt rows, under the token), in one statement. A connection stops when a claim
//! finds nothing. The bodies are empty, as the drain's.
//!
//! What the floor leaves out, compared with slotguard's `CLAIM_DUE` (`backends/postgres/src/sql/
//! due.rs`) and `FINISH_MANY` (`sql/finish.rs`), and around them:
//!
//! - **No recovery.** `CLAIM_DUE` also reads, on every call, the abandoned runs due again (a range
//!   of `job_runs_due_idx`) and the `running` runs with a stale heartbeat (`stale_or_abandoned`),
//!   buries those past `max_attempts` (`exhausted`, `dead`, `dead_attempts`), closes a re-claimed
//!   stale run's previous attempt (`abandon`) and, for jobs that are not `allow`, abandons other
//!   stale runs of the same job and partition (`fenced`, `fenced_attempts`). The floor claims
//!   `pending` rows only: a run whose worker dies stays `running` for good.
//! - **No overlap policy.** `CLAIM_DUE` decides per job (`spec`, from arrays) whether a run is due
//!   while another of its job and partition runs (`NOT EXISTS` on `job_runs_running_job_idx`),
//!   claims buffered slots (`pending` with no `next_attempt_at`), takes only the oldest due run of
//!   each job and partition (`first_due`), and re-checks the whole due condition on the row
//!   version it locks. The floor takes any pending due row.
//! - **No limits, no window.** No per-call or cluster-wide limit per job (`running`, `passing`,
//!   `capped`). `eligible` reads up to `4 × (4 × 16 + 64)` = 512 of the job's oldest active rows
//!   (running ones included) through `job_runs_active_idx`, keeps the first 128 that are due,
//!   numbers them per job and partition and per job (two window functions), and `due` looks them
//!   up again by id to lock 16. The floor reads the same index, in the same order, and stops at
//!   the first 16 pending rows it can lock. So does `CLAIM_DUE_FREE`, which the backend runs
//!   instead of `CLAIM_DUE` when every job of the call is at overlap `allow` without a cluster-wide
//!   limit (it still checks every due condition and recovers): the floor's loop below claims the
//!   `drain` job alone, so it runs `CLAIM_DUE_FREE`; the drain's workers also carry the lag
//!   scenario's jobs, at overlap `skip`, so their claims run `CLAIM_DUE`.
//! - **Fewer columns.** The floor's claim leaves `finished_at`, `next_attempt_at` and `updated_at`
//!   as they are and answers the run's id, attempt, token and slot (six columns, against fourteen);
//!   its finish checks id, token and status (slotguard's also checks owner, job, instant and
//!   partition, on the run and the token on the attempt) and writes `status` and `finished_at`
//!   (slotguard's also error class, message, `next_attempt_at` and `updated_at`).
//! - **Nothing else.** No `NOTIFY`/`LISTEN` (nothing is queued during the drain anyway), no
//!   `next_due` read between rounds, no heartbeats, no pool, no runtime: one connection claims 16,
//!   finishes 16, and claims again. slotguard's workers claim again once half their room is free
//!   (so about 8 at a time after the first 16) and send outcomes as they end, batched by what
//!   ended together.
//!
//! What it keeps, so that it is still a correct queue: each row claimed once (`SKIP LOCKED`), a
//! fencing token per attempt from the schema's sequence, an attempt row per attempt, a finish that
//! only the token's holder can write, and the same rows and indexes as the drain's. Both update a
//! run row twice (claim, finish) and no such update can be HOT (each changes `status`, which three
//! indexes hold and every partial index's predicate reads), so each writes its new version into
//! every index whose predicate it meets: 9 of the eleven for the claim (the six full indexes, the
//! two of `running` rows and the active one), 7 for the finish (the six full ones and the finished
//! one). The bench reads the server's counters around each side to show it.
//!
//! Between the two, the same loop runs slotguard's own statements ([`store_calls`]): 4 tasks of one
//! process, each calling the store's `claim_due` for 16 and `finish` of what it got, through a
//! `PgBackend` with a pool of 4, on a third schema queued the same way. It splits the gap in two:
//! what `CLAIM_DUE` and `FINISH_MANY` cost over the floor's two statements, and what the worker
//! processes add around them (smaller claims and finishes, `next_due`, the runtime).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

use slotguard::Overlap;
use slotguard::store::{DueSpec, Finish, QueueStore, SlotStore};
use slotguard_postgres::PgBackend;

use super::{ROOM, WORKERS, analyze, connect, count, queue_past_slots, scalar_f64};

/// Claims up to [`ROOM`] pending due runs of job `$2` for owner `$1`, oldest slot first, and opens
/// their attempts: one statement. The head of the queue is read through `job_runs_active_idx`
/// (`job_name, scheduled_at, partition_key`, active rows only), as slotguard's claim reads it,
/// with the job named by a range as slotguard's statements name it (`HEAD_OF_QUEUE` in the
/// backend's `sql/due.rs`): written `job_name = $2 ... ORDER BY scheduled_at`, its generic plan
/// walked `job_runs_scheduled_idx` past every finished run once migration 18 widened the index
/// (8.5 ms a claim instead of 2.5); the job is named in the index's "C" collation (migration 19)
/// for the same reason. `SKIP LOCKED` lets concurrent claimers take disjoint rows
/// without waiting.
const CLAIM: &str = r#"
WITH due AS (
    SELECT id
    FROM {schema}.job_runs
    WHERE job_name COLLATE "C" >= $2 AND job_name COLLATE "C" <= $2
      AND status = 'pending' AND next_attempt_at <= statement_timestamp()
    ORDER BY job_name COLLATE "C", scheduled_at
    LIMIT {room}
    FOR UPDATE SKIP LOCKED
),
upd AS (
    UPDATE {schema}.job_runs j
    SET status = 'running',
        attempt = j.attempt + 1,
        owner = $1,
        fencing_token = nextval('{schema}.fencing_tokens'),
        heartbeat_at = statement_timestamp(),
        started_at = statement_timestamp()
    FROM due
    WHERE j.id = due.id
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key
),
attempts AS (
    INSERT INTO {schema}.job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
    SELECT id, attempt, $1, fencing_token, 'running', statement_timestamp()
    FROM upd
)
SELECT id, attempt, fencing_token, job_name, scheduled_at, partition_key FROM upd
"#;

/// Records runs `$1` with tokens `$2` `succeeded`, run rows and attempt rows, only while the token
/// still holds the run: one statement. Attempt rows are found by `(run_id, attempt)`, their unique
/// index.
const FINISH: &str = r#"
WITH run AS (
    UPDATE {schema}.job_runs r
    SET status = 'succeeded', finished_at = statement_timestamp()
    FROM unnest($1::bigint[], $2::bigint[]) AS i(id, token)
    WHERE r.id = i.id AND r.fencing_token = i.token AND r.status = 'running'
    RETURNING r.id, r.attempt
)
UPDATE {schema}.job_run_attempts a
SET status = 'succeeded', finished_at = statement_timestamp()
FROM run
WHERE a.run_id = run.id AND a.attempt = run.attempt
"#;

/// The floor's drain of `n` queued slots; prints its line.
pub(crate) async fn floor(n: usize) -> Drained {
    let schema = TestSchema::with_prefix("sg_bench_floor");
    let (backend, mut conn) = connect(&schema).await;
    queue_past_slots(&backend, n).await;
    analyze(&mut conn, &format!("\"{}\".job_runs", schema.name)).await;
    backend.close().await;
    let before = settled(&mut conn, &schema.name, n as i64, 0, 0).await;

    let quoted = format!("\"{}\"", schema.name);
    let claim: Arc<str> = CLAIM
        .replace("{schema}", &quoted)
        .replace("{room}", &ROOM.to_string())
        .into();
    let finish: Arc<str> = FINISH.replace("{schema}", &quoted).into();
    // As slotguard's pool: no JIT (its claim's estimated cost passes `jit_above_cost`).
    let options = database_url()
        .parse::<PgConnectOptions>()
        .expect("database url")
        .application_name("slotguard bench floor")
        .options([("jit", "off")]);
    let mut conns = Vec::with_capacity(WORKERS);
    for _ in 0..WORKERS {
        conns.push(PgConnection::connect_with(&options).await.expect("connect"));
    }
    let (cpu, wall) = (cpu_seconds().0, Instant::now());
    let loops: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, conn)| {
            tokio::spawn(work(
                conn,
                Arc::clone(&claim),
                Arc::clone(&finish),
                format!("floor-{i}"),
            ))
        })
        .collect();
    let (mut conns, mut timings) = (Vec::with_capacity(WORKERS), Timings::default());
    for handle in loops {
        let (conn, timed) = handle.await.expect("a floor connection");
        conns.push(conn);
        timings.merge(timed);
    }
    let (cpu, wall) = (cpu_seconds().0 - cpu, wall.elapsed());
    for conn in conns {
        let _ = conn.close().await;
    }

    let drained = figures(&mut conn, &schema.name, wall, cpu, before, n as i64).await;
    ran_once(&mut conn, &schema.name, &drained, n).await;
    drained.report(
        &format!("floor: bare SQL, {WORKERS} connections each claiming {ROOM} then finishing them"),
        "floor",
        &timings.medians(),
    );
    drained
}

/// One connection's loop: claim up to [`ROOM`], finish them, until a claim finds nothing.
async fn work(
    mut conn: PgConnection,
    claim: Arc<str>,
    finish: Arc<str>,
    owner: String,
) -> (PgConnection, Timings) {
    let mut timings = Timings::default();
    loop {
        type Claimed = (i64, i32, i64, String, DateTime<Utc>, String);
        let t = Instant::now();
        let claimed: Vec<Claimed> = sqlx::query_as(AssertSqlSafe(Arc::clone(&claim)))
            .bind(&owner)
            .bind("drain")
            .fetch_all(&mut conn)
            .await
            .expect("claim");
        timings.claims.push(t.elapsed());
        if claimed.is_empty() {
            return (conn, timings);
        }
        let ids: Vec<i64> = claimed.iter().map(|c| c.0).collect();
        let tokens: Vec<i64> = claimed.iter().map(|c| c.2).collect();
        let t = Instant::now();
        let finished = sqlx::query(AssertSqlSafe(Arc::clone(&finish)))
            .bind(&ids)
            .bind(&tokens)
            .execute(&mut conn)
            .await
            .expect("finish");
        timings.finishes.push(t.elapsed());
        assert_eq!(finished.rows_affected(), ids.len() as u64, "finished");
    }
}

/// The floor's loop with slotguard's statements: `claim_due` of [`ROOM`] and `finish` of what it
/// got, from [`WORKERS`] tasks sharing a `PgBackend` with a pool of [`WORKERS`] connections;
/// prints its line.
pub(crate) async fn store_calls(n: usize) -> Drained {
    let schema = TestSchema::with_prefix("sg_bench_calls");
    let (backend, mut conn) = connect(&schema).await;
    queue_past_slots(&backend, n).await;
    analyze(&mut conn, &format!("\"{}\".job_runs", schema.name)).await;
    backend.close().await;
    let before = settled(&mut conn, &schema.name, n as i64, 0, 0).await;
    let backend = PgBackend::builder(&database_url())
        .schema(&schema.name)
        .pool_size(WORKERS as u32)
        .connect()
        .await
        .expect("connect");
    // Open the pool's connections (each raises the token floor) before the clock starts: reads
    // made at once, each on a connection of its own.
    let specs = [DueSpec::new("drain", 3).with_overlap(Overlap::Allow)];
    let warm: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (backend, specs) = (backend.clone(), specs.clone());
            tokio::spawn(async move { backend.next_due(&specs).await.expect("next due") })
        })
        .collect();
    for read in warm {
        read.await.expect("a read");
    }
    let (cpu, wall) = (cpu_seconds().0, Instant::now());
    let loops: Vec<_> = (0..WORKERS)
        .map(|i| tokio::spawn(calls(backend.clone(), format!("calls-{i}"))))
        .collect();
    let mut timings = Timings::default();
    for handle in loops {
        timings.merge(handle.await.expect("a task"));
    }
    let (cpu, wall) = (cpu_seconds().0 - cpu, wall.elapsed());
    backend.close().await;
    let drained = figures(&mut conn, &schema.name, wall, cpu, before, n as i64).await;
    ran_once(&mut conn, &schema.name, &drained, n).await;
    drained.report(
        &format!(
            "floor loop, slotguard's statements: {WORKERS} tasks each calling claim_due({ROOM}) then finish"
        ),
        "calls",
        &timings.medians(),
    );
    drained
}

/// One task's loop over the store: claim up to [`ROOM`], finish them, until a claim finds nothing.
async fn calls(backend: PgBackend, owner: String) -> Timings {
    let specs = [DueSpec::new("drain", 3).with_overlap(Overlap::Allow)];
    let mut timings = Timings::default();
    loop {
        let t = Instant::now();
        let claimed = backend
            .claim_due(&owner, &specs, ROOM)
            .await
            .expect("claim_due");
        timings.claims.push(t.elapsed());
        if claimed.is_empty() {
            return timings;
        }
        let done: Vec<_> = claimed
            .into_iter()
            .map(|c| (c.lease, Finish::succeeded()))
            .collect();
        let t = Instant::now();
        let accepted = backend.finish(&owner, &done).await.expect("finish");
        timings.finishes.push(t.elapsed());
        assert!(accepted.iter().all(|a| *a), "finished");
    }
}

/// A correct queue's drain: every slot ran once, as attempt 1, under a token of its own.
async fn ran_once(conn: &mut PgConnection, schema: &str, drained: &Drained, n: usize) {
    let attempts = scalar_f64(
        conn,
        format!(
            "SELECT count(DISTINCT (run_id, fencing_token))::float8 FROM \"{schema}\".job_run_attempts
             WHERE attempt = 1 AND status = 'succeeded'"
        ),
    )
    .await as i64;
    assert_eq!(
        (drained.runs, attempts),
        (n as i64, n as i64),
        "every slot ran once"
    );
}

/// One drain's figures, the floor's or slotguard's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drained {
    /// Runs that succeeded.
    pub(crate) runs: i64,
    /// From starting the connections' loops (floor) or spawning the workers (slotguard) to the last
    /// success, on this process's clock.
    pub(crate) wall: Duration,
    /// From the first attempt's start to the last finish, seconds, on the database's clock.
    pub(crate) span: f64,
    /// Claim and finish statements that wrote a run: each writes one `statement_timestamp()` into
    /// `started_at` or `finished_at` of all its rows, so these are the distinct values.
    pub(crate) claims: i64,
    pub(crate) finishes: i64,
    /// What the server counted on the two tables during the drain.
    pub(crate) runs_table: Writes,
    pub(crate) attempts_table: Writes,
    /// CPU time of the client side, seconds: this process for the floor's connections and the
    /// store calls, the worker processes for slotguard's drain (the machine's cores are shared with
    /// the server).
    pub(crate) client_cpu: f64,
}

impl Drained {
    /// Runs a second from the first start to the last finish.
    pub(crate) fn rate(&self) -> f64 {
        self.runs as f64 / self.span
    }

    /// Runs a second on this process's clock.
    pub(crate) fn wall_rate(&self) -> f64 {
        self.runs as f64 / self.wall.as_secs_f64()
    }

    /// The statements and the writes per run, for the bench's output.
    /// Prints the rates under `what`, then the statements' medians and the writes, each line
    /// under `tag`.
    fn report(&self, what: &str, tag: &str, medians: &str) {
        println!(
            "{what}: {} runs, {:.0}/s from the first start to the last finish ({:.2} s), {:.0}/s \
             from starting the loops ({:.2} s)\n  {tag}: {medians}\n  {tag}: {}",
            self.runs,
            self.rate(),
            self.span,
            self.wall_rate(),
            self.wall.as_secs_f64(),
            self.writes()
        );
    }

    pub(crate) fn writes(&self) -> String {
        let n = self.runs.max(1) as f64;
        let (r, a) = (&self.runs_table, &self.attempts_table);
        format!(
            "{:.1} runs a claim statement, {:.1} a finish statement; client CPU {:.2} s ({:.0} us a \
             run); job_runs ({} indexes): {:.2} updates a run, {:.1} % HOT, indexes +{:.0} bytes a run; \
             job_run_attempts ({} indexes): {:.2} inserts and {:.2} updates a run, {:.1} % HOT, indexes \
             +{:.0} bytes a run",
            n / self.claims.max(1) as f64,
            n / self.finishes.max(1) as f64,
            self.client_cpu,
            self.client_cpu * 1e6 / n,
            r.indexes,
            r.upd as f64 / n,
            r.hot_share(),
            r.index_bytes as f64 / n,
            a.indexes,
            a.ins as f64 / n,
            a.upd as f64 / n,
            a.hot_share(),
            a.index_bytes as f64 / n,
        )
    }
}

/// User + system CPU time, seconds, of this process and of its children that were waited for
/// (`/proc/self/stat`, clock ticks of 1/100 s; 0 elsewhere than Linux).
pub(crate) fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = |i: usize, j: usize| {
        (fields.get(i).copied().unwrap_or(0) + fields.get(j).copied().unwrap_or(0)) as f64 / 100.0
    };
    (ticks(12, 13), ticks(14, 15))
}

/// Each claim's and each finish's time as one connection saw it (round trip included).
#[derive(Debug, Default)]
struct Timings {
    claims: Vec<Duration>,
    finishes: Vec<Duration>,
}

impl Timings {
    fn merge(&mut self, other: Timings) {
        self.claims.extend(other.claims);
        self.finishes.extend(other.finishes);
    }

    /// Medians, for the bench's output.
    fn medians(mut self) -> String {
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v.get(v.len() / 2)
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
        };
        format!(
            "claim {:.2} ms, finish {:.2} ms (medians of {} and {}, round trip included)",
            median(&mut self.claims),
            median(&mut self.finishes),
            self.claims.len(),
            self.finishes.len()
        )
    }
}

/// The server's counters of one table (`pg_stat_user_tables`) and its indexes' size; as a
/// difference, what happened between two reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Writes {
    ins: i64,
    upd: i64,
    hot: i64,
    index_bytes: i64,
    indexes: i64,
}

impl Writes {
    fn hot_share(&self) -> f64 {
        if self.upd == 0 {
            0.0
        } else {
            self.hot as f64 * 100.0 / self.upd as f64
        }
    }

    fn since(self, before: Writes) -> Writes {
        Writes {
            ins: self.ins - before.ins,
            upd: self.upd - before.upd,
            hot: self.hot - before.hot,
            index_bytes: self.index_bytes - before.index_bytes,
            indexes: self.indexes,
        }
    }
}

/// The counters of `job_runs` and `job_run_attempts` in `schema`, once they show `runs_ins` rows
/// inserted into `job_runs`, `runs_upd` updates of it and `attempts_ins` attempt rows (or 10 s
/// passed), and a second later: a backend sends its counts to the server's statistics at most once
/// a second, and when it exits.
pub(crate) async fn settled(
    conn: &mut PgConnection,
    schema: &str,
    runs_ins: i64,
    runs_upd: i64,
    attempts_ins: i64,
) -> (Writes, Writes) {
    let started = Instant::now();
    loop {
        let (runs, attempts) = writes(conn, schema).await;
        let seen = runs.ins >= runs_ins && runs.upd >= runs_upd && attempts.ins >= attempts_ins;
        if seen || started.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    writes(conn, schema).await
}

async fn writes(conn: &mut PgConnection, schema: &str) -> (Writes, Writes) {
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *conn)
        .await
        .expect("clear the statistics snapshot");
    let rows: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT t.relname::text, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd,
                (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid),
                (SELECT COALESCE(sum(pg_relation_size(i.indexrelid)), 0)::bigint
                 FROM pg_index i WHERE i.indrelid = t.relid)
         FROM pg_stat_user_tables t
         WHERE t.schemaname = $1 AND t.relname IN ('job_runs', 'job_run_attempts')",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await
    .expect("table statistics");
    let of = |table: &str| {
        rows.iter()
            .find(|r| r.0 == table)
            .map(|r| Writes {
                ins: r.1,
                upd: r.2,
                hot: r.3,
                indexes: r.4,
                index_bytes: r.5,
            })
            .unwrap_or_default()
    };
    (of("job_runs"), of("job_run_attempts"))
}

/// Statements and counters common to both sides, read once the drain is over: how many claim and
/// finish statements wrote runs, and the span from the first start to the last finish.
pub(crate) async fn figures(
    conn: &mut PgConnection,
    schema: &str,
    wall: Duration,
    client_cpu: f64,
    before: (Writes, Writes),
    n: i64,
) -> Drained {
    let after = settled(conn, schema, n, before.0.upd + 2 * n, before.1.ins + n).await;
    let span = scalar_f64(
        conn,
        format!(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM \"{schema}\".job_runs"
        ),
    )
    .await;
    let distinct = |column: &str| {
        format!(
            "SELECT count(DISTINCT {column})::float8 FROM \"{schema}\".job_runs WHERE status = 'succeeded'"
        )
    };
    let claims = scalar_f64(conn, distinct("started_at")).await as i64;
    let finishes = scalar_f64(conn, distinct("finished_at")).await as i64;
    Drained {
        runs: count(conn, schema, "status = 'succeeded'").await,
        wall,
        span,
        claims,
        finishes,
        runs_table: after.0.since(before.0),
        attempts_table: after.1.since(before.1),
        client_cpu,
    }
}
