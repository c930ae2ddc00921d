//! Every statement the backend runs, with `{schema}` standing for the library's schema.
//!
//! The schema is the only thing spliced into SQL text, once, at connect time, after validation
//! (lower-case letters, digits and `_`) and quoting. Every value — job names included — is a bound
//! parameter.

use std::sync::Arc;

use sqlx::AssertSqlSafe;

/// Takes the transaction-level claim lock of each job in `$1`, in the order of their keys (so two
/// claimers of overlapping sets of jobs never wait on each other in a cycle). The keys live in the
/// two-`int4` advisory space (class `0x736c6f74`, "slot"), apart from the session locks of the
/// `lock` layer, which use `bigint` keys: a claim never waits for a job's running body.
pub(crate) const LOCK_JOBS: &str = "
SELECT count(pg_advisory_xact_lock(1936486260, k))
FROM (SELECT DISTINCT hashtext(j) AS k FROM unnest($1::text[]) AS u(j) ORDER BY k) AS keys
";

/// Claims a batch of slots in one statement.
///
/// Parameters: `$1` owner, then one array per request field, all of the batch's length: `$2` job
/// names, `$3` slot instants, `$4` partition keys, `$5` triggers, `$6` zones, `$7` wall times, `$8`
/// business dates, `$9` fingerprints, `$10` stale-after in microseconds, `$11` overlap policies,
/// `$12` how far ahead of `now()` a scheduled slot may be, in microseconds, `$13` whether to
/// enqueue instead of claim (`SlotStore::enqueue_slots`).
///
/// With `$13` (a scheduler enqueueing for workers), everything below is decided the same way, except
/// that a slot decided `claim` or `replace` is inserted `pending` (attempt 0, no owner, no attempt
/// row) with `next_attempt_at` at its own instant, answered `queued`, nothing is fenced, and an
/// existing stale row is not re-claimed: a worker's `CLAIM_DUE` does all of that when it runs it.
///
/// How it stays exclusive with any number of claimers:
/// - `req` marks `not_due` the scheduled slots more than `$12` ahead of the database clock (their
///   claimer's clock is wrong), and `first` leaves them out. Nothing is written for them and the answer says `not_due`.
/// - `req` draws one fencing token per request, in request order (so a batch's tokens rise in its
///   order), and `first` keeps one request per slot (a slot twice in a batch is won at most once).
/// - `decided` applies the overlap policy to each request: unless it is `allow`, a request whose job
///   and partition has another run `running` with a fresh heartbeat (database clock, statement
///   snapshot) is decided by its policy (`skip`, `buffer_one`, `replace`); any other is `claim`.
///   The decision only matters for a new slot: an existing row is never changed by it.
/// - `ins` inserts every slot: `running` (attempt 1, the request's token) when decided `claim` or
///   `replace`, `skipped` for `skip`, `pending` with no `next_attempt_at` for `buffer_one` (attempt
///   0, no owner; they take the request's token only because the column is unique and not null). A
///   slot whose row exists is left alone (`DO NOTHING`: no row lock, no new row version). When two
///   claimers insert the same new slot, the second waits for the first to commit and then does
///   nothing. Rows are inserted in slot-key order, so two claimers with overlapping batches wait on
///   each other in one direction only and cannot deadlock.
/// - `superseded` (for a slot inserted `pending`) marks the other waiting slots of its job and
///   partition `skipped`: at most one waits. `replaced` (for a slot inserted by `replace`) marks the
///   job and partition's `running` runs `abandoned` with no `next_attempt_at`, so that neither
///   `claim_due` nor their holders' heartbeats and fenced writes touch them again;
///   `replaced_attempts` closes their attempts. Neither sees the rows `ins` inserted (one snapshot).
/// - `fenced` (for a new slot inserted `running` under `skip` or `buffer_one`) marks the other runs
///   of its job and partition that are `running` with an expired heartbeat `abandoned`, due again
///   at once: their holders are frozen or dead, and their heartbeats and fenced writes are refused
///   from now on; `fenced_attempts` closes their attempts. `claim_due` hands them out again once
///   no run of the job and partition is running.
/// - `stale` finds existing rows that are `running` with an expired heartbeat (database clock) and
///   locks them `FOR UPDATE SKIP LOCKED`: of two claimers racing for one abandoned row, one locks
///   it and the other skips it (`Taken`); a claimer that comes after the winner committed re-reads
///   the row, finds its fresh heartbeat and skips it too. Claims therefore never wait on row locks
///   (except `replaced`, which waits for a concurrent writer of a running row to commit).
/// - `upd` re-claims the locked rows: new owner, the request's token, attempt + 1. Its WHERE
///   repeats the staleness test and demands a higher token, as a second line of defence.
/// - `abandon` closes the previous attempt of each re-claimed run; `attempts` opens an attempt row
///   for every win.
/// - The final SELECT answers per request, in order. A request that inserted a `running` row or
///   re-claimed a stale one carries its lease; one that inserted a `skipped` or `pending` row
///   carries that status. One that lost carries the row's status as of the statement's snapshot; a
///   row that is not even in the snapshot was inserted by a concurrent claim (NULL here: reported
///   `running`, the common case).
///
/// The overlap check reads the statement's snapshot: two claimers claiming *different* new slots of
/// one job and partition at the same instant would not see each other's uncommitted rows. So the
/// backend runs `CLAIM` and `CLAIM_DUE` after [`LOCK_JOBS`] in one transaction for every job whose
/// overlap is not `allow`: the second claimer of a job waits for the first to commit, and its
/// statement's snapshot, taken after the wait, sees the first one's rows.
pub(crate) const CLAIM: &str = r#"
WITH req AS (
    SELECT r.*, nextval('{schema}.fencing_tokens') AS token,
           (r.trigger_kind = 'schedule'
            AND r.scheduled_at > now() + $12 * interval '1 microsecond') AS not_due
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[], $11::text[])
         WITH ORDINALITY
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us, overlap, ord)
),
first AS (
    SELECT DISTINCT ON (job_name, scheduled_at, partition_key) *
    FROM req
    WHERE NOT not_due
    ORDER BY job_name, scheduled_at, partition_key, ord
),
decided AS (
    SELECT f.*,
           CASE
               WHEN f.overlap = 'allow' THEN 'claim'
               WHEN EXISTS (
                   SELECT 1
                   FROM {schema}.job_runs o
                   WHERE o.job_name = f.job_name
                     AND o.partition_key = f.partition_key
                     AND o.status = 'running'
                     AND o.scheduled_at <> f.scheduled_at
                     AND o.heartbeat_at + o.stale_after >= now()
               ) THEN f.overlap
               ELSE 'claim'
           END AS decision
    FROM first f
),
ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, started_at, finished_at, error_message, zone,
         wall_time, business_date, "trigger", schedule_fingerprint, next_attempt_at)
    SELECT job_name, scheduled_at, partition_key,
           CASE WHEN decision = 'skip' THEN 'skipped'
                WHEN decision = 'buffer_one' OR $13 THEN 'pending'
                ELSE 'running' END,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN 0 ELSE 1 END,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE $1 END,
           token,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE now() END,
           stale_after_us * interval '1 microsecond', now(), now(),
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE now() END,
           CASE WHEN decision = 'skip' THEN now() END,
           CASE decision
               WHEN 'skip' THEN 'overlap: a previous run is still running'
               WHEN 'buffer_one' THEN 'overlap: waiting for the running slot'
           END,
           zone, wall_time, business_date, trigger_kind, fingerprint,
           CASE WHEN $13 AND decision NOT IN ('skip', 'buffer_one') THEN scheduled_at END
    FROM decided
    ORDER BY job_name, scheduled_at, partition_key
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.job_name, j.scheduled_at, j.partition_key, j.status, j.attempt,
              j.fencing_token, j.next_attempt_at
),
superseded AS (
    UPDATE {schema}.job_runs j
    SET status = 'skipped',
        error_message = 'overlap: superseded by a newer slot',
        finished_at = now(),
        updated_at = now()
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE d.decision = 'buffer_one'
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.status = 'pending'
      AND j.next_attempt_at IS NULL
),
replaced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned',
        next_attempt_at = NULL,
        error_message = 'replaced by a newer slot',
        finished_at = now(),
        updated_at = now()
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE d.decision = 'replace'
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.status = 'running'
    RETURNING j.id, j.attempt, j.fencing_token
),
replaced_attempts AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'replaced by a newer slot'
    FROM replaced r
    WHERE a.run_id = r.id AND a.attempt = r.attempt AND a.status = 'running'
),
fenced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned',
        next_attempt_at = now(),
        error_message = 'heartbeat expired',
        updated_at = now()
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE i.status = 'running'
      AND d.decision = 'claim'
      AND d.overlap IN ('skip', 'buffer_one')
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.scheduled_at <> i.scheduled_at
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < now()
    RETURNING j.id, j.attempt
),
fenced_attempts AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'heartbeat expired'
    FROM fenced f
    WHERE a.run_id = f.id AND a.attempt = f.attempt AND a.status = 'running'
),
stale AS (
    SELECT j.id, f.ord, f.token, f.stale_after_us
    FROM {schema}.job_runs j
    JOIN first f
      ON f.job_name = j.job_name
     AND f.scheduled_at = j.scheduled_at
     AND f.partition_key = j.partition_key
    WHERE j.status = 'running'
      AND j.heartbeat_at + j.stale_after < now()
      AND NOT $13
    FOR UPDATE OF j SKIP LOCKED
),
upd AS (
    UPDATE {schema}.job_runs j
    SET attempt = j.attempt + 1,
        owner = $1,
        fencing_token = s.token,
        heartbeat_at = now(),
        stale_after = s.stale_after_us * interval '1 microsecond',
        started_at = now(),
        finished_at = NULL,
        updated_at = now(),
        next_attempt_at = NULL
    FROM stale s
    WHERE j.id = s.id
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < now()
      AND j.fencing_token < s.token
    RETURNING j.id, j.attempt, j.fencing_token, s.ord
),
abandon AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'heartbeat expired'
    FROM upd u
    WHERE a.run_id = u.id AND a.attempt = u.attempt - 1 AND a.status = 'running'
),
attempts AS (
    INSERT INTO {schema}.job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
    SELECT id, attempt, $1, fencing_token, 'running', now() FROM ins WHERE status = 'running'
    UNION ALL
    SELECT id, attempt, $1, fencing_token, 'running', now() FROM upd
)
SELECT r.ord,
       CASE WHEN i.fencing_token = r.token AND i.status = 'running' THEN i.id ELSE u.id END
           AS run_id,
       CASE WHEN i.fencing_token = r.token AND i.status = 'running' THEN i.attempt
            ELSE u.attempt END AS attempt,
       CASE WHEN i.fencing_token = r.token AND i.status = 'running' THEN i.fencing_token
            ELSE u.fencing_token END AS token,
       COALESCE(i.status, cur.status) AS seen_status,
       r.not_due,
       COALESCE(i.fencing_token = r.token AND i.next_attempt_at IS NOT NULL, false) AS queued
