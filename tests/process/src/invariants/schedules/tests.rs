//! The checks of stored schedules against hand-built versions, rows and ledgers.

use std::time::Duration;

use slotguard::store::{AttemptRecord, ScheduleSpec, SlotKey};

use super::*;

fn at(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
}

fn ms(m: i64) -> DateTime<Utc> {
    at(0) + TimeDelta::milliseconds(m)
}

/// Version `version` of schedule `s-a` (job `job000`, partition `acme`) on `cron`, in force from
/// `from_ms`; `None` removes it.
fn version(version: i64, cron: Option<&str>, paused: bool, from_ms: i64) -> ScheduleVersion {
    ScheduleVersion {
        id: "s-a".into(),
        version,
        spec: cron.map(|cron| ScheduleSpec {
            job: "job000".into(),
            cron: cron.into(),
            zone: "UTC".into(),
            dst: "vixie".into(),
            partition: "acme".into(),
            start_at: None,
            end_at: None,
            remaining_runs: None,
            paused,
            note: None,
            pause_on_failure: false,
        }),
        effective_at: ms(from_ms),
        changed_by: "sg-faults".into(),
        changed_at: ms(from_ms - 500),
        reason: "test".into(),
        seq: version,
    }
}

/// Every second from 0.5 s; every other second from 5.5 s; paused from 10.5 s; removed from
/// 14.5 s; every other second again from 17.5 s (added back).
fn history() -> Vec<ScheduleVersion> {
    vec![
        version(1, Some("* * * * * *"), false, 500),
        version(2, Some("*/2 * * * * *"), false, 5_500),
        version(3, Some("*/2 * * * * *"), true, 10_500),
        version(4, None, false, 14_500),
        version(5, Some("*/2 * * * * *"), false, 17_500),
    ]
}

/// The instants (seconds after `at(0)`) the history produces within 0..=20 s; `at(0)` is even.
const PRODUCED: [i64; 10] = [1, 2, 3, 4, 5, 6, 8, 10, 18, 20];

fn row(slot: i64, status: RunStatus, attempts: u32, message: Option<&str>) -> RunRecord {
    let attempts: Vec<AttemptRecord> = (1..=attempts)
        .map(|n| AttemptRecord {
            attempt: n,
            owner: "n0".into(),
            token: slot * 10 + i64::from(n),
            status,
            started_at: at(slot),
            finished_at: Some(at(slot) + TimeDelta::milliseconds(300)),
            message: None,
        })
        .collect();
    RunRecord {
        id: slot,
        key: SlotKey {
            job: "job000".into(),
            scheduled_at: at(slot),
            partition: "acme".into(),
        },
        status,
        attempt: attempts.last().map_or(0, |a| a.attempt),
        owner: attempts.last().map(|a| a.owner.clone()),
        token: attempts.last().map_or(slot * 10, |a| a.token),
        heartbeat_at: None,
        stale_after: Duration::from_secs(2),
        next_attempt_at: None,
        created_at: at(slot),
        updated_at: at(slot),
        started_at: Some(at(slot)),
        finished_at: Some(at(slot)),
        error_class: None,
        error_message: message.map(str::to_owned),
        zone: "UTC".into(),
        wall_time: at(slot).naive_utc(),
        business_date: at(slot).date_naive(),
        trigger: Trigger::Schedule,
        fingerprint: 0,
        calendar: None,
        attempts,
    }
}

fn start(slot: i64, partition: &str) -> Effect {
    Effect {
        kind: "start".into(),
        job: "job000".into(),
        slot: slot_name(at(slot)),
        attempt: 1,
        token: slot * 10 + 1,
        instance: "n0".into(),
        pid: 7,
        at: Some(at(slot)),
        partition: partition.into(),
    }
}

fn window() -> Window {
    Window {
        from: ms(500),
        to: at(20),
        excluded: Vec::new(),
    }
}

/// Every produced slot `succeeded` once.
fn all_ran() -> (Vec<RunRecord>, Vec<Effect>) {
    let runs = PRODUCED
        .iter()
        .map(|s| row(*s, RunStatus::Succeeded, 1, None))
        .collect();
    let effects = PRODUCED.iter().map(|s| start(*s, "acme")).collect();
    (runs, effects)
}

