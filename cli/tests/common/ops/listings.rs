//! Scenarios of the listings: `runs`, `run`, `missed`, `replicas`, `audit`, and the page rule.

use super::*;

/// `runs`: a table, newest slot first, one line per run; `--status` filters; `--json` has it all.
pub(crate) fn runs_lists_and_filters(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["runs", REPORT]);
    assert_eq!(
        out.ok(),
        "\
SLOT                  PARTITION  STATUS     ATTEMPT  TRIGGER   OWNER      MESSAGE
2026-03-01T04:00:00Z  -          failed     1        schedule  replica-a  bank API down
2026-03-01T03:00:00Z  -          running    1        schedule  replica-a  -
2026-03-01T02:00:00Z  -          failed     1        schedule  replica-a  boom
2026-03-01T01:00:00Z  -          succeeded  1        schedule  replica-a  -
"
    );

    let failed = fx.slotguard(&["runs", REPORT, "--status", "failed"]);
    let failed = rows(
        failed.ok(),
        &[
            "SLOT",
            "PARTITION",
            "STATUS",
            "ATTEMPT",
            "TRIGGER",
            "OWNER",
            "MESSAGE",
        ],
    );
    let slots: Vec<&str> = failed.iter().map(|r| r["SLOT"].as_str()).collect();
    assert_eq!(slots, ["2026-03-01T04:00:00Z", "2026-03-01T02:00:00Z"]);
    assert!(failed.iter().all(|r| r["STATUS"] == "failed"));

    // A range and a limit.
    let some = fx.slotguard(&[
        "runs",
        REPORT,
        "--from",
        "2026-03-01T02:00:00Z",
        "--to",
        "2026-03-01T04:00:00Z",
        "--limit",
        "1",
    ]);
    let some = table(some.ok()).1;
    assert_eq!(some.len(), 1);
    assert_eq!(some[0]["SLOT"], "2026-03-01T03:00:00Z");

    // No run in that status: the header alone.
    let none = fx.slotguard(&["runs", REPORT, "--status", "dead"]);
    assert_eq!(table(none.ok()).1.len(), 0);

    let json = fx.slotguard(&["runs", REPORT, "--json"]).json();
    assert_eq!(json.len(), 4);
    assert_eq!(json[0]["job"], REPORT);
    assert_eq!(json[0]["scheduledAt"], "2026-03-01T04:00:00Z");
    assert_eq!(json[0]["status"], "failed");
    assert_eq!(json[0]["errorMessage"], "bank API down");
    assert_eq!(json[0]["wallTime"], "2026-03-01T13:00:00");
    assert_eq!(json[0]["businessDate"], "2026-03-01");
    assert_eq!(json[0]["trigger"], "schedule");
    assert_eq!(json[0]["fingerprint"], "0000000051076a4d");
    assert_eq!(json[0]["attempts"][0]["owner"], "replica-a");
    assert_eq!(json[0]["attempts"][0]["status"], "failed");
    assert_eq!(json[1]["status"], "running");
    assert_eq!(json[1]["finishedAt"], Value::Null);

    // Bad filters are bad input.
    for args in [
        &["runs", REPORT, "--status", "broken"][..],
        &["runs", REPORT, "--limit", "0"],
        &["runs", REPORT, "--limit", "1001"],
        &["runs", REPORT, "--limit", "-5"],
        &["runs", REPORT, "--from", "yesterday"],
        &[
            "runs",
            REPORT,
            "--from",
            "2026-03-02T00:00:00Z",
            "--to",
            "2026-03-01T00:00:00Z",
        ],
    ] {
        fx.slotguard(args).fails(2);
    }
    let unknown = fx.slotguard(&["runs", "no-such-job"]);
    assert_eq!(
        unknown.fails(3),
        "unknown job `no-such-job`: no scheduler has registered it"
    );
}

