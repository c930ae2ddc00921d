//! Workers' claims of runs that are due: the overlap decisions on queued slots (`DECIDE_QUEUED`),
//! `CLAIM_DUE`, and the reads that say when and for which jobs there is work.

/// `$alias`'s rows of the job `s.job_name`, named in the "C" collation: the range that reads a
/// job's head of queue through `job_runs_active_idx`, whose key holds the job that way (migration
/// 19), and that the slot key (the database's collation) cannot serve. Every head-of-queue read
/// names its job with it; see `DUE_JOBS` for why a range. `sql::head_of_queue` checks the plans.
macro_rules! of_job {
    ($alias:literal) => {
        concat!(
            $alias,
            r#".job_name COLLATE "C" >= s.job_name AND "#,
            $alias,
            r#".job_name COLLATE "C" <= s.job_name"#
        )
    };
}

/// The overlap decisions on queued slots, run before `CLAIM_DUE` in its transaction (after the jobs'
/// claim locks): a slot a scheduler queued (`pending`, attempt 0, from the schedule (catch-up runs wait their turn),
/// due) whose job and partition has another run `running` with a fresh heartbeat is decided by its
/// job's policy `$2` (for jobs `$1`), as a tick decides a new slot: `skip` records it `skipped`;
/// `buffer_one` lets the newest wait (`pending`, no next attempt) and records the older ones and a
/// slot that waited already `skipped`; `replace` abandons the running runs (the oldest queued slot
/// then runs through `CLAIM_DUE`). Answers what it did, for the events: `decided` rows with their
/// new status, `superseded` waiting rows, `replaced` runs, and per job and partition under
/// `replace` the `replacer` (the oldest queued slot).
pub(crate) const DECIDE_QUEUED: &str = concat!(
    r#"
WITH spec AS (
    SELECT DISTINCT ON (job_name) job_name, overlap
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS s(job_name, overlap, ord)
    ORDER BY job_name, ord
),
queued AS MATERIALIZED (
    SELECT q.id, q.job_name, q.partition_key, q.scheduled_at, s.overlap,
           row_number() OVER (PARTITION BY q.job_name, q.partition_key
                              ORDER BY q.scheduled_at DESC) AS newest
    FROM spec s
    JOIN {schema}.job_runs q
      ON "#,
    of_job!("q"),
    r#"
    WHERE s.overlap IN ('skip', 'buffer_one', 'replace')
      AND q.status = 'pending' AND q.attempt = 0
      AND q."trigger" = 'schedule'
      AND q.next_attempt_at <= {now}
      AND EXISTS (
          SELECT 1 FROM {schema}.job_runs o
          WHERE o.job_name = q.job_name AND o.partition_key = q.partition_key
            AND o.status = 'running' AND o.heartbeat_at + o.stale_after >= {now})
),
decided AS (
    UPDATE {schema}.job_runs j
    SET status = CASE WHEN q.overlap = 'skip' OR q.newest > 1 THEN 'skipped' ELSE 'pending' END,
        error_message = CASE WHEN q.overlap = 'skip' THEN {skipped_overlap}
                             WHEN q.newest > 1 THEN {superseded}
                             ELSE {waiting} END,
        next_attempt_at = NULL,
        finished_at = CASE WHEN q.overlap = 'skip' OR q.newest > 1 THEN {now} END,
        updated_at = {now}
    FROM queued q
    WHERE j.id = q.id AND q.overlap IN ('skip', 'buffer_one')
      AND j.status = 'pending' AND j.attempt = 0
    RETURNING j.id, j.job_name, j.scheduled_at, j.partition_key, j.status
),
superseded AS (
    UPDATE {schema}.job_runs j
    SET status = 'skipped', error_message = {superseded}, finished_at = {now}, updated_at = {now}
    FROM queued q
    WHERE q.overlap = 'buffer_one' AND q.newest = 1
      AND j.job_name = q.job_name AND j.partition_key = q.partition_key
      AND j.status = 'pending' AND j.next_attempt_at IS NULL AND j.id <> q.id
    RETURNING j.id, j.job_name, j.scheduled_at, j.partition_key
),
replacer AS (
    SELECT DISTINCT ON (job_name, partition_key) id, job_name, scheduled_at, partition_key
    FROM queued
    WHERE overlap = 'replace'
    ORDER BY job_name, partition_key, scheduled_at
),
replaced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned', next_attempt_at = NULL, error_message = {replaced},
        finished_at = {now}, updated_at = {now}
    FROM replacer p
    WHERE j.job_name = p.job_name AND j.partition_key = p.partition_key AND j.status = 'running'
    RETURNING j.id, j.attempt, j.job_name, j.scheduled_at, j.partition_key
),
"#,
    close_attempts!("replaced_attempts", "replaced", "{replaced}"),
    r#"
