-- Which backend holds a running attempt, so that a run whose process has died is noticed at once.
-- Every backend that claims holds a shared advisory lock (`pres`, presence) on a connection of its
-- own for as long as it lives; PostgreSQL releases it the moment that session ends. A `running` row
-- whose presence is no longer held by any session, and whose heartbeat is older than half its stale
-- threshold, belongs to a process that is gone: it is made stale at once (see src/presence.rs).
-- NULL: claimed by a version without presence; such rows wait out their stale threshold.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

ALTER TABLE {schema}.job_runs ADD COLUMN presence integer;