FROM req r
LEFT JOIN ins i
       ON i.job_name = r.job_name
      AND i.scheduled_at = r.scheduled_at
      AND i.partition_key = r.partition_key
LEFT JOIN upd u ON u.ord = r.ord
LEFT JOIN {schema}.job_runs cur
       ON cur.job_name = r.job_name
      AND cur.scheduled_at = r.scheduled_at
      AND cur.partition_key = r.partition_key
ORDER BY r.ord
"#;

/// Whether run `j` (joined to its spec `s`) is due for another attempt: `CLAIM_DUE` selects by it
/// and re-checks it on the row version it locks. An `abandoned` run is written "pending or
/// abandoned, not pending", as in `stale_or_abandoned`, so that no plan reads it through the index
/// of finished runs.
macro_rules! due_condition {
    () => {
        r#"((j.status = 'pending' AND j.next_attempt_at <= now())
       OR (j.status = 'pending' AND j.next_attempt_at IS NULL
           AND NOT EXISTS (
               SELECT 1
               FROM {schema}.job_runs o
               WHERE o.job_name = j.job_name
                 AND o.partition_key = j.partition_key
                 AND o.id <> j.id
                 AND o.status = 'running'
                 AND o.heartbeat_at + o.stale_after >= now()
           ))
       OR (j.attempt < s.max_attempts
           AND ((j.status IN ('pending', 'abandoned') AND j.status <> 'pending'
                 AND j.next_attempt_at <= now())
                OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < now()))))"#
    };
}

