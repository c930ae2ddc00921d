//! A later look whose claim meets another claim of its job in flight: the batch's other jobs are
//! claimed without waiting for it, and the contended slot is looked at again, never lost, and run
//! once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Timelike as _, Utc};
use slotguard::{GuardLevel, Job, JobContext, Scheduler};
use sqlx::Connection as _;

use crate::common::{Connect, TestSchema, database_url, random_u64};

/// The bodies that started: job, slot, and when.
type Started = Arc<Mutex<Vec<(String, DateTime<Utc>, DateTime<Utc>)>>>;

fn job(name: &str, at: DateTime<Utc>, started: &Started) -> Job {
    let cron = format!("{} {} {} * * *", at.second(), at.minute(), at.hour());
    let (started, owned) = (Arc::clone(started), name.to_owned());
    Job::new(name, cron.as_str(), move |ctx: JobContext| {
        let (started, name) = (Arc::clone(&started), owned.clone());
        async move {
            let entry = (name, ctx.scheduled_at(), Utc::now());
            started.lock().unwrap().push(entry);
        }
    })
    .guard(GuardLevel::Slot)
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(wait) = (at - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

/// Another process holds both jobs' locks (so their rows decide, from the second look, 250 ms
/// after the tick) and keeps `busy`'s claim lock from 300 ms before the slot to 1.2 s after it:
/// the second and third looks find it held and send `busy` back; the fourth may defer no more and
/// waits for it. `free`, in the same claim, starts at the second look: a claim that waited for the
/// lock would hold it back with `busy` until the holder let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_slot_is_looked_at_again_and_the_rest_of_its_batch_does_not_wait() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let suffix = random_u64();
    let (busy, free) = (format!("busy_{suffix}"), format!("free_{suffix}"));
    let slot = (Utc::now() + chrono::Duration::seconds(3))
        .with_nanosecond(0)
        .expect("whole second");
    let started: Started = Arc::default();
    let handle = Scheduler::builder()
        .instance_id("contended")
        .backend(backend.clone())
        .load_spread(Duration::ZERO)
        .jobs([job(&busy, slot, &started), job(&free, slot, &started)])
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");

    let mut holder = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect");
    for name in [&busy, &free] {
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(slotguard::derive_lock_key("default", name))
            .execute(&mut holder)
            .await
            .expect("job lock");
    }
    sleep_until(slot - chrono::Duration::milliseconds(300)).await;
    let mut tx = holder.begin().await.expect("begin");
    crate::common::take_claim_lock(&mut tx, &busy).await;
    sleep_until(slot + chrono::Duration::milliseconds(1_200)).await;
    let released = Utc::now();
    tx.commit().await.expect("commit");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    handle.shutdown().await;
    let _ = holder.close().await;

    let started = started.lock().unwrap().clone();
    let of = |name: &str| -> Vec<_> { started.iter().filter(|s| s.0 == name).collect() };
    let (busy_runs, free_runs) = (of(&busy), of(&free));
    assert_eq!(free_runs.len(), 1, "{started:?}");
    assert_eq!(
        busy_runs.len(),
        1,
        "the contended slot ran once: {started:?}"
    );
    assert_eq!((busy_runs[0].1, free_runs[0].1), (slot, slot));
    let lag = free_runs[0].2 - slot;
    assert!(
        lag < chrono::Duration::milliseconds(900),
        "the free job waited with the contended one: started {lag} after its slot"
    );
    assert!(
        busy_runs[0].2 >= released,
        "the contended slot ran while the other claim was in flight"
    );
    let runs = backend.runs(Some(&busy)).await.expect("runs");
    assert_eq!(runs.len(), 1, "one row for the contended slot");
    assert_eq!(runs[0].attempt, 1);
    backend.close().await;
}
