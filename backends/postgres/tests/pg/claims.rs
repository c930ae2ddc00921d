//! Claims under concurrency, the outcome of finished runs, and names that try to be SQL.

use slotguard::store::SlotStoreExt as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slotguard::ErrorClass;
use slotguard::store::{Claim, ClaimRequest, DueSpec, Finish, RunStatus, SlotStore};
use slotguard_tests::request;
use sqlx::Row;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::common::{Connect, TABLES, TestSchema, won};

const CLAIMERS: usize = 8;
const SLOTS: usize = 200;

fn slots(job: &str, stale_after: Duration) -> Vec<ClaimRequest> {
    (0..SLOTS)
        .map(|i| {
            let at = format!("2026-03-01T{:02}:{:02}:00Z", i / 60, i % 60);
            request(job, &at, stale_after)
        })
        .collect()
}

/// Every claimer gets the slots in its own order (some reversed, some rotated) and in batches of its
/// own size, so that batches overlap partially and in opposite orders.
fn batches_for(claimer: usize, all: &[ClaimRequest]) -> Vec<Vec<ClaimRequest>> {
    let mut mine = all.to_vec();
    if claimer % 2 == 1 {
        mine.reverse();
    }
    mine.rotate_left(claimer * 17 % SLOTS);
    mine.chunks(7 + claimer * 9).map(<[_]>::to_vec).collect()
}

/// 8 replicas race for the same 200 slots: `(owner, job, slot) -> lease` for every win.
async fn race(
    schema: &TestSchema,
    all: &[ClaimRequest],
) -> HashMap<(String, chrono::DateTime<chrono::Utc>), Vec<(String, slotguard::store::Lease)>> {
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let mut set = JoinSet::new();
    for claimer in 0..CLAIMERS {
        let backend = schema
            .builder()
            .pool_size(1)
            .connect()
            .await
            .expect("connect");
        let batches = batches_for(claimer, all);
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            let owner = format!("replica-{claimer}");
            barrier.wait().await;
            let mut wins = Vec::new();
            for batch in batches {
                let answers = backend.claim(&owner, &batch).await.expect("claim");
                assert_eq!(answers.len(), batch.len());
                for (req, answer) in batch.iter().zip(answers) {
                    if let Claim::Won(lease) = answer {
                        wins.push((
                            req.key.job.clone(),
                            req.key.scheduled_at,
                            owner.clone(),
                            lease,
                        ));
                    }
                }
            }
            backend.close().await;
            wins
        });
    }
    let mut by_slot: HashMap<_, Vec<_>> = HashMap::new();
    while let Some(wins) = set.join_next().await {
        for (job, at, owner, lease) in wins.expect("claimer panicked") {
            by_slot.entry((job, at)).or_default().push((owner, lease));
        }
    }
    by_slot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_claimers_win_each_of_200_slots_exactly_once() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let all = slots("race", Duration::from_secs(60));

    let started = Instant::now();
    let by_slot = race(&schema, &all).await;
    eprintln!("8 x 200 claims in {:?}", started.elapsed());
    assert_eq!(by_slot.len(), SLOTS, "every slot was won");
    for (slot, wins) in &by_slot {
        assert_eq!(wins.len(), 1, "{slot:?} won by {wins:?}");
        assert_eq!(wins[0].1.attempt, 1);
    }
    let mut tokens: Vec<i64> = by_slot.values().map(|w| w[0].1.token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), SLOTS, "tokens are unique");

    // The rows agree with the answers: one run and one attempt per slot, held by the winner.
    let runs = backend.runs(Some("race")).await.expect("runs");
    assert_eq!(runs.len(), SLOTS);
    for run in &runs {
        let (owner, lease) = &by_slot[&(run.key.job.clone(), run.key.scheduled_at)][0];
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.owner.as_ref(), Some(owner));
        assert_eq!(
            (run.id, run.token, run.attempt),
            (lease.run_id, lease.token, 1)
        );
        assert_eq!(run.attempts.len(), 1);
        assert_eq!(run.attempts[0].owner, *owner);
    }
    backend.close().await;
}

