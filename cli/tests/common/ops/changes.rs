//! Scenarios of the changes: `retry`, `cancel`, `trigger`, `backfill`, `pause`, `resume`.

use super::*;

/// `retry`: a failed run becomes pending, audited with actor and reason; refusals say why.
pub(crate) fn retry_makes_a_failed_run_pending(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T02:00:00Z";
    let out = fx.slotguard(&["retry", REPORT, slot, "--reason", "bank API was down"]);
    assert_eq!(
        out.ok(),
        "retry accepted: report slot 2026-03-01T02:00:00Z is pending; a replica running the job starts attempt 2 within one recovery poll\n"
    );
    let run = fx.run(slot);
    assert_eq!(run.status, RunStatus::Pending);
    assert_eq!(run.attempt, 1);
    let audit = fx.audit();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].job, REPORT);
    assert_eq!(audit[0].entry.action, "retry");
    assert_eq!(audit[0].entry.actor, USER);
    assert_eq!(audit[0].entry.reason, "bank API was down");
    assert_eq!(audit[0].scheduled_at, Some(instant(slot)));
    assert_eq!(audit[0].run_id, Some(run.id));

    // Again: an attempt is already waiting.
    let again = fx.slotguard(&["retry", REPORT, slot, "--reason", "twice"]);
    assert_eq!(
        again.fails(4),
        "retry refused for job `report` slot 2026-03-01T02:00:00Z: the run is pending; an attempt is already waiting"
    );
    // Running, and succeeded.
    let running = fx.slotguard(&["retry", REPORT, "2026-03-01T03:00:00Z", "--reason", "r"]);
    assert!(
        running
            .fails(4)
            .contains("the run is running; wait for it to end, or cancel it first"),
        "{running:?}"
    );
    let succeeded = fx.slotguard(&["retry", REPORT, "2026-03-01T01:00:00Z", "--reason", "r"]);
    assert!(
        succeeded.fails(4).contains("the run is succeeded"),
        "{succeeded:?}"
    );
    assert_eq!(fx.run("2026-03-01T03:00:00Z").status, RunStatus::Running);

    // The slot may be written with any offset; the actor may be named. The job is paused now, so the
    // attempt waits for the resume, and the answer says so.
    fx.slotguard(&["pause", REPORT, "--reason", "bank maintenance"])
        .ok();
    let other = fx.slotguard(&[
        "retry",
        REPORT,
        "2026-03-01T13:00:00+09:00",
        "--reason",
        "upstream fixed",
        "--actor",
        "alice@example.com",
    ]);
    assert_eq!(
        other.ok(),
        "retry accepted: report slot 2026-03-01T04:00:00Z is pending; the job is paused, so attempt 2 waits and starts after `slotguard resume report`\n"
    );
    assert_eq!(fx.run("2026-03-01T04:00:00Z").status, RunStatus::Pending);
    assert_eq!(fx.audit()[0].entry.actor, "alice@example.com");

    // Unknown job, unknown slot, a slot that is not an instant.
    let unknown = fx.slotguard(&["retry", "nope", slot, "--reason", "r"]);
    assert_eq!(
        unknown.fails(3),
        "unknown job `nope`: no scheduler has registered it"
    );
    let no_slot = fx.slotguard(&["retry", REPORT, "2026-03-01T00:00:00Z", "--reason", "r"]);
    assert_eq!(
        no_slot.fails(3),
        "job `report` has no run for slot 2026-03-01T00:00:00Z"
    );
    for bad in [
        "2026-02-30T00:00:00Z",
        "yesterday",
        "2026-03-01T00:00+25:00",
        "",
    ] {
        let out = fx.slotguard(&["retry", REPORT, bad, "--reason", "r"]);
        assert!(out.fails(2).starts_with("SLOT: `"), "{bad:?} gave {out:?}");
    }
    // A date without an offset is an instant in UTC, as in every front end: midnight, no run there.
    let midnight = fx.slotguard(&["retry", REPORT, "2026-03-01", "--reason", "r"]);
    assert_eq!(
        midnight.fails(3),
        "job `report` has no run for slot 2026-03-01T00:00:00Z"
    );
    // No --reason: clap's own usage error.
    let missing = fx.slotguard(&["retry", REPORT, slot]);
    assert_eq!(missing.code, Some(2));
    assert!(missing.stderr.contains("--reason"), "{missing:?}");

    assert_eq!(
        fx.audit().len(),
        3,
        "two retries and a pause; refusals are not audited"
    );
}

