//! What a transaction pooler costs a slot, in one run: one slot's claim, heartbeat and finish,
//! 2,000 times after 100 of warm-up, one after the other, in three settings on the same server:
//!
//! 1. `direct`: `PgBackend` as it is by default (statements prepared once per connection);
//! 2. `direct, pooler mode`: the same server, the backend built with `transaction_pooler(true)`
//!    (every statement unprepared, in a transaction of its own): the protocol's cost alone;
//! 3. `pgbouncer, pooler mode`: the same, through a PgBouncer in transaction mode started here
//!    (one more hop).
//!
//! `cargo bench -p slotguard-benches --bench pooler` (PostgreSQL from `SLOTGUARD_TEST_DATABASE_URL`
//! or 127.0.0.1:5432/test; PgBouncer from Debian's package, in front of the same database).

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use slotguard::store::{Claim, Finish, SlotStore, SlotStoreExt};
use slotguard_postgres::PgBackend;
use slotguard_process_tests::pgbouncer::PgBouncer;
use slotguard_tests::pg::{TestSchema, database_url};

const ROUNDS: usize = 2_000;
const WARM_UP: usize = 100;

/// The three steps' times of every round.
#[derive(Default)]
struct Steps {
    claim: Vec<Duration>,
    heartbeat: Vec<Duration>,
    finish: Vec<Duration>,
}

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    format!("p50 {:.3} ms, p99 {:.3} ms", ms(at(0.5)), ms(at(0.99)))
}

/// `ROUNDS` slots of one job, each claimed, beaten once and finished, timed step by step.
async fn rounds(backend: &PgBackend) -> Steps {
    let mut steps = Steps::default();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    for i in 0..WARM_UP + ROUNDS {
        let at = start + chrono::Duration::seconds(i as i64);
        let request =
            slotguard_tests::request("pooled_bench", &at.to_rfc3339(), Duration::from_secs(60));
        let t = Instant::now();
        let claimed = backend.claim("bench", &[request]).await.expect("claim");
        let claim = t.elapsed();
        let Claim::Won(lease) = &claimed[0] else {
            panic!("a fresh slot was not won: {claimed:?}");
        };
        let t = Instant::now();
        let held = backend
            .heartbeat("bench", &[lease.token])
            .await
            .expect("beat");
        let heartbeat = t.elapsed();
        assert_eq!(held, [lease.token]);
        let t = Instant::now();
        let done = backend
            .finish_one("bench", lease, &Finish::succeeded())
            .await
            .expect("finish");
        let finish = t.elapsed();
        assert!(done, "the finish was refused");
        if i >= WARM_UP {
            steps.claim.push(claim);
            steps.heartbeat.push(heartbeat);
            steps.finish.push(finish);
        }
    }
    steps
}

async fn setting(name: &str, url: &str, pooler: bool) {
    let schema = TestSchema::new();
    let backend = PgBackend::builder(url)
        .schema(schema.name.clone())
        .pool_size(2)
        .transaction_pooler(pooler)
        .connect()
        .await
        .expect("connect");
    let steps = rounds(&backend).await;
    backend.close().await;
    println!("{name}");
    println!("  claim      {}", summary(steps.claim));
    println!("  heartbeat  {}", summary(steps.heartbeat));
    println!("  finish     {}", summary(steps.finish));
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let bouncer = PgBouncer::in_front_of(&database_url());
    rt.block_on(async {
        println!("one slot's claim, heartbeat and finish, {ROUNDS} rounds after {WARM_UP}");
        setting("direct", &database_url(), false).await;
        setting("direct, pooler mode", &database_url(), true).await;
        match &bouncer {
            Some(bouncer) => setting("pgbouncer, pooler mode", &bouncer.url(), true).await,
            None => println!("pgbouncer, pooler mode: skipped (no pgbouncer installed)"),
        }
    });
}
