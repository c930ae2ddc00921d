-- Overlap decisions and due work.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- `claim` looks for a running run of the same job and partition (the overlap policy), and `claim_due`
-- for one before it claims a buffered slot.
CREATE INDEX job_runs_running_job_idx ON {schema}.job_runs (job_name, partition_key)
    WHERE status = 'running';
-- `claim_due` looks for retries, hand-overs and buffered slots by status and due time.
CREATE INDEX job_runs_due_idx ON {schema}.job_runs (status, next_attempt_at)
    WHERE status IN ('pending', 'abandoned');
