//! What a replica knows of the stored schedules: each followed schedule's versions as a
//! [`Timeline`], the entry its slots go through the chain as, and how far its copy is known to be
//! complete.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use slotguard_cron::Slot;

use crate::entry::JobEntry;
use crate::guard::GuardLevel;
use crate::runtime::Runtime;
use crate::store::{CalendarStamp, SCHEDULE_FENCE, ScheduleChanges, ScheduleVersion};
use crate::timeline::Timeline;

/// One stored schedule of a job this process has the handler of.
pub(super) struct Followed {
    timeline: Timeline,
    /// The job whose handler runs its slots.
    base: Arc<JobEntry>,
    /// The job's index in the runtime: its calendar's overrides apply.
    pub(super) base_index: usize,
    /// Per version: its entry and its partition.
    entries: HashMap<i64, (Arc<JobEntry>, Arc<str>)>,
    /// Its next slot, and the version it is due under.
    pub(super) next: Option<(Slot, i64)>,
    /// The last slot fired here.
    pub(super) fired: Option<DateTime<Utc>>,
}

impl Followed {
    /// The entry and partition a slot due under `version` goes through the chain with.
    pub(super) fn entry(&self, version: i64) -> Option<(Arc<JobEntry>, Arc<str>)> {
        self.entries.get(&version).cloned()
    }

    /// Follows the overrides of the job's calendar read so far, when the runtime follows them;
    /// whether it did (the job has a calendar).
    pub(super) fn follow_calendar(&mut self, rt: &Runtime) -> bool {
        let Some(spans) = rt.calendar_spans(self.base_index) else {
            return false;
        };
        self.timeline.follow_calendar(spans);
        true
    }

    /// What `slot` is planned on: the job's calendar in force at its instant.
    pub(super) fn stamp(&self, slot: &Slot) -> Option<Arc<CalendarStamp>> {
        self.timeline.stamp(slot).map(Arc::new)
    }

    /// Forgets the versions no slot after `at` can be under, with their entries: what a followed
    /// schedule keeps stays bounded by the changes still to take effect, however often it changed.
    pub(super) fn forget_before(&mut self, at: DateTime<Utc>) {
        self.timeline.forget_before(at);
        let timeline = &self.timeline;
        self.entries.retain(|v, _| timeline.schedule(*v).is_some());
    }

    /// Plans the next slot after the last one fired here, and after `from`.
    pub(super) fn replan(&mut self, from: DateTime<Utc>) {
        let from = self.fired.map_or(from, |f| f.max(from));
        self.next = self.timeline.next_after(from);
    }
}

/// The followed schedules, by id, and how far the copy is complete.
#[derive(Default)]
pub(super) struct Book {
    pub(super) followed: HashMap<String, Followed>,
    /// The last change read.
    pub(super) seq: i64,
    /// Every version in force up to this instant is known here (the last read's `fresh_at` plus the
    /// fence); `None` before the first read.
    pub(super) known_until: Option<DateTime<Utc>>,
}

impl Book {
    /// Applies one read of changes; returns the ids whose versions changed.
    pub(super) fn apply(
        &mut self,
        changes: ScheduleChanges,
        jobs: &[Arc<JobEntry>],
    ) -> Vec<String> {
        let mut changed = Vec::new();
        for version in changes.versions {
            self.seq = self.seq.max(version.seq);
            if self.follow(&version, jobs) {
                changed.push(version.id.clone());
            }
        }
        let fence = chrono::Duration::from_std(SCHEDULE_FENCE).unwrap_or_default();
        self.known_until = Some(changes.fresh_at + fence);
        changed
    }

    /// Whether slot `at` is decided by what is known here.
    pub(super) fn knows(&self, at: DateTime<Utc>) -> bool {
        self.known_until.is_some_and(|k| at <= k)
    }

    /// Adds `version` to its schedule's timeline, when this process has the job's handler.
    fn follow(&mut self, version: &ScheduleVersion, jobs: &[Arc<JobEntry>]) -> bool {
        let job = version
            .spec
            .as_ref()
            .map(|s| s.job.as_str())
            .or_else(|| self.followed.get(&version.id).map(|f| &*f.base.name));
        let Some(base_index) = job.and_then(|name| jobs.iter().position(|j| &*j.name == name))
        else {
            return false;
        };
        let base = &jobs[base_index];
        if base.level != GuardLevel::Slot {
            tracing::warn!(schedule = %version.id, job = %base.name, "a stored schedule needs its job at the `slot` level; not followed");
            return false;
        }
        let calendar = base.schedule.business();
        let followed = self
            .followed
            .entry(version.id.clone())
            .or_insert_with(|| Followed {
                timeline: Timeline::default(),
                base: Arc::clone(base),
                base_index,
                entries: HashMap::new(),
                next: None,
                fired: None,
            });
        followed.timeline.push(version, calendar);
        if let (Some(spec), Some(schedule)) =
            (&version.spec, followed.timeline.schedule(version.version))
        {
            let entry = Arc::new(base.for_schedule(schedule.clone()));
            let partition = Arc::from(spec.partition.as_str());
            followed.entries.insert(version.version, (entry, partition));
        }
        tracing::debug!(event = "schedule_followed", schedule = %version.id, job = %base.name, version = version.version, effective_at = %version.effective_at, "stored schedule changed");
        true
    }
}
