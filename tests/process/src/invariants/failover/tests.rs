//! The failover checks against hand-built ledgers and runs tables, the bug an outside harness
//! found among them: token 69 handed out again on the promoted server to another job, and the old
//! body's completion accepted on that job's run.

use std::time::Duration;

use chrono::TimeDelta;
use slotguard::store::{AttemptRecord, SlotKey, Trigger};

use super::*;
use crate::invariants::slot_name;

fn at(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
}

fn ms(m: i64) -> DateTime<Utc> {
    at(0) + TimeDelta::milliseconds(m)
}

/// A run of `job` at second `slot` with one attempt under `token`, claimed at `slot`, ended at
/// `finished_ms` with `status`.
fn run(job: &str, slot: i64, token: i64, status: RunStatus, finished_ms: i64) -> RunRecord {
    RunRecord {
        id: token,
        key: SlotKey {
            job: job.into(),
            scheduled_at: at(slot),
            partition: String::new(),
        },
        status,
        attempt: 1,
        owner: Some("n0".into()),
        token,
        heartbeat_at: None,
        stale_after: Duration::from_secs(3),
        next_attempt_at: None,
        created_at: at(slot),
        updated_at: at(slot),
        started_at: Some(at(slot)),
        finished_at: Some(ms(finished_ms)),
        error_class: None,
        error_message: None,
        zone: "UTC".into(),
        wall_time: at(slot).naive_utc(),
        business_date: at(slot).date_naive(),
        trigger: Trigger::Schedule,
        fingerprint: 0,
        calendar: None,
        attempts: vec![AttemptRecord {
            attempt: 1,
            owner: "n0".into(),
            token,
            status,
            started_at: at(slot),
            finished_at: Some(ms(finished_ms)),
            message: None,
        }],
    }
}

/// A ledger line of `job` at second `slot`, attempt 1, under `token`, written at `at_ms`.
fn line(kind: &str, job: &str, slot: i64, token: i64, pid: u32, at_ms: i64) -> Effect {
    Effect {
        kind: kind.into(),
        job: job.into(),
        slot: slot_name(at(slot)),
        attempt: 1,
        token,
        instance: "n0".into(),
        pid,
        at: Some(ms(at_ms)),
        partition: String::new(),
    }
}

/// Before the failover `job000` :10 ran under token 69 and ended at 10.4 s; its row was lost
/// with the standby's lag. On the promoted server token 69 went to `job003` :12, whose run was
/// accepted as succeeded at 12.05 s: the old body's completion, retried, while `job003`'s own body
/// ran until 12.4 s.
fn reissued() -> (Vec<Effect>, Vec<RunRecord>) {
    let effects = vec![
        line("start", "job000", 10, 69, 7, 10_010),
        line("end", "job000", 10, 69, 7, 10_410),
        line("start", "job003", 12, 69, 7, 12_010),
        line("end", "job003", 12, 69, 7, 12_410),
    ];
    let runs = vec![run("job003", 12, 69, RunStatus::Succeeded, 12_050)];
    (effects, runs)
}

#[test]
fn a_token_handed_out_again_is_caught_from_the_ledger() {
    let (effects, runs) = reissued();
    let v = tokens_granted_twice(&effects, &runs);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("token 69 granted 2 times"), "{v:?}");
    assert!(v[0].contains("job000") && v[0].contains("job003"), "{v:?}");
}

#[test]
fn the_old_bodys_completion_on_another_slots_run_is_caught() {
    let (effects, runs) = reissued();
    let v = foreign_completions(&effects, &runs);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("job003"), "{v:?}");
    assert!(v[0].contains("ended under it: job000"), "{v:?}");
}

#[test]
fn a_body_its_row_and_its_own_completion_are_one_grant() {
    let effects = vec![
        line("start", "job000", 10, 69, 7, 10_010),
        line("end", "job000", 10, 69, 7, 10_410),
        line("start", "job001", 10, 70, 7, 10_010),
    ];
    // The completion read 3 ms before the ledger line: within the clocks' tolerance.
    let runs = vec![
        run("job000", 10, 69, RunStatus::Succeeded, 10_407),
        // A claim whose body never started (the replica stopped first) is a grant too.
        run("job002", 10, 71, RunStatus::Abandoned, 11_000),
    ];
    assert_eq!(tokens_granted_twice(&effects, &runs), Vec::<String>::new());
    assert_eq!(foreign_completions(&effects, &runs), Vec::<String>::new());
}

#[test]
fn a_row_of_another_slot_under_a_token_a_body_ran_under_is_caught() {
    let effects = vec![line("start", "job000", 10, 69, 7, 10_010)];
    let runs = vec![run("job004", 13, 69, RunStatus::Abandoned, 14_000)];
    let v = tokens_granted_twice(&effects, &runs);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("(row only)"), "{v:?}");
}

#[test]
fn a_completion_accepted_before_its_body_ended_is_caught() {
    let effects = vec![
        line("start", "job000", 10, 69, 7, 10_010),
        line("end", "job000", 10, 69, 7, 10_410),
    ];
    let runs = vec![run("job000", 10, 69, RunStatus::Succeeded, 10_300)];
    let v = foreign_completions(&effects, &runs);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(!v[0].contains("; ended under it:"), "{v:?}");
}

#[test]
fn the_token_span_counts_bodies_after_the_fault_not_above_the_highest_before() {
    let (effects, _) = reissued();
    let span = TokenSpan::of(&effects, ms(11_000), ms(11_500));
    assert_eq!(span.max_before, Some(69));
    assert_eq!(span.min_after, Some(69));
    assert_eq!(span.not_above, 1);
    assert_eq!(span.figure(), "69/69");
    let none = TokenSpan::of(&effects, ms(0), ms(20_000));
    assert_eq!(none.figure(), "-/-");
}
