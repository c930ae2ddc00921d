-- Operators' holiday overrides: a date added to a business calendar as a holiday, or removed from
-- it, appended and never rewritten (`CalendarStore`); the latest of a calendar and date decides it.
--
-- `seq` orders every override in the file: writes are `BEGIN IMMEDIATE` transactions, so the order
-- of their rowids is the order of their commits. Dates are TEXT `YYYY-MM-DD`; instants INTEGER Unix
-- milliseconds, UTC, by the host clock read in SQL, as in 0001.
CREATE TABLE slotguard_calendar_overrides (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    calendar_name  TEXT    NOT NULL,
    holiday_date   TEXT    NOT NULL,
    kind           TEXT    NOT NULL CHECK (kind IN ('add', 'remove')),
    -- The holiday's name (empty for a removal).
    holiday_name   TEXT    NOT NULL,
    reason         TEXT    NOT NULL,
    changed_by     TEXT    NOT NULL,
    changed_at     INTEGER NOT NULL,
    effective_at   INTEGER NOT NULL
) STRICT;
