//! Retrying every failed slot of a range: `slotguard retry JOB --failed --from --to`, the HTTP
//! router's `POST /jobs/{job}/retry-failed`.

use chrono::{DateTime, Utc};

use crate::checks::{ordered, partition_key};
use crate::{Admin, AdminError, ChangeRequest};
use slotguard::store::{RunChange, RunFilter, RunStatus, SlotKey};

/// The most runs one [`Admin::retry_failed`] retries; a range with more is refused, to be split.
pub const MAX_RETRY_RUNS: usize = 1_000;

/// What [`Admin::retry_failed`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRetry {
    /// The runs made `pending` again, oldest slot first: one audit entry each.
    pub retried: Vec<SlotKey>,
    /// Runs that were `failed` or `dead` when listed but had changed before their retry (another
    /// operator retried or cancelled them): left alone, not audited.
    pub changed: Vec<SlotKey>,
}

impl Admin {
    /// Retries every `failed` or `dead` run of `job` with a slot in `[from, to)`, as
    /// [`Admin::retry`] retries one: a new attempt of the same run each, one audit entry each.
    /// `partition` `None` is every partition. More than [`MAX_RETRY_RUNS`] such runs are refused
    /// before any is retried: split the range.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for a bad range, partition, reason or actor, or too many runs;
    /// [`AdminError::UnknownJob`]; [`AdminError::Store`], after which some runs may be retried (each
    /// with its audit entry) and the others not.
    pub async fn retry_failed(
        &self,
        job: &str,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        partition: Option<&str>,
        by: &ChangeRequest,
    ) -> Result<RangeRetry, AdminError> {
        let audit = by.entry("retry")?;
        ordered(from, to)?;
        if let Some(partition) = partition {
            partition_key(partition)?;
        }
        self.job(job).await?;
        let mut keys = Vec::new();
        for status in [RunStatus::Failed, RunStatus::Dead] {
            let filter = RunFilter {
                job: Some(job.to_owned()),
                status: Some(status),
                partition: partition.map(str::to_owned),
                from: Some(from),
                to: Some(to),
                limit: MAX_RETRY_RUNS + 1,
            };
            keys.extend(self.store.runs(&filter).await?.into_iter().map(|r| r.key));
        }
        if keys.len() > MAX_RETRY_RUNS {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "it holds more than {MAX_RETRY_RUNS} failed or dead runs; split the range"
                ),
            });
        }
        keys.sort_by(|a, b| (a.scheduled_at, &a.partition).cmp(&(b.scheduled_at, &b.partition)));
        let mut report = RangeRetry {
            retried: Vec::new(),
            changed: Vec::new(),
        };
        for key in keys {
            match self.store.retry(&key, &audit).await? {
                RunChange::Done { .. } => report.retried.push(key),
                RunChange::NotFound | RunChange::Refused { .. } => report.changed.push(key),
            }
        }
        Ok(report)
    }
}