/// The same race on 200 abandoned rows: the re-claim path (`FOR UPDATE SKIP LOCKED`) gives each
/// stale row to exactly one claimer, as attempt 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_claimers_recover_each_of_200_stale_slots_exactly_once() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let ghost: Vec<ClaimRequest> = slots("recover", Duration::from_millis(1));
    let first = backend.claim("ghost", &ghost).await.expect("claim");
    assert!(first.iter().all(|c| matches!(c, Claim::Won(_))));
    tokio::time::sleep(Duration::from_millis(100)).await;

    let all = slots("recover", Duration::from_secs(60));
    let by_slot = race(&schema, &all).await;
    assert_eq!(by_slot.len(), SLOTS, "every stale slot was recovered");
    for (slot, wins) in &by_slot {
        assert_eq!(wins.len(), 1, "{slot:?} recovered by {wins:?}");
        assert_eq!(wins[0].1.attempt, 2);
    }
    for run in backend.runs(Some("recover")).await.expect("runs") {
        assert_eq!(run.attempt, 2);
        assert_eq!(run.stale_after, Duration::from_secs(60));
        let statuses: Vec<_> = run.attempts.iter().map(|a| (a.attempt, a.status)).collect();
        assert_eq!(
            statuses,
            [(1, RunStatus::Abandoned), (2, RunStatus::Running)]
        );
        assert_eq!(run.attempts[0].owner, "ghost");
        assert!(run.attempts[1].token > run.attempts[0].token);
    }
    backend.close().await;
}

