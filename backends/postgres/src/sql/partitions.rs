//! Time-partitioned history: the conversion of the plain tables, the partitions made ahead, and the
//! partitions dropped by retention (`partitions.rs` runs them; docs/scale.md, "Partitioned
//! history").
//!
//! Besides `{schema}`, these templates splice `{schema_name}` (the validated name, unquoted, inside
//! a string literal), `{runs}` and `{attempts}` (a partition's table names, made by `partitions.rs`
//! from a date), and instants `{lo}`, `{hi}` and `{legacy_end}` (UTC literals it formats). Nothing
//! else is spliced; values are bound.

/// The layout a schema was partitioned with, if it was: `span`, `legacy_end`.
pub(crate) const LAYOUT: &str = "SELECT span, legacy_end FROM {schema}.history_layout";

/// What the conversion needs to know: whether the table holds rows, the latest slot in it, and the
/// database clock.
pub(crate) const EXTENT: &str = "
SELECT EXISTS (SELECT 1 FROM {schema}.job_runs) AS any,
       (SELECT max(scheduled_at) FROM {schema}.job_runs) AS latest,
       statement_timestamp() AS now";

/// The ids of the attempts without a slot time (written before migration 17): lowest, highest.
pub(crate) const UNSTAMPED: &str = "
SELECT min(id) AS lo, max(id) AS hi FROM {schema}.job_run_attempts WHERE scheduled_at IS NULL";

/// Gives the attempts with ids from `$1` up to `$2` (excluded) their run's slot time: the
/// conversion's backfill, a range of the primary key per statement, before the conversion's
/// exclusive lock (attempts written meanwhile have theirs already).
pub(crate) const STAMP_ATTEMPTS: &str = "
UPDATE {schema}.job_run_attempts a SET scheduled_at = r.scheduled_at
FROM {schema}.job_runs r
WHERE a.id >= $1 AND a.id < $2 AND a.scheduled_at IS NULL AND r.id = a.run_id";

/// The first half of the conversion, on the plain tables under an exclusive lock: every attempt
/// the backfill (`STAMP_ATTEMPTS`) did not reach gets its run's slot time, the foreign key, the identities and the keys that do not hold the slot
/// time go, the tables become `*_legacy`, and their indexes make way for the parents' names.
///
/// The ids go on from where the identities stopped, in sequences the parents own.
pub(crate) const RETIRE_PLAIN: &str = r"
LOCK TABLE {schema}.job_runs, {schema}.job_run_attempts IN ACCESS EXCLUSIVE MODE;
UPDATE {schema}.job_run_attempts a SET scheduled_at = r.scheduled_at
FROM {schema}.job_runs r
WHERE a.run_id = r.id AND a.scheduled_at IS NULL;
ALTER TABLE {schema}.job_run_attempts DROP CONSTRAINT job_run_attempts_run_id_fkey;
CREATE SEQUENCE {schema}.job_run_ids AS bigint;
SELECT setval('{schema}.job_run_ids', greatest(1,
    pg_sequence_last_value(pg_get_serial_sequence('{schema}.job_runs', 'id')::regclass),
    (SELECT max(id) FROM {schema}.job_runs)));
CREATE SEQUENCE {schema}.job_run_attempt_ids AS bigint;
SELECT setval('{schema}.job_run_attempt_ids', greatest(1,
    pg_sequence_last_value(pg_get_serial_sequence('{schema}.job_run_attempts', 'id')::regclass),
    (SELECT max(id) FROM {schema}.job_run_attempts)));
ALTER TABLE {schema}.job_runs ALTER COLUMN id DROP IDENTITY;
ALTER TABLE {schema}.job_run_attempts ALTER COLUMN id DROP IDENTITY;
ALTER TABLE {schema}.job_runs DROP CONSTRAINT job_runs_pkey;
ALTER TABLE {schema}.job_run_attempts DROP CONSTRAINT job_run_attempts_pkey;
ALTER TABLE {schema}.job_run_attempts DROP CONSTRAINT job_run_attempts_run_attempt_key;
DROP INDEX {schema}.job_runs_fencing_token_key;
ALTER TABLE {schema}.job_run_attempts ALTER COLUMN scheduled_at SET NOT NULL;
ALTER TABLE {schema}.job_runs RENAME TO job_runs_legacy;
ALTER TABLE {schema}.job_run_attempts RENAME TO job_run_attempts_legacy;
DO $$
DECLARE i record;
BEGIN
    FOR i IN SELECT indexname FROM pg_indexes
             WHERE schemaname = '{schema_name}' AND tablename = 'job_runs_legacy' LOOP
        EXECUTE format('ALTER INDEX %I.%I RENAME TO %I', '{schema_name}', i.indexname,
                       'legacy_' || i.indexname);
    END LOOP;