SELECT 'decided' AS what, id, job_name, scheduled_at, partition_key, status FROM decided
UNION ALL
SELECT 'superseded', id, job_name, scheduled_at, partition_key, 'skipped' FROM superseded
UNION ALL
SELECT 'replaced', id, job_name, scheduled_at, partition_key, 'abandoned' FROM replaced
UNION ALL
SELECT 'replacer', id, job_name, scheduled_at, partition_key, 'pending' FROM replacer
"#
);

/// Whether run `j` (joined to its spec `s`) is due for another attempt: `CLAIM_DUE` selects by it
/// and re-checks it on the row version it locks. A slot a scheduler queued (`pending`, attempt 0,
/// from the schedule) counts from `s.ahead` before it falls due: claimed early, decided by nothing
/// (`DECIDE_QUEUED` reads due rows only, and `CLAIM_DUE`'s `eligible` leaves it while its job and
/// partition has a run going). An `abandoned` run is written "pending or
/// abandoned, not pending", as in `stale_or_abandoned`, so that no plan reads it through the index
/// of finished runs.
macro_rules! due_condition {
    () => {
        r#"((j.status = 'pending' AND j.next_attempt_at <= {now})
       OR (j.status = 'pending' AND j.attempt = 0 AND j."trigger" = 'schedule'
           AND j.next_attempt_at <= {now} + s.ahead)
       OR (j.status = 'pending' AND j.next_attempt_at IS NULL
           AND NOT EXISTS (
               SELECT 1
               FROM {schema}.job_runs o
               WHERE o.job_name = j.job_name
                 AND o.partition_key = j.partition_key
                 AND o.id <> j.id
                 AND o.status = 'running'
                 AND o.heartbeat_at + o.stale_after >= {now}
           ))
       OR (j.attempt < s.max_attempts
           AND ((j.status IN ('pending', 'abandoned') AND j.status <> 'pending'
                 AND j.next_attempt_at <= {now})
                OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < {now}))))"#
    };
}

/// The start every claim of due runs shares: `spec`, one entry per job (the first), and the
/// recovery of stale and abandoned runs: `stale_or_abandoned` finds them, `exhausted` locks those
/// that have had `max_attempts` attempts (they are buried by [`claim_end!`]'s `dead`).
macro_rules! claim_start {
    () => {
        r#"
WITH spec AS (
    SELECT DISTINCT ON (job_name) job_name, max_attempts, overlap, lim, cluster,
           ahead * interval '1 microsecond' AS ahead
    FROM unnest($2::text[], $3::integer[], $5::text[], $6::integer[], $7::integer[],
                $8::bigint[])
         WITH ORDINALITY AS s(job_name, max_attempts, overlap, lim, cluster, ahead, ord)
    ORDER BY job_name, ord
),
stale_or_abandoned AS MATERIALIZED (
    -- Abandoned runs due again, as a range of job_runs_due_idx: `status = 'abandoned'` would let
    -- a plan made on statistics from before any run finished read job_runs_finished_idx instead,
    -- whose few abandoned rows sit among every finished run (17,000 rows read a claim, and more
    -- with every run).
    SELECT a.id FROM {schema}.job_runs a
    WHERE a.status IN ('pending', 'abandoned')
      AND (a.status, a.next_attempt_at) > ('abandoned', '-infinity'::timestamptz)
      AND (a.status, a.next_attempt_at) <= ('abandoned', {now})
      AND a.job_name IN (SELECT job_name FROM spec)
    UNION ALL
    SELECT r.id FROM {schema}.job_runs r
    WHERE r.status = 'running' AND r.heartbeat_at + r.stale_after < {now}
      AND r.job_name IN (SELECT job_name FROM spec)
),
exhausted AS (
    SELECT j.id, s.max_attempts
    FROM stale_or_abandoned c
    JOIN {schema}.job_runs j ON j.id = c.id
    JOIN spec s ON s.job_name = j.job_name
    WHERE j.attempt >= s.max_attempts
      AND ((j.status IN ('pending', 'abandoned') AND j.status <> 'pending'
            AND j.next_attempt_at <= {now})
           OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < {now}))
    ORDER BY j.scheduled_at, j.job_name, j.partition_key
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
"#
    };
}