/// Claims up to `$4` runs that are due for another attempt, for owner `$1`, in one statement.
///
/// Parameters: `$1` owner, `$2` job names, `$3` their `max_attempts`, `$5` their overlap policies,
/// `$6` their limits for this call and `$7` their cluster-wide limits (same length; NULL for none),
/// `$4` limit.
///
/// - `running` counts the fresh `running` runs of each job with a cluster-wide limit, and `passing`
///   numbers each job's candidates: a job gets at most `min($6, $7 - running)` runs from one call.
///   The backend serialises the claims of such a job (`LOCK_JOBS`), so the count holds across
///   concurrent claimers.
///
/// - `eligible` looks at the oldest `4 × $4 + 64` candidates only (through the index of active
///   runs, `job_runs_active_idx`): a deep queue costs a call what its head costs. A job whose runs
///   fill that window while one of them must wait gets one run this call; once it runs, its other
///   rows leave the window (they wait for it), so no job starves another for more than a call.
/// - `eligible` and `first_due`: unless a job's overlap is `allow`, a run is due only while no other
///   run of its job and partition is `running` with a fresh heartbeat, and only the oldest due run
///   of each job and partition is taken: whatever path claims it, two runs of one job and partition
///   are never running at once.
///
/// - `spec` keeps one entry per job (the first).
/// - A run is due when it is `pending` or `abandoned` with `next_attempt_at` reached, `pending`
///   with no `next_attempt_at` (buffered) while no other run of its job and partition is `running`
///   with a fresh heartbeat, or `running` with a stale heartbeat (database clock throughout).
/// - `exhausted` locks the due runs that are stale or abandoned and have had `max_attempts`
///   attempts; `dead` marks them `dead` and `dead_attempts` closes a still-running attempt.
///   They are not returned and do not count towards the limit.
/// - A `pending` run is never exhausted, whatever its attempt count: a run an operator enqueued
///   (attempt 0, no attempt row yet) becomes attempt 1, and a `dead` or `failed` run an operator
///   retried becomes attempt + 1, even past `max_attempts` (a person asked for it).
/// - `due` locks the others, oldest slot first, `LIMIT $4`, `FOR UPDATE SKIP LOCKED`: concurrent
///   callers each take rows no one else holds, never wait, and a row re-claimed and committed by
///   another caller after this statement's snapshot is re-checked on its new version (now fresh
///   `running`) and dropped. The two sets are disjoint by their conditions.
/// - `upd` makes each `running` with attempt + 1, a new token, a fresh heartbeat; `abandon` closes
///   a stale run's previous attempt (`heartbeat expired`); `attempts` opens the new attempt rows.
pub(crate) const CLAIM_DUE: &str = concat!(
    r#"
WITH spec AS (
    SELECT DISTINCT ON (job_name) job_name, max_attempts, overlap, lim, cluster
    FROM unnest($2::text[], $3::integer[], $5::text[], $6::integer[], $7::integer[])
         WITH ORDINALITY AS s(job_name, max_attempts, overlap, lim, cluster, ord)
    ORDER BY job_name, ord
),
running AS (
    SELECT o.job_name, count(*) AS n
    FROM {schema}.job_runs o
    JOIN spec s ON s.job_name = o.job_name
    WHERE s.cluster IS NOT NULL
      AND o.status = 'running'
      AND o.heartbeat_at + o.stale_after >= now()
    GROUP BY o.job_name
),
stale_or_abandoned AS MATERIALIZED (
    -- Abandoned runs due again, as a range of job_runs_due_idx: `status = 'abandoned'` would let
    -- a plan made on statistics from before any run finished read job_runs_finished_idx instead,
    -- whose few abandoned rows sit among every finished run (17,000 rows read a claim, and more
    -- with every run).
    SELECT a.id FROM {schema}.job_runs a
    WHERE a.status IN ('pending', 'abandoned')
      AND (a.status, a.next_attempt_at) > ('abandoned', '-infinity'::timestamptz)
      AND (a.status, a.next_attempt_at) <= ('abandoned', now())
      AND a.job_name IN (SELECT job_name FROM spec)
    UNION ALL
    SELECT r.id FROM {schema}.job_runs r
    WHERE r.status = 'running' AND r.heartbeat_at + r.stale_after < now()
      AND r.job_name IN (SELECT job_name FROM spec)
),
exhausted AS (
    SELECT j.id, s.max_attempts
    FROM stale_or_abandoned c
    JOIN {schema}.job_runs j ON j.id = c.id
    JOIN spec s ON s.job_name = j.job_name
    WHERE j.attempt >= s.max_attempts
      AND ((j.status IN ('pending', 'abandoned') AND j.status <> 'pending'
            AND j.next_attempt_at <= now())
           OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < now()))
    ORDER BY j.scheduled_at, j.job_name, j.partition_key
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
eligible AS MATERIALIZED (
    SELECT c.*
    FROM spec s
    CROSS JOIN LATERAL (
        SELECT j.id, j.job_name, j.partition_key, j.scheduled_at,
               s.overlap <> 'allow' AS exclusive
        FROM (
            -- The head of the job's active runs, in slot order, through job_runs_active_idx
            -- (a plain predicate, so that the planner walks the index instead of collecting every
            -- active row for the conditions below). See `HEAD_OF_QUEUE` for the shape.
            SELECT a.*
            FROM {schema}.job_runs a
            WHERE a.job_name >= s.job_name AND a.job_name <= s.job_name
              AND a.status IN ('pending', 'abandoned', 'running')
            ORDER BY a.job_name, a.scheduled_at
            LIMIT ($4 * 4 + 64) * 4
        ) j
        WHERE "#,
    due_condition!(),
    r#"
          AND (s.overlap = 'allow' OR NOT EXISTS (
                   SELECT 1
                   FROM {schema}.job_runs o
                   WHERE o.job_name = j.job_name
                     AND o.partition_key = j.partition_key
                     AND o.id <> j.id
                     AND o.status = 'running'
                     AND o.heartbeat_at + o.stale_after >= now()))
        ORDER BY j.scheduled_at
        LIMIT $4 * 4 + 64
    ) c
),
first_due AS (
    SELECT id, exclusive, job_name, scheduled_at, partition_key,
           row_number() OVER (PARTITION BY job_name, partition_key
                              ORDER BY scheduled_at) AS nth
    FROM eligible
),
passing AS (
    SELECT id, job_name,
           row_number() OVER (PARTITION BY job_name
                              ORDER BY scheduled_at, partition_key) AS job_nth
    FROM first_due
    WHERE NOT exclusive OR nth = 1
),
capped AS MATERIALIZED (
    SELECT p.id
    FROM passing p
    JOIN spec s ON s.job_name = p.job_name
    LEFT JOIN running r ON r.job_name = p.job_name
    WHERE p.job_nth <= LEAST(COALESCE(s.lim, 2147483647),
                             COALESCE(s.cluster - COALESCE(r.n, 0), 2147483647))
),
due AS (
    SELECT j.id
    FROM {schema}.job_runs j
    JOIN spec s ON s.job_name = j.job_name
    WHERE j.id IN (SELECT id FROM capped)
      -- Repeated so that a row another caller re-claimed and committed after this statement's
      -- snapshot is re-checked on its new version (now fresh `running`) and dropped.
      AND "#,
    due_condition!(),
    r#"
    ORDER BY j.scheduled_at, j.job_name, j.partition_key
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
dead AS (
    UPDATE {schema}.job_runs j
    SET status = 'dead',
        next_attempt_at = NULL,
        error_message = format('attempts exhausted (%s of %s)', j.attempt, x.max_attempts),
        finished_at = now(),
        updated_at = now()
    FROM exhausted x
    WHERE j.id = x.id
    RETURNING j.id, j.attempt
),
dead_attempts AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'heartbeat expired'
    FROM dead d
    WHERE a.run_id = d.id AND a.attempt = d.attempt AND a.status = 'running'
),
upd AS (
    UPDATE {schema}.job_runs j
    SET status = 'running',
        attempt = j.attempt + 1,
        owner = $1,
        fencing_token = nextval('{schema}.fencing_tokens'),
        heartbeat_at = now(),
        started_at = now(),
        finished_at = NULL,
        next_attempt_at = NULL,
        updated_at = now()
    FROM due d
    WHERE j.id = d.id
      AND j.status IN ('pending', 'abandoned', 'running')
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key,
              j."trigger", j.zone, j.wall_time, j.business_date
),
abandon AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'heartbeat expired'
    FROM upd u
    WHERE a.run_id = u.id AND a.attempt = u.attempt - 1 AND a.status = 'running'
),
attempts AS (
    INSERT INTO {schema}.job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
    SELECT id, attempt, $1, fencing_token, 'running', now() FROM upd
)
SELECT id, attempt, fencing_token, job_name, scheduled_at, partition_key, "trigger", zone,
       wall_time, business_date