#[test]
fn the_versions_produce_the_slots_of_the_version_in_force() {
    let slots: Vec<DateTime<Utc>> = produced(&[history()], at(0), at(20))
        .into_keys()
        .map(|(_, _, t)| t)
        .collect();
    let want: Vec<DateTime<Utc>> = PRODUCED.iter().map(|s| at(*s)).collect();
    assert_eq!(slots, want);
    let (runs, effects) = all_ran();
    let report = check_schedules(&[history()], &runs, &effects, &window(), &[]);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!((report.produced, report.ran), (10, 10));
    assert_eq!(report.recorded.get("succeeded"), Some(&10));
}

#[test]
fn a_slot_that_ran_off_schedule_is_caught() {
    let (mut runs, effects) = all_ran();
    // 7 s: the old version's instant, after the flip to every other second; 12 s: while paused;
    // 16 s: after the removal. A run of another partition at 7 s is no stored schedule's.
    runs.extend([7, 12, 16].map(|s| row(s, RunStatus::Succeeded, 1, None)));
    let mut other = row(7, RunStatus::Succeeded, 1, None);
    other.key.partition = "bolt".into();
    runs.push(other);
    let report = check_schedules(&[history()], &runs, &effects, &window(), &[]);
    assert_eq!(report.off_schedule, 3, "{:?}", report.violations);
    assert_eq!(report.ran, 13);
    assert!(
        report.violations[0].contains("2027-01-15T08:00:07Z")
            && report.violations[0].contains("no version in force"),
        "{:?}",
        report.violations
    );
    // An overlap skip at such an instant did not run: no violation.
    let (mut runs, _) = all_ran();
    runs.push(row(
        7,
        RunStatus::Skipped,
        0,
        Some("overlap: a previous run is still running"),
    ));
    let report = check_schedules(&[history()], &runs, &effects, &window(), &[]);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_slot_with_no_row_is_caught_unless_every_replica_was_down() {
    let (mut runs, effects) = all_ran();
    runs.retain(|r| r.key.scheduled_at != at(4));
    // A row with no reason is no better than none.
    runs.retain(|r| r.key.scheduled_at != at(8));
    runs.push(row(8, RunStatus::Abandoned, 1, None));
    let report = check_schedules(&[history()], &runs, &effects, &window(), &[]);
    assert_eq!(report.unrecorded, 2, "{:?}", report.violations);
    assert!(
        report.violations[0].contains("v1 has no row"),
        "{:?}",
        report.violations
    );
    assert!(
        report.violations[1].contains("a row abandoned with no reason"),
        "{:?}",
        report.violations
    );
    // With a reason it is recorded; with every replica down at 4 s the slot is not asked for.
    runs.retain(|r| r.key.scheduled_at != at(8));
    runs.push(row(8, RunStatus::Abandoned, 1, Some("heartbeat expired")));
    let mut down = window();
    down.excluded.push((ms(3_500), ms(4_500)));
    let report = check_schedules(&[history()], &runs, &effects, &down, &[]);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.produced, 9);
    // Slots before the window (the first version's effect) and after it are not asked for.
    let late = Window {
        from: ms(5_500),
        ..down.clone()
    };
    let report = check_schedules(&[history()], &runs[..0], &[], &late, &[]);
    assert_eq!(
        (report.produced, report.unrecorded),
        (5, 5),
        "{:?}",
        report.violations
    );
}

#[test]
fn an_operator_skip_is_recorded_with_its_reason_and_never_runs() {
    let skip = OperatorSkip {
        job: "job000".into(),
        partition: "acme".into(),
        slot: at(6),
        reason: "holiday".into(),
    };
    let (mut runs, mut effects) = all_ran();
    runs.retain(|r| r.key.scheduled_at != at(6));
    effects.retain(|e| e.slot != slot_name(at(6)));
    let message = operator_skip_message("holiday");
    runs.push(row(6, RunStatus::Skipped, 0, Some(&message)));
    let skips = [skip];
    let report = check_schedules(&[history()], &runs, &effects, &window(), &skips);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.recorded.get("skipped"), Some(&1));
    // It ran anyway: the ledger shows a start of that slot and partition.
    effects.push(start(6, "acme"));
    let report = check_schedules(&[history()], &runs, &effects, &window(), &skips);
    assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
    assert!(report.violations[0].contains("but ran (pid 7"));
    // Or it was claimed and succeeded instead of being skipped.
    runs.retain(|r| r.key.scheduled_at != at(6));
    runs.push(row(6, RunStatus::Succeeded, 1, None));
    let report = check_schedules(&[history()], &runs, &effects, &window(), &skips);
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("the row is succeeded")),
        "{:?}",
        report.violations
    );
}
