//! The checker against hand-built ledgers and runs tables.

use super::*;
use slotguard::store::{AttemptRecord, SlotKey, Trigger};

fn at(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
}

fn attempt(n: u32, token: i64, status: RunStatus, start: i64, end: Option<i64>) -> AttemptRecord {
    AttemptRecord {
        attempt: n,
        owner: format!("n{n}"),
        token,
        status,
        started_at: at(start),
        finished_at: end.map(at),
        message: None,
    }
}

fn run(slot: i64, status: RunStatus, attempts: Vec<AttemptRecord>) -> RunRecord {
    let last = attempts.last().cloned();
    RunRecord {
        id: slot,
        key: SlotKey {
            job: "job000".into(),
            scheduled_at: at(slot),
            partition: String::new(),
        },
        status,
        attempt: last.as_ref().map_or(0, |a| a.attempt),
        owner: last.as_ref().map(|a| a.owner.clone()),
        token: last.as_ref().map_or(1_000 + slot, |a| a.token),
        heartbeat_at: Some(at(slot)),
        stale_after: Duration::from_secs(2),
        next_attempt_at: None,
        created_at: at(slot),
        updated_at: at(slot),
        started_at: Some(at(slot)),
        finished_at: None,
        error_class: None,
        error_message: None,
        zone: "UTC".into(),
        wall_time: at(slot).naive_utc(),
        business_date: at(slot).date_naive(),
        trigger: Trigger::Schedule,
        fingerprint: 0,
        calendar: None,
        attempts,
    }
}

fn effect(kind: &str, slot: i64, attempt: u32, token: i64) -> Effect {
    Effect {
        kind: kind.into(),
        job: "job000".into(),
        slot: slot_name(at(slot)),
        attempt,
        token,
        instance: "n".into(),
        pid: 1,
        at: None,
        partition: String::new(),
    }
}

/// A ledger line written `ms` milliseconds after `at(0)` by process `pid`.
fn timed(kind: &str, slot: i64, attempt: u32, token: i64, pid: u32, ms: i64) -> Effect {
    Effect {
        pid,
        at: Some(at(0) + chrono::Duration::milliseconds(ms)),
        ..effect(kind, slot, attempt, token)
    }
}

fn overlaps(effects: &[Effect], runs: &[RunRecord], exclusion: &Exclusion) -> Report {
    let mut report = Report::default();
    check_overlaps(&mut report, effects, runs, at(100), exclusion);
    report
}

/// Slot 0: attempt 1 (token 1) closed at 3 s by the take-over, attempt 2 (token 5) from 3 s to
/// `done`; slot `newer` (token 7) from its instant to one second later.
fn taken_over_beside(newer: i64, done: i64) -> Vec<RunRecord> {
    vec![
        run(
            0,
            RunStatus::Succeeded,
            vec![
                attempt(1, 1, RunStatus::Abandoned, 0, Some(3)),
                attempt(2, 5, RunStatus::Succeeded, 3, Some(done)),
            ],
        ),
        run(
            newer,
            RunStatus::Succeeded,
            vec![attempt(1, 7, RunStatus::Succeeded, newer, Some(newer + 1))],
        ),
    ]
}

/// Slot 0 was interrupted at 0.5 s (attempt 1, token 1) and recovered at 3.5 s (attempt 2,
/// token 5), while slot 3 (token 7) ran from 3.0 s to 4.0 s.
fn recovered_beside_newer() -> (Vec<Effect>, Vec<RunRecord>) {
    let runs = taken_over_beside(3, 5);
    let effects = vec![
        timed("start", 0, 1, 1, 10, 10),
        timed("start", 3, 1, 7, 20, 3_000),
        timed("start", 0, 2, 5, 30, 3_500),
        timed("end", 3, 1, 7, 20, 3_960),
        timed("end", 0, 2, 5, 30, 4_460),
    ];
    (effects, runs)
}