/// The end every claim of due runs shares, after its `due` (the rows it locked to run) and
/// `exhausted`: `dead` buries the exhausted runs and `dead_attempts` closes a still-running
/// attempt of theirs; `upd` makes each due run `running` with attempt + 1, a new token, a fresh
/// heartbeat and this backend's presence key; `abandon` closes a stale run's previous attempt
/// (`heartbeat expired`); `attempts` opens the new attempt rows.
macro_rules! claim_end {
    () => {
        concat!(
            r#"dead AS (
    UPDATE {schema}.job_runs j
    SET status = 'dead',
        next_attempt_at = NULL,
        error_message = format({exhausted}, j.attempt, x.max_attempts),
        finished_at = {now},
        updated_at = {now}
    FROM exhausted x
    WHERE j.id = x.id
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key,
              j."trigger", j.zone, j.wall_time, j.business_date, j.trace_parent, x.max_attempts
),
"#,
            close_attempts!("dead_attempts", "dead", "{heartbeat_expired}"),
            r#",
upd AS (
    UPDATE {schema}.job_runs j
    SET status = 'running',
        attempt = j.attempt + 1,
        owner = $1,
        presence = {presence},
        fencing_token = nextval('{schema}.fencing_tokens'),
        heartbeat_at = {now},
        started_at = {now},
        finished_at = NULL,
        next_attempt_at = NULL,
        updated_at = {now}
    FROM due d
    WHERE j.id = d.id AND j.scheduled_at = d.scheduled_at
      AND j.status IN ('pending', 'abandoned', 'running')
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key,
              j."trigger", j.zone, j.wall_time, j.business_date, j.trace_parent
),
abandon AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = {now}, message = {heartbeat_expired}
    FROM upd u
    WHERE a.run_id = u.id AND (a.scheduled_at = u.scheduled_at OR a.scheduled_at IS NULL)
      AND a.attempt = u.attempt - 1 AND a.status = 'running'
),
attempts AS (
    INSERT INTO {schema}.job_run_attempts
        (run_id, attempt, owner, fencing_token, status, started_at, scheduled_at)
    SELECT id, attempt, $1, fencing_token, 'running', {now}, scheduled_at FROM upd
)
"#
        )
    };
}

/// What a claim of due runs answers: the runs it started (`upd`) and those it buried (`dead`),
/// each with whether it was buried, its job's `max_attempts` then, and whether it was fenced.
macro_rules! claimed_rows {
    () => {
        r#"SELECT id, attempt, fencing_token, job_name, scheduled_at, partition_key, "trigger", zone,
       wall_time, business_date, trace_parent, false AS buried, 0 AS max_attempts,
       false AS fenced
FROM upd
UNION ALL
SELECT id, attempt, fencing_token, job_name, scheduled_at, partition_key, "trigger", zone,
       wall_time, business_date, trace_parent, true, max_attempts, false
FROM dead
"#
    };
}