FROM upd
ORDER BY scheduled_at, job_name, partition_key
"#
);

/// The earliest `next_attempt_at` after `now()` of a `pending` run of the jobs `$1`: when a worker
/// has something to claim next. Reads only.
pub(crate) const NEXT_DUE: &str = r#"
SELECT j.next_attempt_at
FROM {schema}.job_runs j
WHERE j.status = 'pending'
  AND j.next_attempt_at > now()
  AND j.job_name = ANY($1::text[])
ORDER BY j.next_attempt_at
LIMIT 1
"#;

/// Which of the jobs `$1` (with `$2` their `max_attempts`, `$3` their overlap policies) have work
/// waiting for `CLAIM_DUE` (which may have to wait for a running run of the job); reads only. One
/// look per job (`LATERAL … LIMIT 1` through `job_runs_active_idx`): with many jobs the planner would
/// otherwise scan every active row of all of them once per call.
///
/// `HEAD_OF_QUEUE`, the shape of this look and of `CLAIM_DUE`'s `eligible`: the job is named by
/// `job_name >= x AND job_name <= x` and the rows ordered by `(job_name, scheduled_at)`, the
/// columns of job_runs_active_idx. With `job_name = x` and `ORDER BY scheduled_at`, a generic plan
/// made right after a bulk load of one job (every row active, one job name) may as well walk
/// job_runs_scheduled_idx and read past every run that finished since: 400–800 ms a call once a
/// quarter of 100,000 queued slots had run, against 0.1 ms. A range's selectivity does not depend
/// on the number of job names, so the plan through job_runs_active_idx stays the cheap one.
pub(crate) const DUE_JOBS: &str = r#"
SELECT DISTINCT s.job_name
FROM unnest($1::text[], $2::integer[], $3::text[]) AS s(job_name, max_attempts, overlap)
CROSS JOIN LATERAL (
    SELECT 1
    FROM (
        SELECT a.*
        FROM {schema}.job_runs a
        WHERE a.job_name >= s.job_name AND a.job_name <= s.job_name
          AND a.status IN ('pending', 'abandoned', 'running')
        ORDER BY a.job_name, a.scheduled_at
        LIMIT 512
    ) j
    WHERE ((j.status = 'pending' AND (j.next_attempt_at IS NULL OR j.next_attempt_at <= now()))
           OR (j.status = 'abandoned' AND j.next_attempt_at <= now())
           OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < now()))
    LIMIT 1
) AS found
"#;

