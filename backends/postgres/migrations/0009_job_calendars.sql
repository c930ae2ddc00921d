-- A job's business calendar, convention and shift, as `CalendarDefinition::to_stored` writes it
-- (NULL for a job without one), so that operators see it and the admin rebuilds the schedule.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

ALTER TABLE {schema}.jobs ADD COLUMN calendar text;
