//! The admin-store contract against the memory backend, in paused time.

use std::sync::Arc;

use slotguard::{MemoryBackend, TokioClock};
use slotguard_tests::admin;

/// A fresh store on a clock that moves only when the test sleeps.
async fn fresh() -> Box<MemoryBackend> {
    Box::new(MemoryBackend::with_clock(Arc::new(
        TokioClock::starting_at(chrono::Utc::now()),
    )))
}

slotguard_tests::admin_contract!(
    #[tokio::test(start_paused = true)]
    fresh
);

/// Real time and threads: the retries race for the store's one mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_are_done_once() {
    admin::concurrent_retries_are_done_once(&[MemoryBackend::new()]).await;
}

#[tokio::test(start_paused = true)]
async fn hostile_job_names_round_trip_through_every_operation() {
    let backend = fresh().await;
    admin::hostile_job_names_round_trip_through_every_operation(&*backend, &admin::hostile_names())
        .await;
}

#[tokio::test]
async fn names_outside_the_rule_are_bad_input() {
    admin::names_outside_the_rule_are_bad_input(&MemoryBackend::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_triggers_each_get_a_run() {
    admin::concurrent_triggers_each_get_a_run(&MemoryBackend::new()).await;
}