END
$$;
";

/// The second half: the partitioned parents, with the plain tables' columns, checks and defaults,
/// their keys widened by the slot time (a partitioned table's unique keys must hold its partition
/// key; the fencing sequence keeps tokens unique across partitions), the plain table's indexes
/// under their names, and a default partition each for slots no partition covers.
pub(crate) const PARENTS: &str = r#"
CREATE TABLE {schema}.job_runs
    (LIKE {schema}.job_runs_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (scheduled_at);
ALTER TABLE {schema}.job_runs ALTER COLUMN id SET DEFAULT nextval('{schema}.job_run_ids');
ALTER SEQUENCE {schema}.job_run_ids OWNED BY {schema}.job_runs.id;
ALTER TABLE {schema}.job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id, scheduled_at),
    ADD CONSTRAINT job_runs_slot_key UNIQUE (job_name, scheduled_at, partition_key);
CREATE UNIQUE INDEX job_runs_fencing_token_key ON {schema}.job_runs (fencing_token, scheduled_at);
CREATE INDEX job_runs_running_job_idx ON {schema}.job_runs (job_name, partition_key)
    WHERE status = 'running';
CREATE INDEX job_runs_due_idx ON {schema}.job_runs (status, next_attempt_at)
    WHERE status IN ('pending', 'abandoned');
CREATE INDEX job_runs_scheduled_idx ON {schema}.job_runs (scheduled_at, id);
CREATE INDEX job_runs_finished_idx ON {schema}.job_runs (job_name, finished_at)
    WHERE status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned');
CREATE INDEX job_runs_job_status_idx
    ON {schema}.job_runs (job_name, status, scheduled_at DESC, id DESC);
CREATE INDEX job_runs_status_scheduled_idx
    ON {schema}.job_runs (status COLLATE "C", scheduled_at DESC, id DESC);
CREATE INDEX job_runs_active_idx
    ON {schema}.job_runs (job_name COLLATE "C", scheduled_at, partition_key COLLATE "C")
    WHERE status IN ('pending', 'abandoned', 'running');