/// `pause` and `resume`, as `jobs` shows them.
pub(crate) fn pause_and_resume(fx: &Fixture) {
    fx.seed();
    let header = JOBS_HEADER;
    let jobs = fx.slotguard(&["jobs"]);
    let jobs = rows(jobs.ok(), &header);
    let names: Vec<&str> = jobs.iter().map(|j| j["JOB"].as_str()).collect();
    assert_eq!(names, ["nightly", REPORT, TICKER]);
    let report = &jobs[1];
    assert_eq!(report["CRON"], "0 * * * *");
    assert_eq!(report["ZONE"], "Asia/Seoul");
    assert_eq!(report["CALENDAR"], "-", "no business calendar");
    assert_eq!(report["GUARD"], "slot");
    assert_eq!(report["LAST SLOT"], "2026-03-01T04:00:00Z");
    assert_eq!(report["LAST STATUS"], "failed");
    assert_eq!(report["STATE"], "active");
    assert_eq!(report["NOTE"], "-");
    let next = instant(&report["NEXT"]);
    assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::hours(1));
    assert_eq!(jobs[0]["LAST SLOT"], "-");
    assert_eq!(jobs[0]["LAST STATUS"], "-");

    let out = fx.slotguard(&["pause", REPORT, "--reason", "bank maintenance"]);
    assert_eq!(
        out.ok(),
        "paused: report (by tester); every replica sees it within one recovery poll\n"
    );
    assert!(fx.paused(REPORT));
    let jobs = fx.slotguard(&["jobs"]);
    let jobs = rows(jobs.ok(), &header);
    assert_eq!(jobs[1]["STATE"], "paused");
    assert_eq!(jobs[1]["NOTE"], "by tester: bank maintenance");
    assert_eq!(jobs[0]["STATE"], "active");

    let json = fx.slotguard(&["jobs", "--json"]).json();
    assert_eq!(json.len(), 3);
    assert_eq!(json[1]["name"], REPORT);
    assert_eq!(json[1]["paused"], true);
    assert_eq!(json[1]["pausedBy"], USER);
    assert_eq!(json[1]["pausedReason"], "bank maintenance");
    assert_eq!(json[1]["lastRun"]["status"], "failed");
    assert_eq!(json[1]["nextSlots"].as_array().map(Vec::len), Some(3));
    assert_eq!(json[0]["lastRun"], Value::Null);

    let out = fx.slotguard(&["resume", REPORT, "--reason", "done", "--actor", "bob"]);
    assert_eq!(
        out.ok(),
        "resumed: report (by bob); every replica sees it within one recovery poll\n"
    );
    assert!(!fx.paused(REPORT));
    let jobs = fx.slotguard(&["jobs"]);
    assert_eq!(rows(jobs.ok(), &header)[1]["STATE"], "active");

    fx.slotguard(&["pause", "nope", "--reason", "r"]).fails(3);
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["resume", "pause"]);
}

/// `trigger`: a manual run at a millisecond slot, pending.
pub(crate) fn trigger_creates_a_manual_run(fx: &Fixture) {
    fx.seed();
    let before = Utc::now();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "month-end rerun"]);
    let text = out.ok();
    let slot = text
        .strip_prefix("triggered: report slot ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{text:?}"));
    let at = instant(slot);
    assert!(
        at >= before - chrono::Duration::seconds(1) && at <= Utc::now(),
        "{text}"
    );
    assert_ne!(at.timestamp_subsec_millis(), 0, "{text}");
    let run = fx.run(slot);
    assert_eq!(run.trigger, Trigger::Manual);
    assert_eq!(run.status, RunStatus::Pending);
    assert!(
        text.contains(&format!("(manual, run {})", run.id)),
        "{text}"
    );
    let audit = fx.audit();
    assert_eq!(audit[0].entry.action, "trigger");
    assert_eq!(audit[0].entry.reason, "month-end rerun");

    // It is listed, and can be cancelled by the slot printed.
    let runs = fx.slotguard(&["runs", REPORT, "--limit", "1"]);
    let runs = table(runs.ok()).1;
    assert_eq!(runs[0]["SLOT"], slot);
    assert_eq!(runs[0]["TRIGGER"], "manual");
    assert_eq!(runs[0]["STATUS"], "pending");
    fx.slotguard(&["cancel", REPORT, slot, "--reason", "not needed"])
        .ok();
    assert_eq!(fx.run(slot).status, RunStatus::Failed);

    fx.slotguard(&["trigger", "nope", "--reason", "r"]).fails(3);
}