/// Ends the sessions that hold the `bigint` advisory locks `$1` for jobs `$2` (same length) when the
/// session is another process's lock connection (its `application_name` ends with
/// ` (slotguard locks) <owner>`, the owner perhaps cut short; see `locks::session_name`) whose
/// runs of the job are `running` with an expired heartbeat, and no run of the job is fresh: a
/// frozen or cut-off holder. Answers the keys whose holder was ended.
pub(crate) const BREAK_STALE_LOCKS: &str = r#"
WITH holders AS MATERIALIZED (
    SELECT s.k, l.pid
    FROM unnest($1::bigint[], $2::text[]) AS s(k, job_name)
    JOIN pg_locks l
      ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND ((l.classid::bigint << 32) | l.objid::bigint) = s.k
    JOIN pg_stat_activity a ON a.pid = l.pid
    CROSS JOIN LATERAL (
        SELECT substr(a.application_name,
                      strpos(a.application_name, ' (slotguard locks) ') + 19) AS owner
    ) named
    WHERE a.pid <> pg_backend_pid()
      AND strpos(a.application_name, ' (slotguard locks) ') > 0
      AND named.owner <> ''
      AND EXISTS (
          SELECT 1 FROM {schema}.job_runs r
          WHERE r.job_name = s.job_name AND r.status = 'running'
            AND r.heartbeat_at + r.stale_after < now()
            -- The whole owner, unless PostgreSQL cut the name at its 63 bytes.
            AND (r.owner = named.owner
                 OR (octet_length(a.application_name) >= 63
                     AND starts_with(r.owner, named.owner))))
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.job_runs r
          WHERE r.job_name = s.job_name AND r.status = 'running'
            AND r.heartbeat_at + r.stale_after >= now())
)
SELECT k FROM holders WHERE pg_terminate_backend(pid)
"#;

/// Which of the slots (`$1` jobs, `$2` instants, `$3` partitions, same length) have a row, in order.
pub(crate) const EXISTING_SLOTS: &str = r#"
SELECT EXISTS (
    SELECT 1 FROM {schema}.job_runs j
    WHERE j.job_name = k.job_name AND j.scheduled_at = k.scheduled_at
      AND j.partition_key = k.partition_key
) AS found
FROM unnest($1::text[], $2::timestamptz[], $3::text[]) WITH ORDINALITY
     AS k(job_name, scheduled_at, partition_key, ord)
ORDER BY k.ord
"#;

/// Records slots as `skipped` with reason `$1`, unless a row for the slot exists; one statement.
///
/// Parameters: `$1` reason, then per request: `$2` job names, `$3` slot instants, `$4` partition
/// keys, `$5` triggers, `$6` zones, `$7` wall times, `$8` business dates, `$9` fingerprints, `$10`
/// stale-after in microseconds; `$11` how far ahead of `now()` a scheduled slot may be (further:
/// not recorded, as `CLAIM` leaves it out). A skipped row has attempt 0, no owner and a token of its own (the
/// column is unique and not null); nothing ever claims it.
pub(crate) const RECORD_SKIPPED: &str = r#"
INSERT INTO {schema}.job_runs AS j
    (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
     stale_after, created_at, updated_at, finished_at, error_message, zone, wall_time,
     business_date, "trigger", schedule_fingerprint)
SELECT r.job_name, r.scheduled_at, r.partition_key, 'skipped', 0, NULL,
       nextval('{schema}.fencing_tokens'), NULL, r.stale_after_us * interval '1 microsecond',
       now(), now(), now(), $1, r.zone, r.wall_time, r.business_date, r.trigger_kind, r.fingerprint
FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
            $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[])
     AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
          business_date, fingerprint, stale_after_us)
WHERE NOT (r.trigger_kind = 'schedule' AND r.scheduled_at > now() + $11 * interval '1 microsecond')
ORDER BY r.job_name, r.scheduled_at, r.partition_key
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
"#;

/// Refreshes the heartbeat of every attempt `$1` holds with a token in `$2`.
pub(crate) const HEARTBEAT: &str = "
UPDATE {schema}.job_runs
SET heartbeat_at = now()
WHERE owner = $1 AND fencing_token = ANY($2) AND status = 'running'
RETURNING fencing_token
";

/// Records how an attempt ended on the run and on its attempt row, only while `$3` holds run `$1`
/// with token `$2` and the run is `running`. Answers how many run rows matched (0 or 1).
///
/// `$4` run status, `$5` attempt status, `$6` error class, `$7` message, `$8` microseconds until
/// the run is due again (`NULL`: not due; `next_attempt_at` is cleared).
pub(crate) const FINISH: &str = "
WITH run AS (
    UPDATE {schema}.job_runs
    SET status = $4,
        error_class = $6,
        error_message = $7,
        next_attempt_at = now() + $8::bigint * interval '1 microsecond',
        finished_at = now(),
        updated_at = now()
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
    RETURNING id, attempt, fencing_token
),
attempt AS (
    UPDATE {schema}.job_run_attempts a
    SET status = $5, finished_at = now(), message = $7
    FROM run
    WHERE a.run_id = run.id AND a.attempt = run.attempt AND a.fencing_token = run.fencing_token
    RETURNING a.id
)
SELECT (SELECT count(*) FROM run) AS runs
";

/// [`FINISH`] for many attempts of owner `$1` at once: run ids `$2`, tokens `$3`, run statuses `$4`,
/// attempt statuses `$5`, error classes `$6`, messages `$7`, microseconds until due again `$8`
/// (`NULL`: not due). Answers the ids of the runs that matched.
pub(crate) const FINISH_MANY: &str = "
WITH input AS (
    SELECT *
    FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
        AS i(id, token, status, attempt_status, class, message, retry_us)
),
run AS (
    UPDATE {schema}.job_runs r
    SET status = i.status,
        error_class = i.class,
        error_message = i.message,
        next_attempt_at = now() + i.retry_us * interval '1 microsecond',
        finished_at = now(),
        updated_at = now()
    FROM input i
    WHERE r.id = i.id AND r.fencing_token = i.token AND r.owner = $1 AND r.status = 'running'
    RETURNING r.id, r.attempt, r.fencing_token, i.attempt_status, i.message
),
attempt AS (
    UPDATE {schema}.job_run_attempts a
    SET status = run.attempt_status, finished_at = now(), message = run.message
    FROM run
    WHERE a.run_id = run.id AND a.attempt = run.attempt AND a.fencing_token = run.fencing_token
    RETURNING a.id
)
SELECT id FROM run
";

/// Registers keys `$2` for jobs `$3` of namespace `$1`; a key already registered is left as it is.
pub(crate) const REGISTER_KEYS: &str = "
INSERT INTO {schema}.lock_keys (lock_key, namespace, job_name)
SELECT k, $1, j FROM unnest($2::bigint[], $3::text[]) AS r(k, j)
ORDER BY k
ON CONFLICT (lock_key) DO NOTHING
";

