//! Where a run-once process finds its slot: an argument, the environment, the Kubernetes
//! CronJob's annotation read through the downward API, or "the latest slot" for a systemd timer.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use slotguard_cron::Schedule;

use super::RunOnceError;

/// The annotation a Kubernetes CronJob puts on each Job it creates: the slot's instant, RFC 3339.
pub const ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The environment variable naming the slot (an RFC 3339 instant, or `latest`).
const SLOT_VAR: &str = "SLOTGUARD_SLOT";

/// The environment variable naming a downward-API annotations file.
const ANNOTATIONS_VAR: &str = "SLOTGUARD_ANNOTATIONS";

/// Where the slot of a [`run_once`](crate::Scheduler::run_once) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotSource {
    /// This instant (RFC 3339 in an argument, parsed with [`SlotSource::parse`]).
    At(DateTime<Utc>),
    /// The job's latest slot at or before now: a systemd timer fires for it.
    Latest,
    /// A downward-API file holding the pod's annotations (`key="value"` lines), read for
    /// [`ANNOTATION`].
    Annotations(PathBuf),
}

impl SlotSource {
    /// `latest`, or an RFC 3339 instant (`2026-03-08T02:00:00+09:00`).
    ///
    /// # Errors
    /// [`RunOnceError::NoSlot`] for anything else.
    pub fn parse(text: &str) -> Result<SlotSource, RunOnceError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("latest") {
            return Ok(SlotSource::Latest);
        }
        DateTime::parse_from_rfc3339(text)
            .map(|t| SlotSource::At(t.with_timezone(&Utc)))
            .map_err(|e| {
                RunOnceError::NoSlot(format!(
                    "`{}` is neither `latest` nor an RFC 3339 instant: {e}",
                    slotguard_cron::shown_within(text, 64)
                ))
            })
    }

    /// From the environment: `SLOTGUARD_SLOT` (an instant or `latest`), else the annotations file
    /// `SLOTGUARD_ANNOTATIONS` names, else [`SlotSource::Latest`].
    ///
    /// # Errors
    /// [`RunOnceError::NoSlot`] when `SLOTGUARD_SLOT` holds neither.
    pub fn from_env() -> Result<SlotSource, RunOnceError> {
        if let Some(slot) = std::env::var_os(SLOT_VAR) {
            return SlotSource::parse(&slot.to_string_lossy());
        }
        Ok(match std::env::var_os(ANNOTATIONS_VAR) {
            Some(path) => SlotSource::Annotations(PathBuf::from(path)),
            None => SlotSource::Latest,
        })
    }

    /// The slot's instant for a job with `schedule`, at `now`.
    pub(crate) fn resolve(
        &self,
        schedule: &Schedule,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, RunOnceError> {
        match self {
            SlotSource::At(at) => Ok(*at),
            SlotSource::Latest => latest(schedule, now),
            SlotSource::Annotations(path) => annotation(path),
        }
    }
}

/// The schedule's last slot at or before `now`.
fn latest(schedule: &Schedule, now: DateTime<Utc>) -> Result<DateTime<Utc>, RunOnceError> {
    // Walk back in growing steps until a slot is found before now, then forward to the last one.
    let mut back = chrono::Duration::minutes(1);
    for _ in 0..24 {
        let from = now - back;
        if let Some(first) = schedule.next_after(from).filter(|s| s.scheduled_at <= now) {
            let last = schedule
                .slots_after(first.scheduled_at)
                .take_while(|s| s.scheduled_at <= now)
                .last()
                .unwrap_or(first);
            return Ok(last.scheduled_at);
        }
        back = back * 2;
    }
    Err(RunOnceError::NoSlot(
        "the job's schedule has no slot in the last 30 years".to_owned(),
    ))
}

/// The annotation's instant in a downward-API annotations file.
fn annotation(path: &Path) -> Result<DateTime<Utc>, RunOnceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| RunOnceError::NoSlot(format!("cannot read {}: {e}", path.display())))?;
    let value = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .find(|(key, _)| key.trim() == ANNOTATION)
        .map(|(_, value)| value.trim().trim_matches('"'))
        .ok_or_else(|| RunOnceError::NoSlot(format!("{} has no `{ANNOTATION}`", path.display())))?;
    match SlotSource::parse(value)? {
        SlotSource::At(at) => Ok(at),
        _ => Err(RunOnceError::NoSlot(format!(
            "`{ANNOTATION}` is not an instant"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(cron: &str) -> Schedule {
        Schedule::new(
            cron.parse().unwrap(),
            chrono_tz::Tz::UTC,
            Default::default(),
        )
    }

    #[test]
    fn the_annotation_is_read_from_a_downward_api_file() {
        let dir = std::env::temp_dir().join(format!("sg-annot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("annotations");
        std::fs::write(
            &file,
            format!(
                "kubernetes.io/config.seen=\"x\"\n{ANNOTATION}=\"2026-03-08T02:00:00+09:00\"\n"
            ),
        )
        .unwrap();
        let at = SlotSource::Annotations(file.clone())
            .resolve(&schedule("0 17 * * *"), Utc::now())
            .unwrap();
        assert_eq!(at.to_rfc3339(), "2026-03-07T17:00:00+00:00");
        std::fs::write(&file, "other=\"1\"\n").unwrap();
        let err = SlotSource::Annotations(file).resolve(&schedule("* * * * *"), Utc::now());
        assert!(matches!(err, Err(RunOnceError::NoSlot(_))), "{err:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn latest_is_the_last_slot_at_or_before_now() {
        let now = DateTime::parse_from_rfc3339("2026-03-08T02:17:30Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = latest(&schedule("*/5 * * * *"), now).unwrap();
        assert_eq!(at.to_rfc3339(), "2026-03-08T02:15:00+00:00");
        let at = latest(&schedule("0 2 1 * *"), now).unwrap();
        assert_eq!(at.to_rfc3339(), "2026-03-01T02:00:00+00:00");
    }

    #[test]
    fn bad_text_is_no_slot() {
        assert!(matches!(
            SlotSource::parse("yesterday"),
            Err(RunOnceError::NoSlot(_))
        ));
        assert_eq!(SlotSource::parse(" LATEST "), Ok(SlotSource::Latest));
    }
}
