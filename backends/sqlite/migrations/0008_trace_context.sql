-- The W3C `traceparent` of the span that queued a run for workers (the scheduler role, with
-- slotguard's `otel` feature), so that the worker's run span links to it. NULL otherwise.

ALTER TABLE slotguard_job_runs ADD COLUMN trace_parent TEXT;
