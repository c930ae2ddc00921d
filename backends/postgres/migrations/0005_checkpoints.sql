-- Checkpoints: progress a long job saves under its run, read by the next attempt.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

ALTER TABLE {schema}.job_runs ADD COLUMN checkpoint text;