/// `backfill`: a dry run lists and changes nothing; `--execute` creates; a storm is refused.
pub(crate) fn backfill_dry_run_then_execute(fx: &Fixture) {
    fx.seed();
    let dry = fx.slotguard(&[
        "backfill", REPORT, "--from", FROM, "--to", TO, "--reason", "outage",
    ]);
    assert_eq!(
        dry.ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-03-01T00:00:00Z  2026-03-01 09:00:00  2026-03-01
2026-03-01T05:00:00Z  2026-03-01 14:00:00  2026-03-01
dry run: 2 run(s) would be created; add --execute to create them
"
    );
    // Every slot of the range but the two above has a row already.
    let had_rows = fx.runs(REPORT).len();
    assert_eq!(had_rows, 4);
    assert!(fx.audit().is_empty());

    let done = fx.slotguard(&[
        "backfill",
        REPORT,
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "outage",
        "--execute",
        "--per-second",
        "2",
    ]);
    let text = done.ok();
    assert!(
        text.contains(&format!(
            "created 2 run(s) ({had_rows} existed already), due at 2/s, the last at "
        )),
        "{text}"
    );
    let runs = fx.runs(REPORT);
    assert_eq!(runs.len(), 6);
    for slot in ["2026-03-01T00:00:00Z", "2026-03-01T05:00:00Z"] {
        let run = fx.run(slot);
        assert_eq!(run.trigger, Trigger::Backfill);
        assert_eq!(run.status, RunStatus::Pending);
    }
    assert_eq!(fx.audit().len(), 2, "one audit record per created run");
    assert!(fx.audit().iter().all(|a| a.entry.action == "backfill"));

    // Nothing is missing any more.
    let again = fx.slotguard(&[
        "backfill",
        REPORT,
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "outage",
        "--execute",
    ]);
    assert_eq!(
        again.ok(),
        format!(
            "SLOT  WALL TIME  BUSINESS DATE\ncreated 0 run(s) ({} existed already)\n",
            had_rows + 2
        )
    );

    // A million slots of a per-second job: refused before anything is created.
    let storm = fx.slotguard(&[
        "backfill",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
        "--reason",
        "storm",
        "--execute",
    ]);
    assert_eq!(
        storm.fails(2),
        "invalid range: it holds more than 100000 slots of the schedule; narrow it"
    );
    // 1,001 missing slots: more than one backfill may create.
    let split = fx.slotguard(&[
        "backfill",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T00:16:41Z",
        "--reason",
        "storm",
        "--execute",
    ]);
    assert!(split.fails(2).contains("split the range"), "{split:?}");
    assert!(fx.runs(TICKER).is_empty());
    assert_eq!(fx.audit().len(), 2);

    for per_second in ["0", "-1", "NaN", "inf", "fast"] {
        fx.slotguard(&[
            "backfill",
            REPORT,
            "--from",
            FROM,
            "--to",
            TO,
            "--reason",
            "r",
            "--per-second",
            per_second,
        ])
        .fails(2);
    }
}

/// `cancel`: a running run ends failed with the actor and reason; a finished one is refused.
pub(crate) fn cancel_a_running_run(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T03:00:00Z";
    let out = fx.slotguard(&["cancel", REPORT, slot, "--reason", "stuck on a lock"]);
    assert_eq!(
        out.ok(),
        "cancelled: report slot 2026-03-01T03:00:00Z was running and is failed (cancelled by tester: stuck on a lock); the replica running it is told at its next heartbeat, and its outcome is refused\n"
    );
    let run = fx.run(slot);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error_class.as_deref(), Some("permanent"));
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by tester: stuck on a lock")
    );
    let again = fx.slotguard(&["cancel", REPORT, slot, "--reason", "again"]);
    assert!(
        again
            .fails(4)
            .contains("the run is failed; only running or pending runs can be cancelled"),
        "{again:?}"
    );
    fx.slotguard(&["cancel", REPORT, "2026-03-01T00:00:00Z", "--reason", "r"])
        .fails(3);
    // A cancelled run can be retried.
    fx.slotguard(&["retry", REPORT, slot, "--reason", "lock released"])
        .ok();
    assert_eq!(fx.run(slot).status, RunStatus::Pending);
}