#[test]
fn overlapping_executions_of_one_job_are_caught() {
    let killed = Exclusion {
        killed: [(10, at(0) + chrono::Duration::milliseconds(500))].into(),
        ..Exclusion::default()
    };
    let (effects, runs) = recovered_beside_newer();
    let report = overlaps(&effects, &runs, &killed);
    assert_eq!(report.overlapping, 1, "{:?}", report.violations);
    assert_eq!(report.overlap_max.num_milliseconds(), 460);
    let v = &report.violations[0];
    assert!(
        v.contains("by 460 ms") && v.contains("attempt 2 (pid 30"),
        "{v}"
    );
    // The same job at overlap `allow` may overlap.
    let shared = Exclusion {
        shared: ["job000".to_owned()].into(),
        ..killed.clone()
    };
    assert!(overlaps(&effects, &runs, &shared).violations.is_empty());
    // Without the kill, its attempt's close (3 s) bounds the first execution: the same pair.
    assert_eq!(
        overlaps(&effects, &runs, &Exclusion::default()).overlapping,
        1
    );
    // With neither, it is still open and overlaps both later executions too.
    let mut open = runs.clone();
    open[0].attempts[0].finished_at = None;
    let report = overlaps(&effects, &open, &Exclusion::default());
    assert_eq!(report.overlapping, 3, "{:?}", report.violations);
    assert!(report.violations.iter().any(|v| v.contains("open]")));
}

#[test]
fn sequential_runs_and_fenced_tails_are_not_overlaps() {
    // Sequential: each body ends as the next starts; 2 ms of clock noise is tolerated.
    let runs: Vec<RunRecord> = (0..3)
        .map(|s| {
            run(
                s,
                RunStatus::Succeeded,
                vec![attempt(1, 10 + s, RunStatus::Succeeded, s, Some(s + 1))],
            )
        })
        .collect();
    let effects: Vec<Effect> = (0..3)
        .flat_map(|s| {
            [
                timed("start", s, 1, 10 + s, 1, s * 1_000 - 3),
                timed("end", s, 1, 10 + s, 1, s * 1_000 + 999),
            ]
        })
        .collect();
    let report = overlaps(&effects, &runs, &Exclusion::default());
    assert!(report.ok(), "{:?}", report.violations);
    // 12 ms is more than clock noise.
    let mut early = effects.clone();
    early[2].at = early[2].at.map(|t| t - chrono::Duration::milliseconds(10));
    let report = overlaps(&early, &runs, &Exclusion::default());
    assert_eq!(report.overlap_max.num_milliseconds(), 12);

    // A fenced tail: attempt 1 was stopped, taken over at 3 s, and its body wrote `end` at 9 s
    // (refused); the take-over and the next slot ran after the fence, one after the other.
    let runs = taken_over_beside(4, 4);
    let effects = [
        timed("start", 0, 1, 1, 10, 10),
        timed("start", 0, 2, 5, 30, 3_004),
        timed("end", 0, 2, 5, 30, 3_990),
        timed("start", 4, 1, 7, 20, 4_010),
        timed("end", 4, 1, 7, 20, 4_970),
        timed("end", 0, 1, 1, 10, 9_000),
    ];
    let report = overlaps(&effects, &runs, &Exclusion::default());
    assert!(report.ok(), "{:?}", report.violations);
    let x = bounded(&effects, &runs, &BTreeMap::new(), at(100));
    assert_eq!((x[0].end, x[0].ended_by.as_str()), (at(3), "fenced"));
}

fn violations(effects: &[Effect], runs: &[RunRecord], expected: &[i64]) -> Vec<String> {
    let expected = expect(
        &["job000".to_owned()],
        &expected.iter().map(|s| at(*s)).collect::<Vec<_>>(),
    );
    check(effects, runs, at(100), &expected, Duration::from_secs(3)).violations
}

#[test]
fn a_recovered_slot_with_one_accepted_completion_is_clean() {
    let runs = [run(
        0,
        RunStatus::Succeeded,
        vec![
            attempt(1, 1, RunStatus::Abandoned, 0, Some(3)),
            attempt(2, 5, RunStatus::Succeeded, 3, Some(4)),
        ],
    )];
    let effects = [
        effect("start", 0, 1, 1),
        effect("end", 0, 1, 1),
        effect("start", 0, 2, 5),
        effect("end", 0, 2, 5),
    ];
    let report = check(
        &effects,
        &runs,
        at(100),
        &expect(&["job000".to_owned()], &[at(0)]),
        Duration::from_secs(3),
    );
    assert!(report.ok(), "{:?}", report.violations);
    assert_eq!(
        (report.re_executed, report.refused, report.accepted),
        (1, 1, 1)
    );
}

