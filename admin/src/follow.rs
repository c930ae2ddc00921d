//! Following a run to its outcome: what `slotguard trigger --wait` and the HTTP router's
//! `GET /jobs/{job}/runs/{slot}?wait=` do.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::{Admin, AdminError};
use slotguard::store::{RunRecord, RunStatus};

/// The longest [`Admin::wait`] waits in one call: an hour.
pub const MAX_WAIT: Duration = Duration::from_secs(3_600);

/// How often [`Admin::wait`] reads the run.
const POLL: Duration = Duration::from_millis(250);

/// Whether a run has an outcome that nothing changes by itself: `succeeded`, `failed`, `dead`,
/// `skipped`, or `abandoned` with no next attempt. A `pending` or `running` run, or an `abandoned`
/// one due for another attempt, is still going.
pub fn finished(run: &RunRecord) -> bool {
    match run.status {
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::Dead | RunStatus::Skipped => true,
        RunStatus::Abandoned => run.next_attempt_at.is_none(),
        RunStatus::Pending | RunStatus::Running => false,
    }
}

impl Admin {
    /// The run of one slot once it is [`finished`], or as it is when `timeout` has passed (check
    /// [`finished`] on the answer). Reads the run every 250 ms; `timeout` is at most [`MAX_WAIT`].
    ///
    /// # Errors
    /// As [`Admin::run`]; [`AdminError::Invalid`] for the field `wait` when `timeout` is over
    /// [`MAX_WAIT`].
    pub async fn wait(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        timeout: Duration,
    ) -> Result<RunRecord, AdminError> {
        check_wait(timeout)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let run = self.run(job, slot, partition).await?;
            let now = tokio::time::Instant::now();
            if finished(&run) || now >= deadline {
                return Ok(run);
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
    }
}

/// Checks a wait: at most [`MAX_WAIT`].
///
/// # Errors
/// [`AdminError::Invalid`] for the field `wait`.
pub fn check_wait(timeout: Duration) -> Result<(), AdminError> {
    if timeout <= MAX_WAIT {
        return Ok(());
    }
    Err(AdminError::Invalid {
        field: "wait",
        problem: format!(
            "{} s is too long: at most {} s",
            timeout.as_secs(),
            MAX_WAIT.as_secs()
        ),
    })
}
