//! Pause after a failure: a run of a stored schedule's slot that fails for good (its retries spent,
//! or a permanent error) pauses the schedules of its job and partition that ask for it
//! ([`ScheduleSpec::pause_on_failure`]), with a note the system writes; an operator resumes them.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::store::{ScheduleStore, ScheduleVersion, ScheduleWrite};

/// Who the audit trail names for a pause after a failure.
pub(crate) const SYSTEM: &str = "slotguard";

/// How many times a pause is written again when an operator's change came first.
const TRIES: usize = 3;

/// The longest error text a note quotes, in bytes.
const QUOTED: usize = 400;

/// Pauses the schedules of `job` on `partition` that pause on failure, after the run of `slot`
/// failed for good with `message`. Failures are logged: the run's outcome is recorded either way.
pub(crate) async fn pause(
    store: Arc<dyn ScheduleStore>,
    (job, partition): (Arc<str>, Arc<str>),
    slot: DateTime<Utc>,
    message: String,
) {
    let note = note(slot, &message);
    let mut after: Option<String> = None;
    loop {
        let page = match store.schedules(Some(&job), after.as_deref(), 500).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(error = %e, %job, "could not read the schedules to pause after a failure");
                return;
            }
        };
        for latest in page.iter().filter(|v| pauses(v, &partition)) {
            pause_one(&*store, latest.clone(), &note).await;
        }
        if page.len() < 500 {
            return;
        }
        after = page.last().map(|v| v.id.clone());
    }
}

/// Whether `latest` is an active schedule of `partition` that pauses on failure.
fn pauses(latest: &ScheduleVersion, partition: &str) -> bool {
    latest
        .spec
        .as_ref()
        .is_some_and(|s| s.partition == partition && s.pause_on_failure && !s.paused)
}

/// Writes a paused version of the schedule, reading it again when someone changed it meanwhile.
async fn pause_one(store: &dyn ScheduleStore, mut latest: ScheduleVersion, note: &str) {
    for _ in 0..TRIES {
        let Some(mut spec) = latest.spec.clone().filter(|s| !s.paused) else {
            return;
        };
        spec.paused = true;
        spec.note = Some(note.to_owned());
        let id = latest.id.clone();
        match store
            .write_schedule(&id, latest.version, Some(&spec), SYSTEM, note)
            .await
        {
            Ok(ScheduleWrite::Written(_)) => {
                tracing::warn!(event = "schedule_paused_after_failure", schedule = %id, "{note}");
                return;
            }
            Ok(ScheduleWrite::Stale { .. }) => {
                match store.schedule_history(&id).await.map(|h| h.last().cloned()) {
                    Ok(Some(now)) if now.spec.is_some() => latest = now,
                    _ => return,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, schedule = %id, "could not pause the schedule after a failure");
                return;
            }
        }
    }
}

/// The note of a pause after the run of `slot` failed with `message`.
fn note(slot: DateTime<Utc>, message: &str) -> String {
    let mut quoted = message.to_owned();
    if quoted.len() > QUOTED {
        let mut end = QUOTED;
        while !quoted.is_char_boundary(end) {
            end -= 1;
        }
        quoted.truncate(end);
        quoted.push('…');
    }
    format!(
        "paused after the run of slot {} failed for good: {quoted}",
        crate::operate::rfc3339(&slot)
    )
}