/// Claims up to `$4` runs that are due for another attempt, for owner `$1`, in one statement.
///
/// Parameters: `$1` owner, `$2` job names, `$3` their `max_attempts`, `$5` their overlap policies,
/// `$6` their limits for this call, `$7` their cluster-wide limits (same length; NULL for none)
/// and `$8` their leads in microseconds (`DueSpec::ahead`, at most `MAX_AHEAD`), `$4` limit.
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
/// - `upd` makes each `running` with attempt + 1, a new token, a fresh heartbeat and this backend's
///   presence key; `abandon` closes a stale run's previous attempt (`heartbeat expired`);
///   `attempts` opens the new attempt rows.
pub(crate) const CLAIM_DUE: &str = concat!(
    claim_start!(),
    r#"running AS (
    SELECT o.job_name, count(*) AS n
    FROM {schema}.job_runs o
    JOIN spec s ON s.job_name = o.job_name
    WHERE s.cluster IS NOT NULL
      AND o.status = 'running'
      AND o.heartbeat_at + o.stale_after >= {now}
    GROUP BY o.job_name
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
            WHERE "#,
    of_job!("a"),
    r#"
              AND a.status IN ('pending', 'abandoned', 'running')
            ORDER BY a.job_name COLLATE "C", a.scheduled_at
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
                     AND o.heartbeat_at + o.stale_after >= {now}))
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
    SELECT id, job_name, scheduled_at,
           row_number() OVER (PARTITION BY job_name
                              ORDER BY scheduled_at, partition_key) AS job_nth
    FROM first_due
    WHERE NOT exclusive OR nth = 1
),
capped AS MATERIALIZED (
    SELECT p.id, p.scheduled_at
    FROM passing p
    JOIN spec s ON s.job_name = p.job_name
    LEFT JOIN running r ON r.job_name = p.job_name
    WHERE p.job_nth <= LEAST(COALESCE(s.lim, 2147483647),
                             COALESCE(s.cluster - COALESCE(r.n, 0), 2147483647))
),
due AS (
    SELECT j.id, j.scheduled_at
    FROM {schema}.job_runs j
    JOIN spec s ON s.job_name = j.job_name
    -- Arrays, not `IN (SELECT ...)`: an index scan of the primary key whatever the planner
    -- believes of the rows' count (a table whose statistics predate a burst of queued rows
    -- otherwise gets a nested loop that compares every active row with every capped one), and
    -- the slot times let a partitioned history look only in the partitions that hold them.
    WHERE j.id = ANY (ARRAY(SELECT id FROM capped))
      AND j.scheduled_at = ANY (ARRAY(SELECT scheduled_at FROM capped))
      -- Repeated so that a row another caller re-claimed and committed after this statement's
      -- snapshot is re-checked on its new version (now fresh `running`) and dropped.
      AND "#,
    due_condition!(),
    r#"
    ORDER BY j.scheduled_at, j.job_name, j.partition_key
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
"#,
    claim_end!(),
    r#",
fenced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned',
        next_attempt_at = {now},
        error_message = {heartbeat_expired},
        updated_at = {now}
    FROM upd u
    JOIN spec s ON s.job_name = u.job_name
    WHERE s.overlap <> 'allow'
      AND j.job_name = u.job_name
      AND j.partition_key = u.partition_key
      AND j.id <> u.id
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < {now}
      AND j.id NOT IN (SELECT id FROM dead)
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key,
              j."trigger", j.zone, j.wall_time, j.business_date, j.trace_parent
),
"#,
    close_attempts!("fenced_attempts", "fenced", "{heartbeat_expired}"),
    r#"
"#,
    claimed_rows!(),
    r#"UNION ALL
SELECT id, attempt, fencing_token, job_name, scheduled_at, partition_key, "trigger", zone,
       wall_time, business_date, trace_parent, false, 0, true
FROM fenced
ORDER BY buried, fenced, scheduled_at, job_name, partition_key
"#
);

