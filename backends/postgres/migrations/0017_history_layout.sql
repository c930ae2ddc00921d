-- What time-partitioned history needs (docs/scale.md, "Partitioned history"): the slot time of each
-- attempt, written by every claim from now on, so that attempts can be partitioned by their run's
-- slot like the runs are; and the layout a schema was partitioned with. Both are cheap on a large
-- table: the column is added without a rewrite (NULL for the attempts written before it), and
-- nothing is partitioned until `PgBackendBuilder::partitioned_history` asks for it.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

ALTER TABLE {schema}.job_run_attempts ADD COLUMN scheduled_at timestamptz;

-- One row once the history is partitioned; none while it is a plain table.
CREATE TABLE {schema}.history_layout (
    -- Always true: at most one row.
    one            boolean     PRIMARY KEY DEFAULT true CHECK (one),
    -- The partitions' span (`day`, `week`, `month`), in UTC.
    span           text        NOT NULL CHECK (span IN ('day', 'week', 'month')),
    -- The end of the partition that holds the rows from before the conversion (`job_runs_legacy`),
    -- or NULL when the table was empty.
    legacy_end     timestamptz,
    partitioned_at timestamptz NOT NULL DEFAULT now()
);
