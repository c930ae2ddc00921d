//! The claim of new slots: the jobs' claim locks and `CLAIM`, which decides each slot's overlap and
//! inserts, fences, replaces or re-claims its row.

/// Takes the transaction-level claim lock of each job in `$1`, in the order of their keys (so two
/// claimers of overlapping sets of jobs never wait on each other in a cycle). The keys live in the
/// two-`int4` advisory space (class `0x736c6f74`, "slot"), apart from the session locks of the
/// `lock` layer, which use `bigint` keys: a claim never waits for a job's running body.
pub(crate) const LOCK_JOBS: &str = "
SELECT count(pg_advisory_xact_lock(1936486260, k))
FROM (SELECT DISTINCT hashtext(j) AS k FROM unnest($1::text[]) AS u(j) ORDER BY k) AS keys
";

/// Tries the transaction-level claim lock of each job in `$1` (the keys of [`LOCK_JOBS`]) without
/// waiting, and answers the jobs whose lock another transaction holds: another claim of the job
/// is in flight. Nothing waits, so the order of the keys does not matter.
pub(crate) const TRY_LOCK_JOBS: &str = "
SELECT j
FROM (SELECT DISTINCT j FROM unnest($1::text[]) AS u(j)) AS jobs
WHERE NOT pg_try_advisory_xact_lock(1936486260, hashtext(j))
";

/// Claims a batch of slots in one statement.
///
/// Parameters: `$1` owner, then one array per request field, all of the batch's length: `$2` job
/// names, `$3` slot instants, `$4` partition keys, `$5` triggers, `$6` zones, `$7` wall times, `$8`
/// business dates, `$9` fingerprints, `$10` stale-after in microseconds, `$11` overlap policies,
/// `$12` how far ahead of `{now}` a scheduled slot may be, in microseconds, `$13` whether to
/// enqueue instead of claim (`QueueStore::enqueue_slots`), and per request `$14` nominal dates,
/// `$15` calendar names and `$16` calendar versions (NULL without a calendar), and `$17` whether
/// it is made ahead of the slot's instant (`ClaimRequest::ahead`).
///
/// With `$13` (a scheduler enqueueing for workers), every new slot is decided `claim` whatever
/// runs and inserted `pending` (attempt 0, no owner, no attempt row) with `next_attempt_at` at its
/// own instant, answered `queued`; nothing is fenced, replaced or superseded, and an existing stale
/// row is not re-claimed: the worker that picks the slot decides its overlap (`DECIDE_QUEUED`)
/// and recovers stale rows (`CLAIM_DUE`).
///
/// How it stays exclusive with any number of claimers:
/// - `req` marks `not_due` the scheduled slots more than `$12` ahead of the database clock (their
///   claimer's clock is wrong), and `first` leaves them out. Nothing is written for them and the answer says `not_due`.
/// - `req` draws one fencing token per request, in request order (so a batch's tokens rise in its
///   order), and `first` keeps one request per slot (a slot twice in a batch is won at most once).
/// - `decided` applies the overlap policy to each request: unless it is `allow`, a request whose job
///   and partition has another run `running` with a fresh heartbeat (database clock, statement
///   snapshot) is decided by its policy (`skip`, `buffer_one`, `replace`), or `busy` when it is
///   made ahead of its instant; any other is `claim`. The decision only matters for a new slot:
///   an existing row is never changed by it, and a `busy` slot is not inserted (the answer says
///   `busy`, and its claimer asks again at the instant).
/// - `ins` inserts every slot: `running` (attempt 1, the request's token) when decided `claim` or
///   `replace`, with this backend's presence key (`presence.rs`), `skipped` for `skip`, `pending`
///   with no `next_attempt_at` for `buffer_one` (attempt 0, no owner; they take the request's
///   token only because the column is unique and not null). A slot whose row exists is left alone
///   (`DO NOTHING`: no row lock, no new row version). When two claimers insert the same new slot,
///   the second waits for the first to commit and then does nothing. Rows are inserted in slot-key
///   order, so two claimers with overlapping batches wait on each other in one direction only and
///   cannot deadlock.
/// - `superseded` (for a slot inserted `pending`) marks the other waiting slots of its job and
///   partition `skipped`: at most one waits. `replaced` (for a slot inserted by `replace`) marks the
///   job and partition's `running` runs `abandoned` with no `next_attempt_at`, so that neither
///   `claim_due` nor their holders' heartbeats and fenced writes touch them again;
///   `replaced_attempts` closes their attempts. Neither sees the rows `ins` inserted (one snapshot).
///   `replaced` runs only when some request was decided `replace` (a one-time test): with
///   statistics that expect no running run the planner may drive its join from every running run,
///   once per inserted slot (`sql::by_key`).
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
/// - `upd` re-claims the locked rows: new owner and presence, the request's token, attempt + 1.
///   Its WHERE repeats the staleness test and demands a higher token, as a second line of defence.
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
/// statement's snapshot, taken after the wait, sees the first one's rows. A batch whose requests
/// may all defer (`ClaimRequest::defer_if_contended`) takes the locks with [`TRY_LOCK_JOBS`]
/// instead and leaves out the jobs whose lock is held (answered `Contended`, nothing written): its
/// snapshot, taken after the locks, then sees every committed claim of the jobs it kept.
pub(crate) const CLAIM: &str = concat!(
    r#"
WITH req AS (
    SELECT r.*, nextval('{schema}.fencing_tokens') AS token,
           (r.trigger_kind = 'schedule'
            AND r.scheduled_at > {now} + $12 * interval '1 microsecond') AS not_due
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[], $11::text[],
                $14::text[], $15::text[], $16::text[], $17::boolean[])
         WITH ORDINALITY
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us, overlap, nominal_dates, calendar_name,
              calendar_version, ahead, ord)
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
               WHEN f.overlap = 'allow' OR $13 THEN 'claim'
               WHEN EXISTS (
                   SELECT 1
                   FROM {schema}.job_runs o
                   WHERE o.job_name = f.job_name
                     AND o.partition_key = f.partition_key
                     AND o.status = 'running'
                     AND o.scheduled_at <> f.scheduled_at
                     AND o.heartbeat_at + o.stale_after >= {now}
               ) THEN CASE WHEN f.ahead THEN 'busy' ELSE f.overlap END
               ELSE 'claim'
           END AS decision
    FROM first f
),
ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, started_at, finished_at, error_message, zone,
         wall_time, business_date, "trigger", schedule_fingerprint, next_attempt_at, presence,
         nominal_dates, calendar_name, calendar_version)
    SELECT job_name, scheduled_at, partition_key,
           CASE WHEN decision = 'skip' THEN 'skipped'
                WHEN decision = 'buffer_one' OR $13 THEN 'pending'
                ELSE 'running' END,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN 0 ELSE 1 END,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE $1 END,
           token,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE {now} END,
           stale_after_us * interval '1 microsecond', {now}, {now},
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE {now} END,
           CASE WHEN decision = 'skip' THEN {now} END,
           CASE decision
               WHEN 'skip' THEN {skipped_overlap}
               WHEN 'buffer_one' THEN {waiting}
           END,
           zone, wall_time, business_date, trigger_kind, fingerprint,
           CASE WHEN $13 AND decision NOT IN ('skip', 'buffer_one') THEN scheduled_at END,
           CASE WHEN decision IN ('skip', 'buffer_one') OR $13 THEN NULL ELSE {presence} END,
           nominal_dates, calendar_name, calendar_version
    FROM decided
    WHERE decision <> 'busy'
    ORDER BY job_name, scheduled_at, partition_key
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.job_name, j.scheduled_at, j.partition_key, j.status, j.attempt,
              j.fencing_token, j.next_attempt_at
),
superseded AS (
    UPDATE {schema}.job_runs j
    SET status = 'skipped',
        error_message = {superseded},
        finished_at = {now},
        updated_at = {now}
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE d.decision = 'buffer_one'
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.status = 'pending'
      AND j.next_attempt_at IS NULL
    RETURNING j.job_name, j.partition_key
),
replaced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned',
        next_attempt_at = NULL,
        error_message = {replaced},
        finished_at = {now},
        updated_at = {now}
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE d.decision = 'replace'
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.status = 'running'
      AND EXISTS (SELECT 1 FROM decided x WHERE x.decision = 'replace')
    RETURNING j.id, j.attempt, j.fencing_token, j.job_name, j.scheduled_at, j.partition_key
),
"#,
    close_attempts!("replaced_attempts", "replaced", "{replaced}"),
    r#",
