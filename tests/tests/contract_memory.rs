//! The backend contract against the memory backend, in paused time.

use std::sync::Arc;
use std::time::Duration;

use slotguard::{MemoryBackend, TokioClock};
use slotguard_tests as contract;

fn backend() -> MemoryBackend {
    MemoryBackend::with_clock(Arc::new(TokioClock::starting_at(chrono::Utc::now())))
}

#[tokio::test(start_paused = true)]
async fn claims_are_exclusive() {
    contract::claims_are_exclusive(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn writes_are_fenced() {
    contract::writes_are_fenced(&backend(), Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn locks_are_exclusive() {
    contract::locks_are_exclusive(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn retries_become_due() {
    contract::retries_become_due(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn abandoned_runs_are_recovered() {
    contract::abandoned_runs_are_recovered(&backend(), Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn overlap_is_decided_by_the_store() {
    contract::overlap_is_decided_by_the_store(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn slots_ahead_of_the_store_clock_are_not_due() {
    contract::slots_ahead_of_the_store_clock_are_not_due(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn batched_finishes_are_fenced() {
    contract::batched_finishes_are_fenced(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn due_work_is_one_at_a_time() {
    contract::due_work_is_one_at_a_time(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn newer_slots_fence_stale_runs() {
    contract::newer_slots_fence_stale_runs(&backend(), Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn existing_slots_are_found() {
    contract::existing_slots_are_found(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn lock_tokens_rise() {
    contract::lock_tokens_rise(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn slots_are_queued_once() {
    contract::slots_are_queued_once(&backend()).await;
}

#[tokio::test(start_paused = true)]
async fn due_work_keeps_its_limits() {
    contract::due_work_keeps_its_limits(&backend()).await;
}