/// 200 runs wait for a retry that is due now; 8 replicas call `claim_due` at once, in small pages,
/// until it answers nothing: each run is claimed exactly once, as attempt 2, with a new token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_callers_claim_each_of_200_due_retries_exactly_once() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let all = slots("due", Duration::from_secs(60));
    let leases: Vec<_> = backend
        .claim("first", &all)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    let retry = Finish::failed(ErrorClass::Transient, "503", Some(Duration::ZERO));
    for lease in &leases {
        assert!(
            backend
                .finish_one("first", lease, &retry)
                .await
                .expect("finish")
        );
    }

    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let mut set = JoinSet::new();
    for claimer in 0..CLAIMERS {
        let replica = schema
            .builder()
            .pool_size(1)
            .connect()
            .await
            .expect("connect");
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            let owner = format!("replica-{claimer}");
            let specs = [DueSpec {
                job: "due".into(),
                max_attempts: 3,
                overlap: slotguard::Overlap::Allow,
                limit: None,
                cluster_limit: None,
                ahead: std::time::Duration::ZERO,
            }];
            barrier.wait().await;
            let mut claimed = Vec::new();
            loop {
                let page = replica
                    .claim_due(&owner, &specs, 3 + claimer % 4)
                    .await
                    .expect("claim_due");
                if page.is_empty() {
                    break;
                }
                assert!(page.len() <= 3 + claimer % 4);
                claimed.extend(page.into_iter().map(|d| (owner.clone(), d)));
            }
            replica.close().await;
            claimed
        });
    }
    let mut by_run: HashMap<i64, Vec<_>> = HashMap::new();
    while let Some(claimed) = set.join_next().await {
        for (owner, due) in claimed.expect("caller panicked") {
            by_run
                .entry(due.lease.run_id)
                .or_default()
                .push((owner, due));
        }
    }
    assert_eq!(by_run.len(), SLOTS, "every due run was claimed");
    for (run, claims) in &by_run {
        assert_eq!(claims.len(), 1, "run {run} claimed by {claims:?}");
        assert_eq!(claims[0].1.lease.attempt, 2);
    }
    let specs = [DueSpec {
        job: "due".into(),
        max_attempts: 3,
        overlap: slotguard::Overlap::Allow,
        limit: None,
        cluster_limit: None,
        ahead: std::time::Duration::ZERO,
    }];
    assert!(
        backend
            .claim_due("late", &specs, 1_000)
            .await
            .expect("claim_due")
            .is_empty()
    );
    for run in backend.runs(Some("due")).await.expect("runs") {
        let (owner, due) = &by_run[&run.id][0];
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.owner.as_ref(), Some(owner));
        assert_eq!((run.attempt, run.token), (2, due.lease.token));
        assert_eq!(run.next_attempt_at, None);
        let attempts: Vec<_> = run
            .attempts
            .iter()
            .map(|a| (a.attempt, a.status, a.owner.as_str()))
            .collect();
        assert_eq!(
            attempts,
            [
                (1, RunStatus::Failed, "first"),
                (2, RunStatus::Running, owner.as_str())
            ]
        );
        assert!(run.attempts[1].token > run.attempts[0].token);
    }
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_map_to_statuses_and_later_claims_see_them() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let stale = Duration::from_secs(60);
    let batch = [
        request("outcome", "2026-01-01T00:00:00Z", stale),
        request("outcome", "2026-01-01T00:01:00Z", stale),
        request("outcome", "2026-01-01T00:02:00Z", stale),
        request("outcome", "2026-01-01T00:03:00Z", stale),
    ];
    let leases: Vec<_> = backend
        .claim("me", &batch)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    let outcomes = [
        Finish::succeeded(),
        Finish::failed(ErrorClass::Transient, "timeout talking to the bank", None),
        Finish::failed(ErrorClass::Permanent, "bad credentials", None),
        Finish::abandoned("shutdown", None),
    ];
    // Someone else, or a wrong token, cannot write.
    assert!(
        !backend
            .finish_one("other", &leases[0], &outcomes[0])
            .await
            .expect("finish")
    );
    let mut forged = leases[0].clone();
    forged.token += 1_000_000;
    assert!(
        !backend
            .finish_one("me", &forged, &outcomes[0])
            .await
            .expect("finish")
    );
    for (lease, outcome) in leases.iter().zip(&outcomes) {
        assert!(
            backend
                .finish_one("me", lease, outcome)
                .await
                .expect("finish")
        );
    }
    // Heartbeats no longer hold finished runs.
    let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
    assert!(
        backend
            .heartbeat("me", &tokens)
            .await
            .expect("heartbeat")
            .is_empty()
    );

    let runs = backend.runs(Some("outcome")).await.expect("runs");
    let seen: Vec<_> = runs
        .iter()
        .map(|r| {
            (
                r.status,
                r.error_class.as_deref(),
                r.error_message.as_deref(),
                r.attempts[0].status,
                r.attempts[0].message.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (RunStatus::Succeeded, None, None, RunStatus::Succeeded, None),
            (
                RunStatus::Failed,
                Some("transient"),
                Some("timeout talking to the bank"),
                RunStatus::Failed,
                Some("timeout talking to the bank")
            ),
            (
                RunStatus::Dead,
                Some("permanent"),
                Some("bad credentials"),
                RunStatus::Failed,
                Some("bad credentials")
            ),
            (
                RunStatus::Abandoned,
                None,
                Some("shutdown"),
                RunStatus::Abandoned,
                Some("shutdown")
            ),
        ]
    );
    assert!(
        runs.iter()
            .all(|r| r.finished_at.is_some() && r.attempts[0].finished_at.is_some())
    );

    // A later claim of the same slots is refused and says why.
    let again = backend.claim("me", &batch).await.expect("claim");
    let statuses: Vec<_> = again
        .iter()
        .map(|c| match c {
            Claim::Taken { status } => *status,
            Claim::Won(l) => panic!("won a finished slot: {l:?}"),
            other => panic!("a past slot answered {other:?}"),
        })
        .collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Dead,
            RunStatus::Abandoned
        ]
    );
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_in_order_and_wins_a_repeated_slot_once() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let stale = Duration::from_secs(60);
    let taken = request("order", "2026-01-01T00:00:00Z", stale);
    backend
        .claim("early", std::slice::from_ref(&taken))
        .await
        .expect("claim");

    let batch = [
        request("order", "2026-01-01T00:05:00Z", stale),
        taken.clone(),
        request("order", "2026-01-01T00:01:00Z", stale),
        request("order", "2026-01-01T00:05:00Z", stale),
    ];
    let answers = backend.claim("late", &batch).await.expect("claim");
    assert!(matches!(answers[0], Claim::Won(_)), "{answers:?}");
    assert_eq!(
        answers[1],
        Claim::Taken {
            status: RunStatus::Running
        }
    );
    assert!(matches!(answers[2], Claim::Won(_)), "{answers:?}");
    assert_eq!(
        answers[3],
        Claim::Taken {
            status: RunStatus::Running
        }
    );
    // Tokens follow the batch's order, not the slots' order.
    assert!(won(&answers[0]).token < won(&answers[2]).token);

    // Heartbeats answer with exactly the tokens still held.
    let held = [won(&answers[0]).token, won(&answers[2]).token];
    let mut beat = backend
        .heartbeat("late", &[held[0], held[1], held[1] + 999_999])
        .await
        .expect("heartbeat");
    beat.sort_unstable();
    assert_eq!(beat, held);
    assert!(backend.claim("x", &[]).await.expect("claim").is_empty());
    assert!(
        backend
            .heartbeat("x", &[])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_parameters_and_round_trip_verbatim() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let stale = Duration::from_secs(60);
    let long: String = "정산🚀".chars().cycle().take(200).collect();
    let names = [
        "x'); DROP TABLE job_runs;--".to_owned(),
        format!("\"; DROP SCHEMA {} CASCADE; --", schema.name),
        "Robert'); DELETE FROM job_run_attempts WHERE ('1'='1".to_owned(),
        "정산_日次_🚀 \u{0301}\u{200b}".to_owned(),
        "$1 $$ \\ % _ \t\n".to_owned(),
        long,
    ];
    let mut requests = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut req = request(name, "2026-01-01T00:00:00Z", stale);
        req.key.partition = format!("p'{i}; DROP TABLE lock_keys;--");
        req.zone = "Asia/Seoul'--".to_owned();
        requests.push(req);
    }
    let answers = backend
        .claim("owner'); --", &requests)
        .await
        .expect("claim");
    for answer in &answers {
        let lease = won(answer);
        assert!(
            backend
                .finish_one("owner'); --", &lease, &Finish::succeeded())
                .await
                .expect("finish")
        );
    }
    for (i, name) in names.iter().enumerate() {
        let runs = backend.runs(Some(name)).await.expect("runs");
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].key.job, *name);
        assert_eq!(
            runs[0].key.partition,
            format!("p'{i}; DROP TABLE lock_keys;--")
        );
        assert_eq!(runs[0].zone, "Asia/Seoul'--");
        assert_eq!(runs[0].owner.as_deref(), Some("owner'); --"));
        assert_eq!(runs[0].status, RunStatus::Succeeded);
    }
    assert_eq!(names[5].chars().count(), 200);

    let keys: Vec<(i64, String)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (1_000 + i as i64, n.clone()))
        .collect();
    backend
        .register_lock_keys("ns'); DROP TABLE lock_keys;--", &keys)
        .await
        .expect("register");
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT lock_key, namespace, job_name FROM \"{}\".lock_keys ORDER BY lock_key",
        schema.name
    )))
    .fetch_all(backend.pool())
    .await
    .expect("lock_keys");
    let stored: Vec<(i64, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let want: Vec<_> = keys
        .iter()
        .map(|(k, n)| (*k, "ns'); DROP TABLE lock_keys;--".to_owned(), n.clone()))
        .collect();
    assert_eq!(stored, want);

    // Every table is still there.
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&schema.name)
    .fetch_one(backend.pool())
    .await
    .expect("tables");
    assert_eq!(tables, TABLES.len() as i64, "{TABLES:?}");
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_keys_cannot_collide_silently() {
    let schema = TestSchema::new();
    let billing = schema.backend().await;
    let reports = schema.backend().await;
    billing
        .register_lock_keys("billing", &[(1, "settle".into()), (2, "invoice".into())])
        .await
        .expect("register");
    // Again, from another replica of the same application: fine.
    reports
        .register_lock_keys("billing", &[(1, "settle".into()), (2, "invoice".into())])
        .await
        .expect("register again");

    // Another application wants key 2 (and a fresh key 3): refused, and key 3 is not registered.
    let err = reports
        .register_lock_keys("reports", &[(3, "weekly".into()), (2, "monthly".into())])
        .await
        .expect_err("collision");
    match &err {
        slotguard_postgres::PgError::LockKeyCollision {
            key,
            registered_namespace,
            registered_job,
            namespace,
            job,
        } => {
            assert_eq!(*key, 2);
            assert_eq!(
                (registered_namespace.as_str(), registered_job.as_str()),
                ("billing", "invoice")
            );
            assert_eq!((namespace.as_str(), job.as_str()), ("reports", "monthly"));
        }
        other => panic!("expected a collision, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("lock key 2") && text.contains("invoice") && text.contains("monthly"),
        "{text}"
    );
    let three: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{}\".lock_keys WHERE lock_key = 3",
        schema.name
    )))
    .fetch_one(reports.pool())
    .await
    .expect("count");
    assert_eq!(three, 0, "a refused registration registers nothing");

    // The same application, another job on the same key: refused too.
    assert!(matches!(
        billing
            .register_lock_keys("billing", &[(1, "other".into())])
            .await,
        Err(slotguard_postgres::PgError::LockKeyCollision { key: 1, .. })
    ));
    billing.close().await;
    reports.close().await;
}

