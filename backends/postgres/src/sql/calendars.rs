//! Operators' holiday overrides (`calendar_overrides`, one row per override). Writes and reads of
//! the overrides written after a `seq` take the schedules' advisory lock
//! ([`SCHEDULE_LOCK`](super::schedules::SCHEDULE_LOCK), exclusive to write, shared to read) and
//! read the clock after it, as the stored schedules' do: a read never misses an override that
//! takes effect before its clock read plus the fence.

/// The database clock now (`now`), and when the latest override takes effect (`effective_at`,
/// NULL when there is none). Run after the lock.
pub(crate) const LAST_OVERRIDE: &str = "
SELECT clock_timestamp() AS now,
       (SELECT max(effective_at) FROM {schema}.calendar_overrides) AS effective_at
";

/// Appends an override (`$1` calendar, `$2` date, `$3` kind, `$4` holiday, `$5` reason, `$6` by,
/// `$7` at, `$8` effective at) with its audit record (job `''`, `$9` action, `$10` reason); answers
/// its `seq`, drawn here, under the lock.
pub(crate) const INSERT_OVERRIDE: &str = "
WITH o AS (
    INSERT INTO {schema}.calendar_overrides
        (calendar_name, holiday_date, kind, holiday_name, reason, changed_by, changed_at,
         effective_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    RETURNING seq
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason, at)
    VALUES ('', NULL, NULL, $9, $6, $10, $7)
)
SELECT seq FROM o
";

/// The overrides written after `seq` `$1`, oldest first, at most `$2`. Run after the shared lock
/// and the clock read; walks the primary key.
pub(crate) const OVERRIDE_CHANGES: &str = "
SELECT seq, calendar_name, holiday_date, kind, holiday_name, reason, changed_by, changed_at,
       effective_at
FROM {schema}.calendar_overrides WHERE seq > $1 ORDER BY seq LIMIT $2
";
