//! Lock costs, Redis beside PostgreSQL advisory locks, in one run:
//!
//! 1. acquire + release of one key, one after the other (`try_lock` then `unlock`), 2,000 times;
//! 2. 1,000 locks held: the time to take them in one `try_lock`, and the cost of keeping them for one
//!    interval. Redis: one renewal (`RedisLocks::renew_now`, the pipelined compare-and-`PEXPIRE` the
//!    background task sends every TTL/3). PostgreSQL: advisory locks need no renewal; the backend's
//!    only per-interval cost is its liveness check, the same statement (`LOCK_LIVENESS_QUERY`)
//!    timed here on a connection that holds 1,000 advisory locks.
//!
//! `cargo bench -p slotguard-benches --bench locks` (Redis on 127.0.0.1:6379, PostgreSQL from
//! `SLOTGUARD_TEST_DATABASE_URL` or 127.0.0.1:5432).

use std::time::{Duration, Instant};

use slotguard::store::LockStore;
use slotguard_postgres::PgBackend;
use slotguard_redis::RedisLocks;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::Connection;

const ROUND_TRIPS: usize = 2_000;
const HELD: i64 = 1_000;
const INTERVALS: usize = 20;

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    format!(
        "p50 {:.3} ms, p99 {:.3} ms, mean {:.3} ms, max {:.3} ms (n = {})",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(mean),
        ms(at(1.0)),
        samples.len()
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// `try_lock` + `unlock` of one key, `ROUND_TRIPS` times, after 100 of warm-up.
async fn round_trips(store: &dyn LockStore, key: i64) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS + 100 {
        let started = Instant::now();
        let got = store.try_lock("bench", &[key]).await.expect("lock");
        assert!(got[0].is_some(), "the key is free");
        store.unlock("bench", &[key]).await.expect("unlock");
        if i >= 100 {
            samples.push(started.elapsed());
        }
    }
    samples
}

/// Takes `HELD` keys in one call; prints how long it took.
async fn take_all(store: &dyn LockStore, name: &str) -> Vec<i64> {
    let keys: Vec<i64> = (1_000..1_000 + HELD).collect();
    let started = Instant::now();
    let got = store.try_lock("bench", &keys).await.expect("lock");
    let took = started.elapsed();
    assert!(got.iter().all(Option::is_some));
    println!("{name:<6} take {HELD} in one call: {:.3} ms", ms(took));
    keys
}

async fn redis() {
    let prefix = format!("bench:{}", std::process::id());
    let locks = RedisLocks::new("redis://127.0.0.1:6379")
        .expect("url")
        .lease_ttl(Duration::from_secs(30))
        .prefix(prefix);
    println!(
        "redis  acquire+release: {}",
        summary(round_trips(&locks, 1).await)
    );
    let keys = take_all(&locks, "redis").await;
    let mut samples = Vec::new();
    for _ in 0..INTERVALS {
        let started = Instant::now();
        let held = locks.renew_now().await.expect("renew");
        samples.push(started.elapsed());
        assert_eq!(held, HELD as usize, "every lease renewed");
    }
    println!(
        "redis  renew {HELD} held (one interval): {}",
        summary(samples)
    );
    locks.unlock("bench", &keys).await.expect("unlock");
}

async fn postgres() {
    let schema = TestSchema::with_prefix("sg_bench_locks");
    let backend = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .connect()
        .await
        .expect("connect to PostgreSQL");
    println!(
        "pg     acquire+release: {}",
        summary(round_trips(&backend, 1).await)
    );
    let keys = take_all(&backend, "pg").await;
    backend.unlock("bench", &keys).await.expect("unlock");

    let mut conn = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let taken: i64 = sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_try_advisory_lock(k)) FROM unnest($1::bigint[]) AS k",
    )
    .bind(&keys)
    .fetch_one(&mut conn)
    .await
    .expect("advisory locks");
    assert_eq!(taken, HELD);
    let mut samples = Vec::new();
    for _ in 0..INTERVALS {
        let started = Instant::now();
        let row: (i32, Vec<i64>) = sqlx::query_as(slotguard_postgres::LOCK_LIVENESS_QUERY)
            .fetch_one(&mut conn)
            .await
            .expect("liveness");
        samples.push(started.elapsed());
        assert_eq!(row.1.len(), HELD as usize, "the session holds every key");
    }
    println!(
        "pg     liveness check, {HELD} held (one interval): {}",
        summary(samples)
    );
    conn.close().await.expect("close");
    backend.close().await;
    drop(schema);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        redis().await;
        postgres().await;
    });
}
