//! The heartbeats of the attempts this process holds, and how long each attempt is trusted.
//!
//! A store judges an attempt stale by its own clock, `stale_after` after the last heartbeat it
//! recorded, and another process may then take the slot over. This process never learns when the
//! store recorded a claim or a heartbeat, only when it sent it, and the store's moment is later.
//! So an attempt is trusted here for a little less than `stale_after` from the sending of the last
//! claim or heartbeat the store confirmed, by this process's monotonic clock. Past that its body is
//! told it lost the run, whether or not the store has said so yet; and a claim answered after it
//! (held up in the network while another process took the slot's job over) never starts a body.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::{LeaseDeadline, SlotStore};

/// One attempt this process holds.
struct Held {
    /// Cancelled when the attempt is lost: refused by the store, or past `deadline`.
    lost: CancellationToken,
    /// Until when it is trusted without another confirmed heartbeat; shared with its permit, so
    /// that `ctx.is_lost()` turns true at it even before this task has run.
    deadline: LeaseDeadline,
}

/// The running attempts of this process, refreshed together: one store call per interval, whatever
/// their number, and none at all while nothing runs.
pub(crate) struct Heartbeats {
    active: Mutex<HashMap<i64, Held>>,
    wake: Notify,
    /// How often the held attempts are refreshed: a third of the stale threshold.
    pub(crate) interval: Duration,
    /// How long a confirmed claim or heartbeat is trusted, from its sending: the stale threshold
    /// less a quarter of an interval, the time a body gets to stop before another may start.
    trusted_for: Duration,
}

impl Heartbeats {
    /// Heartbeats for attempts that go stale in the store `stale_after` after their last one.
    pub(crate) fn new(stale_after: Duration) -> Self {
        let interval = stale_after / 3;
        Heartbeats {
            active: Mutex::default(),
            wake: Notify::new(),
            interval,
            trusted_for: stale_after.saturating_sub(interval / 4),
        }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<i64, Held>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds the attempt of `token`, whose claim was sent at `sent`; answers the token that tells
    /// its body it lost the run (already cancelled when the claim was answered too late to trust),
    /// and the deadline it is trusted until.
    pub(crate) fn add(&self, token: i64, sent: Instant) -> (CancellationToken, LeaseDeadline) {
        let lost = CancellationToken::new();
        let deadline = LeaseDeadline::new(sent + self.trusted_for);
        if deadline.has_passed() {
            tracing::warn!(
                event = "job_ownership_lost",
                token,
                waited_ms = sent.elapsed().as_millis() as u64,
                "the claim was answered after the stale threshold could have passed; another process may hold the run, so it does not start here"
            );
            lost.cancel();
            return (lost, deadline);
        }
        let held = Held {
            lost: lost.clone(),
            deadline: deadline.clone(),
        };
        self.held().insert(token, held);
        self.wake.notify_one();
        (lost, deadline)
    }

    /// Stops refreshing the attempt of `token`: its outcome is written, or it was dropped.
    pub(crate) fn remove(&self, token: i64) {
        self.held().remove(&token);
    }

    fn tokens(&self) -> Vec<i64> {
        self.held().keys().copied().collect()
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        self.held().values().map(|h| h.deadline.at()).min()
    }

    /// Trusts the attempts the store confirmed (`held`) from `sent` on; tells the others of
    /// `tokens` that they lost the run.
    fn confirm(&self, tokens: &[i64], held: &[i64], sent: Instant) {
        let mut active = self.held();
        for token in tokens {
            if held.contains(token) {
                if let Some(h) = active.get(token) {
                    h.deadline.set(h.deadline.at().max(sent + self.trusted_for));
                }
            } else if let Some(h) = active.remove(token) {
                tracing::warn!(
                    event = "job_ownership_lost",
                    token,
                    "heartbeat refused: the attempt was taken over; telling the job to stop"
                );
                h.lost.cancel();
            }
        }
    }

    /// Tells every attempt past its deadline that it lost the run.
    fn expire_overdue(&self) {
        self.held().retain(|token, h| {
            if !h.deadline.has_passed() {
                return true;
            }
            tracing::warn!(
                event = "job_ownership_lost",
                token,
                "no heartbeat confirmed within the stale threshold; another process may take the run over, so the job is told to stop"
            );
            h.lost.cancel();
            false
        });
    }

    /// Refreshes every held attempt each interval, and tells each attempt its loss at its deadline,
    /// until `done` is cancelled; sleeps without waking while no attempt is held.
    pub(crate) async fn run(&self, store: &dyn SlotStore, owner: &str, done: CancellationToken) {
        let mut next = Instant::now() + self.interval;
        loop {
            let Some(deadline) = self.earliest_deadline() else {
                tokio::select! {
                    () = self.wake.notified() => next = Instant::now() + self.interval,
                    () = done.cancelled() => return,
                }
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(deadline.min(next)) => {}
                () = self.wake.notified() => continue,
                () = done.cancelled() => return,
            }
            if Instant::now() >= next {
                // The cadence counts from the sending, so a slow answer does not stretch it.
                next = Instant::now() + self.interval;
                self.beat(store, owner, &done).await;
            }
            self.expire_overdue();
        }
    }

    /// One heartbeat of every held attempt; given up at the earliest deadline, since one that
    /// hangs past it must not delay telling that attempt's body.
    async fn beat(&self, store: &dyn SlotStore, owner: &str, done: &CancellationToken) {
        let tokens = self.tokens();
        let Some(overdue) = self.earliest_deadline() else {
            return;
        };
        let sent = Instant::now();
        tokio::select! {
            answer = store.heartbeat(owner, &tokens) => match answer {
                Ok(held) => self.confirm(&tokens, &held, sent),
                Err(e) => tracing::warn!(error = %e, "heartbeat failed; will retry next interval"),
            },
            () = tokio::time::sleep_until(overdue) => {}
            () = done.cancelled() => {}
        }
    }
}
