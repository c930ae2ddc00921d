-- What a slot of a job with a business calendar was planned on, recorded with its run: the cron
-- expression's nominal dates it stands for (`YYYY-MM-DD`, comma-separated: several when they moved
-- onto one day), the calendar's name and its data version (with the last operator override in
-- force). NULL for a job without a calendar and for rows written before this migration.

ALTER TABLE slotguard_job_runs ADD COLUMN nominal_dates TEXT;
ALTER TABLE slotguard_job_runs ADD COLUMN calendar_name TEXT;
ALTER TABLE slotguard_job_runs ADD COLUMN calendar_version TEXT;
