//! The trace context a scheduler queues with its slots (feature `otel` of `slotguard`): kept on
//! the rows it queued, in the enqueue's own transaction, and handed back by `claim_due`.

use slotguard::store::{Claim, ClaimRequest};

use crate::error::SqliteError;
use crate::{Shared, WriteTx};

/// Keeps the W3C `traceparent` of the span that queued a slot on its row, for the worker's run to
/// link to. Only a row just queued (`pending`, attempt 0) without one is written.
const KEEP_TRACE: &str = "
UPDATE slotguard_job_runs SET trace_parent = ?4
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3
  AND status = 'pending' AND attempt = 0 AND trace_parent IS NULL";

impl Shared {
    /// Writes the trace context of each request answered [`Claim::Queued`] that carries one.
    pub(crate) async fn keep_traces(
        &self,
        w: &mut WriteTx<'_>,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
        answers: &[&Claim],
    ) -> Result<(), SqliteError> {
        for ((request, trace), answer) in requests.iter().zip(traces).zip(answers) {
            let (Some(trace), Claim::Queued) = (trace, answer) else {
                continue;
            };
            sqlx::query(KEEP_TRACE)
                .bind(&request.key.job)
                .bind(request.key.scheduled_at.timestamp_millis())
                .bind(&request.key.partition)
                .bind(trace)
                .execute(&mut *w.tx)
                .await
                .map_err(|e| self.query_error(e))?;
        }
        Ok(())
    }
}