/// `backfill` of year 0 is refused, naming the first slot accepted, with or without
/// `--before-first-seen`; a range before the job was first registered needs that flag.
pub(crate) fn backfill_refuses_year_zero_and_history_unless_asked(fx: &Fixture) {
    fx.seed();
    let year_zero = [
        "backfill",
        REPORT,
        "--from",
        "0000-01-01T00:00:00Z",
        "--to",
        "0000-01-05T00:00:00Z",
        "--per-second",
        "1000",
        "--reason",
        "x",
        "--execute",
    ];
    for flag in [&[][..], &["--before-first-seen"][..]] {
        let refused = fx.slotguard(&[&year_zero[..], flag].concat());
        assert_eq!(
            refused.fails(2),
            "invalid from: 0000-01-01T00:00:00Z is before 1970-01-01T00:00:00Z, and instants before \
             1970 are refused; the first slot that would be accepted is 1970-01-01T00:00:00Z"
        );
    }
    // The seeded jobs were first registered on 2025-12-01: November is history from before then.
    let history = [
        "backfill",
        REPORT,
        "--from",
        "2025-11-30T22:00:00Z",
        "--to",
        "2025-12-01T00:00:00Z",
        "--reason",
        "history",
        "--execute",
    ];
    let refused = fx.slotguard(&history).fails(2).to_owned();
    assert!(refused.contains("--before-first-seen"), "{refused}");
    assert!(
        refused.contains("the first slot that would be accepted is 2025-12-01T00:00:00Z"),
        "{refused}"
    );
    let done = fx.slotguard(&[&history[..], &["--before-first-seen"]].concat());
    assert!(done.ok().contains("created 2 run(s)"), "{done:?}");
    assert!(
        fx.audit().iter().all(|a| a.entry.reason != "x"),
        "year 0 created nothing"
    );
}

/// Issue 15, bug 10: triggering a paused job says that the run waits for the resume.
pub(crate) fn trigger_of_a_paused_job_says_it_waits(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "now"]);
    assert!(out.ok().contains("within one recovery poll"), "{out:#?}");
    fx.slotguard(&["pause", REPORT, "--reason", "maintenance"])
        .ok();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "now"]);
    let text = out.ok();
    assert!(text.contains("the job is paused"), "{text}");
    assert!(text.contains("runs after it is resumed"), "{text}");
    assert!(!text.contains("recovery poll"), "{text}");
}

/// Issue 15, item 13: `retry --failed --from --to` retries every failed slot of the range, one audit
/// entry each.
pub(crate) fn retry_failed_retries_a_range(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&[
        "retry",
        REPORT,
        "--failed",
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "bank API was down",
    ]);
    let text = out.ok();
    assert!(
        text.contains("retried 2 failed or dead run(s) of report"),
        "{text}"
    );
    for slot in ["2026-03-01T02:00:00Z", "2026-03-01T04:00:00Z"] {
        assert_eq!(fx.run(slot).status, RunStatus::Pending, "{slot}");
    }
    assert_eq!(fx.run("2026-03-01T01:00:00Z").status, RunStatus::Succeeded);
    assert_eq!(fx.run("2026-03-01T03:00:00Z").status, RunStatus::Running);
    let audit = fx.audit();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|a| a.entry.action == "retry" && a.entry.actor == USER)
    );
    // Usage: --failed needs the range, and takes no slot.
    let no_range = fx.slotguard(&["retry", REPORT, "--failed", "--reason", "r"]);
    assert_eq!(no_range.code, Some(2), "{no_range:#?}");
    let both = fx.slotguard(&[
        "retry",
        REPORT,
        "2026-03-01T02:00:00Z",
        "--failed",
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "r",
    ]);
    assert_eq!(both.code, Some(2), "{both:#?}");
    assert_eq!(fx.audit().len(), 2);
}

