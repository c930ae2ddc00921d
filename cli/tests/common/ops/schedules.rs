//! Scenarios of the stored schedules (`schedule add|list|show|set|remove|preview`), `skip` and
//! `unskip`.

use super::*;

/// The stored schedule the scenarios add: 09:30 in New York, for tenant `acme`, of `report`.
const ID: &str = "acme-report";

/// The columns of `schedule list`.
const LIST_HEADER: [&str; 9] = [
    "ID",
    "VERSION",
    "JOB",
    "PARTITION",
    "CRON",
    "ZONE",
    "STATE",
    "NEXT",
    "NOTE",
];

/// A schedule as `schedule show` prints it: its fields by name, and its next slots (UTC, local).
fn shown(text: &str) -> (HashMap<String, String>, Vec<(String, String)>) {
    let (fields, slots) = text
        .split_once("\n\n")
        .expect("fields, then the next slots");
    let fields = fields
        .lines()
        .map(|line| {
            let (name, value) = line.split_once(':').expect("`name: value`");
            (name.to_owned(), value.trim().to_owned())
        })
        .collect();
    let slots = rows(slots, &["NEXT", "LOCAL"])
        .into_iter()
        .map(|row| (row["NEXT"].clone(), row["LOCAL"].clone()))
        .collect();
    (fields, slots)
}

/// Asserts 5 slots, rising, each at `wall` local time.
#[track_caller]
fn five_slots_at(slots: &[(String, String)], wall: &str) {
    assert_eq!(slots.len(), 5, "{slots:?}");
    let now = Utc::now();
    let mut last = now;
    for (utc, local) in slots {
        let at = instant(utc);
        assert!(at > last, "{slots:?}");
        last = at;
        assert!(local.contains(wall), "{local} is not at {wall}");
    }
}

/// How many entries the audit trail holds.
fn audited(fx: &Fixture) -> usize {
    fx.audit().len()
}

/// `schedule add`, `list`, `show`, `set` (and a stale `set`, exit 7), `remove`: each printed with
/// its version and next slots; a refusal changes nothing.
pub(crate) fn stored_schedules_add_change_remove(fx: &Fixture) {
    fx.seed();
    let add = [
        "schedule",
        "add",
        ID,
        "--job",
        REPORT,
        "--cron",
        "30 9 * * *",
        "--tz",
        "America/New_York",
        "--partition",
        "acme",
        "--reason",
        "onboarding acme",
    ];
    let out = fx.slotguard(&add);
    let (done, rest) = out.ok().split_once('\n').expect("a first line");
    assert!(
        done.starts_with("added: schedule acme-report at version 1, in force from "),
        "{done}"
    );
    let (fields, slots) = shown(rest);
    assert_eq!(fields["version"], "1");
    assert_eq!(fields["state"], "active");
    assert_eq!(fields["partition"], "acme");
    assert_eq!(fields["changed by"], USER);
    assert_eq!(fields["pause on failure"], "no");
    five_slots_at(&slots, " 09:30:00");
    // The same id again: it exists (exit 4), and nothing is written.
    let before = audited(fx);
    assert!(fx.slotguard(&add).fails(4).contains("exists already"));
    assert_eq!(audited(fx), before);

    listed_and_shown_at(fx, "1", "30 9 * * *");
    changed_once_then_stale(fx);
    let out = fx.slotguard(&[
        "schedule",
        "remove",
        ID,
        "--version",
        "2",
        "--reason",
        "gone",
    ]);
    assert!(
        out.ok()
            .starts_with("removed: schedule acme-report at version 3 (by tester); no slots from "),
        "{}",
        out.stdout
    );
    let message = fx.slotguard(&["schedule", "show", ID]).fails(3).to_owned();
    assert_eq!(message, "unknown schedule `acme-report`");
    assert!(table(fx.slotguard(&["schedule", "list"]).ok()).1.is_empty());
    fx.slotguard(&["schedule", "remove", ID, "--reason", "again"])
        .fails(3);
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(
        actions[..3],
        ["schedule_remove", "schedule_change", "schedule_add"]
    );
}

