//! The trace context a scheduler queues with its slots (feature `otel` of `slotguard`).

/// Keeps the W3C `traceparent` of the span that queued each slot on its row, for the worker's run
/// to link to (`CLAIM_DUE` returns it). Runs right after `CLAIM` in its enqueue mode, for the slots
/// it answered `queued`; a row a worker already claimed (attempt above 0) or that has a context is
/// left alone. Walks the slot key's unique index.
///
/// Parameters, arrays of one length: `$1` job names, `$2` slot instants, `$3` partition keys, `$4`
/// trace contexts.
pub(crate) const KEEP_TRACES: &str = "
UPDATE {schema}.job_runs j
SET trace_parent = t.trace_parent
FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[])
     AS t(job_name, scheduled_at, partition_key, trace_parent)
WHERE j.job_name = t.job_name
  AND j.scheduled_at = t.scheduled_at
  AND j.partition_key = t.partition_key
  AND j.status = 'pending'
  AND j.attempt = 0
  AND j.trace_parent IS NULL
";