/// Two replicas claim *different* new slots of one job at the same instant, with no lock layer in
/// front (a job at `buffer_one`, or a second look): the store lets one run, never both. The claim
/// statements read one snapshot each, so without the per-job claim lock both would see no running
/// run and both would win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_slots_of_one_job_claimed_together_run_one_at_a_time() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let mut replicas = Vec::new();
    for _ in 0..2 {
        replicas.push(Arc::new(
            schema
                .builder()
                .pool_size(1)
                .connect()
                .await
                .expect("connect"),
        ));
    }
    let mut both_ran = 0;
    for round in 0..40 {
        // Half the rounds may defer (`TRY_LOCK_JOBS`): one of them is then `Contended`, or sees
        // the other's run; never both run.
        let defer = round % 2 == 1;
        let job = format!("together_{round}");
        let barrier = Arc::new(Barrier::new(2));
        let mut set = JoinSet::new();
        for (i, replica) in replicas.iter().enumerate() {
            let (replica, barrier) = (Arc::clone(replica), Arc::clone(&barrier));
            let mut req = request(
                &job,
                &format!("2026-03-02T00:00:0{i}Z"),
                Duration::from_secs(60),
            );
            req.overlap = slotguard::Overlap::BufferOne;
            req.defer_if_contended = defer;
            set.spawn(async move {
                barrier.wait().await;
                let claim = replica
                    .claim(&format!("r{i}"), &[req])
                    .await
                    .expect("claim");
                matches!(claim[0], Claim::Won(_))
            });
        }
        let mut won = 0;
        while let Some(w) = set.join_next().await {
            won += usize::from(w.expect("claimer"));
        }
        assert!(won >= 1, "round {round}: one of them runs");
        both_ran += usize::from(won == 2);
    }
    assert_eq!(both_ran, 0, "rounds in which both slots ran at once");
    for replica in replicas {
        replica.close().await;
    }
    backend.close().await;
}

