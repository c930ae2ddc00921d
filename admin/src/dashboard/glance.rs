//! The counts the jobs page leads with: per job and in all, the runs running and queued now, and the
//! runs failed and slots missed in the last 24 hours.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};

use super::page::{Base, segment};
use crate::{Admin, AdminError, JobStatus, MissedCount, MissedCounts, rfc3339};
use slotguard::store::RunCounts;

/// How far back "failed" and "missed" count.
pub(super) const WINDOW_HOURS: i64 = 24;

/// The most schedule slots the missed counts look at: a day of 1,000 jobs every 5 minutes (288,000
/// slots) fits; past it, the jobs after the last one counted say "at least".
pub(super) const MISSED_BUDGET: usize = 3 * crate::MAX_SCAN_SLOTS;

/// The counts of every job, read together.
pub(super) struct Glance {
    since: DateTime<Utc>,
    runs: HashMap<String, RunCounts>,
    missed: MissedCounts,
}

impl Glance {
    /// Reads the run counts and the missed counts of the last [`WINDOW_HOURS`], at once.
    pub(super) async fn read(admin: &Admin, now: DateTime<Utc>) -> Result<Glance, AdminError> {
        let since = now - Duration::hours(WINDOW_HOURS);
        let (runs, missed) = tokio::try_join!(
            admin.run_counts(since),
            admin.missed_counts(since, now, MISSED_BUDGET)
        )?;
        Ok(Glance {
            since,
            runs,
            missed,
        })
    }

    /// The counts of one job.
    pub(super) fn runs_of(&self, job: &str) -> RunCounts {
        self.runs.get(job).cloned().unwrap_or_default()
    }

    /// The cells of a job's row: running, queued (with "wait for resume" when paused), failed and
    /// missed in the window.
    pub(super) fn cells(&self, base: &Base, job: &JobStatus) -> Markup {
        let name = &job.record.definition.name;
        let runs = self.runs_of(name);
        html! {
            td.n { (runs.running) }
            td.n.queued {
                (runs.queued)
                @if job.record.paused && runs.queued > 0 { br; small.waits { "wait for resume" } }
            }
            td.n { @if runs.failed > 0 { span.bad { (runs.failed) } } @else { "0" } }
            td.n { (self.missed_cell(base, name)) }
        }
    }

    fn missed_cell(&self, base: &Base, job: &str) -> Markup {
        let link = format!(
            "{}?from={}&cursor={}",
            base.at("/missed"),
            segment(&rfc3339(&self.since)),
            segment(&format!("{job}:{}", rfc3339(&self.since)))
        );
        html! {
            @match self.missed.of(job) {
                MissedCount::Counted(0) => "0",
                MissedCount::Counted(n) => a.bad href=(link) { (n) },
                MissedCount::AtLeast(n) => a href=(link) title="not all counted: see the missed slots" { "≥ " (n) },
                MissedCount::Unreadable => span title="this version cannot read its stored schedule" { "?" },
            }
        }
    }

    /// The totals over every job, above the table.
    pub(super) fn summary(&self, base: &Base, jobs: &[JobStatus]) -> Markup {
        let sum = |f: fn(&RunCounts) -> u64| self.runs.values().map(f).sum::<u64>();
        let paused = jobs.iter().filter(|j| j.record.paused).count();
        let inactive = jobs.iter().filter(|j| !j.active()).count();
        let (missed, complete) = self.missed.total();
        let missed_link = format!(
            "{}?from={}",
            base.at("/missed"),
            segment(&rfc3339(&self.since))
        );
        html! {
            ul.glance aria-label="at a glance" {
                li { strong { (jobs.len()) } " jobs" small { (paused) " paused · " (inactive) " inactive" } }
                li { strong { (sum(|c| c.running)) } " running" }
                li { strong { (sum(|c| c.queued)) } " queued" }
                li.failed { a href=(base.at("/failures")) { strong { (sum(|c| c.failed)) } " failed" } small { "last " (WINDOW_HOURS) " h" } }
                li.missed { a href=(missed_link) { strong { @if !complete { "≥ " } (missed) } " missed" } small { "last " (WINDOW_HOURS) " h" } }
            }
        }
    }
}
