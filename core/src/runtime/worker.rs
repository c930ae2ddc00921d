//! The `worker` role's driver: it computes no slot, it drains the durable queue. Each round offers
//! every job's due work to its guard chain exactly as the recovery loop does (flag → lock →
//! `claim_due`), so a queued slot runs with the same attempts, heartbeats, fencing tokens, retries,
//! overlap policy and recovery as a tick's. Between rounds it sleeps until `claim_ahead` before the
//! earliest queued row falls due (a round claims the queued slots due within that lead whose job
//! has no run going, and each body starts at its slot's instant), until the store signals new work
//! (PostgreSQL `NOTIFY`), until a run ends, or until the slow poll: no busy polling.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::Runtime;
use super::recover::{BATCH, due_round, lead};

/// The shortest sleep after a round that claimed nothing: a row due by this process's clock but not
/// yet by the store's is asked for again this soon, not in a tight loop.
const MIN_NAP: Duration = Duration::from_millis(1);

/// The longest poll on a store that cannot signal queued work (SQLite): a slot enqueued just after
/// a look waits at most this long.
const POLL_WITHOUT_SIGNAL: Duration = Duration::from_millis(100);

/// The longest a worker with half its room free waits for the runs whose outcomes are on their
/// way to the store: about one finish's round trip on a busy server.
const SETTLE: Duration = Duration::from_millis(5);

/// Runs the worker until shutdown; `poll` is the safety net when no signal comes.
pub(crate) async fn work(rt: Arc<Runtime>, poll: Duration) {
    let Some(slots) = rt.slots.clone() else {
        return;
    };
    if !rt.jobs.iter().any(|j| j.layers.slot) {
        return;
    }
    let mut signal = match slots.store.queue() {
        Ok(queue) => queue.due_signal().await,
        Err(_) => None,
    };
    let poll = if signal.is_none() {
        poll.min(POLL_WITHOUT_SIGNAL)
    } else {
        poll
    };
    let mut next_poll = Instant::now() + poll;
    loop {
        if rt.stop.is_cancelled() {
            return;
        }
        let looked = Instant::now();
        let claimed = drain(&rt).await;
        if let Some(limit) = &rt.run_limit
            && limit.available_permits() < rt.run_refill as usize
        {
            // Busy: claim again once half the room is free, not one run at a time.
            tokio::select! {
                () = rt.stop.cancelled() => return,
                _ = limit.acquire_many(rt.run_refill) => {}
            }
            settle(&rt, limit).await;
            continue;
        }
        let wake = match next_due(&rt).await {
            Some(at) => wake_for(at, lead(&rt), looked).min(next_poll),
            None => next_poll,
        };
        let wake = if claimed == 0 {
            wake.max(Instant::now() + MIN_NAP)
        } else {
            wake
        };
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep_until(wake) => {}
            () = changed(&mut signal) => {}
            () = rt.due_wake.notified() => {}
        }
        if Instant::now() >= next_poll {
            next_poll = Instant::now() + poll;
        }
    }
}

/// When to look for a row that falls due at `at`: `lead` before it, so that the round claims it
/// early ([`DueSpec::ahead`](crate::store::DueSpec::ahead)) and its body starts at the instant;
/// at the instant itself when a round since `looked` already looked that early (the row was left:
/// a run of its job was going, and the policy decides at the instant).
fn wake_for(at: Instant, lead: Duration, looked: Instant) -> Instant {
    match at.checked_sub(lead) {
        Some(early) if early > looked => early,
        _ => at,
    }
}

/// Once half the room is free, the runs whose outcomes are being written free theirs within a round
/// trip: waits for them (at most [`SETTLE`]), so that short bodies are claimed in one call of a
/// full room rather than two of half. Bodies that run longer leave nothing in flight: no wait.
async fn settle(rt: &Runtime, limit: &Semaphore) {
    let Some(slots) = &rt.slots else { return };
    let ending = slots.finisher.in_flight();
    if ending == 0 {
        return;
    }
    let want = limit.available_permits().saturating_add(ending);
    let want = u32::try_from(want).unwrap_or(u32::MAX);
    tokio::select! {
        () = rt.stop.cancelled() => {}
        _ = tokio::time::timeout(SETTLE, limit.acquire_many(want)) => {}
    }
}

/// Rounds of due work while they fill their batch and this process has room; the runs claimed.
async fn drain(rt: &Arc<Runtime>) -> usize {
    let mut claimed = 0;
    loop {
        let room = rt
            .run_limit
            .as_ref()
            .map_or(BATCH, |l| l.available_permits().min(BATCH));
        if room == 0 || rt.stop.is_cancelled() {
            return claimed;
        }
        let got = due_round(rt, room, |_| true).await;
        claimed += got;
        if got < room {
            return claimed;
        }
    }
}

/// When the earliest queued row of this worker's jobs falls due, on the tokio clock.
async fn next_due(rt: &Runtime) -> Option<Instant> {
    let slots = rt.slots.as_ref()?;
    let specs: Vec<_> = rt
        .jobs
        .iter()
        .filter(|j| j.layers.slot && !j.is_paused())
        .map(|j| j.due_spec())
        .collect();
    if specs.is_empty() {
        return None;
    }
    let next = match slots.store.queue() {
        Ok(queue) => queue.next_due(&specs).await,
        Err(e) => Err(e),
    };
    match next {
        Ok(Some(at)) => {
            let wait = (at - rt.clock.now()).to_std().unwrap_or(Duration::ZERO);
            Some(Instant::now() + wait)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::debug!(error = %e, "could not read the next due run; polling");
            None
        }
    }
}

/// Completes when the store signals queued work; never without a signal (or once it is gone).
async fn changed(signal: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    match signal {
        Some(receiver) => {
            if receiver.changed().await.is_err() {
                *signal = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}