/// Issue 15, item 13: `trigger --wait` follows the run; the exit code says how it ended: 0
/// succeeded, 5 ended without success, 6 not finished within `--timeout`.
pub(crate) fn trigger_wait_follows_the_run(fx: &Fixture) {
    fx.seed();
    // Nobody runs it: still pending when the timeout passes.
    let out = fx.slotguard(&[
        "trigger",
        REPORT,
        "--reason",
        "r",
        "--wait",
        "--timeout",
        "1",
    ]);
    assert_eq!(out.code, Some(6), "{out:#?}");
    assert!(out.stdout.contains("still pending after 1 s"), "{out:#?}");
    assert!(out.elapsed >= Duration::from_secs(1), "{out:#?}");
    // A replica runs it, with the outcome given.
    for (finish, code, said) in [
        (Finish::succeeded(), 0, "succeeded after 1 attempt(s)"),
        (
            Finish::failed(ErrorClass::Permanent, "no such account", None),
            5,
            "dead after 1 attempt(s): no such account",
        ),
    ] {
        let mut args: Vec<String> = [
            "trigger",
            REPORT,
            "--reason",
            "r",
            "--wait",
            "--timeout",
            "60",
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(fx.store_args());
        let child = Command::new(env!("CARGO_BIN_EXE_slotguard"))
            .args(&args)
            .env("USER", USER)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slotguard");
        // Runs whatever is due (the pending run of the timed-out wait above too) until the wait ends.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut child = child;
        while child.try_wait().expect("slotguard runs").is_none() {
            assert!(Instant::now() < deadline, "the wait never ended");
            fx.run_due(REPORT, &finish);
            std::thread::sleep(Duration::from_millis(100));
        }
        let output = child.wait_with_output().expect("slotguard ends");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.starts_with("triggered: report slot "), "{stdout}");
        assert!(stdout.contains(said), "{stdout}");
    }
    let timeout = fx.slotguard(&[
        "trigger",
        REPORT,
        "--reason",
        "r",
        "--wait",
        "--timeout",
        "3601",
    ]);
    assert!(timeout.fails(2).starts_with("--timeout: "), "{timeout:#?}");
    let no_wait = fx.slotguard(&["trigger", REPORT, "--reason", "r", "--timeout", "5"]);
    assert_eq!(no_wait.code, Some(2), "{no_wait:#?}");
}

/// Issue 21, point 8: cancelling a pending run says it will not start, not that a replica running
/// it is told at its next heartbeat; a running run's cancellation still says that.
pub(crate) fn cancel_says_what_happens_to_a_pending_run(fx: &Fixture) {
    fx.seed();
    let failed = "2026-03-01T02:00:00Z";
    fx.slotguard(&["retry", REPORT, failed, "--reason", "again"])
        .ok();
    let text = fx
        .slotguard(&["cancel", REPORT, failed, "--reason", "not needed"])
        .ok()
        .to_owned();
    assert!(!text.contains("heartbeat"), "{text}");
    assert!(text.contains("was pending"), "{text}");
    assert!(text.contains("will not start"), "{text}");
    let running = "2026-03-01T03:00:00Z";
    let text = fx
        .slotguard(&["cancel", REPORT, running, "--reason", "stuck"])
        .ok()
        .to_owned();
    assert!(text.contains("was running"), "{text}");
    assert!(text.contains("next heartbeat"), "{text}");
}

/// Issue 21, point 8: a second pause keeps who paused first and is refused; resuming an active job
/// is refused and writes no `resume` audit entry.
pub(crate) fn a_second_pause_and_a_needless_resume_are_refused(fx: &Fixture) {
    fx.seed();
    fx.slotguard(&["pause", REPORT, "--reason", "maintenance"])
        .ok();
    let message = fx
        .slotguard(&["pause", REPORT, "--reason", "mine", "--actor", "bob"])
        .fails(4)
        .to_owned();
    assert!(message.contains("already paused by tester"), "{message}");
    let json = fx.slotguard(&["jobs", "--json"]).json();
    let report = json.iter().find(|j| j["name"] == REPORT).expect("report");
    assert_eq!(report["pausedBy"], USER);
    assert_eq!(report["pausedReason"], "maintenance");
    fx.slotguard(&["resume", REPORT, "--reason", "done"]).ok();
    let message = fx
        .slotguard(&["resume", REPORT, "--reason", "again"])
        .fails(4)
        .to_owned();
    assert!(message.contains("is not paused"), "{message}");
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["resume", "pause"]);
}
