-- A job's business calendar, convention and shift, as `CalendarDefinition::to_stored` writes it
-- (NULL for a job without one), so that operators see it and the admin rebuilds the schedule.

ALTER TABLE slotguard_jobs ADD COLUMN calendar TEXT;
