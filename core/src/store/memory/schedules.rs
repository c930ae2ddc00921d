//! The memory backend's stored schedules: versions in a list, written and read under the mutex
//! (so writes and reads are serialized as [`ScheduleStore`] asks).

use async_trait::async_trait;

use super::{MemoryBackend, Run};
use crate::store::schedules::{
    SKIPPED_BY_OPERATOR, ScheduleChanges, ScheduleSpec, ScheduleStore, ScheduleVersion,
    ScheduleWrite, audit_action, audit_reason, effective_at, operator_skip_message, written,
};
use crate::store::{AuditEntry, ClaimRequest, RunStatus, SlotKey, StoreError};

#[async_trait]
impl ScheduleStore for MemoryBackend {
    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &str,
        reason: &str,
    ) -> Result<ScheduleWrite, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let latest = inner.schedules.iter().rev().find(|v| v.id == id).cloned();
        let current = latest.as_ref().map_or(0, |v| v.version);
        if current != expected {
            return Ok(ScheduleWrite::Stale { current });
        }
        let version = ScheduleVersion {
            id: id.to_owned(),
            version: current + 1,
            spec: spec.cloned(),
            effective_at: effective_at(now, latest.as_ref().map(|l| l.effective_at)),
            changed_by: by.to_owned(),
            changed_at: now,
            reason: reason.to_owned(),
            seq: inner.schedules.len() as i64 + 1,
        };
        let last_spec = inner
            .schedules
            .iter()
            .rev()
            .filter(|v| v.id == id)
            .find_map(|v| v.spec.as_ref());
        let job = spec
            .or(last_spec)
            .map_or_else(String::new, |s| s.job.clone());
        let existed = latest.as_ref().is_some_and(|l| l.spec.is_some());
        let reason = audit_reason(id, version.version, reason);
        let entry = AuditEntry::new(audit_action(existed, spec), by, &reason);
        inner.audit(&job, None, &entry, now);
        inner.schedules.push(version.clone());
        let action = entry.action.clone();
        drop(inner);
        Ok(written(version, &action, by))
    }

    async fn schedule_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<ScheduleChanges, StoreError> {
        let now = self.clock.now();
        let inner = self.lock();
        self.check(&inner)?;
        let versions = inner
            .schedules
            .iter()
            .filter(|v| v.seq > after)
            .take(limit)
            .cloned()
            .collect();
        Ok(ScheduleChanges {
            versions,
            fresh_at: now,
        })
    }

    async fn schedules(
        &self,
        job: Option<&str>,
        after_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduleVersion>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        let mut latest = std::collections::BTreeMap::new();
        for v in &inner.schedules {
            latest.insert(v.id.as_str(), v);
        }
        Ok(latest
            .into_values()
            .filter(|v| after_id.is_none_or(|a| v.id.as_str() > a))
            .filter(|v| {
                v.spec
                    .as_ref()
                    .is_some_and(|s| job.is_none_or(|j| s.job == j))
            })
            .take(limit)
            .cloned()
            .collect())
    }

    async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, StoreError> {
        let inner = self.lock();
        self.check(&inner)?;
        Ok(inner
            .schedules
            .iter()
            .filter(|v| v.id == id)
            .cloned()
            .collect())
    }

    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        if inner.runs.contains_key(&request.key) {
            return Ok(false);
        }
        inner.next_run_id += 1;
        let id = inner.next_run_id;
        let run = Run {
            status: RunStatus::Skipped,
            message: Some(operator_skip_message(reason)),
            finished_at: Some(now),
            ..Run::new(id, request, now)
        };
        inner.runs.insert(request.key.clone(), run);
        let entry = AuditEntry::new("skip", by, reason);
        inner.audit(
            &request.key.job,
            Some((id, request.key.scheduled_at)),
            &entry,
            now,
        );
        Ok(true)
    }

    async fn unskip_slot(&self, key: &SlotKey, by: &str, reason: &str) -> Result<bool, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let Some(run) = inner.runs.get(key) else {
            return Ok(false);
        };
        if !is_operator_skip(run.status, run.message.as_deref(), run.attempts.len()) {
            return Ok(false);
        }
        let id = run.id;
        inner.runs.remove(key);
        let entry = AuditEntry::new("unskip", by, reason);
        inner.audit(&key.job, Some((id, key.scheduled_at)), &entry, now);
        Ok(true)
    }
}

/// Whether a row is one an operator's skip wrote and nothing claimed since.
fn is_operator_skip(status: RunStatus, message: Option<&str>, attempts: usize) -> bool {
    status == RunStatus::Skipped
        && attempts == 0
        && message.is_some_and(|m| m.starts_with(SKIPPED_BY_OPERATOR))
}