/// `schedule list` (table and JSON) and `schedule show` (fields and JSON) at `version`.
fn listed_and_shown_at(fx: &Fixture, version: &str, cron: &str) {
    let list = rows(fx.slotguard(&["schedule", "list"]).ok(), &LIST_HEADER);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["ID"], ID);
    assert_eq!(list[0]["VERSION"], version);
    assert_eq!(list[0]["JOB"], REPORT);
    assert_eq!(list[0]["CRON"], cron);
    let json = fx
        .slotguard(&["schedule", "list", "--job", REPORT, "--json"])
        .json();
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["version"].to_string(), version);
    assert_eq!(json[0]["next"].as_array().map(Vec::len), Some(5));
    assert_eq!(json[0]["tz"], "America/New_York");
    assert_eq!(json[0]["source"], "api");
    assert_eq!(list[0]["NEXT"], json[0]["next"][0].as_str().unwrap());
    assert!(
        fx.slotguard(&["schedule", "list", "--job", "nightly", "--json"])
            .json()
            .is_empty()
    );
    let (fields, slots) = shown(fx.slotguard(&["schedule", "show", ID]).ok());
    assert_eq!(fields["version"], version);
    assert_eq!(fields["cron"], cron);
    assert_eq!(slots.len(), 5);
    let json = fx.slotguard(&["schedule", "show", ID, "--json"]).json();
    assert_eq!(json[0]["id"], ID);
    assert_eq!(json[0]["pauseOnFailure"], version != "1");
    assert_eq!(json[0]["next"].as_array().map(Vec::len), Some(5));
}

/// A change read at version 1 makes version 2; the same change again is stale (exit 7), and
/// nothing changes.
fn changed_once_then_stale(fx: &Fixture) {
    let set = |cron: &str| {
        fx.slotguard(&[
            "schedule",
            "set",
            ID,
            "--version",
            "1",
            "--cron",
            cron,
            "--pause-on-failure",
            "--reason",
            "later",
        ])
    };
    let out = set("0 10 * * *");
    let (done, rest) = out.ok().split_once('\n').expect("a first line");
    assert!(
        done.starts_with("changed: schedule acme-report at version 2"),
        "{done}"
    );
    let (fields, slots) = shown(rest);
    assert_eq!(fields["cron"], "0 10 * * *");
    assert_eq!(fields["partition"], "acme", "kept");
    assert_eq!(fields["pause on failure"], "yes");
    // The next slots follow the change (it takes effect half a second after it is stored).
    five_slots_at(&slots, " 10:00:00");

    let before = audited(fx);
    let message = set("0 11 * * *").fails(7).to_owned();
    assert_eq!(
        message,
        "schedule `acme-report` is at version 2, not 1: it changed since it was read; read it again"
    );
    assert_eq!(audited(fx), before);
    listed_and_shown_at(fx, "2", "0 10 * * *");
}

/// Bad input is exit 2 with one line naming the argument, before or after the store is opened.
pub(crate) fn schedule_input_names_the_argument(fx: &Fixture) {
    fx.seed();
    let add = |extra: &[&str]| {
        let mut args = vec![
            "schedule", "add", "bad", "--job", REPORT, "--tz", "UTC", "--reason", "r",
        ];
        args.extend(extra);
        fx.slotguard(&args).fails(2).to_owned()
    };
    assert!(add(&["--cron", "61 * * * *"]).starts_with("--cron: "));
    assert!(add(&["--cron", "0 * * * *", "--dst", "sometimes"]).starts_with("--dst: "));
    assert!(add(&["--cron", "0 * * * *", "--partition", "a\nb"]).starts_with("--partition: "));
    assert!(add(&["--cron", "0 * * * *", "--start-at", "soon"]).starts_with("--start-at: `soon`"));
    assert_eq!(
        add(&["--cron", "@daily", "--remaining-runs", "-1"]),
        "--remaining-runs: `-1` is not a whole number from 0 to 100000"
    );
    let preview = |extra: &[&str]| {
        let mut args = vec!["schedule", "preview", "--job", REPORT, "--cron", "@daily"];
        args.extend(extra);
        fx.slotguard(&args).fails(2).to_owned()
    };
    assert!(preview(&["--tz", "Asia/Seol"]).starts_with("--tz: "));
    assert!(preview(&["--tz", "UTC", "--count", "0"]).starts_with("--count: "));
    // Nothing was stored.
    assert!(table(fx.slotguard(&["schedule", "list"]).ok()).1.is_empty());
    assert!(fx.audit().is_empty());
    // Checked before the store is opened: no store at all, and still exit 2 naming the argument.
    let set = [
        "schedule",
        "set",
        ID,
        "--version",
        "one",
        "--cron",
        "@daily",
        "--reason",
        "r",
    ];
    assert!(run(&set, &[]).fails(2).starts_with("--version: `one`"));
    let nothing = ["schedule", "set", ID, "--version", "1", "--reason", "r"];
    assert!(run(&nothing, &[]).fails(2).starts_with("nothing to change"));
    let skip = ["skip", REPORT, "tomorrow", "--reason", "r"];
    assert!(run(&skip, &[]).fails(2).starts_with("SLOT: `tomorrow`"));
}

