//! The events a claim implies, logged the same way whichever store carried it out.

use crate::store::SlotKey;

/// Something a claim did that the runtime cannot see in its answer: logged by [`Event::emit`],
/// which every store calls once its transaction committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A new slot was recorded `skipped`: another run of its job and partition is running.
    Skipped {
        /// The slot.
        key: &'a SlotKey,
    },
    /// A new slot waits for the running one (`buffer_one`); `superseded` older waiting slots gave
    /// way.
    Buffered {
        /// The slot.
        key: &'a SlotKey,
        /// How many waiting slots were recorded `skipped`.
        superseded: usize,
    },
    /// A new slot runs and `replaced` running runs of its job and partition were stopped.
    Replaced {
        /// The new slot.
        key: &'a SlotKey,
        /// How many runs were stopped.
        replaced: usize,
    },
    /// A stale run of the job and partition was fenced because the newer slot `key` runs now.
    Fenced {
        /// The newer slot.
        key: &'a SlotKey,
        /// The fenced run.
        run_id: i64,
    },
    /// A run had all its attempts and became `dead`.
    Dead {
        /// The run's slot.
        key: &'a SlotKey,
        /// The run.
        run_id: i64,
        /// Attempts made.
        attempt: u32,
        /// The job's `max_attempts`.
        max_attempts: u32,
    },
}

impl Event<'_> {
    /// The `event` field of the log line.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Skipped { .. } => "job_skipped",
            Event::Buffered { .. } => "job_buffered",
            Event::Replaced { .. } => "job_replaced",
            Event::Fenced { .. } => "job_fenced",
            Event::Dead { .. } => "job_dead",
        }
    }

    /// Logs the event (`job_skipped`, `job_buffered` and `job_replaced` at info, `job_fenced` and
    /// `job_dead` at warn), with the job, the slot and the partition as fields.
    pub fn emit(&self) {
        let event = self.name();
        match self {
            Event::Skipped { key } => tracing::info!(
                event, job = ?key.job, slot = %key.scheduled_at, partition = ?key.partition,
                reason = super::reason::SKIPPED_OVERLAP,
                "slot skipped: a previous run is still running"
            ),
            Event::Buffered { key, superseded } => tracing::info!(
                event, job = ?key.job, slot = %key.scheduled_at, partition = ?key.partition,
                superseded, "slot waits for the running one"
            ),
            Event::Replaced { key, replaced } => tracing::info!(
                event, job = ?key.job, slot = %key.scheduled_at, partition = ?key.partition,
                replaced, "running runs abandoned for a newer slot"
            ),
            Event::Fenced { key, run_id } => {
                crate::metrics::run_fenced(&key.job);
                tracing::warn!(
                    event, job = ?key.job, slot = %key.scheduled_at, partition = ?key.partition,
                    run_id, "a stale run of the job was fenced: a newer slot runs now"
                );
            }
            Event::Dead {
                key,
                run_id,
                attempt,
                max_attempts,
            } => {
                crate::metrics::run_dead(&key.job);
                tracing::warn!(
                    event, job = ?key.job, slot = %key.scheduled_at, partition = ?key.partition,
                    run_id, attempt, max_attempts,
                    "attempts exhausted: the run is dead and needs a person"
                );
            }
        }
    }

    /// Logs every event of `events`.
    pub fn emit_all(events: &[Event<'_>]) {
        events.iter().for_each(Event::emit);
    }
}
