-- Overlap decisions and due work.
--
-- A claim under an overlap policy looks for a fresh `running` run of the same job and partition, and
-- buffer_one / replace update the waiting or running runs of that job and partition: all found by
-- (job_name, partition_key, status). Due work (retries, hand-overs, buffered slots, stale runs) is
-- found by (status, next_attempt_at), which 0001 already indexes as slotguard_job_runs_status.

CREATE INDEX slotguard_job_runs_job_status
    ON slotguard_job_runs (job_name, partition_key, status);