#[test]
fn each_invariant_is_caught() {
    // (b) two succeeded attempts, the first below the current token.
    let two = run(
        0,
        RunStatus::Succeeded,
        vec![
            attempt(1, 1, RunStatus::Succeeded, 0, Some(5)),
            attempt(2, 5, RunStatus::Succeeded, 3, Some(6)),
        ],
    );
    let v = violations(
        &[
            effect("start", 0, 1, 1),
            effect("end", 0, 1, 1),
            effect("start", 0, 2, 5),
            effect("end", 0, 2, 5),
        ],
        &[two],
        &[0],
    );
    assert!(
        v.iter().any(|m| m.contains("2 succeeded attempts")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.contains("below the current token")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.contains("ended in an accepted")),
        "{v:?}"
    );

    // (a) an accepted completion nothing executed; an execution under no attempt's token.
    let ghost = run(
        1,
        RunStatus::Succeeded,
        vec![attempt(1, 7, RunStatus::Succeeded, 1, Some(2))],
    );
    let v = violations(&[effect("start", 1, 1, 8)], &[ghost], &[1]);
    assert!(
        v.iter().any(|m| m.contains("0 finished executions")),
        "{v:?}"
    );
    assert!(v.iter().any(|m| m.contains("no attempt holds")), "{v:?}");

    // (c) left running past stale + grace; (d) an expected slot with no row.
    let stuck = run(
        2,
        RunStatus::Running,
        vec![attempt(1, 9, RunStatus::Running, 2, None)],
    );
    let v = violations(&[], &[stuck], &[2, 3]);
    assert!(
        v.iter().any(|m| m.contains("running with heartbeat")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.contains("expected slot has no row")),
        "{v:?}"
    );

    // Two executions under one lease.
    let once = run(
        4,
        RunStatus::Failed,
        vec![attempt(1, 11, RunStatus::Failed, 4, Some(5))],
    );
    let v = violations(
        &[effect("start", 4, 1, 11), effect("start", 4, 1, 11)],
        &[once],
        &[4],
    );
    assert!(
        v.iter().any(|m| m.contains("executions under one token")),
        "{v:?}"
    );
}

#[test]
fn slots_of_a_step_are_aligned() {
    let from = DateTime::from_timestamp(1_000, 500_000_000).unwrap();
    let to = DateTime::from_timestamp(1_010, 0).unwrap();
    let got: Vec<i64> = every(from, to, 2).iter().map(|t| t.timestamp()).collect();
    assert_eq!(got, [1_002, 1_004, 1_006, 1_008, 1_010]);
    assert_eq!(every(at(0), at(0), 1), [at(0)]);
}

#[test]
fn the_partitions_of_one_instant_are_slots_apart() {
    // The job's own slot at 0 s (token 1) and its partition `acme`'s (token 2), each run once.
    let mut acme = run(
        0,
        RunStatus::Succeeded,
        vec![attempt(1, 2, RunStatus::Succeeded, 0, Some(1))],
    );
    acme.key.partition = "acme".into();
    let own = run(
        0,
        RunStatus::Succeeded,
        vec![attempt(1, 1, RunStatus::Succeeded, 0, Some(1))],
    );
    let of = |e: Effect, partition: &str| Effect {
        partition: partition.into(),
        ..e
    };
    let mut effects = vec![
        effect("start", 0, 1, 1),
        effect("end", 0, 1, 1),
        of(effect("start", 0, 1, 2), "acme"),
        of(effect("end", 0, 1, 2), "acme"),
    ];
    let runs = [own, acme];
    let v = violations(&effects, &runs, &[0]);
    assert!(v.is_empty(), "{v:?}");
    // The partition's execution written as the job's own slot: under no attempt of that slot.
    effects[2].partition.clear();
    let v = violations(&effects, &runs, &[0]);
    assert!(
        v.iter()
            .any(|m| m.contains("(\"job000\", \"2027-01-15T08:00:00Z\")")
                && m.contains("no attempt holds")),
        "{v:?}"
    );
    // An execution of the partition with no row is named with its partition.
    let v = violations(&[of(effect("start", 0, 1, 2), "acme")], &[], &[]);
    assert!(
        v.iter()
            .any(|m| m.contains("\"acme\")") && m.contains("with no row")),
        "{v:?}"
    );
}
