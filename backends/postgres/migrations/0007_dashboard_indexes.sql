-- What the dashboard's pages read at scale (1,000 jobs, 1,000,000 runs).
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- A job's runs of one status, newest slot first (the job page's status filter).
CREATE INDEX job_runs_job_status_idx ON {schema}.job_runs (job_name, status, scheduled_at DESC, id DESC);
-- Runs of one status across every job, newest slot first (the failures page).
CREATE INDEX job_runs_status_scheduled_idx ON {schema}.job_runs (status, scheduled_at DESC, id DESC);
