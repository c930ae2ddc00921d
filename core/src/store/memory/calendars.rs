//! The memory backend's holiday overrides: a list, written and read under the mutex (so writes and
//! reads are serialized as [`CalendarStore`] asks).

use async_trait::async_trait;

use super::MemoryBackend;
use crate::store::calendars::{
    CalendarOverride, CalendarStore, OverrideChanges, OverrideSpec, check_override,
    override_action, override_audit_reason, override_effective_at, override_written,
};
use crate::store::{AuditEntry, StoreError};

#[async_trait]
impl CalendarStore for MemoryBackend {
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError> {
        check_override(spec, by, reason)?;
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let previous = inner.overrides.last().map(|o| o.effective_at);
        let written = CalendarOverride {
            spec: spec.clone(),
            reason: reason.to_owned(),
            changed_by: by.to_owned(),
            changed_at: now,
            effective_at: override_effective_at(now, previous),
            seq: inner.overrides.len() as i64 + 1,
        };
        let entry = AuditEntry::new(
            override_action(spec.kind),
            by,
            &override_audit_reason(spec, reason),
        );
        inner.audit("", None, &entry, now);
        inner.overrides.push(written.clone());
        drop(inner);
        Ok(override_written(written))
    }

    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError> {
        let now = self.clock.now();
        let inner = self.lock();
        self.check(&inner)?;
        let overrides = inner
            .overrides
            .iter()
            .filter(|o| o.seq > after)
            .take(limit)
            .cloned()
            .collect();
        Ok(OverrideChanges {
            overrides,
            fresh_at: now,
        })
    }
}