/// `CLAIM_DUE` for calls whose every job runs freely: overlap `allow` and no cluster-wide limit,
/// so that no run of a job waits for another and no count is shared across claimers. Same
/// parameters, same answer (no run is ever `fenced`), same rules; what it leaves out is the work
/// those two features need: `running`, the window of candidates, the per-partition numbering and
/// the look-up again by id.
///
/// `due` reads each job's active runs in slot order through job_runs_active_idx and locks the
/// first due ones it can (`FOR UPDATE SKIP LOCKED`, at most the job's limit for the call), then keeps
/// the oldest `$4` of all jobs: the queue's usual shape, one pass over the head of the queue. A
/// row that another caller re-claimed and committed after this statement's snapshot is re-checked
/// on its new version (now fresh `running`) and skipped, as the lock re-evaluates the condition.
/// With several jobs, rows locked beyond the `$4` kept are let go at commit.
pub(crate) const CLAIM_DUE_FREE: &str = concat!(
    claim_start!(),
    r#"due AS (
    SELECT c.id, c.scheduled_at
    FROM spec s
    CROSS JOIN LATERAL (
        SELECT j.id, j.job_name, j.partition_key, j.scheduled_at
        FROM {schema}.job_runs j
        WHERE "#,
    of_job!("j"),
    r#"
          AND j.status IN ('pending', 'abandoned', 'running')
          AND "#,
    due_condition!(),
    r#"
        ORDER BY j.job_name COLLATE "C", j.scheduled_at, j.partition_key COLLATE "C"
        LIMIT LEAST($4, COALESCE(s.lim, $4))
        FOR UPDATE OF j SKIP LOCKED
    ) c
    ORDER BY c.scheduled_at, c.job_name, c.partition_key
    LIMIT $4
),
"#,
    claim_end!(),
    claimed_rows!(),
    r#"ORDER BY buried, fenced, scheduled_at, job_name, partition_key
"#
);

/// The earliest `next_attempt_at` after `{now}` of a `pending` run of the jobs `$1`: when a worker
/// has something to claim next. Reads only.
pub(crate) const NEXT_DUE: &str = r#"
SELECT j.next_attempt_at
FROM {schema}.job_runs j
WHERE j.status = 'pending'
  AND j.next_attempt_at > {now}
  AND j.job_name = ANY($1::text[])
ORDER BY j.next_attempt_at
LIMIT 1
"#;

/// Which of the jobs `$1` (with `$2` their `max_attempts`, `$3` their overlap policies, `$4` their
/// leads in microseconds: queued slots that fall due within them count) have work
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
/// on the number of job names, so the plan through job_runs_active_idx stays the cheap one. The
/// job is named in the "C" collation, as the index holds it (migration 19): the slot key, which has
/// the same columns in the database's collation, can then serve neither the range nor the order,
/// so a plan made when every row was active cannot walk it past the finished runs either.
pub(crate) const DUE_JOBS: &str = concat!(
    r#"
SELECT DISTINCT s.job_name
FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[])
     AS s(job_name, max_attempts, overlap, ahead)
CROSS JOIN LATERAL (
    SELECT 1
    FROM (
        SELECT a.*
        FROM {schema}.job_runs a
        WHERE "#,
    of_job!("a"),
    r#"
          AND a.status IN ('pending', 'abandoned', 'running')
        ORDER BY a.job_name COLLATE "C", a.scheduled_at
        LIMIT 512
    ) j
    WHERE ((j.status = 'pending' AND (j.next_attempt_at IS NULL OR j.next_attempt_at <= {now}))
           OR (j.status = 'pending' AND j.attempt = 0 AND j."trigger" = 'schedule'
               AND j.next_attempt_at <= {now} + s.ahead * interval '1 microsecond')
           OR (j.status = 'abandoned' AND j.next_attempt_at <= {now})
           OR (j.status = 'running' AND j.heartbeat_at + j.stale_after < {now}))
    LIMIT 1
) AS found
"#
);
