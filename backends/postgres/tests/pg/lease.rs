//! Lock leases (`PgLeaseLocks`): the lock contract on a direct connection, and through a real
//! PgBouncer in transaction mode, where session advisory locks cannot work: one holder per key,
//! renewed past its TTL, taken with a higher token once its holder is gone, and kept across a
//! PgBouncer restart and killed server connections.

use std::time::Duration;

use slotguard::store::{LockLease, LockStore};
use slotguard_postgres::{PgError, PgLeaseLocks};

use crate::bouncer::start;
use crate::common::{Connect, TestSchema, database_url, lock_key};

/// Lease locks in `schema` (migrated first over a direct connection) through `url`.
async fn leases(schema: &TestSchema, url: &str, ttl: Duration) -> PgLeaseLocks {
    schema.backend().await.close().await;
    PgLeaseLocks::builder(url)
        .schema(schema.name.clone())
        .lease_ttl(ttl)
        .pool_size(2)
        .connect()
        .await
        .expect("connect the lease locks")
}

async fn with_direct(check: impl AsyncFnOnce(&PgLeaseLocks)) {
    let schema = TestSchema::new();
    let locks = leases(&schema, &database_url(), Duration::from_secs(30)).await;
    check(&locks).await;
}

slotguard_tests::contract!(
    locks,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    with = with_direct,
);

/// `locks`' lease of `key` for `owner`, if it got one.
async fn take(locks: &PgLeaseLocks, owner: &str, key: i64) -> Option<LockLease> {
    let mut answer = locks.try_lock(owner, &[key]).await.expect("try_lock");
    answer.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_never_migrated_is_named_not_used() {
    let schema = TestSchema::new();
    let err = PgLeaseLocks::builder(&database_url())
        .schema(schema.name.clone())
        .connect()
        .await
        .expect_err("no lease table");
    assert!(
        matches!(
            err,
            PgError::NotMigrated {
                table: "lease_locks",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("directly"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_transaction_pooler_one_holder_renewed_then_taken_with_a_higher_token() {
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let ttl = Duration::from_millis(1_500);
    let a = leases(&schema, &bouncer.url(), ttl).await;
    let b = leases(&schema, &bouncer.url(), ttl).await;
    let key = lock_key();
    let keys = [(key, "pooled_job".to_owned())];
    a.register_lock_keys("app", &keys).await.expect("register");
    b.register_lock_keys("app", &keys)
        .await
        .expect("register again");
    let first = take(&a, "a", key).await.expect("a takes the free key");
    // Three TTLs of tries by b: refused every time, because a renews its lease.
    for _ in 0..30 {
        assert!(take(&b, "b", key).await.is_none(), "b took a held lease");
        tokio::time::sleep(ttl / 10).await;
    }
    assert!(
        !first.lost.is_cancelled(),
        "a's renewed lease was reported lost"
    );
    assert_eq!(a.held_keys(), [key]);
    // a's process goes away without releasing: nothing renews its lease any more.
    drop(a);
    let started = std::time::Instant::now();
    let second = loop {
        if let Some(lease) = take(&b, "b", key).await {
            break lease;
        }
        assert!(
            started.elapsed() < ttl * 4,
            "the dead holder's lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        started.elapsed() >= ttl / 2,
        "taken before the lease could expire"
    );
    assert!(second.token > first.token, "{second:?} after {first:?}");
    // Released, the key is free at once.
    b.unlock("b", &[key]).await.expect("unlock");
    let b2 = leases(&schema, &bouncer.url(), ttl).await;
    assert!(take(&b2, "c", key).await.is_some(), "released key not free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_kept_across_a_pgbouncer_restart_and_killed_server_connections() {
    let Some(mut bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let ttl = Duration::from_secs(3);
    // Named after the schema, so that ending "our" server sessions spares the lease sessions of
    // the tests running beside this one.
    let url = format!("{}?application_name={}", bouncer.url(), schema.name);
    let a = leases(&schema, &url, ttl).await;
    let b = leases(&schema, &url, ttl).await;
    let key = lock_key();
    let held = take(&a, "a", key).await.expect("a takes the free key");
    bouncer.restart();
    // The restarted PgBouncer opens a server session when a renewal comes (every third of the
    // TTL): end the first ones it opens.
    let mut killed = 0;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        killed = kill_bouncer_servers(&schema).await;
        if killed > 0 {
            break;
        }
    }
    assert!(killed > 0, "no server connection of the pooler to kill");
    // Two TTLs later the lease is still a's: its renewals came through again.
    for _ in 0..12 {
        tokio::time::sleep(ttl / 6).await;
        assert!(take(&b, "b", key).await.is_none(), "b took a renewed lease");
    }
    assert!(!held.lost.is_cancelled(), "a's lease was reported lost");
    assert_eq!(a.held_keys(), [key]);
}

/// Ends every lease session of `schema`'s test (its application name starts with the schema's
/// name) that PgBouncer holds to the test database; the number ended. Other tests' lease sessions,
/// direct ones included, carry other names and are left alone.
async fn kill_bouncer_servers(schema: &TestSchema) -> i64 {
    let backend = schema.backend().await;
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND application_name = $1 || ' (slotguard leases)'",
    )
    .bind(&schema.name)
    .fetch_one(backend.pool())
    .await
    .expect("terminate");
    backend.close().await;
    killed
}

/// One body's run: its start and end, and its lease's fencing token.
type Ran = std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, std::time::Instant, i64)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_level_runs_through_a_transaction_pooler_one_body_at_a_time() {
    use slotguard::{GuardLevel, Job, JobContext, Scheduler};
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let ran: Ran = Ran::default();
    let mut handles = Vec::new();
    for id in ["a", "b"] {
        let locks = leases(&schema, &bouncer.url(), Duration::from_secs(3)).await;
        let ran = ran.clone();
        let job = Job::new("pooled_tick", "* * * * * *", move |ctx: JobContext| {
            let ran = ran.clone();
            async move {
                let start = std::time::Instant::now();
                tokio::time::sleep(Duration::from_millis(300)).await;
                let token = ctx.fencing_token().expect("a lease token");
                ran.lock()
                    .unwrap()
                    .push((start, std::time::Instant::now(), token));
            }
        })
        .guard(GuardLevel::Lock);
        let handle = Scheduler::builder()
            .instance_id(id)
            .lock_store(locks)
            .job(job)
            .build()
            .expect("build")
            .try_start()
            .await
            .expect("start");
        handles.push(handle);
    }
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    for handle in handles {
        handle.shutdown().await;
    }
    let mut ran = ran.lock().unwrap().clone();
    ran.sort_by_key(|(start, ..)| *start);
    assert!(ran.len() >= 3, "{} runs", ran.len());
    for pair in ran.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two bodies overlapped: {pair:?}");
        assert!(pair[0].2 < pair[1].2, "tokens not rising: {pair:?}");
    }
}
