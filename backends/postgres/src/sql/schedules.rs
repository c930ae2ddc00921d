//! Schedules kept as data (`job_schedules`, one row per version) and operators' skips of upcoming
//! slots.
//!
//! Writes of versions and reads of the changes are serialized by a transaction-level advisory lock
//! of the schema ([`SCHEDULE_LOCK`], [`SCHEDULE_LOCK_SHARED`]): a write takes it exclusive, a read of
//! the changes shared. Each reads the clock (`clock_timestamp()`, the moment it runs, not the
//! transaction's start, which is before the lock wait) after taking it.

/// The first half of the two-`int4` advisory-lock key of the schedules (ASCII `schd`); the second
/// half is `hashtext(schema)`. The two-key form is apart from the `bigint` keys jobs and pruning
/// lock (`PRUNE_LOCK_KEY`), and this class apart from the claim and migration locks' (`slot`), so
/// the schedules never wait for a job's lock nor a claim for them.
pub(crate) const SCHEDULE_LOCK_CLASS: i32 = 0x7363_6864;

/// Takes the schedules' lock of schema `$1` for the transaction, exclusive: one writer at a time,
/// and no read of the changes meanwhile.
pub(crate) const SCHEDULE_LOCK: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

/// Takes the schedules' lock of schema `$1` for the transaction, shared: reads of the changes run
/// together, but not beside a write.
pub(crate) const SCHEDULE_LOCK_SHARED: &str =
    "SELECT pg_advisory_xact_lock_shared($1, hashtext($2))";

/// The columns of a version that the backend reads.
macro_rules! columns {
    () => {
        "seq, schedule_id, version, removed, job_name, cron, zone, dst, partition_key, start_at, \
         end_at, remaining_runs, paused, note, effective_at, changed_by, changed_at, reason, \
         pause_on_failure"
    };
}

/// The database clock now (`now`), and the latest version of schedule `$1` if it has one: its
/// number, when it takes effect, whether it removed the schedule, and the job of its latest version
/// with a spec (the removed schedule's job). Run after [`SCHEDULE_LOCK`].
pub(crate) const LATEST_SCHEDULE: &str = "
SELECT clock_timestamp() AS now, l.version, l.effective_at, l.removed,
       (SELECT j.job_name FROM {schema}.job_schedules j
        WHERE j.schedule_id = $1 AND NOT j.removed
        ORDER BY j.version DESC LIMIT 1) AS job_name
FROM (VALUES (1)) AS one(x)
LEFT JOIN LATERAL (
    SELECT s.version, s.effective_at, s.removed
    FROM {schema}.job_schedules s
    WHERE s.schedule_id = $1
    ORDER BY s.version DESC
    LIMIT 1
) AS l ON true
";

/// Appends version `$2` of schedule `$1` (`$3` removed; the spec `$4` job to `$13` note; `$14`
/// effective at, `$15` changed by, `$16` changed at, `$17` reason) with its audit record (`$4`
/// job, or `$18` when removed; `$19` action, `$20` reason, at `$16`; `$21` pause on failure); answers its `seq`, drawn
/// here, under the lock.
pub(crate) const INSERT_SCHEDULE: &str = "
WITH v AS (
    INSERT INTO {schema}.job_schedules
        (schedule_id, version, removed, job_name, cron, zone, dst, partition_key, start_at, end_at,
         remaining_runs, paused, note, effective_at, changed_by, changed_at, reason,
         pause_on_failure)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $21)
    RETURNING seq
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason, at)
    VALUES (coalesce($4, $18), NULL, NULL, $19, $15, $20, $16)
)
SELECT seq FROM v
";

/// The versions written after `seq` `$1`, in the order they were written, at most `$2`. Run after
/// [`SCHEDULE_LOCK_SHARED`] and the clock read.
pub(crate) const SCHEDULE_CHANGES: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {schema}.job_schedules WHERE seq > $1 ORDER BY seq LIMIT $2"
);

/// The latest version of each schedule that is not removed, of job `$1` (any when NULL), with an
/// id after `$2` (any when NULL), by id, at most `$3`. The latest version is found by the primary
/// key.
pub(crate) const SCHEDULES: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {schema}.job_schedules s
WHERE NOT s.removed AND ($1::text IS NULL OR s.job_name = $1)
  AND ($2::text IS NULL OR s.schedule_id > $2)
  AND s.version = (SELECT max(m.version) FROM {schema}.job_schedules m
                   WHERE m.schedule_id = s.schedule_id)
ORDER BY s.schedule_id
LIMIT $3"
);

/// Every version of schedule `$1`, oldest first.
pub(crate) const SCHEDULE_HISTORY: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {schema}.job_schedules WHERE schedule_id = $1 ORDER BY version"
);

/// Records one slot `skipped` with message `$1`, unless a row for the slot exists, with its audit
/// record (`$11` action, `$12` actor, `$13` reason); one statement. Answers the new row's id, or no
/// row.
///
/// `$2` to `$10` are the request's fields as in [`RECORD_SKIPPED`](super::slots::RECORD_SKIPPED)
/// (one-element arrays), and the row is the one that writes, but with no not-due check: an
/// operator skips a slot before it falls due. Like it, the row has attempt 0, no owner and a token
/// of its own; nothing ever claims it.
pub(crate) const SKIP_SLOT: &str = r#"
WITH ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, finished_at, error_message, zone, wall_time,
         business_date, "trigger", schedule_fingerprint)
    SELECT r.job_name, r.scheduled_at, r.partition_key, 'skipped', 0, NULL,
           nextval('{schema}.fencing_tokens'), NULL, r.stale_after_us * interval '1 microsecond',
           now(), now(), now(), $1, r.zone, r.wall_time, r.business_date, r.trigger_kind,
           r.fingerprint
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[])
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us)
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.job_name, j.scheduled_at
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT job_name, id, scheduled_at, $11, $12, $13 FROM ins
)
SELECT id FROM ins
"#;

/// Deletes the row of slot (`$1` job, `$2` instant, `$3` partition) if an operator's skip wrote it
/// (`skipped`, its message starting with `$4`) and nothing ever claimed it (no attempt), with its
/// audit record (`$5` action, `$6` actor, `$7` reason); one statement. Answers its id, or no row.
///
/// The delete locks the row: a concurrent retry that made it `pending` first is waited for, and
/// the status re-checked on its version. Attempts would go with the row (`ON DELETE CASCADE`), but
/// there are none; the audit trail has no foreign key.
pub(crate) const UNSKIP_SLOT: &str = "
WITH run AS (
    DELETE FROM {schema}.job_runs j
    WHERE j.job_name = $1 AND j.scheduled_at = $2 AND j.partition_key = $3
      AND j.status = 'skipped' AND left(j.error_message, char_length($4)) = $4
      AND NOT EXISTS (SELECT 1 FROM {schema}.job_run_attempts a
                      WHERE a.run_id = j.id
                        AND (a.scheduled_at = j.scheduled_at OR a.scheduled_at IS NULL))
    RETURNING j.id, j.job_name, j.scheduled_at
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT job_name, id, scheduled_at, $5, $6, $7 FROM run
)
SELECT id FROM run
";