/// `missed`: exactly the slots of the schedule without a row.
pub(crate) fn missed_lists_slots_without_rows(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["missed", REPORT, "--from", FROM, "--to", TO]);
    // 00:00Z and 05:00Z have no row; 06:00Z is excluded. Seoul is UTC+9.
    assert_eq!(
        out.ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-03-01T00:00:00Z  2026-03-01 09:00:00  2026-03-01
2026-03-01T05:00:00Z  2026-03-01 14:00:00  2026-03-01
2 missed slot(s)
"
    );
    let json = fx
        .slotguard(&["missed", REPORT, "--from", FROM, "--to", TO, "--json"])
        .json();
    assert_eq!(
        json,
        [
            serde_json::json!({"scheduledAt": "2026-03-01T00:00:00Z", "wallTime": "2026-03-01T09:00:00", "businessDate": "2026-03-01"}),
            serde_json::json!({"scheduledAt": "2026-03-01T05:00:00Z", "wallTime": "2026-03-01T14:00:00", "businessDate": "2026-03-01"}),
        ]
    );
    // Offsets are honoured: 10:00+09:00 is 01:00Z; 01:00Z..05:00Z has no missed slot.
    let none = fx.slotguard(&[
        "missed",
        REPORT,
        "--from",
        "2026-03-01T10:00:00+09:00",
        "--to",
        "2026-03-01T05:00:00Z",
    ]);
    assert_eq!(
        none.ok(),
        "SLOT  WALL TIME  BUSINESS DATE\n0 missed slot(s)\n"
    );
    // A range in the future; before 1970; a million slots, listed a page at a time.
    fx.slotguard(&["missed", REPORT, "--from", "2999-01-01T00:00:00Z"])
        .fails(2);
    let year_zero = fx.slotguard(&["missed", REPORT, "--from", "0000-01-01T00:00:00Z"]);
    assert!(year_zero.fails(2).contains("before 1970"), "{year_zero:?}");
    let storm = [
        "missed",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
        "--limit",
        "3",
    ];
    assert_eq!(
        fx.slotguard(&storm).ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-01-01T00:00:00Z  2026-01-01 00:00:00  2026-01-01
2026-01-01T00:00:01Z  2026-01-01 00:00:01  2026-01-01
2026-01-01T00:00:02Z  2026-01-01 00:00:02  2026-01-01
3 missed slot(s)
more: ask again with --from 2026-01-01T00:00:03Z
"
    );
    let json = fx.slotguard(&[&storm[..], &["--json"]].concat()).json();
    assert_eq!(json.len(), 4);
    assert_eq!(json[3], serde_json::json!({"next": "2026-01-01T00:00:03Z"}));
    fx.slotguard(&["missed", "nope", "--from", FROM]).fails(3);
}

/// `missed` without a job reads every job: a row per slot with its job, a page at a time, and the
/// cursor of the next page.
pub(crate) fn missed_without_a_job_reads_every_job(fx: &Fixture) {
    fx.seed();
    let (from, to) = ("2026-03-01T00:59:58Z", "2026-03-01T01:00:01Z");
    let out = fx.slotguard(&["missed", "--from", from, "--to", to]);
    // `report` ran at 01:00Z; `nightly` is 02:00 in Berlin (UTC+1), 01:00Z.
    assert_eq!(
        out.ok(),
        "\
JOB      SLOT                  WALL TIME            BUSINESS DATE
nightly  2026-03-01T01:00:00Z  2026-03-01 02:00:00  2026-03-01
ticker   2026-03-01T00:59:58Z  2026-03-01 00:59:58  2026-03-01
ticker   2026-03-01T00:59:59Z  2026-03-01 00:59:59  2026-03-01
ticker   2026-03-01T01:00:00Z  2026-03-01 01:00:00  2026-03-01
4 missed slot(s) in 2 of 3 job(s)
"
    );
    let json = fx
        .slotguard(&["missed", "--from", from, "--to", to, "--json"])
        .json();
    assert_eq!(json.len(), 4);
    assert_eq!(
        json[0],
        serde_json::json!({"job": "nightly", "scheduledAt": "2026-03-01T01:00:00Z", "wallTime": "2026-03-01T02:00:00", "businessDate": "2026-03-01"})
    );
    let storm = [
        "missed",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
    ];
    // Twelve nights, then the first 38 hours of `report`: a page of 50, and where to go on.
    let answer = fx.slotguard(&storm);
    let text = answer.ok();
    assert!(
        text.contains("50 missed slot(s) in 2 of 2 job(s)"),
        "{text}"
    );
    assert!(
        text.ends_with("more: ask again with --cursor 'report:2026-01-02T14:00:00Z'\n"),
        "{text}"
    );
    let json = fx.slotguard(&[&storm[..], &["--json"]].concat()).json();
    assert_eq!(json.len(), 51);
    let next = json[50]["next"].as_str().expect("a next cursor").to_owned();
    let page = fx
        .slotguard(&[&storm[..], &["--json", "--cursor", &next]].concat())
        .json();
    assert_eq!(page[0]["job"], REPORT);
    assert_eq!(page[0]["scheduledAt"], "2026-01-02T14:00:00Z");
    fx.slotguard(&[&storm[..], &["--cursor", "no-colon"]].concat())
        .fails(2);
    fx.slotguard(&["missed", "--from", to, "--to", from])
        .fails(2);
}

