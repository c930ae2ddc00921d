//! [`ReplicaStore`] for the memory backend: one entry per replica, judged by the backend's clock.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryBackend;
use crate::store::{ReplicaInfo, ReplicaRecord, ReplicaStore, StoreError};

/// A replica's entry.
#[derive(Debug, Clone)]
pub(super) struct Replica {
    info: ReplicaInfo,
    started_at: DateTime<Utc>,
    heartbeat_at: DateTime<Utc>,
}

impl Replica {
    /// When it is gone: its heartbeat plus its threshold and `grace`.
    fn gone_at(&self, grace: Duration) -> DateTime<Utc> {
        chrono::Duration::from_std(self.info.gone_after.saturating_add(grace))
            .ok()
            .and_then(|d| self.heartbeat_at.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

#[async_trait]
impl ReplicaStore for MemoryBackend {
    async fn record_replica(&self, replica: &ReplicaInfo) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let started_at = inner
            .replicas
            .get(&replica.id)
            .map_or(now, |r| r.started_at);
        inner.replicas.insert(
            replica.id.clone(),
            Replica {
                info: replica.clone(),
                started_at,
                heartbeat_at: now,
            },
        );
        Ok(())
    }

    async fn remove_replica(&self, id: &str) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        self.check(&inner)?;
        Ok(inner.replicas.remove(id).is_some())
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let now = self.clock.now();
        let inner = self.lock();
        self.check(&inner)?;
        Ok(inner
            .replicas
            .values()
            .map(|r| ReplicaRecord {
                info: r.info.clone(),
                started_at: r.started_at,
                heartbeat_at: r.heartbeat_at,
                alive: r.gone_at(Duration::ZERO) >= now,
            })
            .collect())
    }

    async fn forget_replicas(&self, gone_for: Duration) -> Result<u64, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let before = inner.replicas.len();
        inner.replicas.retain(|_, r| r.gone_at(gone_for) >= now);
        Ok((before - inner.replicas.len()) as u64)
    }
}
