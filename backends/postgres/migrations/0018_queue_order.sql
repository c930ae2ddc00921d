-- The head of a job's queue in the order claims hand runs out: slot time, then partition. A claim of
-- jobs that run freely (overlap `allow`, no cluster-wide limit) locks each job's first due runs
-- straight from this index, so the index must give that whole order; with two columns, runs of one
-- slot in several partitions came out in no set order, and a plan that sorted them read the whole
-- history through `job_runs_slot_key` instead. Older releases read the index as before (its first
-- two columns are the old ones). Building it reads the table once, under a lock that holds off
-- writes meanwhile; it holds active rows only.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

DROP INDEX {schema}.job_runs_active_idx;
CREATE INDEX job_runs_active_idx ON {schema}.job_runs (job_name, scheduled_at, partition_key)
    WHERE status IN ('pending', 'abandoned', 'running');