/// `replicas` lists the processes, alive or gone; `jobs` calls a job `inactive` once every
/// replica that ran it is gone.
pub(crate) fn replicas_and_inactive_jobs(fx: &Fixture) {
    fx.seed();
    fx.replica("replica-b", &[TICKER, "retired"], Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(50));
    let header = [
        "REPLICA",
        "STATE",
        "HOST",
        "PID",
        "VERSION",
        "ROLES",
        "RUNS",
        "STARTED",
        "HEARTBEAT",
        "JOBS",
    ];
    let out = fx.slotguard(&["replicas"]);
    let listed = rows(out.ok(), &header);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["REPLICA"], "replica-a");
    assert_eq!(listed[0]["STATE"], "alive");
    assert_eq!(listed[0]["HOST"], "web-1");
    assert_eq!(listed[0]["PID"], "4242");
    assert_eq!(listed[0]["ROLES"], "all");
    assert_eq!(listed[0]["RUNS"], "1");
    assert_eq!(listed[0]["JOBS"], "report,ticker,nightly");
    assert_eq!(listed[1]["REPLICA"], "replica-b");
    assert_eq!(listed[1]["STATE"], "gone");

    let json = fx.slotguard(&["replicas", "--json"]).json();
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["id"], "replica-a");
    assert_eq!(json[0]["alive"], true);
    assert_eq!(json[0]["roles"], serde_json::json!(["all"]));
    assert_eq!(json[0]["goneAfterMs"], 3_600_000);
    assert_eq!(json[1]["alive"], false);

    // `nightly` is run by replica-a only: active. Once replica-a is gone too, it is inactive.
    let states = |fx: &Fixture| -> Vec<(String, String)> {
        rows(fx.slotguard(&["jobs"]).ok(), &JOBS_HEADER)
            .into_iter()
            .map(|r| (r["JOB"].clone(), r["STATE"].clone()))
            .collect()
    };
    let pair = |job: &str, state: &str| (job.to_owned(), state.to_owned());
    assert_eq!(
        states(fx),
        [
            pair("nightly", "active"),
            pair(REPORT, "active"),
            pair(TICKER, "active")
        ]
    );
    fx.replica(
        "replica-a",
        &[REPORT, TICKER, "nightly"],
        Duration::from_millis(1),
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        states(fx),
        [
            pair("nightly", "inactive"),
            pair(REPORT, "inactive"),
            pair(TICKER, "inactive")
        ]
    );
    let json = fx.slotguard(&["jobs", "--json"]).json();
    assert_eq!(json[0]["active"], false);
    assert_eq!(json[0]["replicas"], serde_json::json!([]));
}

/// `audit`: every change, newest first, with actor and reason.
pub(crate) fn audit_lists_changes(fx: &Fixture) {
    fx.seed();
    fx.slotguard(&["retry", REPORT, "2026-03-01T02:00:00Z", "--reason", "first"])
        .ok();
    fx.slotguard(&["pause", "nightly", "--reason", "second", "--actor", "alice"])
        .ok();
    fx.slotguard(&[
        "cancel",
        REPORT,
        "2026-03-01T03:00:00Z",
        "--reason",
        "third\nwith a second line",
    ])
    .ok();

    let out = fx.slotguard(&["audit"]);
    let entries = rows(
        out.ok(),
        &["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"],
    );
    let summary: Vec<[&str; 5]> = entries
        .iter()
        .map(|e| {
            [
                e["JOB"].as_str(),
                e["ACTION"].as_str(),
                e["SLOT"].as_str(),
                e["ACTOR"].as_str(),
                e["REASON"].as_str(),
            ]
        })
        .collect();
    assert_eq!(
        summary,
        [
            [
                REPORT,
                "cancel",
                "2026-03-01T03:00:00Z",
                USER,
                // Escaped: a stored newline does not break the table.
                "third\\nwith a second line"
            ],
            ["nightly", "pause", "-", "alice", "second"],
            [REPORT, "retry", "2026-03-01T02:00:00Z", USER, "first"],
        ]
    );
    for entry in &entries {
        let at = instant(&entry["AT"]);
        assert!((Utc::now() - at).num_minutes().abs() < 10, "{entry:?}");
    }

    let only = fx.slotguard(&["audit", "nightly"]);
    assert_eq!(table(only.ok()).1.len(), 1);
    // A full page says how to ask for the next, which holds the older entries.
    let one = fx.slotguard(&["audit", "--limit", "1"]);
    let (page, more) = one
        .ok()
        .rsplit_once("more: ask again with --before ")
        .expect("a full page says how to go on");
    assert_eq!(table(page).1.len(), 1);
    let older = fx.slotguard(&["audit", "--before", more.trim()]);
    let older = rows(
        older.ok(),
        &["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"],
    );
    let actions: Vec<&str> = older.iter().map(|e| e["ACTION"].as_str()).collect();
    assert_eq!(actions, ["pause", "retry"]);
    let json = fx.slotguard(&["audit", REPORT, "--json"]).json();
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["action"], "cancel");
    assert_eq!(json[0]["reason"], "third\nwith a second line");
    assert_eq!(json[1]["scheduledAt"], "2026-03-01T02:00:00Z");
    fx.slotguard(&["audit", "nope"]).fails(3);
    fx.slotguard(&["audit", "--limit", "0"]).fails(2);
}

