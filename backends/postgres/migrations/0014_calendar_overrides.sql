-- Operators' holiday overrides: a date added to a business calendar as a holiday, or removed from
-- it, appended and never rewritten (`CalendarStore`); the latest of a calendar and date decides it.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.
--
-- `seq` orders every override in the schema: a write draws it after taking the schedules' advisory
-- lock (which overrides share) and commits before releasing it, so the order of `seq` is the order
-- of the commits.
CREATE TABLE {schema}.calendar_overrides (
    seq            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    calendar_name  text        NOT NULL,
    holiday_date   date        NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('add', 'remove')),
    -- The holiday's name (empty for a removal).
    holiday_name   text        NOT NULL,
    reason         text        NOT NULL,
    changed_by     text        NOT NULL,
    -- When it was written (the database clock) and when it takes effect.
    changed_at     timestamptz NOT NULL,
    effective_at   timestamptz NOT NULL
);
