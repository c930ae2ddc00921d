//! What operators read: jobs, runs, replicas and the audit trail. Nothing here changes the store.

use chrono::{DateTime, Utc};
use slotguard::store::{AuditRecord, JobRecord, ReplicaRecord, RunFilter, RunRecord};

use crate::checks::{named, ordered, partition_key};
use crate::planned::Planned;
use crate::{Admin, AdminError, JobStatus, check_page, shown};

impl Admin {
    /// Every registered job with its next slots, last run and pause state.
    ///
    /// # Errors
    /// [`AdminError::Store`] when the store could not be asked.
    pub async fn jobs(&self) -> Result<Vec<JobStatus>, AdminError> {
        let records = self.store.jobs().await?;
        let live: Vec<ReplicaRecord> = self
            .store
            .replicas()
            .await?
            .into_iter()
            .filter(|r| r.alive)
            .collect();
        let now = self.clock.now();
        let names: Vec<String> = records.iter().map(|r| r.definition.name.clone()).collect();
        // One read for every job's newest run (one statement on PostgreSQL), not one per job.
        let latest = self.store.latest_runs(&names).await?;
        let overrides = self.overrides_of(&records).await?;
        let mut out = Vec::with_capacity(records.len());
        for (record, last_run) in records.into_iter().zip(latest) {
            let next_slots = Planned::of(&record, &overrides)
                .map(|s| s.slots_after(now).take(3).map(|s| s.scheduled_at).collect())
                .unwrap_or_default();
            let replicas = runners(&live, &record.definition.name);
            out.push(JobStatus {
                record,
                next_slots,
                last_run,
                replicas,
            });
        }
        Ok(out)
    }

    /// Every scheduler process recorded in the store, by id, alive or gone (by the store's clock).
    /// A process removes itself on a graceful shutdown; one that died stays, shown gone, for a day.
    ///
    /// # Errors
    /// [`AdminError::Store`] when the store could not be asked.
    pub async fn replicas(&self) -> Result<Vec<ReplicaRecord>, AdminError> {
        Ok(self.store.replicas().await?)
    }

    /// One registered job.
    ///
    /// # Errors
    /// [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn job(&self, name: &str) -> Result<JobRecord, AdminError> {
        named(name)?;
        self.store
            .jobs()
            .await?
            .into_iter()
            .find(|j| j.definition.name == name)
            .ok_or_else(|| AdminError::UnknownJob { job: shown(name) })
    }

    /// Runs matching `filter`, newest slot first, at most `filter.limit`: 1 to
    /// [`MAX_PAGE`](crate::MAX_PAGE) ([`check_page`]); `RunFilter::default()` asks for
    /// [`DEFAULT_PAGE`](crate::DEFAULT_PAGE).
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the page size, the partition or an empty range;
    /// [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, AdminError> {
        check_page(filter.limit)?;
        if let Some(job) = &filter.job {
            self.job(job).await?;
        }
        if let Some(partition) = &filter.partition {
            partition_key(partition)?;
        }
        if let (Some(from), Some(to)) = (filter.from, filter.to) {
            ordered(from, to)?;
        }
        Ok(self.store.runs(&filter).await?)
    }

    /// The run of one slot.
    ///
    /// # Errors
    /// [`AdminError::UnknownJob`], [`AdminError::UnknownRun`]; [`AdminError::Invalid`] for the
    /// partition; [`AdminError::Store`].
    pub async fn run(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
    ) -> Result<RunRecord, AdminError> {
        self.job(job).await?;
        partition_key(partition)?;
        self.find_run(job, slot, partition).await
    }

    pub(crate) async fn find_run(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
    ) -> Result<RunRecord, AdminError> {
        let filter = RunFilter {
            job: Some(job.to_owned()),
            partition: Some(partition.to_owned()),
            from: Some(slot),
            to: Some(slot + chrono::Duration::milliseconds(1)),
            limit: 1,
            ..RunFilter::default()
        };
        self.store
            .runs(&filter)
            .await?
            .pop()
            .ok_or_else(|| AdminError::UnknownRun {
                job: shown(job),
                slot,
                partition: partition.to_owned(),
            })
    }

    /// The audit trail, newest first, at most `limit` records: 1 to [`MAX_PAGE`](crate::MAX_PAGE)
    /// ([`check_page`]).
    ///
    /// # Errors
    /// As [`Admin::audit_page`].
    pub async fn audit(
        &self,
        job: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, AdminError> {
        self.audit_page(job, None, limit).await
    }

    /// The page of the audit trail after the record with id `before` (the last `id` of the previous
    /// page), newest first, at most `limit` records; the first page when `before` is `None`.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the page size; [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, AdminError> {
        check_page(limit)?;
        if let Some(job) = job {
            self.job(job).await?;
        }
        Ok(self.store.audit_page(job, before, limit).await?)
    }
}

/// The ids of the live replicas in `live` that run `job`'s bodies.
pub(crate) fn runners(live: &[ReplicaRecord], job: &str) -> Vec<String> {
    live.iter()
        .filter(|r| r.alive && runs_jobs(r) && r.info.jobs.iter().any(|j| j == job))
        .map(|r| r.info.id.clone())
        .collect()
}

/// Whether a replica runs job bodies (role `all` or `worker`): a `scheduler` only queues slots,
/// and an `admin` process does neither.
fn runs_jobs(replica: &ReplicaRecord) -> bool {
    replica.info.roles.iter().any(|role| {
        role.parse::<slotguard::Role>()
            .is_ok_and(slotguard::Role::executes)
    })
}