/// Who holds keys `$1` now (a separate statement, so that keys registered concurrently are seen).
pub(crate) const REGISTERED_KEYS: &str = "
SELECT lock_key, namespace, job_name FROM {schema}.lock_keys WHERE lock_key = ANY($1)
";

/// Marks keys `$1` of namespace `$2` as still in use.
pub(crate) const TOUCH_KEYS: &str = "
UPDATE {schema}.lock_keys SET seen_at = now() WHERE lock_key = ANY($1) AND namespace = $2
";

/// Every run (of job `$1`, when not NULL) with its attempts.
pub(crate) const RUNS: &str = r#"
SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner,
       r.fencing_token, r.heartbeat_at, (extract(epoch FROM r.stale_after) * 1000000)::bigint AS stale_after_us,
       r.next_attempt_at, r.created_at, r.updated_at, r.started_at, r.finished_at, r.error_class,
       r.error_message, r.zone, r.wall_time, r.business_date, r."trigger", r.schedule_fingerprint,
       a.attempt AS a_attempt, a.owner AS a_owner, a.fencing_token AS a_token,
       a.started_at AS a_started_at, a.finished_at AS a_finished_at, a.status AS a_status,
       a.message AS a_message
FROM {schema}.job_runs r
LEFT JOIN {schema}.job_run_attempts a ON a.run_id = r.id
WHERE $1::text IS NULL OR r.job_name = $1
ORDER BY r.job_name, r.scheduled_at, r.partition_key, a.attempt
"#;

/// Registers job definitions, one array per field (`$1` names, `$2` cron expressions, `$3` zones,
/// `$4` DST policies, `$5` guard levels, `$6` fingerprints), in one upsert.
///
/// A job named twice in one call keeps its last definition (`DISTINCT ON`, so that the upsert never
/// touches one row twice). An existing job gets the new definition and a fresh `seen_at`; its pause
/// state is left alone. Rows are written in name order, so concurrent registrations wait on each
/// other in one direction only.
pub(crate) const REGISTER_JOBS: &str = "
INSERT INTO {schema}.jobs AS j (job_name, cron, zone, dst, guard, schedule_fingerprint)
SELECT DISTINCT ON (d.job_name) d.job_name, d.cron, d.zone, d.dst, d.guard, d.fingerprint
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
     WITH ORDINALITY AS d(job_name, cron, zone, dst, guard, fingerprint, ord)
ORDER BY d.job_name, d.ord DESC
ON CONFLICT (job_name) DO UPDATE
SET cron = excluded.cron,
    zone = excluded.zone,
    dst = excluded.dst,
    guard = excluded.guard,
    schedule_fingerprint = excluded.schedule_fingerprint,
    seen_at = now()
";

/// Every registered job, by name (byte order, whatever the database's collation).
pub(crate) const JOBS: &str = r#"
SELECT job_name, cron, zone, dst, guard, schedule_fingerprint, paused, paused_by, paused_reason,
       paused_at, registered_at, seen_at
FROM {schema}.jobs
ORDER BY job_name COLLATE "C"
"#;

/// Pauses (`$2 = true`) or resumes job `$1` and writes the audit record (`$3` action, `$4` actor,
/// `$5` reason), in one statement. Answers how many jobs changed (0 or 1).
pub(crate) const SET_PAUSED: &str = "
WITH job AS (
    UPDATE {schema}.jobs
    SET paused = $2,
        paused_by = CASE WHEN $2 THEN $4 ELSE paused_by END,
        paused_reason = CASE WHEN $2 THEN $5 ELSE paused_reason END,
        paused_at = CASE WHEN $2 THEN now() ELSE paused_at END
    WHERE job_name = $1
    RETURNING job_name
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, action, actor, reason)
    SELECT job_name, $3, $4, $5 FROM job
)
SELECT count(*) FROM job
";

/// The columns of the runs of a CTE `page` (as `r`), each joined with its attempts (as `a`).
macro_rules! runs_with_attempts {
    () => {
        r#"SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner,
       r.fencing_token, r.heartbeat_at, (extract(epoch FROM r.stale_after) * 1000000)::bigint AS stale_after_us,
       r.next_attempt_at, r.created_at, r.updated_at, r.started_at, r.finished_at, r.error_class,
       r.error_message, r.zone, r.wall_time, r.business_date, r."trigger", r.schedule_fingerprint,
       a.attempt AS a_attempt, a.owner AS a_owner, a.fencing_token AS a_token,
       a.started_at AS a_started_at, a.finished_at AS a_finished_at, a.status AS a_status,
       a.message AS a_message
FROM page r
LEFT JOIN {schema}.job_run_attempts a ON a.run_id = r.id
"#
    };
}

/// The runs matching a filter, newest slot first, with their attempts: `$1` job, `$2` status, `$3`
/// partition, `$4` from (inclusive), `$5` to (exclusive), each ignored when NULL; `$6` limit.
///
/// The limit applies to runs (in `page`), not to the joined attempt rows.
pub(crate) const LIST_RUNS: &str = concat!(
    r#"
WITH page AS (
    SELECT *
    FROM {schema}.job_runs
    WHERE ($1::text IS NULL OR job_name = $1)
      AND ($2::text IS NULL OR status = $2)
      AND ($3::text IS NULL OR partition_key = $3)
      AND ($4::timestamptz IS NULL OR scheduled_at >= $4)
      AND ($5::timestamptz IS NULL OR scheduled_at < $5)
    ORDER BY scheduled_at DESC, id DESC
    LIMIT $6
)
"#,
    runs_with_attempts!(),
    "ORDER BY r.scheduled_at DESC, r.id DESC, a.attempt\n"
);

/// The newest run (by slot) of each job in `$1`, with its attempts: one index probe per job.
pub(crate) const LATEST_RUNS: &str = concat!(
    r#"
WITH page AS (
    SELECT newest.*
    FROM unnest($1::text[]) AS j(job_name)
    CROSS JOIN LATERAL (
        SELECT *
        FROM {schema}.job_runs x
        WHERE x.job_name = j.job_name
        ORDER BY x.scheduled_at DESC, x.id DESC
        LIMIT 1
    ) AS newest
)
"#,
    runs_with_attempts!(),
    "ORDER BY r.id, a.attempt\n"
);

