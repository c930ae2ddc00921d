//! Schedules as data: schedules of a job kept in the store and changed at run time
//! ([`ScheduleStore`]), beside the one its code declares.
//!
//! A stored schedule is a list of versions, each appended by one change and never rewritten (the
//! versions are its history). A change takes effect at its version's
//! [`effective_at`](ScheduleVersion::effective_at): [`SCHEDULE_FENCE`] after the store wrote it
//! (by the store's clock), and never before the version it replaces. A slot at instant `T` is due
//! under the version in force at `T`, so every replica that knows the versions in force up to `T`
//! decides the slot alike; [`ScheduleChanges::fresh_at`] tells a replica how far that is.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{ClaimRequest, SlotKey, StoreError};

/// How long after a change is written it takes effect. A replica whose copy of the versions was
/// read at store time `F` knows every version in force up to `F + SCHEDULE_FENCE`: a change written
/// after its read takes effect later than that (see [`ScheduleStore::schedule_changes`]).
pub const SCHEDULE_FENCE: Duration = Duration::from_millis(500);

/// A schedule as an operator writes it: a job's slots on an expression, in a zone, for one
/// partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    /// The job whose handler runs the slots.
    pub job: String,
    /// The cron expression.
    pub cron: String,
    /// The IANA zone the expression is read in.
    pub zone: String,
    /// The DST policy's name (`vixie`, `skip`, `shift`, `instant`).
    pub dst: String,
    /// The partition (tenant) of its slots; empty for the job's own.
    pub partition: String,
    /// No slot before this instant.
    pub start_at: Option<DateTime<Utc>>,
    /// No slot after this instant.
    pub end_at: Option<DateTime<Utc>>,
    /// At most this many slots from the moment the version takes effect (manual runs and
    /// backfills are not slots of a schedule, so they do not count).
    pub remaining_runs: Option<u32>,
    /// Whether the schedule is paused: it has no slots while it is.
    pub paused: bool,
    /// Why it is paused (an operator's note, or the system's after a failure).
    pub note: Option<String>,
    /// Whether a run of one of its slots that fails for good (its retries spent, or a permanent
    /// error) pauses the schedule, with a note naming the slot and the error.
    pub pause_on_failure: bool,
}

impl ScheduleSpec {
    /// `job`'s slots on `cron` in `zone` for `partition` (empty: the job's own), with the default
    /// DST policy (`vixie`), no bounds, not paused.
    pub fn new(
        job: impl Into<String>,
        cron: impl Into<String>,
        zone: impl Into<String>,
        partition: impl Into<String>,
    ) -> Self {
        ScheduleSpec {
            job: job.into(),
            cron: cron.into(),
            zone: zone.into(),
            dst: "vixie".to_owned(),
            partition: partition.into(),
            start_at: None,
            end_at: None,
            remaining_runs: None,
            paused: false,
            note: None,
            pause_on_failure: false,
        }
    }
}

/// One version of a stored schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleVersion {
    /// The schedule's id, unique in the store.
    pub id: String,
    /// Its version: 1 for the first, one more for each change.
    pub version: i64,
    /// The schedule from this version on; `None` once it was removed.
    pub spec: Option<ScheduleSpec>,
    /// When this version takes effect (store clock).
    pub effective_at: DateTime<Utc>,
    /// Who wrote it.
    pub changed_by: String,
    /// When it was written (store clock).
    pub changed_at: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// Its place in the order of all changes in the store, rising.
    pub seq: i64,
}

/// What [`ScheduleStore::schedule_changes`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleChanges {
    /// The versions written after the caller's `seq`, in the order they were written.
    pub versions: Vec<ScheduleVersion>,
    /// The store's clock when the read saw every change written before it: a change the read
    /// missed takes effect after `fresh_at + SCHEDULE_FENCE`.
    pub fresh_at: DateTime<Utc>,
}