/// Issue 15, bug 5: `--limit` follows the admin API's one rule (1 to 1,000) on every listing.
pub(crate) fn limits_follow_the_admin_rule(fx: &Fixture) {
    fx.seed();
    for (args, limit) in [
        (vec!["runs", REPORT], "0"),
        (vec!["runs", REPORT], "100000"),
        (vec!["audit"], "0"),
        (vec!["audit"], "100000"),
    ] {
        let mut args = args.clone();
        args.extend(["--limit", limit]);
        let message = fx.slotguard(&args).fails(2).to_owned();
        assert_eq!(
            message,
            format!("--limit: {limit} is out of range: expected 1 to 1000"),
            "{args:?}"
        );
    }
    assert_eq!(
        table(fx.slotguard(&["runs", REPORT, "--limit", "1000"]).ok())
            .1
            .len(),
        4
    );
}

/// Issue 15, bug 8: the "one run" command of docs/operations.md shows the run at the slot it names,
/// not the newest run from that slot on.
pub(crate) fn the_documented_one_run_command_shows_that_run(fx: &Fixture) {
    fx.seed();
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .expect("docs/operations.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| one run |"))
        .expect("a `one run` row");
    let command = row
        .rsplit('|')
        .nth(1)
        .and_then(|cell| cell.trim().strip_prefix('`'))
        .and_then(|cell| cell.strip_suffix('`'))
        .unwrap_or_else(|| panic!("no CLI command in {row}"));
    // The older of the two failed runs: a listing from it on starts with the newer one.
    let slot = "2026-03-01T02:00:00Z";
    let args: Vec<&str> = command
        .split_whitespace()
        .skip(1)
        .map(|word| match word {
            "JOB" => REPORT,
            "SLOT" => slot,
            other => other,
        })
        .collect();
    let out = fx.slotguard(&args);
    let text = out.ok();
    assert!(text.contains(slot), "`{command}`:\n{text}");
    assert!(
        !text.contains("2026-03-01T04:00:00Z"),
        "`{command}`:\n{text}"
    );
}

/// Issue 15, item 13: `run JOB SLOT` shows one run with its attempts, in a table or as JSON.
pub(crate) fn run_shows_one_run_with_its_attempts(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T02:00:00Z";
    let out = fx.slotguard(&["run", REPORT, slot]);
    let text = out.ok();
    assert!(
        text.contains("slot:          2026-03-01T02:00:00Z"),
        "{text}"
    );
    assert!(text.contains("status:        failed"), "{text}");
    assert!(
        text.contains("wall time:     2026-03-01 11:00:00 Asia/Seoul"),
        "{text}"
    );
    let attempts = text.split("\n\n").nth(1).expect("an attempts table");
    let attempts = rows(
        attempts,
        &[
            "ATTEMPT", "STATUS", "OWNER", "STARTED", "FINISHED", "MESSAGE",
        ],
    );
    assert_eq!(attempts.len(), 1, "{text}");
    assert_eq!(attempts[0]["OWNER"], "replica-a");
    assert_eq!(attempts[0]["MESSAGE"], "boom");
    let json = fx.slotguard(&["run", REPORT, slot, "--json"]).json();
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["scheduledAt"], slot);
    assert_eq!(json[0]["attempts"].as_array().map(Vec::len), Some(1));
    fx.slotguard(&["run", REPORT, "2026-03-01T00:00:00Z"])
        .fails(3);
    fx.slotguard(&["run", REPORT, "yesterday"]).fails(2);
}

/// Issue 21, point 8: `missed` over every job exits non-zero when no job could be counted, rather
/// than "0 missed".
pub(crate) fn missed_with_no_job_countable_fails(fx: &Fixture) {
    let backend = fx.backend().clone();
    fx.rt.block_on(async move {
        backend
            .register_jobs(&[definition("alien", "0 2 * * *", "Mars/Olympus")])
            .await
            .expect("register jobs");
    });
    let out = fx.slotguard(&["missed", "--from", FROM, "--to", TO]);
    let message = out.fails(1);
    assert!(message.contains("alien"), "{message}");
    assert!(message.contains("cannot be read"), "{message}");
}
