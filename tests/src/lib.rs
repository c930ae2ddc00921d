//! The contract every backend passes, and helpers shared by the integration tests.
//!
//! Each check takes the backend under test and the staleness threshold it should use; checks that need
//! a stale heartbeat sleep past it with `tokio::time::sleep`, which is instant in paused time (memory
//! backend) and real time against a database, whose own clock judges staleness.

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{
    Backend, Claim, ClaimRequest, DueSpec, Finish, Lease, LockStore, MAX_EARLY, RunFilter,
    RunStatus, SlotKey, Trigger,
};
use slotguard::{ErrorClass, Overlap};

pub mod admin;
mod contract;
pub mod history;
pub mod logs;
pub mod otlp;
pub mod overrides;
pub mod pg;
pub mod traces;

/// A claim request for `job` at `scheduled_at`.
pub fn request(job: &str, scheduled_at: &str, stale_after: Duration) -> ClaimRequest {
    let at = DateTime::parse_from_rfc3339(scheduled_at)
        .expect("valid RFC 3339")
        .with_timezone(&Utc);
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: at,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: at.naive_utc(),
        business_date: at.date_naive(),
        fingerprint: 7,
        stale_after,
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// The same request with an overlap policy.
pub fn with_overlap(mut request: ClaimRequest, overlap: Overlap) -> ClaimRequest {
    request.overlap = overlap;
    request
}

fn spec(job: &str, max_attempts: u32) -> DueSpec {
    DueSpec {
        job: job.to_owned(),
        max_attempts,
        overlap: slotguard::Overlap::Allow,
        limit: None,
        cluster_limit: None,
        ahead: std::time::Duration::ZERO,
    }
}

/// The lease of a claim that was won; panics, naming the answer, on any other.
pub fn won(claim: &Claim) -> Lease {
    match claim {
        Claim::Won(lease) => lease.clone(),
        Claim::Taken { status } => panic!("expected to win the claim, found it {status}"),
        other => panic!("expected to win the claim, found {other:?}"),
    }
}

/// Claims `requests` for `a` and hands each over as a shutdown would: due again at once.
async fn claim_and_hand_over(backend: &dyn Backend, requests: &[ClaimRequest]) {
    let handed = Finish::abandoned("shutdown", Some(Duration::ZERO));
    for lease in backend
        .claim("a", requests)
        .await
        .expect("claim")
        .iter()
        .map(won)
    {
        let recorded = backend
            .finish_one("a", &lease, &handed)
            .await
            .expect("finish");
        assert!(recorded, "the hand-over was recorded");
    }
}

/// `owner`'s attempt `lease` lost its hold: its heartbeat and its outcome are refused.
async fn assert_fenced(backend: &dyn Backend, owner: &str, lease: &Lease, who: &str) {
    let held = backend
        .heartbeat(owner, &[lease.token])
        .await
        .expect("heartbeat");
    assert!(held.is_empty(), "{who}: heartbeat accepted");
    let recorded = backend
        .finish_one(owner, lease, &Finish::succeeded())
        .await
        .expect("finish");
    assert!(!recorded, "{who}: outcome accepted");
}

/// A slot is claimed once; a batch is answered in order; tokens rise.
pub async fn claims_are_exclusive(backend: &dyn Backend) {
    let stale = Duration::from_secs(60);
    let batch = [
        request("contract_a", "2026-01-01T00:00:00Z", stale),
        request("contract_a", "2026-01-01T00:01:00Z", stale),
        request("contract_b", "2026-01-01T00:00:00Z", stale),
    ];
    let first = backend.claim("one", &batch).await.expect("claim");
    assert_eq!(first.len(), 3);
    let leases: Vec<_> = first.iter().map(won).collect();
    assert!(leases.iter().all(|l| l.attempt == 1));
    assert!(
        leases.windows(2).all(|w| w[0].token < w[1].token),
        "{leases:?}"
    );
    let second = backend.claim("two", &batch).await.expect("claim");
    assert!(
        second.iter().all(|c| matches!(c, Claim::Taken { .. })),
        "{second:?}"
    );
    // The same owner cannot claim it twice either.
    let again = backend.claim("one", &batch[..1]).await.expect("claim");
    assert!(matches!(again[0], Claim::Taken { .. }));
}

/// Only the holder of the current token may finish a run; heartbeats answer with the tokens held.
pub async fn writes_are_fenced(backend: &dyn Backend, stale_after: Duration) {
    let req = request("contract_fence", "2026-01-01T00:00:00Z", stale_after);
    let a = won(&backend
        .claim("a", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    assert_eq!(
        backend
            .heartbeat("a", &[a.token, a.token + 1_000_000])
            .await
            .expect("heartbeat"),
        vec![a.token]
    );
    assert!(
        backend
            .heartbeat("b", &[a.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    // Not stale yet: nobody else may take it.
    assert!(matches!(
        backend
            .claim("b", std::slice::from_ref(&req))
            .await
            .expect("claim")[0],
        Claim::Taken { .. }
    ));
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    let b = won(&backend
        .claim("b", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    assert_eq!(b.attempt, 2);
    assert_eq!(b.run_id, a.run_id);
    assert!(b.token > a.token);
    // "a" wakes up late: its heartbeat and its completion are refused.
    assert!(
        backend
            .heartbeat("a", &[a.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(
        !backend
            .finish_one("a", &a, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert!(
        backend
            .finish_one("b", &b, &Finish::succeeded())
            .await
            .expect("finish")
    );
    // Finished rows are never claimed again, stale or not.
    tokio::time::sleep(stale_after * 2).await;
    assert!(matches!(
        backend
            .claim("c", std::slice::from_ref(&req))
            .await
            .expect("claim")[0],
        Claim::Taken { .. }
    ));
    // A second completion with the winning token is refused too.
    assert!(
        !backend
            .finish_one("b", &b, &Finish::succeeded())
            .await
            .expect("finish")
    );
}

/// Locks are exclusive per key, and only their owner releases them.
pub async fn locks_are_exclusive(backend: &dyn LockStore) {
    let keys = [9_001, 9_002];
    let a = backend.try_lock("a", &keys).await.expect("lock");
    assert!(a.iter().all(Option::is_some));
    let b = backend.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_none));
    backend.unlock("b", &keys).await.expect("unlock");
    assert!(backend.try_lock("b", &keys[..1]).await.expect("lock")[0].is_none());
    backend.unlock("a", &keys).await.expect("unlock");
    let b = backend.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_some));
    backend.unlock("b", &keys).await.expect("unlock");
}

/// A lock store whose locks carry fencing tokens gives every grant of a key a higher token than
/// the grants before it, whoever the owner; one without tokens gives none at all.
pub async fn lock_tokens_rise(store: &dyn LockStore) {
    let key = 9_003;
    let mut seen: Vec<Option<i64>> = Vec::new();
    for owner in ["a", "b", "a", "c"] {
        let lease = store.try_lock(owner, &[key]).await.expect("lock")[0]
            .clone()
            .expect("free");
        seen.push(lease.token);
        store.unlock(owner, &[key]).await.expect("unlock");
    }
    if seen.iter().all(Option::is_none) {
        return;
    }
    let tokens: Vec<i64> = seen
        .iter()
        .map(|t| t.expect("every grant has a token"))
        .collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must rise with every grant: {tokens:?}"
    );
}

fn taken(claim: &Claim) -> RunStatus {
    match claim {
        Claim::Taken { status } => *status,
        Claim::Won(lease) => panic!("expected the claim to be refused, it won {lease:?}"),
        other => panic!("expected the claim to be refused as taken, found {other:?}"),
    }
}

/// A scheduled slot further than `MAX_EARLY` ahead of the store's clock is neither claimed nor
/// recorded skipped; one within it is claimed (`claim_ahead`), and other triggers are not judged.
pub async fn slots_ahead_of_the_store_clock_are_not_due(backend: &dyn Backend) {
    let now = backend.store_now().await.expect("store clock");
    let stale = Duration::from_secs(60);
    let at = |ahead: chrono::TimeDelta, job: &str| {
        let slot = (now + ahead).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        request(job, &slot, stale)
    };
    let early = chrono::TimeDelta::from_std(MAX_EARLY).expect("small");
    let far = at(early + chrono::TimeDelta::seconds(60), "contract_early_far");
    let near = at(chrono::TimeDelta::milliseconds(500), "contract_early_near");
    let mut manual = at(chrono::TimeDelta::hours(1), "contract_early_manual");
    manual.trigger = Trigger::Manual;
    let claims = backend
        .claim("a", &[far.clone(), near, manual])
        .await
        .expect("claim");
    assert_eq!(claims[0], Claim::NotDue, "an hour ahead: not due");
    won(&claims[1]);
    won(&claims[2]);
    backend
        .record_skipped(std::slice::from_ref(&far), "overlap")
        .await
        .expect("record skipped");
    let rows = backend
        .runs(&RunFilter {
            job: Some("contract_early_far".to_owned()),
            limit: 10,
            ..RunFilter::default()
        })
        .await
        .expect("runs");
    assert!(
        rows.is_empty(),
        "nothing written for a slot not due: {rows:?}"
    );
}

/// A failed attempt with a retry becomes due after its delay, as a new attempt of the same run.
pub async fn retries_become_due(backend: &dyn Backend) {
    let req = request(
        "contract_retry",
        "2026-01-01T00:00:00Z",
        Duration::from_secs(60),
    );
    let a = won(&backend
        .claim("a", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    let failed = Finish::failed(ErrorClass::Transient, "503", Some(Duration::from_secs(1)));
    assert!(backend.finish_one("a", &a, &failed).await.expect("finish"));
    let specs = [spec("contract_retry", 3)];
    assert!(
        backend
            .claim_due("b", &specs, 10)
            .await
            .expect("due")
            .is_empty(),
        "not yet due"
    );
    assert_eq!(
        taken(
            &backend
                .claim("b", std::slice::from_ref(&req))
                .await
                .expect("claim")[0]
        ),
        RunStatus::Pending
    );
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    // Only the jobs asked for.
    assert!(
        backend
            .claim_due("b", &[spec("other", 3)], 10)
            .await
            .expect("due")
            .is_empty()
    );
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].key, req.key);
    assert_eq!(due[0].lease.run_id, a.run_id);
    assert_eq!(due[0].lease.attempt, 2);
    assert!(due[0].lease.token > a.token);
    assert_eq!(due[0].trigger, Trigger::Schedule);
    assert_eq!(due[0].business_date, req.business_date);
    assert!(
        backend
            .claim_due("c", &specs, 10)
            .await
            .expect("due")
            .is_empty(),
        "claimed once"
    );
    assert!(
        backend
            .finish_one("b", &due[0].lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    // A permanent failure is dead at once, whatever the retry.
    let req2 = request(
        "contract_retry",
        "2026-01-01T00:01:00Z",
        Duration::from_secs(60),
    );
    let p = won(&backend
        .claim("a", std::slice::from_ref(&req2))
        .await
        .expect("claim")[0]);
    let permanent = Finish::failed(
        ErrorClass::Permanent,
        "bad credentials",
        Some(Duration::ZERO),
    );
    assert!(
        backend
            .finish_one("a", &p, &permanent)
            .await
            .expect("finish")
    );
    assert_eq!(
        taken(
            &backend
                .claim("a", std::slice::from_ref(&req2))
                .await
                .expect("claim")[0]
        ),
        RunStatus::Dead
    );
    assert!(
        backend
            .claim_due("a", &specs, 10)
            .await
            .expect("due")
            .is_empty()
    );
}

/// Stale and handed-over runs are recovered by `claim_due`; attempts are capped.
pub async fn abandoned_runs_are_recovered(backend: &dyn Backend, stale_after: Duration) {
    let specs = [spec("contract_recover", 2)];
    // Handed over at shutdown: due at once.
    let handover = request("contract_recover", "2026-01-01T00:00:00Z", stale_after);
    let a = won(&backend
        .claim("a", std::slice::from_ref(&handover))
        .await
        .expect("claim")[0]);
    let shutdown = Finish::abandoned("shutdown", Some(Duration::ZERO));
    assert!(
        backend
            .finish_one("a", &a, &shutdown)
            .await
            .expect("finish")
    );
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!((due[0].lease.attempt, due[0].lease.run_id), (2, a.run_id));
    // It dies now, silently: after the stale threshold it has had both of its attempts.
    let stale = request("contract_recover", "2026-01-01T00:01:00Z", stale_after);
    let s = won(&backend
        .claim("a", std::slice::from_ref(&stale))
        .await
        .expect("claim")[0]);
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    let due = backend.claim_due("c", &specs, 10).await.expect("due");
    assert_eq!(
        due.len(),
        1,
        "only the stale first attempt is recovered: {due:?}"
    );
    assert_eq!(due[0].key, stale.key);
    assert_eq!(due[0].lease.attempt, 2);
    assert!(due[0].lease.token > s.token);
    assert!(
        !backend
            .finish_one("a", &s, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(
        taken(
            &backend
                .claim("x", std::slice::from_ref(&handover))
                .await
                .expect("claim")[0]
        ),
        RunStatus::Dead,
        "the hand-over's second attempt went stale too and had no attempts left"
    );
    // Limit is honoured.
    let many: Vec<_> = (0..5)
        .map(|i| {
            request(
                "contract_recover_many",
                &format!("2026-01-01T01:0{i}:00Z"),
                stale_after,
            )
        })
        .collect();
    claim_and_hand_over(backend, &many).await;
    let due = backend
        .claim_due("b", &[spec("contract_recover_many", 3)], 3)
        .await
        .expect("due");
    assert_eq!(due.len(), 3);
    assert!(
        due.windows(2)
            .all(|w| w[0].key.scheduled_at < w[1].key.scheduled_at),
        "oldest first"
    );
}

/// The overlap policies, decided by the store.
pub async fn overlap_is_decided_by_the_store(backend: &dyn Backend) {
    let stale = Duration::from_secs(60);
    let slot = |job: &str, minute: u32, overlap: Overlap| {
        with_overlap(
            request(job, &format!("2026-01-01T00:{minute:02}:00Z"), stale),
            overlap,
        )
    };
    // Recorded skips (the flag or the lock refused the slot): once, and never over an existing row.
    let skipped = slot("ov_recorded", 0, Overlap::Skip);
    backend
        .record_skipped(
            std::slice::from_ref(&skipped),
            "overlap: a previous run is still running",
        )
        .await
        .expect("record");
    backend
        .record_skipped(std::slice::from_ref(&skipped), "again")
        .await
        .expect("record");
    assert_eq!(
        taken(
            &backend
                .claim("a", std::slice::from_ref(&skipped))
                .await
                .expect("claim")[0]
        ),
        RunStatus::Skipped
    );
    let live = slot("ov_recorded", 1, Overlap::Skip);
    let lease = won(&backend
        .claim("a", std::slice::from_ref(&live))
        .await
        .expect("claim")[0]);
    backend
        .record_skipped(std::slice::from_ref(&live), "late")
        .await
        .expect("record");
    assert_eq!(
        backend
            .heartbeat("a", &[lease.token])
            .await
            .expect("heartbeat"),
        vec![lease.token]
    );

    // skip
    let first = won(&backend
        .claim("a", &[slot("ov_skip", 0, Overlap::Skip)])
        .await
        .expect("claim")[0]);
    assert_eq!(
        taken(
            &backend
                .claim("b", &[slot("ov_skip", 1, Overlap::Skip)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Skipped
    );
    assert_eq!(
        taken(
            &backend
                .claim("c", &[slot("ov_skip", 1, Overlap::Skip)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Skipped,
        "the skip is recorded"
    );
    assert!(
        backend
            .finish_one("a", &first, &Finish::succeeded())
            .await
            .expect("finish")
    );
    won(&backend
        .claim("b", &[slot("ov_skip", 2, Overlap::Skip)])
        .await
        .expect("claim")[0]);

    // buffer_one
    let running = won(&backend
        .claim("a", &[slot("ov_buf", 0, Overlap::BufferOne)])
        .await
        .expect("claim")[0]);
    assert_eq!(
        taken(
            &backend
                .claim("b", &[slot("ov_buf", 1, Overlap::BufferOne)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Pending
    );
    assert_eq!(
        taken(
            &backend
                .claim("b", &[slot("ov_buf", 2, Overlap::BufferOne)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Pending
    );
    assert_eq!(
        taken(
            &backend
                .claim("b", &[slot("ov_buf", 1, Overlap::BufferOne)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Skipped,
        "only the newest waits"
    );
    let specs = [spec("ov_buf", 3)];
    assert!(
        backend
            .claim_due("b", &specs, 10)
            .await
            .expect("due")
            .is_empty(),
        "still running"
    );
    assert!(
        backend
            .finish_one("a", &running, &Finish::succeeded())
            .await
            .expect("finish")
    );
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].key.scheduled_at.format("%M").to_string(), "02");
    assert_eq!(due[0].lease.attempt, 1);

    // allow
    won(&backend
        .claim("a", &[slot("ov_allow", 0, Overlap::Allow)])
        .await
        .expect("claim")[0]);
    won(&backend
        .claim("b", &[slot("ov_allow", 1, Overlap::Allow)])
        .await
        .expect("claim")[0]);

    // replace
    let old = won(&backend
        .claim("a", &[slot("ov_replace", 0, Overlap::Replace)])
        .await
        .expect("claim")[0]);
    let new = won(&backend
        .claim("b", &[slot("ov_replace", 1, Overlap::Replace)])
        .await
        .expect("claim")[0]);
    assert!(new.token > old.token);
    assert_fenced(backend, "a", &old, "the replaced run").await;
    assert_eq!(
        taken(
            &backend
                .claim("c", &[slot("ov_replace", 0, Overlap::Replace)])
                .await
                .expect("claim")[0]
        ),
        RunStatus::Abandoned
    );
    assert!(
        backend
            .claim_due("c", &[spec("ov_replace", 5)], 10)
            .await
            .expect("due")
            .is_empty(),
        "a replaced run is not recovered"
    );
}

/// Outcomes written together are fenced one by one: each answer says whether that attempt still held
/// its run, and nothing is written for the ones that did not.
pub async fn batched_finishes_are_fenced(backend: &dyn Backend) {
    let requests: Vec<ClaimRequest> = [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:01:00Z",
        "2026-01-01T00:02:00Z",
    ]
    .iter()
    .map(|at| request("contract_batch", at, Duration::from_secs(60)))
    .collect();
    let leases: Vec<Lease> = backend
        .claim("a", &requests)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    let forged = Lease {
        token: leases[2].token + 1_000_000,
        ..leases[2].clone()
    };
    let answers = backend
        .finish(
            "a",
            &[
                (leases[0].clone(), Finish::succeeded()),
                (
                    leases[1].clone(),
                    Finish::failed(
                        ErrorClass::Transient,
                        "try later",
                        Some(Duration::from_secs(3600)),
                    ),
                ),
                (forged, Finish::succeeded()),
            ],
        )
        .await
        .expect("finish_many");
    assert_eq!(answers, vec![true, true, false]);
    // The refused one is still running under its real token; another owner cannot finish it.
    assert_eq!(
        backend
            .heartbeat("a", &[leases[2].token])
            .await
            .expect("heartbeat"),
        vec![leases[2].token]
    );
    let again = backend
        .finish(
            "b",
            &[
                (leases[2].clone(), Finish::succeeded()),
                (leases[0].clone(), Finish::succeeded()),
            ],
        )
        .await
        .expect("finish_many");
    assert_eq!(again, vec![false, false]);
    let last = backend
        .finish(
            "a",
            &[
                (leases[2].clone(), Finish::succeeded()),
                (leases[0].clone(), Finish::succeeded()),
            ],
        )
        .await
        .expect("finish_many");
    assert_eq!(
        last,
        vec![true, false],
        "a finished run is not finished twice"
    );
    assert!(backend.finish("a", &[]).await.expect("empty").is_empty());
}

/// The writes that record what an attempt did (its outcome, alone or in a batch, and its
/// checkpoint) are checked against the slot's own key as well as the run id, token and owner: a
/// lease whose id and token are right but whose slot is another job's, instant or partition (a run
/// id and token handed out again by a database that went back in time) writes nothing.
pub async fn fenced_writes_check_the_slot(backend: &dyn Backend) {
    let requests = [
        request(
            "contract_key_a",
            "2026-01-01T00:00:00Z",
            Duration::from_secs(60),
        ),
        request(
            "contract_key_b",
            "2026-01-01T00:00:00Z",
            Duration::from_secs(60),
        ),
    ];
    let claims = backend.claim("a", &requests).await.expect("claim");
    let leases: Vec<Lease> = claims.iter().map(won).collect();
    let on = |lease: &Lease, key: SlotKey| Lease {
        key,
        ..lease.clone()
    };
    let (a, b) = (&leases[0], &leases[1]);
    let later = SlotKey {
        scheduled_at: a.key.scheduled_at + chrono::Duration::minutes(1),
        ..a.key.clone()
    };
    let partition = SlotKey {
        partition: "p".into(),
        ..a.key.clone()
    };
    let done = Finish::succeeded;
    let crossed = [on(a, b.key.clone()), on(b, a.key.clone())];
    let batch = [(crossed[0].clone(), done()), (crossed[1].clone(), done())];
    assert_eq!(
        backend.finish("a", &batch).await.expect("finish"),
        [false, false]
    );
    for wrong in [&crossed[0], &on(a, later), &on(a, partition)] {
        let finished = backend.finish_one("a", wrong, &done()).await;
        assert!(
            !finished.expect("finish"),
            "{:?} is not its run's slot",
            wrong.key
        );
        let saved = backend.save_checkpoint("a", wrong, "forged").await;
        assert!(
            !saved.expect("save"),
            "{:?} is not its run's slot",
            wrong.key
        );
    }
    assert!(backend.save_checkpoint("a", a, "mine").await.expect("save"));
    let right = [(a.clone(), done()), (b.clone(), done())];
    assert_eq!(
        backend.finish("a", &right).await.expect("finish"),
        [true, true]
    );
    let saved = backend.load_checkpoint(a.run_id).await.expect("load");
    assert_eq!(saved.as_deref(), Some("mine"));
}

/// Whatever path claims it, a job whose overlap is not `allow` never has two runs of one partition
/// `running`: due work is handed out one run at a time, and not while another run is fresh.
pub async fn due_work_is_one_at_a_time(backend: &dyn Backend) {
    let job = "contract_serial";
    let stale = Duration::from_secs(60);
    let slots: Vec<_> = ["2026-01-02T00:00:00Z", "2026-01-02T00:01:00Z"]
        .iter()
        .map(|s| request(job, s, stale))
        .collect();
    claim_and_hand_over(backend, &slots).await;
    let serial = [DueSpec::new(job, 3)];
    assert_eq!(
        backend.due_jobs(&serial).await.expect("due jobs"),
        [job.to_owned()]
    );
    let first = backend.claim_due("b", &serial, 10).await.expect("due");
    assert_eq!(first.len(), 1, "one run of the job at a time: {first:?}");
    assert_eq!(first[0].key, slots[0].key, "oldest first");
    assert!(
        backend
            .claim_due("c", &serial, 10)
            .await
            .expect("due")
            .is_empty(),
        "not while the first runs"
    );
    assert_eq!(
        backend.due_jobs(&serial).await.expect("due jobs"),
        [job.to_owned()],
        "the second waits, and is still listed"
    );
    let ok = Finish::succeeded();
    assert!(
        backend
            .finish_one("b", &first[0].lease, &ok)
            .await
            .expect("finish")
    );
    let second = backend.claim_due("c", &serial, 10).await.expect("due");
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].key, slots[1].key);
    assert!(
        backend
            .due_jobs(&serial)
            .await
            .expect("due jobs")
            .is_empty(),
        "nothing else waits"
    );
}

/// A newer slot claimed while an older run of its job is `running` with a stale heartbeat (a frozen
/// holder) fences the older run: its holder's heartbeats and writes are refused, and the older run
/// is handed out again only after the newer one ended.
pub async fn newer_slots_fence_stale_runs(backend: &dyn Backend, stale_after: Duration) {
    let job = "contract_fence";
    let skip = |s: &str| with_overlap(request(job, s, stale_after), Overlap::Skip);
    let old = skip("2026-01-03T00:00:00Z");
    let frozen = won(&backend
        .claim("frozen", std::slice::from_ref(&old))
        .await
        .expect("claim")[0]);
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    let newer = won(&backend
        .claim("b", &[skip("2026-01-03T00:00:05Z")])
        .await
        .expect("claim")[0]);
    assert!(newer.token > frozen.token);
    assert_fenced(backend, "frozen", &frozen, "the frozen holder").await;
    let serial = [DueSpec::new(job, 3)];
    assert!(
        backend
            .claim_due("c", &serial, 10)
            .await
            .expect("due")
            .is_empty(),
        "the fenced run waits while the newer one runs"
    );
    let ok = Finish::succeeded();
    assert!(backend.finish_one("b", &newer, &ok).await.expect("finish"));
    let again = backend.claim_due("c", &serial, 10).await.expect("due");
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!((again[0].key.clone(), again[0].lease.attempt), (old.key, 2));
}

/// A run handed out again fences the other stale runs of its job and partition: a holder frozen
/// while the recovered run starts has its heartbeat and outcome refused, so it cannot run on beside
/// it unnoticed; its slot runs once the recovered one has ended.
pub async fn recovered_runs_fence_other_stale_runs(backend: &dyn Backend, stale_after: Duration) {
    let job = "contract_due_fence";
    let skip = |s: &str| with_overlap(request(job, s, stale_after), Overlap::Skip);
    let (old, newer) = (skip("2026-01-04T00:00:00Z"), skip("2026-01-04T00:00:05Z"));
    let killed = won(&backend
        .claim("killed", std::slice::from_ref(&old))
        .await
        .expect("claim")[0]);
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    // The newer slot fences the killed holder's run (due again at once) and is then frozen.
    let frozen = won(&backend
        .claim("frozen", std::slice::from_ref(&newer))
        .await
        .expect("claim")[0]);
    assert_fenced(backend, "killed", &killed, "the killed holder").await;
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    let serial = [DueSpec::new(job, 3)];
    let first = backend.claim_due("c", &serial, 10).await.expect("due");
    assert_eq!(
        first.len(),
        1,
        "one run of the job and partition at a time: {first:?}"
    );
    assert_eq!((first[0].key.clone(), first[0].lease.attempt), (old.key, 2));
    assert_fenced(
        backend,
        "frozen",
        &frozen,
        "the frozen holder of the newer slot",
    )
    .await;
    assert!(
        backend
            .claim_due("c", &serial, 10)
            .await
            .expect("due")
            .is_empty(),
        "the fenced run waits while the recovered one runs"
    );
    let ok = Finish::succeeded();
    assert!(
        backend
            .finish_one("c", &first[0].lease, &ok)
            .await
            .expect("finish")
    );
    let again = backend.claim_due("d", &serial, 10).await.expect("due");
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(
        (again[0].key.clone(), again[0].lease.attempt),
        (newer.key, 2)
    );
}

/// `existing_slots` answers, in order, which slots have a row.
pub async fn existing_slots_are_found(backend: &dyn Backend) {
    let stale = Duration::from_secs(60);
    let claimed = request("contract_existing", "2026-01-04T00:00:00Z", stale);
    let other = request("contract_existing", "2026-01-04T00:00:01Z", stale);
    won(&backend
        .claim("a", std::slice::from_ref(&claimed))
        .await
        .expect("claim")[0]);
    let keys = [other.key.clone(), claimed.key.clone(), other.key];
    assert_eq!(
        backend.existing_slots(&keys).await.expect("existing"),
        [false, true, false]
    );
    assert!(
        backend
            .existing_slots(&[])
            .await
            .expect("existing")
            .is_empty()
    );
}

/// `enqueue_slots` (the scheduler role): each slot is queued once, as a `pending` row due at its own
/// instant; `next_due` names that instant; `claim_due` hands it out only once it is due, as attempt
/// 1 of a scheduled run; the overlap policy decides at enqueue time as at a claim.
pub async fn slots_are_queued_once(backend: &dyn Backend) {
    let job = "contract_queue";
    let now = backend.store_now().await.expect("store clock");
    let soon = now + chrono::Duration::milliseconds(1_500);
    let past = request(job, "2026-01-05T00:00:00Z", Duration::from_secs(60));
    let mut ahead = past.clone();
    ahead.key.scheduled_at = soon;
    let batch = [past.clone(), ahead.clone()];
    let first = backend.enqueue_slots(&batch, &[]).await.expect("enqueue");
    assert_eq!(first, [Claim::Queued, Claim::Queued]);
    let again = backend.enqueue_slots(&batch, &[]).await.expect("enqueue");
    assert!(
        again.iter().all(|c| *c
            == Claim::Taken {
                status: RunStatus::Pending
            }),
        "a second scheduler finds both queued: {again:?}"
    );
    let specs = [spec(job, 3)];
    let next = backend.next_due(&specs).await.expect("next due");
    let next = next.expect("the slot ahead is the next due");
    assert!(
        (next - soon).num_milliseconds().abs() <= 1,
        "{next} vs {soon}"
    );
    let due = backend.claim_due("w1", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1, "only the past slot is due: {due:?}");
    assert_eq!(
        (&due[0].key, due[0].lease.attempt, due[0].trigger),
        (&past.key, 1, Trigger::Schedule)
    );
    let wait = (soon - now).to_std().unwrap_or_default() + Duration::from_millis(100);
    tokio::time::sleep(wait).await;
    let due = backend.claim_due("w2", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!((&due[0].key, due[0].lease.attempt), (&ahead.key, 1));
    assert_eq!(backend.next_due(&specs).await.expect("next due"), None);
    // `skip`: a slot queued while a run of its job goes on is queued all the same; the worker
    // that picks it records it skipped, as a tick at its instant would.
    let mut busy = with_overlap(past.clone(), Overlap::Skip);
    busy.key.scheduled_at += chrono::Duration::seconds(5);
    let answer = backend
        .enqueue_slots(std::slice::from_ref(&busy), &[])
        .await
        .expect("enqueue");
    assert_eq!(answer, [Claim::Queued]);
    let skipping = [spec(job, 3).with_overlap(Overlap::Skip)];
    let due = backend.claim_due("w3", &skipping, 10).await.expect("due");
    assert!(due.is_empty(), "the job is busy: {due:?}");
    let row = admin::run_of(backend, &busy.key).await;
    assert_eq!(
        (row.status, row.error_message.as_deref()),
        (
            RunStatus::Skipped,
            Some(slotguard::store::rules::reason::SKIPPED_OVERLAP)
        )
    );
}

/// A job's limits on due work: at most `limit` runs from one call, and never more than
/// `cluster_limit` of the job's runs `running` and fresh in the store.
pub async fn due_work_keeps_its_limits(backend: &dyn Backend) {
    let job = "contract_limits";
    let stale = Duration::from_secs(60);
    let slots: Vec<ClaimRequest> = (0..6)
        .map(|i| request(job, &format!("2026-01-06T00:00:0{i}Z"), stale))
        .collect();
    let queued = backend.enqueue_slots(&slots, &[]).await.expect("enqueue");
    assert!(queued.iter().all(|c| *c == Claim::Queued), "{queued:?}");
    let own = [spec(job, 3).with_limits(Some(2), None)];
    let first = backend.claim_due("w1", &own, 10).await.expect("due");
    assert_eq!(first.len(), 2, "the call's limit for the job: {first:?}");
    let cluster = [spec(job, 3).with_limits(None, Some(3))];
    let second = backend.claim_due("w2", &cluster, 10).await.expect("due");
    assert_eq!(second.len(), 1, "3 in the cluster, 2 running: {second:?}");
    let none = backend.claim_due("w3", &cluster, 10).await.expect("due");
    assert!(none.is_empty(), "the cluster is full: {none:?}");
    let ok = Finish::succeeded();
    assert!(
        backend
            .finish_one("w1", &first[0].lease, &ok)
            .await
            .expect("finish")
    );
    let third = backend.claim_due("w3", &cluster, 10).await.expect("due");
    assert_eq!(third.len(), 1, "one ended, one more may run: {third:?}");
    let free = backend
        .claim_due("w4", &[spec(job, 3)], 10)
        .await
        .expect("due");
    assert_eq!(free.len(), 2, "without limits, the rest: {free:?}");
}