fenced AS (
    UPDATE {schema}.job_runs j
    SET status = 'abandoned',
        next_attempt_at = {now},
        error_message = {heartbeat_expired},
        updated_at = {now}
    FROM ins i
    JOIN decided d ON d.token = i.fencing_token
    WHERE i.status = 'running'
      AND d.decision = 'claim'
      AND d.overlap IN ('skip', 'buffer_one')
      AND j.job_name = i.job_name
      AND j.partition_key = i.partition_key
      AND j.scheduled_at <> i.scheduled_at
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < {now}
    RETURNING j.id, j.attempt, j.job_name, j.scheduled_at, j.partition_key
),
"#,
    close_attempts!("fenced_attempts", "fenced", "{heartbeat_expired}"),
    r#",
stale AS (
    SELECT j.id, f.ord, f.token, f.stale_after_us
    FROM {schema}.job_runs j
    JOIN first f
      ON f.job_name = j.job_name
     AND f.scheduled_at = j.scheduled_at
     AND f.partition_key = j.partition_key
    WHERE j.status = 'running'
      AND j.heartbeat_at + j.stale_after < {now}
      AND NOT $13
    FOR UPDATE OF j SKIP LOCKED
),
upd AS (
    UPDATE {schema}.job_runs j
    SET attempt = j.attempt + 1,
        owner = $1,
        presence = {presence},
        fencing_token = s.token,
        heartbeat_at = {now},
        stale_after = s.stale_after_us * interval '1 microsecond',
        started_at = {now},
        finished_at = NULL,
        updated_at = {now},
        next_attempt_at = NULL
    FROM stale s
    WHERE j.id = s.id
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < {now}
      AND j.fencing_token < s.token
    RETURNING j.id, j.attempt, j.fencing_token, j.scheduled_at, s.ord
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
    SELECT id, attempt, $1, fencing_token, 'running', {now}, scheduled_at
    FROM ins WHERE status = 'running'
    UNION ALL
    SELECT id, attempt, $1, fencing_token, 'running', {now}, scheduled_at FROM upd
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
       COALESCE(d.decision = 'busy' AND cur.id IS NULL AND u.id IS NULL, false) AS busy,
       COALESCE(i.fencing_token = r.token AND i.next_attempt_at IS NOT NULL, false) AS queued,
       COALESCE(i.fencing_token = r.token, false) AS inserted,
       d.decision,
       (SELECT count(*) FROM superseded s
        WHERE s.job_name = r.job_name AND s.partition_key = r.partition_key) AS superseded,
       (SELECT count(*) FROM replaced x
        WHERE x.job_name = r.job_name AND x.partition_key = r.partition_key) AS replaced,
       (SELECT array_agg(f.id ORDER BY f.id) FROM fenced f
        WHERE f.job_name = r.job_name AND f.partition_key = r.partition_key) AS fenced
FROM req r
LEFT JOIN decided d ON d.ord = r.ord
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
"#
);