/// The answer to [`ScheduleStore::write_schedule`].
// One per change made by an operator: not worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleWrite {
    /// The new version.
    Written(ScheduleVersion),
    /// The schedule's latest version was not the one the change was read at; nothing was written.
    Stale {
        /// The latest version (0: the schedule does not exist).
        current: i64,
    },
}

/// Schedules kept in the store: versions appended by operators' changes, read by every replica.
#[async_trait]
pub trait ScheduleStore: Send + Sync + 'static {
    /// Appends a version of schedule `id` if its latest version is `expected` (0: it has none),
    /// in one transaction with an audit record of `spec`'s job (or the removed schedule's). `spec`
    /// `None` removes the schedule; a removed schedule's id may be written again. The version takes
    /// effect at the store's clock plus [`SCHEDULE_FENCE`], or at its predecessor's, whichever is
    /// later.
    ///
    /// Writes are serialized with each other and with [`schedule_changes`](Self::schedule_changes),
    /// so that a read never misses a change that takes effect before its `fresh_at` plus the fence.
    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &str,
        reason: &str,
    ) -> Result<ScheduleWrite, StoreError>;

    /// The versions written after `after` (a [`ScheduleVersion::seq`]; 0 for all), at most
    /// `limit`, in the order they were written, and the time the read saw every change before it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn schedule_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<ScheduleChanges, StoreError>;

    /// The latest version of each schedule that is not removed, of `job` if given, by id, those
    /// after `after_id`, at most `limit`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn schedules(
        &self,
        job: Option<&str>,
        after_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduleVersion>, StoreError>;

    /// Every version of schedule `id`, oldest first (empty: it never existed).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, StoreError>;

    /// Records the upcoming slot of `request` `skipped` with `reason`, by `by`, unless it has a row
    /// (then nothing is written and the answer is `false`), with an audit record. Unlike
    /// [`SlotStore::record_skipped`](super::SlotStore::record_skipped), a slot in the future is
    /// recorded: that is what skipping it means.
    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, StoreError>;

    /// Removes the row an operator's [`skip_slot`](Self::skip_slot) wrote for `key`, if it is
    /// still that row (`skipped`, never claimed), with an audit record; `false` when there is no
    /// such row.
    async fn unskip_slot(&self, key: &SlotKey, by: &str, reason: &str) -> Result<bool, StoreError>;
}

/// The message of a slot an operator skipped, before their reason.
pub const SKIPPED_BY_OPERATOR: &str = "skipped by an operator";

/// When a version written at `now` takes effect: [`SCHEDULE_FENCE`] later, and never before the
/// version it follows (in force from `previous`).
pub fn effective_at(now: DateTime<Utc>, previous: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let fenced = now + chrono::Duration::from_std(SCHEDULE_FENCE).unwrap_or_default();
    previous.map_or(fenced, |p| fenced.max(p))
}

/// The audit action of a write: `schedule_add` when the schedule did not exist (or was removed),
/// `schedule_remove` when `spec` is `None`, `schedule_change` otherwise.
pub fn audit_action(existed: bool, spec: Option<&ScheduleSpec>) -> &'static str {
    match (existed, spec) {
        (_, None) => "schedule_remove",
        (false, Some(_)) => "schedule_add",
        (true, Some(_)) => "schedule_change",
    }
}

/// The audit reason of a write of version `version` of schedule `id`.
pub fn audit_reason(id: &str, version: i64, reason: &str) -> String {
    format!("schedule `{id}` v{version}: {reason}")
}

/// The message recorded on a slot an operator skipped for `reason`.
pub fn operator_skip_message(reason: &str) -> String {
    format!("{SKIPPED_BY_OPERATOR}: {reason}")
}

/// The answer to a write that stored `version`, logged (`event = "schedule_written"`) with its
/// audit `action` and who made it.
pub fn written(version: ScheduleVersion, action: &str, by: &str) -> ScheduleWrite {
    tracing::info!(
        event = "schedule_written",
        schedule = ?version.id,
        version = version.version,
        action,
        actor = ?by,
        "stored schedule changed"
    );
    ScheduleWrite::Written(version)
}
