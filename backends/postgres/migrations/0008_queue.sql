-- The durable queue between schedulers and workers.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- `claim_due` and `due_jobs` read each job's runs that may still be handed out, oldest slot first:
-- a drained queue leaves millions of finished rows behind, which this index does not hold.
CREATE INDEX job_runs_active_idx ON {schema}.job_runs (job_name, scheduled_at)
    WHERE status IN ('pending', 'abandoned', 'running');
