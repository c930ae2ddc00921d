-- Checkpoints: progress a long job saves under its run, read by the next attempt.
ALTER TABLE slotguard_job_runs ADD COLUMN checkpoint TEXT;