/// The distinct slot instants of job `$1` in `[$2, $3)`, ascending.
pub(crate) const SLOT_TIMES: &str = "
SELECT DISTINCT scheduled_at
FROM {schema}.job_runs
WHERE job_name = $1 AND scheduled_at >= $2 AND scheduled_at < $3
ORDER BY scheduled_at
";

/// For each job in `$1`, in order, the slot instants of its rows in `[$2, $3)` as one ascending
/// array: a range of the `(job_name, scheduled_at, partition_key)` key per job, one round trip for
/// every job. An instant with several partitions comes once per partition: the caller removes the
/// repeats, which costs less there than a `DISTINCT` here (40 against 70 ms for 288,000 rows).
pub(crate) const SLOT_TIMES_OF: &str = "
SELECT ARRAY(SELECT r.scheduled_at
             FROM {schema}.job_runs r
             WHERE r.job_name = j.job_name AND r.scheduled_at >= $2 AND r.scheduled_at < $3
             ORDER BY r.scheduled_at) AS times
FROM unnest($1::text[]) WITH ORDINALITY AS j(job_name, ord)
ORDER BY j.ord
";

/// For each job in `$1`, in order, the latest slot instant among its rows not triggered by hand
/// (NULL when it has none).
pub(crate) const LATEST_SLOTS: &str = r#"
SELECT (SELECT max(r.scheduled_at)
        FROM {schema}.job_runs r
        WHERE r.job_name = j.job_name AND r."trigger" <> 'manual') AS latest
FROM unnest($1::text[]) WITH ORDINALITY AS j(job_name, ord)
ORDER BY j.ord
"#;

/// Makes the finished run with key (`$1` job, `$2` slot, `$3` partition) `pending` and due now, and
/// writes the audit record (`$4` action, `$5` actor, `$6` reason), in one statement. Answers the
/// run's id, or no row when no run with that key is `failed`, `dead`, `abandoned` or `skipped`.
///
/// Of concurrent retries of one run, the first locks the row; the others wait for it to commit,
/// re-check the condition on the new version (now `pending`) and update nothing.
pub(crate) const RETRY: &str = "
WITH run AS (
    UPDATE {schema}.job_runs
    SET status = 'pending', next_attempt_at = now(), finished_at = NULL, updated_at = now()
    WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
      AND status IN ('failed', 'dead', 'abandoned', 'skipped')
    RETURNING id, job_name, scheduled_at
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT job_name, id, scheduled_at, $4, $5, $6 FROM run
)
SELECT id FROM run
";

/// The status of the run with key (`$1` job, `$2` slot, `$3` partition), if there is one.
pub(crate) const RUN_STATUS: &str = "
SELECT status
FROM {schema}.job_runs
WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
";

/// Creates a `pending` run (attempt 0, no owner, due at its `not_before`) per request unless its
/// slot has a row, with one audit record per created run; one statement.
///
/// Parameters: `$1` not-before instants, then one array per request field as in [`CLAIM`] (`$2` job
/// names to `$10` stale-after in microseconds), then `$11` action, `$12` actor, `$13` reason.
/// Answers one row per request, in order: the new run's id, or NULL.
///
/// Each request draws a token (the column is unique and not null; `claim_due` gives the run a new
/// one). A slot named twice in the batch is created once, for its first request. Rows are inserted
/// in slot-key order, as claims insert them, so the two cannot deadlock.
pub(crate) const ENQUEUE: &str = r#"
WITH req AS (
    SELECT r.*, nextval('{schema}.fencing_tokens') AS token
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[], $1::timestamptz[])
         WITH ORDINALITY
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us, not_before, ord)
),
first AS (
    SELECT DISTINCT ON (job_name, scheduled_at, partition_key) *
    FROM req
    ORDER BY job_name, scheduled_at, partition_key, ord
),
ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, next_attempt_at, zone, wall_time, business_date,
         "trigger", schedule_fingerprint)
    SELECT job_name, scheduled_at, partition_key, 'pending', 0, NULL, token, NULL,
           stale_after_us * interval '1 microsecond', now(), now(), not_before, zone, wall_time,
           business_date, trigger_kind, fingerprint
    FROM first
    ORDER BY job_name, scheduled_at, partition_key
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.job_name, j.scheduled_at, j.fencing_token
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT i.job_name, i.id, i.scheduled_at, $11, $12, $13
    FROM ins i
    JOIN req r ON r.token = i.fencing_token
    ORDER BY r.ord
)
SELECT r.ord, i.id
FROM req r
LEFT JOIN ins i ON i.fencing_token = r.token
ORDER BY r.ord
"#;

/// Cancels the `running` or `pending` run with key (`$1` job, `$2` slot, `$3` partition): `failed`,
/// class `permanent`, message `$4`, no next attempt. Answers its id, or no row. The first statement
/// of the cancel transaction: it locks the row (waiting for a concurrent writer to commit and
/// re-checking the status on the new version).
///
/// The owner and token are kept: the holder's heartbeat and fenced writes demand `running`, so they
/// stop matching.
pub(crate) const CANCEL_RUN: &str = "
UPDATE {schema}.job_runs
SET status = 'failed',
    error_class = 'permanent',
    error_message = $4,
    next_attempt_at = NULL,
    finished_at = now(),
    updated_at = now()
WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
  AND status IN ('running', 'pending')
RETURNING id, job_name, scheduled_at
";

/// The second statement of the cancel transaction: records the running attempt of run `$1`
/// `abandoned` with message `$2`, and writes the audit record (`$3` job, `$4` slot, `$5` action,
/// `$6` actor, `$7` reason). A statement of its own so that it sees an attempt row committed by a
/// concurrent re-claim just before `CANCEL_RUN` locked the run.
pub(crate) const CANCEL_ATTEMPT: &str = "
WITH attempt AS (
    UPDATE {schema}.job_run_attempts
    SET status = 'abandoned', finished_at = now(), message = $2
    WHERE run_id = $1 AND status = 'running'
)
INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
VALUES ($3, $1, $4, $5, $6, $7)
";