/// `schedule preview` prints the slots asked for, and stores nothing.
pub(crate) fn schedule_preview_stores_nothing(fx: &Fixture) {
    fx.seed();
    let preview = [
        "schedule",
        "preview",
        "--job",
        REPORT,
        "--cron",
        "0 2 * * *",
        "--tz",
        "Asia/Seoul",
        "--count",
        "3",
    ];
    let out = fx.slotguard(&preview);
    let (head, slots) = out.ok().split_once('\n').expect("a first line");
    assert_eq!(
        head,
        "next 3 slot(s) of \"0 2 * * *\" in Asia/Seoul (DST policy vixie) for job report; nothing is stored"
    );
    let slots = rows(slots, &["NEXT", "LOCAL"]);
    assert_eq!(slots.len(), 3);
    for slot in &slots {
        assert!(slot["LOCAL"].contains(" 02:00:00+09:00"), "{slot:?}");
    }
    let mut json = preview.to_vec();
    json.push("--json");
    let json = fx.slotguard(&json).json();
    assert_eq!(json.len(), 1);
    let next = json[0]["next"].as_array().expect("next");
    assert_eq!(next.len(), 3);
    assert_eq!(next[0], slots[0]["NEXT"].as_str());
    assert!(table(fx.slotguard(&["schedule", "list"]).ok()).1.is_empty());
    assert!(fx.audit().is_empty());
}

/// The next slot of `report`'s code schedule at least two minutes ahead, as `jobs --json` lists it.
fn next_code_slot(fx: &Fixture) -> String {
    let jobs = fx.slotguard(&["jobs", "--json"]).json();
    let report = jobs
        .iter()
        .find(|j| j["name"] == REPORT)
        .expect("report is listed");
    let soon = Utc::now() + chrono::Duration::minutes(2);
    report["nextSlots"]
        .as_array()
        .expect("nextSlots")
        .iter()
        .filter_map(|s| s.as_str())
        .find(|s| instant(s) > soon)
        .expect("an upcoming slot")
        .to_owned()
}

/// `skip` records the job's next code slot `skipped`; a second skip is refused (exit 4); `unskip`
/// takes it back, and a second unskip finds nothing to undo (exit 3).
pub(crate) fn skip_and_unskip_a_slot(fx: &Fixture) {
    fx.seed();
    let slot = next_code_slot(fx);
    let skip = |verb: &str| fx.slotguard(&[verb, REPORT, &slot, "--reason", "holiday"]);
    let out = skip("skip");
    assert!(
        out.ok()
            .starts_with(&format!("skipped: report slot {slot} is skipped (")),
        "{}",
        out.stdout
    );
    assert_eq!(fx.run(&slot).status, RunStatus::Skipped);
    let message = skip("skip").fails(4).to_owned();
    assert!(
        message.starts_with("skip refused for job `report`"),
        "{message}"
    );
    assert_eq!(
        skip("unskip").ok(),
        format!("unskipped: report slot {slot}; it runs as its schedule says\n")
    );
    assert!(
        fx.runs(REPORT)
            .iter()
            .all(|r| r.key.scheduled_at != instant(&slot))
    );
    assert!(skip("unskip").fails(3).contains("has no skip to undo"));
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["unskip", "skip"]);
    // Not a slot of the job's schedules, or not ahead: bad input naming SLOT.
    let off = (instant(&slot) + chrono::Duration::minutes(1)).to_rfc3339();
    let out = fx.slotguard(&["skip", REPORT, &off, "--reason", "r"]);
    assert!(out.fails(2).starts_with("SLOT: "), "{out:?}");
    let past = (instant(&slot) - chrono::Duration::days(1)).to_rfc3339();
    let out = fx.slotguard(&["skip", REPORT, &past, "--reason", "r"]);
    assert!(out.fails(2).contains("is not ahead"), "{out:?}");
    fx.slotguard(&["skip", "nope", &slot, "--reason", "r"])
        .fails(3);
}
