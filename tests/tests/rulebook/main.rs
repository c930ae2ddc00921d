//! The claim rules, model-checked: random sequences of operations (claims from several owners,
//! enqueues, due claims with limits, heartbeats, outcomes, retries, stale clocks, every overlap
//! policy, two jobs in two partitions) run against the pure model of `slotguard::store::rules`
//! and against the memory, SQLite and PostgreSQL stores side by side (PostgreSQL twice: its
//! history a plain table, and partitioned by day). Every store must give the
//! same answers, log the same rule events and hold the same rows as the model after every step.
//!
//! `SLOTGUARD_RULEBOOK_CASES` sets the number of sequences (48 by default) and
//! `SLOTGUARD_RULEBOOK_LEN` their longest length (40); see docs/RELIABILITY.md for the long run.
//! PostgreSQL is the server on 127.0.0.1:5432 (`SLOTGUARD_TEST_DATABASE_URL`).

mod capture;
mod check;
mod model;
mod ops;
mod stores;

use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_store_follows_the_rulebook() {
    let cases = env_number("SLOTGUARD_RULEBOOK_CASES", 48);
    let len = env_number("SLOTGUARD_RULEBOOK_LEN", 40);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let events = capture::install();
    let stores = runtime.block_on(check::Stores::open());
    let config = Config {
        cases: u32::try_from(cases).unwrap_or(u32::MAX),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&ops::sequence(len), |sequence| {
        runtime
            .block_on(stores.check(&sequence, &events))
            .map_err(TestCaseError::fail)
    });
    if let Err(failure) = outcome {
        panic!("a store departs from the rulebook: {failure}");
    }
    eprintln!("rulebook: {cases} sequences of up to {len} operations, every store agreed");
}
