//! Counts at a glance: per job, the runs running, queued and failed since an instant, and the slots
//! missed in a range; the numbers the dashboard's jobs page leads with.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use slotguard::store::RunCounts;

use crate::missed::{Sink, Turn};
use crate::{Admin, AdminError, MissedCursor, MissedSlot};

/// The missed slots of every job in a range, counted: see [`Admin::missed_counts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedCounts {
    /// Per job, in byte order of names: how many of its slots in the range have no row, or why they
    /// cannot be counted (a stored schedule this version cannot read). A job at or after
    /// [`stopped_at`](Self::stopped_at) has a partial count or none.
    pub jobs: BTreeMap<String, Result<usize, AdminError>>,
    /// Where counting stopped when it reached its budget; `None` when every job was counted.
    pub stopped_at: Option<MissedCursor>,
}

/// One job's count in [`MissedCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedCount {
    /// Every slot of the range was looked at.
    Counted(usize),
    /// Counting stopped inside or before the job: at least this many.
    AtLeast(usize),
    /// The job's stored schedule cannot be read by this version.
    Unreadable,
}

impl MissedCounts {
    /// The count of `job`.
    pub fn of(&self, job: &str) -> MissedCount {
        let counted = self
            .stopped_at
            .as_ref()
            .is_none_or(|at| job < at.job.as_str());
        match (self.jobs.get(job), counted) {
            (Some(Err(_)), _) => MissedCount::Unreadable,
            (Some(Ok(n)), true) => MissedCount::Counted(*n),
            (None, true) => MissedCount::Counted(0),
            (found, false) => MissedCount::AtLeast(found.and_then(|f| f.clone().ok()).unwrap_or(0)),
        }
    }

    /// The counted slots of every job, and whether that is all of them.
    pub fn total(&self) -> (usize, bool) {
        let sum = self.jobs.values().filter_map(|n| n.as_ref().ok()).sum();
        (sum, self.stopped_at.is_none())
    }
}

/// A walk's sink that keeps only the number of slots per job.
struct Tally(BTreeMap<String, Result<usize, AdminError>>);

impl Sink for Tally {
    fn full(&self) -> bool {
        false
    }

    fn take(
        &mut self,
        job: &str,
        found: Result<Vec<MissedSlot>, AdminError>,
    ) -> Option<DateTime<Utc>> {
        let entry = self.0.entry(job.to_owned()).or_insert(Ok(0));
        match (entry, found) {
            (Ok(n), Ok(slots)) => *n += slots.len(),
            (entry, Err(e)) => *entry = Err(e),
            (Err(_), Ok(_)) => {}
        }
        None
    }
}

impl Admin {
    /// Runs of every job running now, queued, and failed (`failed`, `dead`, `abandoned`) with a
    /// slot at or after `failed_since`, in one read; a job with none is not in the map.
    ///
    /// # Errors
    /// [`AdminError::Store`].
    pub async fn run_counts(
        &self,
        failed_since: DateTime<Utc>,
    ) -> Result<HashMap<String, RunCounts>, AdminError> {
        let counts = self.store.run_counts(failed_since).await?;
        Ok(counts.into_iter().map(|c| (c.job.clone(), c)).collect())
    }

    /// The missed slots of every job in `[from, to)` (before now, from when each job was first
    /// registered), counted, looking at no more than `budget` schedule slots in all. Jobs are
    /// counted in byte order of names; when the budget runs out, [`MissedCounts::stopped_at`]
    /// says where, and [`MissedCounts::of`] answers [`MissedCount::AtLeast`] from there on.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for an empty range or an instant before 1970;
    /// [`AdminError::Store`].
    pub async fn missed_counts(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        budget: usize,
    ) -> Result<MissedCounts, AdminError> {
        let to = self.settled_end(from, to)?;
        let mut records = self.store.jobs().await?;
        records.sort_by(|a, b| a.definition.name.cmp(&b.definition.name));
        let turns = records
            .into_iter()
            .map(|record| Turn {
                start: from.max(record.registered_at),
                record,
            })
            .filter(|turn| turn.start < to)
            .collect();
        let mut tally = Tally(BTreeMap::new());
        let stopped_at = self.walk(turns, to, budget, &mut tally).await?;
        Ok(MissedCounts {
            jobs: tally.0,
            stopped_at,
        })
    }
}
