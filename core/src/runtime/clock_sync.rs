//! The scheduler's clock measured against the store's, and followed when they disagree
//! ([`ClockSync`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, ClockSync, SharedClock};
use crate::store::{ClockStore, StoreError};

/// Round trips per measurement; the shortest one is kept.
const SAMPLES: usize = 3;

/// A change of the scheduler's time by more than this makes the timer plan its slots again.
const REPLAN_STEP: chrono::TimeDelta = chrono::TimeDelta::milliseconds(500);

/// In `Observe` mode, a skew over this is logged.
const OBSERVE_WARN: chrono::TimeDelta = chrono::TimeDelta::seconds(1);

/// One reading of the store's clock, placed at the midpoint of its round trip.
#[derive(Debug, Clone, Copy)]
struct Sample {
    store: DateTime<Utc>,
    at: Instant,
}

#[derive(Debug, Default)]
struct State {
    sample: Option<Sample>,
    following: bool,
}

/// The clock the runtime computes slots from: the local clock, or the store's carried forward by the
/// monotonic clock since the last measurement, per [`ClockSync`].
#[derive(Debug)]
pub(crate) struct SyncedClock {
    local: SharedClock,
    mode: ClockSync,
    state: Mutex<State>,
    /// Bumped whenever the time this clock reads moves by more than [`REPLAN_STEP`] at once.
    generation: watch::Sender<u64>,
}

impl SyncedClock {
    pub(crate) fn new(local: SharedClock, mode: ClockSync) -> Self {
        SyncedClock {
            local,
            mode,
            state: Mutex::new(State::default()),
            generation: watch::Sender::new(0),
        }
    }

    /// Notified when the timer should plan its slots again.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the store's clock [`SAMPLES`] times and keeps the reading with the shortest round trip.
    /// Returns the skew (local minus store).
    pub(crate) async fn measure(
        &self,
        store: &dyn ClockStore,
    ) -> Result<Option<chrono::TimeDelta>, StoreError> {
        let mut best: Option<(Duration, Sample)> = None;
        for _ in 0..SAMPLES {
            let sent = Instant::now();
            let store_now = store.store_now().await?;
            let rtt = sent.elapsed();
            if best.is_none_or(|(b, _)| rtt < b) {
                let sample = Sample {
                    store: store_now,
                    at: sent + rtt / 2,
                };
                best = Some((rtt, sample));
            }
        }
        let Some((rtt, sample)) = best else {
            return Ok(None);
        };
        let before = self.now();
        self.state().sample = Some(sample);
        let skew = self.local.now() - (sample.store + elapsed_since(sample.at));
        crate::metrics::clock_skew(skew);
        tracing::debug!(
            skew_ms = skew.num_milliseconds(),
            rtt_us = rtt.as_micros() as u64,
            "clock measured against the store"
        );
        if self.mode == ClockSync::Observe && skew.abs() > OBSERVE_WARN {
            tracing::warn!(
                event = "clock_skew",
                skew_ms = skew.num_milliseconds(),
                "this replica's clock differs from the store's; slots follow this clock (ClockSync::Observe)"
            );
        }
        // Reading the clock applies the tolerance, and tells the timer if the time moved.
        let after = self.now();
        if (after - before).abs() > REPLAN_STEP {
            self.generation.send_modify(|g| *g += 1);
        }
        Ok(Some(skew))
    }
}

fn elapsed_since(at: Instant) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(Instant::now().saturating_duration_since(at))
        .unwrap_or(chrono::TimeDelta::MAX)
}

impl Clock for SyncedClock {
    fn now(&self) -> DateTime<Utc> {
        let local = self.local.now();
        let ClockSync::Follow { tolerance } = self.mode else {
            return local;
        };
        let tolerance = chrono::TimeDelta::from_std(tolerance).unwrap_or(chrono::TimeDelta::MAX);
        let mut state = self.state();
        let Some(sample) = state.sample else {
            return local;
        };
        let store = sample
            .store
            .checked_add_signed(elapsed_since(sample.at))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let skew = local - store;
        let follow = if state.following {
            skew.abs() > tolerance / 2
        } else {
            skew.abs() > tolerance
        };
        if follow != state.following {
            state.following = follow;
            drop(state);
            if follow {
                tracing::warn!(
                    event = "clock_skew",
                    skew_ms = skew.num_milliseconds(),
                    "this replica's clock differs from the store's; slots follow the store's clock"
                );
            } else {
                tracing::info!(
                    event = "clock_skew_resolved",
                    skew_ms = skew.num_milliseconds(),
                    "this replica's clock agrees with the store's again; slots follow it"
                );
            }
            if skew.abs() > REPLAN_STEP {
                self.generation.send_modify(|g| *g += 1);
            }
        }
        if follow { store } else { local }
    }
}

/// Measures the clock every `every` until `stop`.
pub(crate) async fn watch(
    clock: Arc<SyncedClock>,
    store: Arc<dyn ClockStore>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        match clock.measure(&*store).await {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "could not read the store's clock; keeping the last measurement")
            }
        }
    }
}
