//! The lock layer on Redis in a running scheduler: Redis alone at the `lock` level, and Redis in
//! front of SQLite slot rows at the `slot` level, on the Redis at 127.0.0.1:6379.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use slotguard::store::LockStore;
use slotguard::{GuardLevel, Job, JobContext, Scheduler};
use slotguard_sqlite::SqliteBackend;
use tokio::time::sleep;

type Seen = Arc<Mutex<Vec<(Option<i64>, Option<i64>)>>>;

/// A job that records `(run_id, fencing_token)` of each run, and checks that its lock is held in
/// Redis while it runs.
fn recording(level: GuardLevel, locks: slotguard_redis::RedisLocks, seen: &Seen) -> Job {
    let seen = Arc::clone(seen);
    Job::new("tick", "* * * * * *", move |ctx: JobContext| {
        let (seen, locks) = (Arc::clone(&seen), locks.clone());
        async move {
            // Held by this scheduler: nobody else can take it while the body runs.
            let key = slotguard::derive_lock_key("default", "tick");
            let other = locks.try_lock("someone-else", &[key]).await.expect("lock");
            assert!(other[0].is_none(), "the run's lock is held in Redis");
            seen.lock()
                .expect("seen")
                .push((ctx.run_id(), ctx.fencing_token()));
        }
    })
    .guard(level)
}

#[tokio::test]
async fn redis_alone_gives_the_lock_level_with_the_lease_token() {
    let locks = common::shared_locks("sched-lock", Duration::from_secs(3));
    let seen: Seen = Arc::default();
    let handle = Scheduler::builder()
        .lock_store(locks.clone())
        .job(recording(GuardLevel::Lock, locks.clone(), &seen))
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    sleep(Duration::from_millis(2_600)).await;
    handle.shutdown().await;
    let seen = seen.lock().expect("seen").clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.iter().all(|(run, _)| run.is_none()), "no slot rows");
    let tokens: Vec<i64> = seen.iter().map(|(_, t)| t.expect("token")).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(locks.held(), 0, "released after each run");
}

#[tokio::test]
async fn redis_in_front_of_sqlite_rows_gives_the_slot_level_with_the_rows_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = SqliteBackend::open(dir.path().join("rows.db"))
        .await
        .expect("open");
    let locks = common::shared_locks("sched-slot", Duration::from_secs(3));
    let seen: Seen = Arc::default();
    let handle = Scheduler::builder()
        .backend(sqlite.clone())
        .lock_store(locks.clone())
        .job(recording(GuardLevel::Slot, locks.clone(), &seen))
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    sleep(Duration::from_millis(2_600)).await;
    handle.shutdown().await;
    let seen = seen.lock().expect("seen").clone();
    assert!(seen.len() >= 2, "{seen:?}");
    for (run_id, token) in &seen {
        let run_id = run_id.expect("a slot row");
        let row = row_token(&sqlite, run_id).await;
        assert_eq!(*token, Some(row), "the slot row's token is the run's token");
    }
    assert_eq!(locks.held(), 0);
}

async fn row_token(sqlite: &SqliteBackend, run_id: i64) -> i64 {
    let runs = sqlite.runs(Some("tick")).await.expect("runs");
    runs.iter().find(|r| r.id == run_id).expect("run").token
}

/// A process frozen past its lease's TTL (here the runtime's only thread is blocked, so nothing
/// else runs, the renewal task included) is woken with the lost token not yet cancelled:
/// `ctx.is_lost()` already says the run is lost, from the lease's deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_body_woken_past_its_lease_deadline_is_told_it_lost_before_the_renewal_runs() {
    let locks = common::shared_locks("frozen", Duration::from_secs(1));
    let seen: Arc<Mutex<Vec<(bool, bool)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let job = Job::new("frozen", "* * * * * *", move |ctx: JobContext| {
        let record = Arc::clone(&record);
        async move {
            let before = ctx.is_lost();
            std::thread::sleep(Duration::from_millis(1_300));
            record.lock().expect("seen").push((before, ctx.is_lost()));
        }
    })
    .guard(GuardLevel::Lock);
    let handle = Scheduler::builder()
        .lock_store(locks.clone())
        .job(job)
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    sleep(Duration::from_millis(2_500)).await;
    handle.shutdown().await;
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.first(), Some(&(false, true)), "{seen:?}");
}