/// The audit trail (of job `$1`, when not NULL), newest first, at most `$2` records, with ids below
/// `$3` when not NULL (the page after the record `$3`).
pub(crate) const AUDIT_LOG: &str = "
SELECT id, job_name, run_id, scheduled_at, action, actor, reason, at
FROM {schema}.job_run_audit
WHERE ($1::text IS NULL OR job_name = $1) AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $2
";

/// Saves checkpoint `$4` on run `$1`, only while `$3` holds it with token `$2` and it is `running`.
/// Answers how many rows matched (0 or 1).
pub(crate) const SAVE_CHECKPOINT: &str = "
WITH saved AS (
    UPDATE {schema}.job_runs
    SET checkpoint = $4
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
    RETURNING 1
)
SELECT count(*) FROM saved
";

/// The checkpoint of run `$1`.
pub(crate) const LOAD_CHECKPOINT: &str = "
SELECT checkpoint FROM {schema}.job_runs WHERE id = $1
";

/// The statements above, for one schema.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) claim: Arc<str>,
    pub(crate) claim_due: Arc<str>,
    pub(crate) due_jobs: Arc<str>,
    pub(crate) next_due: Arc<str>,
    pub(crate) existing_slots: Arc<str>,
    pub(crate) break_stale_locks: Arc<str>,
    pub(crate) record_skipped: Arc<str>,
    pub(crate) heartbeat: Arc<str>,
    pub(crate) finish: Arc<str>,
    pub(crate) finish_many: Arc<str>,
    pub(crate) register_keys: Arc<str>,
    pub(crate) registered_keys: Arc<str>,
    pub(crate) touch_keys: Arc<str>,
    pub(crate) runs: Arc<str>,
    pub(crate) register_jobs: Arc<str>,
    pub(crate) jobs: Arc<str>,
    pub(crate) set_paused: Arc<str>,
    pub(crate) list_runs: Arc<str>,
    pub(crate) latest_runs: Arc<str>,
    pub(crate) slot_times: Arc<str>,
    pub(crate) slot_times_of: Arc<str>,
    pub(crate) latest_slots: Arc<str>,
    pub(crate) retry: Arc<str>,
    pub(crate) run_status: Arc<str>,
    pub(crate) enqueue: Arc<str>,
    pub(crate) cancel_run: Arc<str>,
    pub(crate) cancel_attempt: Arc<str>,
    pub(crate) audit_log: Arc<str>,
    pub(crate) save_checkpoint: Arc<str>,
    pub(crate) load_checkpoint: Arc<str>,
    pub(crate) record_replica: Arc<str>,
    pub(crate) remove_replica: Arc<str>,
    pub(crate) replicas: Arc<str>,
    pub(crate) forget_replicas: Arc<str>,
    pub(crate) prune_runs: Arc<str>,
}

impl Statements {
    pub(crate) fn new(quoted_schema: &str) -> Self {
        let s = |sql: &str| Arc::<str>::from(sql.replace("{schema}", quoted_schema));
        Statements {
            claim: s(CLAIM),
            claim_due: s(CLAIM_DUE),
            due_jobs: s(DUE_JOBS),
            next_due: s(NEXT_DUE),
            existing_slots: s(EXISTING_SLOTS),
            break_stale_locks: s(BREAK_STALE_LOCKS),
            record_skipped: s(RECORD_SKIPPED),
            heartbeat: s(HEARTBEAT),
            finish: s(FINISH),
            finish_many: s(FINISH_MANY),
            register_keys: s(REGISTER_KEYS),
            registered_keys: s(REGISTERED_KEYS),
            touch_keys: s(TOUCH_KEYS),
            runs: s(RUNS),
            register_jobs: s(REGISTER_JOBS),
            jobs: s(JOBS),
            set_paused: s(SET_PAUSED),
            list_runs: s(LIST_RUNS),
            latest_runs: s(LATEST_RUNS),
            slot_times: s(SLOT_TIMES),
            slot_times_of: s(SLOT_TIMES_OF),
            latest_slots: s(LATEST_SLOTS),
            retry: s(RETRY),
            run_status: s(RUN_STATUS),
            enqueue: s(ENQUEUE),
            cancel_run: s(CANCEL_RUN),
            cancel_attempt: s(CANCEL_ATTEMPT),
            audit_log: s(AUDIT_LOG),
            save_checkpoint: s(SAVE_CHECKPOINT),
            load_checkpoint: s(LOAD_CHECKPOINT),
            record_replica: s(crate::replicas::RECORD_REPLICA),
            remove_replica: s(crate::replicas::REMOVE_REPLICA),
            replicas: s(crate::replicas::REPLICAS),
            forget_replicas: s(crate::replicas::FORGET_REPLICAS),
            prune_runs: s(crate::retention::PRUNE_RUNS),
        }
    }
}

/// A statement, ready for `sqlx::query`.
pub(crate) fn sql(statement: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    // Safe: built only from the constants above (and those of `replicas` and `retention`) and a
    // validated, quoted schema name.
    AssertSqlSafe(Arc::clone(statement))
}

/// `schema` checked and quoted for splicing into SQL.
pub(crate) fn quote_schema(schema: &str) -> Option<String> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (first_ok && rest_ok && schema.len() <= 63).then(|| format!("\"{schema}\""))
}

#[cfg(test)]
mod tests {
    use super::quote_schema;

    #[test]
    fn only_plain_identifiers_are_schemas() {
        assert_eq!(quote_schema("slotguard").as_deref(), Some("\"slotguard\""));
        assert_eq!(quote_schema("sg_t_01ab").as_deref(), Some("\"sg_t_01ab\""));
        for bad in [
            "",
            "1abc",
            "Slotguard",
            "a-b",
            "a\"; DROP SCHEMA public; --",
            "ä",
        ] {
            assert_eq!(quote_schema(bad), None, "{bad}");
        }
        assert!(quote_schema(&"a".repeat(63)).is_some());
        assert!(quote_schema(&"a".repeat(64)).is_none());
    }
}