/// A claim that may defer does not wait for another claim of its job in flight: it answers
/// `Contended` for that job and writes nothing for it, and claims the rest of its batch. A claim
/// that may not defer waits for the other claim to commit, then decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_may_defer_leaves_a_contended_job_for_later() {
    use sqlx::Connection as _;
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let suffix = crate::common::random_u64();
    let (busy, free) = (format!("busy_{suffix}"), format!("free_{suffix}"));
    let at = "2026-03-03T00:00:00Z";
    let claim = |job: &str, defer: bool| {
        let mut r = request(job, at, Duration::from_secs(60));
        r.overlap = slotguard::Overlap::Skip;
        r.defer_if_contended = defer;
        r
    };
    // Another claim of `busy` in flight: its claim lock held in an open transaction.
    let mut holder = sqlx::PgConnection::connect(&crate::common::database_url())
        .await
        .expect("connect");
    let mut tx = holder.begin().await.expect("begin");
    crate::common::take_claim_lock(&mut tx, &busy).await;

    let answers = tokio::time::timeout(
        Duration::from_secs(5),
        backend.claim("r1", &[claim(&busy, true), claim(&free, true)]),
    )
    .await
    .expect("a claim that may defer waited for the other claim")
    .expect("claim");
    assert_eq!(answers[0], Claim::Contended, "the job claimed elsewhere");
    assert!(matches!(answers[1], Claim::Won(_)), "{:?}", answers[1]);
    let busy_key = claim(&busy, true).key;
    let found = backend
        .existing_slots(std::slice::from_ref(&busy_key))
        .await
        .expect("existing");
    assert_eq!(found, vec![false], "nothing written for the contended job");

    // Not allowed to defer: it waits for the holder.
    let waiting = {
        let backend = backend.clone();
        let request = claim(&busy, false);
        tokio::spawn(async move { backend.claim("r2", &[request]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a claim that may not defer waits");
    tx.commit().await.expect("commit");
    let answers = waiting.await.expect("task").expect("claim");
    assert!(matches!(answers[0], Claim::Won(_)), "{:?}", answers[0]);
    // Asked again when the lock is free, the slot is decided as any claim: its row exists now.
    let again = backend
        .claim("r1", &[claim(&busy, true)])
        .await
        .expect("claim");
    assert_eq!(
        again[0],
        Claim::Taken {
            status: RunStatus::Running
        }
    );
    let _ = holder.close().await;
    backend.close().await;
}
