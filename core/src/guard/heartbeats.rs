//! The heartbeats of the attempts this process holds, and how long each attempt is trusted.
//!
//! A store judges an attempt stale by its own clock, `stale_after` after the last heartbeat it
//! recorded, and another process may then take the slot over. This process never learns when the
//! store recorded a claim or a heartbeat, only when it sent it, and the store's moment is later.
//! So an attempt is trusted here for a little less than `stale_after` from the sending of the last
//! claim or heartbeat the store confirmed, by this process's monotonic clock. Past that its body is
//! told it lost the run, whether or not the store has said so yet; and a claim answered after it
//! (held up in the network while another process took the slot's job over) never starts a body.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::held::HeldLeases;
use crate::store::{LeaseDeadline, SlotStore};

/// The running attempts of this process, by fencing token, refreshed together: one store call per
/// interval, whatever their number, and none at all while nothing runs.
pub(crate) struct Heartbeats {
    held: HeldLeases<()>,
    /// Wakes the heartbeats when the first attempt is held.
    wake: Notify,
    /// Wakes the deadline watch when an attempt is held.
    changed: Notify,
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
            held: HeldLeases::default(),
            wake: Notify::new(),
            changed: Notify::new(),
            interval,
            trusted_for: stale_after.saturating_sub(interval / 4),
        }
    }

    /// Holds the attempt of `token`, whose claim was sent at `sent`; answers the token that tells
    /// its body it lost the run (already cancelled when the claim was answered too late to trust),
    /// and the deadline it is trusted until.
    pub(crate) fn add(&self, token: i64, sent: Instant) -> (CancellationToken, LeaseDeadline) {
        let deadline = sent + self.trusted_for;
        if deadline <= Instant::now() {
            tracing::warn!(
                event = "job_ownership_lost",
                token,
                waited_ms = sent.elapsed().as_millis() as u64,
                "the claim was answered after the stale threshold could have passed; another process may hold the run, so it does not start here"
            );
            let lost = CancellationToken::new();
            lost.cancel();
            return (lost, LeaseDeadline::new(deadline));
        }
        let answer = self.held.hold(token, (), deadline);
        self.wake.notify_one();
        self.changed.notify_one();
        answer
    }

    /// Stops refreshing the attempt of `token`: its outcome is written, or it was dropped.
    pub(crate) fn remove(&self, token: i64) {
        self.held.release(token, |()| true);
    }

    /// Trusts the attempts the store confirmed (`held`) from `sent` on; tells the others of
    /// `tokens` that they lost the run.
    fn confirm(&self, tokens: &[i64], held: &[i64], sent: Instant) {
        for &token in tokens {
            let until = held.contains(&token).then_some(sent + self.trusted_for);
            self.held.settle(
                token,
                |()| true,
                until,
                |token, ()| {
                    tracing::warn!(
                        event = "job_ownership_lost",
                        token,
                        "heartbeat refused: the attempt was taken over; telling the job to stop"
                    );
                },
            );
        }
    }

    /// Tells every attempt past its deadline that it lost the run.
    fn expire_overdue(&self) {
        self.held.expire_overdue(|token, ()| {
            tracing::warn!(
                event = "job_ownership_lost",
                token,
                "no heartbeat confirmed within the stale threshold; another process may take the run over, so the job is told to stop"
            );
        });
    }

    /// Refreshes every held attempt each interval, and tells each attempt its loss at its deadline,
    /// until `done` is cancelled; sleeps without waking while no attempt is held. The two go side
    /// by side: a heartbeat that hangs never delays telling an attempt, and is never dropped in
    /// flight (its answer, however late, still vouches for the attempts from its sending).
    pub(crate) async fn run(&self, store: &dyn SlotStore, owner: &str, done: CancellationToken) {
        tokio::join!(self.beat(store, owner, &done), self.expire(&done));
    }

    /// One heartbeat of every held attempt each interval, counted from the sending, so a slow
    /// answer does not stretch the cadence.
    async fn beat(&self, store: &dyn SlotStore, owner: &str, done: &CancellationToken) {
        let mut next = Instant::now() + self.interval;
        loop {
            if self.held.is_empty() {
                tokio::select! {
                    () = self.wake.notified() => next = Instant::now() + self.interval,
                    () = done.cancelled() => return,
                }
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = done.cancelled() => return,
            }
            let tokens = self.held.keys();
            let sent = Instant::now();
            next = sent + self.interval;
            if tokens.is_empty() {
                continue;
            }
            tokio::select! {
                answer = store.heartbeat(owner, &tokens) => match answer {
                    Ok(held) => self.confirm(&tokens, &held, sent),
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed; will retry next interval"),
                },
                () = done.cancelled() => return,
            }
        }
    }

    /// Tells each attempt at its deadline that it lost the run.
    async fn expire(&self, done: &CancellationToken) {
        loop {
            let changed = self.changed.notified();
            match self.held.earliest_deadline() {
                Some(deadline) => tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = changed => continue,
                    () = done.cancelled() => return,
                },
                None => tokio::select! {
                    () = changed => continue,
                    () = done.cancelled() => return,
                },
            }
            self.expire_overdue();
        }
    }
}
