//! Eight backends (eight connection pools, as eight processes would have) race for the same 200 slots
//! on one file, and then for the same 200 due retries: every slot and every retry is won exactly once.

use slotguard::store::SlotStoreExt as _;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slotguard::ErrorClass;
use slotguard::store::{Claim, DueSpec, Finish, Lease, RunStatus, SlotStore};
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::request;
use tokio::sync::Barrier;

const CLAIMERS: usize = 8;
const SLOTS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_claimers_win_each_slot_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("race.db");
    let stale = Duration::from_secs(300);
    let slots: Vec<_> = (0..SLOTS)
        .map(|i| {
            let at = format!("2026-03-01T{:02}:{:02}:00Z", i / 60, i % 60);
            request("race", &at, stale)
        })
        .collect();
    let slots = Arc::new(slots);
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let started = Instant::now();

    let mut tasks = Vec::new();
    for claimer in 0..CLAIMERS {
        let (path, slots, barrier) = (path.clone(), Arc::clone(&slots), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let backend = SqliteBackend::open(&path).await.expect("open");
            let owner = format!("claimer-{claimer}");
            // Like replicas whose timers fire together: every claimer walks the same slots in the
            // same order, in batches of its own size, so every slot is contested by claimers at
            // different points of their batches. Odd claimers walk backwards and meet the others in
            // the middle.
            let mut order: Vec<_> = slots.to_vec();
            if claimer % 2 == 1 {
                order.reverse();
            }
            let batch = 1 + claimer;
            barrier.wait().await;
            let mut won = Vec::new();
            for chunk in order.chunks(batch) {
                let answers = backend.claim(&owner, chunk).await.expect("claim");
                assert_eq!(answers.len(), chunk.len());
                for (request, answer) in chunk.iter().zip(answers) {
                    match answer {
                        Claim::Won(lease) => won.push((request.key.scheduled_at, lease)),
                        Claim::Taken { status } => assert_eq!(status, RunStatus::Running),
                        other => panic!("a past slot answered {other:?}"),
                    }
                }
                // A replica claims once per tick, not back to back: leave the write lock to the
                // others for a moment (SQLite's lock is not fair to sleepers in its busy handler).
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (owner, won)
        }));
    }
    let mut winners: HashMap<_, Vec<String>> = HashMap::new();
    let mut tokens = HashSet::new();
    let mut by_owner = HashMap::new();
    for task in tasks {
        let (owner, won) = task.await.expect("claimer");
        by_owner.insert(owner.clone(), won.len());
        for (slot, lease) in won {
            assert_eq!(lease.attempt, 1);
            assert!(
                tokens.insert(lease.token),
                "token {} handed out twice",
                lease.token
            );
            winners.entry(slot).or_default().push(owner.clone());
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(winners.len(), SLOTS, "every slot has a winner");
    for (slot, owners) in &winners {
        assert_eq!(owners.len(), 1, "{slot} won by {owners:?}");
    }
    eprintln!("{SLOTS} slots x {CLAIMERS} claimers in {elapsed:?}; wins per claimer: {by_owner:?}");

    // The file agrees: one row per slot, one attempt each, held by the claimer that was told it won.
    let check = SqliteBackend::open(&path).await.expect("open");
    let runs = check.runs(Some("race")).await.expect("runs");
    assert_eq!(runs.len(), SLOTS);
    for run in runs {
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.attempt, 1);
        assert_eq!(run.attempts.len(), 1);
        let owner = run.owner.expect("owner");
        assert_eq!(winners[&run.key.scheduled_at], vec![owner.clone()]);
        assert_eq!(run.attempts[0].owner, owner);
        assert_eq!(run.attempts[0].token, run.token);
    }
}

/// Eight backends (eight pools on one file) call `claim_due` together over the same 200 due retries:
/// every retry is claimed exactly once, as attempt 2, with a token of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_claimers_take_each_due_retry_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("due.db");
    let stale = Duration::from_secs(300);
    let slots: Vec<_> = (0..SLOTS)
        .map(|i| {
            let at = format!("2026-03-02T{:02}:{:02}:00Z", i / 60, i % 60);
            request("due_race", &at, stale)
        })
        .collect();
    // Every slot ran once and failed with a retry due at once.
    let setup = SqliteBackend::open(&path).await.expect("open");
    let first: Vec<Lease> = setup
        .claim("first", &slots)
        .await
        .expect("claim")
        .into_iter()
        .map(|c| match c {
            Claim::Won(lease) => lease,
            Claim::Taken { status } => panic!("fresh slot taken: {status}"),
            other => panic!("a past slot answered {other:?}"),
        })
        .collect();
    for lease in &first {
        let failed = Finish::failed(ErrorClass::Transient, "503", Some(Duration::ZERO));
        assert!(
            setup
                .finish_one("first", lease, &failed)
                .await
                .expect("finish")
        );
    }
    let first_tokens: HashSet<i64> = first.iter().map(|l| l.token).collect();
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let started = Instant::now();

    let mut tasks = Vec::new();
    for claimer in 0..CLAIMERS {
        let (path, barrier) = (path.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let backend = SqliteBackend::open(&path).await.expect("open");
            let owner = format!("claimer-{claimer}");
            let specs = [DueSpec {
                job: "due_race".to_owned(),
                max_attempts: 3,
                overlap: slotguard::Overlap::Allow,
                limit: None,
                cluster_limit: None,
                ahead: std::time::Duration::ZERO,
            }];
            barrier.wait().await;
            let mut won = Vec::new();
            loop {
                // Limits differ, so claimers take batches of different sizes.
                let due = backend
                    .claim_due(&owner, &specs, 1 + claimer)
                    .await
                    .expect("claim_due");
                if due.is_empty() {
                    break;
                }
                assert!(due.len() <= 1 + claimer, "limit honoured");
                won.extend(due);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (owner, won)
        }));
    }
    let mut winners: HashMap<_, Vec<String>> = HashMap::new();
    let mut tokens = HashSet::new();
    let mut by_owner = HashMap::new();
    for task in tasks {
        let (owner, won) = task.await.expect("claimer");
        by_owner.insert(owner.clone(), won.len());
        for due in won {
            assert_eq!(due.lease.attempt, 2);
            assert!(!first_tokens.contains(&due.lease.token));
            assert!(
                tokens.insert(due.lease.token),
                "token {} handed out twice",
                due.lease.token
            );
            winners
                .entry(due.key.scheduled_at)
                .or_default()
                .push(owner.clone());
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(winners.len(), SLOTS, "every retry has a winner");
    for (slot, owners) in &winners {
        assert_eq!(owners.len(), 1, "{slot} claimed by {owners:?}");
    }
    eprintln!(
        "{SLOTS} retries x {CLAIMERS} claimers in {elapsed:?}; claims per claimer: {by_owner:?}"
    );

    // The file agrees: every run holds its second attempt, by the claimer told it won.
    let runs = setup.runs(Some("due_race")).await.expect("runs");
    assert_eq!(runs.len(), SLOTS);
    for run in runs {
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.attempt, 2);
        assert_eq!(run.attempts.len(), 2);
        assert_eq!(run.attempts[0].status, RunStatus::Failed);
        assert_eq!(run.attempts[1].status, RunStatus::Running);
        let owner = run.owner.expect("owner");
        assert_eq!(winners[&run.key.scheduled_at], vec![owner.clone()]);
        assert_eq!(run.attempts[1].owner, owner);
        assert_eq!(run.attempts[1].token, run.token);
    }
}