CREATE TABLE {schema}.job_run_attempts
    (LIKE {schema}.job_run_attempts_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (scheduled_at);
ALTER TABLE {schema}.job_run_attempts
    ALTER COLUMN id SET DEFAULT nextval('{schema}.job_run_attempt_ids');
ALTER SEQUENCE {schema}.job_run_attempt_ids OWNED BY {schema}.job_run_attempts.id;
ALTER TABLE {schema}.job_run_attempts
    ADD CONSTRAINT job_run_attempts_pkey PRIMARY KEY (id, scheduled_at),
    ADD CONSTRAINT job_run_attempts_run_attempt_key UNIQUE (run_id, attempt, scheduled_at);

CREATE TABLE {schema}.job_runs_default PARTITION OF {schema}.job_runs DEFAULT;
CREATE TABLE {schema}.job_run_attempts_default PARTITION OF {schema}.job_run_attempts DEFAULT;
"#;

/// The plain tables' rows stay where they are: each table becomes the partition of every slot
/// before `{legacy_end}` (its indexes that match the parent's are adopted as they are; the
/// widened keys are built).
pub(crate) const ATTACH_LEGACY: &str = "
ALTER TABLE {schema}.job_runs ATTACH PARTITION {schema}.job_runs_legacy
    FOR VALUES FROM (MINVALUE) TO ('{legacy_end}');
ALTER TABLE {schema}.job_run_attempts ATTACH PARTITION {schema}.job_run_attempts_legacy
    FOR VALUES FROM (MINVALUE) TO ('{legacy_end}');
";

/// An empty plain table has nothing to keep.
pub(crate) const DROP_LEGACY: &str = "
DROP TABLE {schema}.job_runs_legacy, {schema}.job_run_attempts_legacy;
";

/// Records the layout (`$1` span, `$2` legacy end or NULL).
pub(crate) const RECORD_LAYOUT: &str =
    "INSERT INTO {schema}.history_layout (span, legacy_end) VALUES ($1, $2)";

/// The partitions attached to `$1` (a table's qualified name) and the tables of the schema that
/// look like partitions but are not attached (a drop that stopped half-way): name, attached.
pub(crate) const PARTITIONS: &str = r"
SELECT c.relname::text AS name, c.relispartition AS attached
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind = 'r'
  AND c.relname ~ '^job_runs_(p[0-9]{8}|legacy)$'
";

/// One partition of each table for the slots from `{lo}` to `{hi}`: made beside the parent, given
/// the rows the default partition holds for that range (one statement each: a row inserted after
/// it makes the attach fail, and the whole is tried again later), then attached, which checks that
/// the default partition holds no more of them.
pub(crate) const CREATE_PARTITION: &str = "
CREATE TABLE {schema}.{runs} (LIKE {schema}.job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
WITH moved AS (
    DELETE FROM {schema}.job_runs_default
    WHERE scheduled_at >= '{lo}' AND scheduled_at < '{hi}'
    RETURNING *
)
INSERT INTO {schema}.{runs} SELECT * FROM moved;
ALTER TABLE {schema}.job_runs ATTACH PARTITION {schema}.{runs} FOR VALUES FROM ('{lo}') TO ('{hi}');
CREATE TABLE {schema}.{attempts}
    (LIKE {schema}.job_run_attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
WITH moved AS (
    DELETE FROM {schema}.job_run_attempts_default
    WHERE scheduled_at >= '{lo}' AND scheduled_at < '{hi}'
    RETURNING *
)
INSERT INTO {schema}.{attempts} SELECT * FROM moved;
ALTER TABLE {schema}.job_run_attempts ATTACH PARTITION {schema}.{attempts}
    FOR VALUES FROM ('{lo}') TO ('{hi}');
";

/// Takes both partitions out of their parents (a short exclusive lock on the parents; the caller
/// sets a lock timeout so that a busy moment is skipped, not queued behind).
pub(crate) const DETACH: &str = "
ALTER TABLE {schema}.job_runs DETACH PARTITION {schema}.{runs};
ALTER TABLE {schema}.job_run_attempts DETACH PARTITION {schema}.{attempts};
";

/// A CTE prefix: each row of the runs table `{runs}` judged by retention's rule for the jobs in
/// `$1` kept `$2` microseconds (`PRUNE_RUNS` in `retention.rs`): `kept` unless the job is one of them, the run
/// finished for good longer ago than its keep, and it is not at or after the job's newest scheduled
/// slot (catch-up's watermark, looked for in the whole table and in `{runs}`, attached or not).
macro_rules! judged {
    () => {
        r#"
WITH spec AS (
    SELECT s.job_name, s.keep_us
    FROM unnest($1::text[], $2::bigint[]) AS s(job_name, keep_us)
),
seen AS (
    SELECT job_name, max(scheduled_at) FILTER (WHERE "trigger" <> 'manual') AS mark
    FROM {schema}.{runs}
    GROUP BY job_name
),
marks AS (
    SELECT s.job_name,
           greatest(s.mark,
                    (SELECT max(m.scheduled_at) FROM {schema}.job_runs m
                     WHERE m.job_name = s.job_name
                       AND m."trigger" IN ('schedule', 'catch_up', 'backfill'))) AS mark
    FROM seen s
),
judged AS (
    SELECT r.id, r.job_name,
           NOT COALESCE(
               k.job_name IS NOT NULL
               AND r.status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned')
               AND (r.status <> 'abandoned' OR r.next_attempt_at IS NULL)
               AND r.finished_at < {now} - k.keep_us * interval '1 microsecond'
               AND (r."trigger" = 'manual' OR r.scheduled_at < mk.mark),
               false) AS kept
    FROM {schema}.{runs} r
    LEFT JOIN spec k ON k.job_name = r.job_name
    LEFT JOIN marks mk ON mk.job_name = r.job_name
)
"#
    };
}

/// Whether `{runs}` holds a row retention keeps (`judged!`).
pub(crate) const KEEPS_ANY: &str = concat!(
    judged!(),
    "SELECT EXISTS (SELECT 1 FROM judged WHERE kept) AS keeps\n"
);

/// The end of a drop, on the detached partitions: the rows retention keeps (which a change made
/// between the check and the detach can have made) go back into the parents, where the default
/// partition takes them; the audit records of the others go; answers the runs dropped per job.
/// The caller then drops both tables in the same transaction.
pub(crate) const FINISH_DROP: &str = concat!(
    judged!(),
    r#",
kept AS (SELECT id FROM judged WHERE kept),
back AS (
    INSERT INTO {schema}.job_runs
    SELECT r.* FROM {schema}.{runs} r WHERE r.id IN (SELECT id FROM kept)
),
back_attempts AS (
    INSERT INTO {schema}.job_run_attempts
    SELECT a.* FROM {schema}.{attempts} a WHERE a.run_id IN (SELECT id FROM kept)
),
audit AS (
    DELETE FROM {schema}.job_run_audit a
    USING judged j
    WHERE a.run_id = j.id AND NOT j.kept
)
SELECT job_name, count(*)::bigint AS runs FROM judged WHERE NOT kept GROUP BY job_name
"#
);

/// Drops both detached tables.
pub(crate) const DROP: &str = "DROP TABLE {schema}.{runs}, {schema}.{attempts}";
