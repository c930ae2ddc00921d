//! Catch-up starts when the job was first registered: a row from before then (a backfill of history,
//! a row written by hand) does not make every slot since look missed.

use slotguard::store::SlotStoreExt as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{Claim, ClaimRequest, Finish, SlotKey, SlotStore, Trigger};
use slotguard::{CatchUp, Job, JobContext, MemoryBackend, Overlap, Scheduler, TokioClock};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A succeeded run of `job` at `slot`, written straight into the store.
async fn succeeded(store: &MemoryBackend, job: &str, slot: DateTime<Utc>) {
    let request = ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
        },
        trigger: Trigger::Backfill,
        zone: "UTC".to_owned(),
        wall: slot.naive_utc(),
        business_date: slot.date_naive(),
        fingerprint: 7,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    };
    let claims = store.claim("by-hand", &[request]).await.unwrap();
    let [Claim::Won(lease)] = claims.as_slice() else {
        panic!("claim not won: {claims:?}");
    };
    let done = store
        .finish_one("by-hand", lease, &Finish::succeeded())
        .await
        .unwrap();
    assert!(done);
}

#[tokio::test(start_paused = true)]
async fn catch_up_never_creates_slots_before_the_job_was_first_registered() {
    let first_start = at("2026-03-02T01:00:00.500Z");
    let clock = TokioClock::starting_at(first_start);
    let store = MemoryBackend::with_clock(Arc::new(clock));
    // History backfilled before the job existed: its latest slot is two hours before the first start.
    succeeded(&store, "settle", at("2026-03-01T23:00:00Z")).await;
    let job =
        Job::new("settle", "0 * * * * *", |_ctx: JobContext| async {}).catch_up(CatchUp::All {
            within: Duration::from_secs(86_400),
            max_slots: 1_000,
        });
    let handle = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id("first")
        .catch_up_rate(1_000.0)
        .jobs(vec![job])
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.shutdown().await;
    let early: Vec<DateTime<Utc>> = store
        .runs()
        .iter()
        .filter(|r| r.trigger == Trigger::CatchUp && r.key.scheduled_at < first_start)
        .map(|r| r.key.scheduled_at)
        .collect();
    assert!(
        early.is_empty(),
        "{} catch-up runs of slots before the job was first registered, from {:?}",
        early.len(),
        early.first()
    );
}
