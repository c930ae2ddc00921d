//! The slots a scheduler reads or records without claiming them: which have a row, and skipped
//! ones.

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
/// stale-after in microseconds; `$11` how far ahead of `{now}` a scheduled slot may be (further:
/// not recorded, as `CLAIM` leaves it out); per request `$12` nominal dates, `$13` calendar names,
/// `$14` calendar versions. A skipped row has attempt 0, no owner and a token of its own (the
/// column is unique and not null); nothing ever claims it.
pub(crate) const RECORD_SKIPPED: &str = r#"
INSERT INTO {schema}.job_runs AS j
    (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
     stale_after, created_at, updated_at, finished_at, error_message, zone, wall_time,
     business_date, "trigger", schedule_fingerprint, nominal_dates, calendar_name,
     calendar_version)
SELECT r.job_name, r.scheduled_at, r.partition_key, 'skipped', 0, NULL,
       nextval('{schema}.fencing_tokens'), NULL, r.stale_after_us * interval '1 microsecond',
       {now}, {now}, {now}, $1, r.zone, r.wall_time, r.business_date, r.trigger_kind, r.fingerprint,
       r.nominal_dates, r.calendar_name, r.calendar_version
FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
            $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[], $12::text[], $13::text[],
            $14::text[])
     AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
          business_date, fingerprint, stale_after_us, nominal_dates, calendar_name,
          calendar_version)
WHERE NOT (r.trigger_kind = 'schedule' AND r.scheduled_at > {now} + $11 * interval '1 microsecond')
ORDER BY r.job_name, r.scheduled_at, r.partition_key
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
"#;
