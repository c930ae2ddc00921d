//! Scenarios of operators' holiday overrides (`holiday add|remove|list`).

use super::*;

/// The columns of `holiday list`.
const LIST_HEADER: [&str; 7] = ["CALENDAR", "DATE", "KIND", "NAME", "BY", "FROM", "REASON"];

/// A holiday is added and removed, listed as the latest of its date with who and why, both
/// audited; bad input (an unknown calendar, a bad or absurd date, a long reason) is exit 2 naming
/// the argument, and nothing is stored; `next --calendar` with the store moves a slot off an
/// added holiday.
pub(crate) fn holidays_are_added_removed_and_listed(fx: &Fixture) {
    fx.seed();
    let add = [
        "holiday",
        "add",
        "KR",
        "2026-10-02",
        "--name",
        "임시공휴일",
        "--reason",
        "decree",
    ];
    let out = fx.slotguard(&add);
    assert!(
        out.ok()
            .starts_with("KR 2026-10-02 is a holiday (임시공휴일) from "),
        "{out:?}"
    );
    let list = rows(fx.slotguard(&["holiday", "list"]).ok(), &LIST_HEADER);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (
            list[0]["KIND"].as_str(),
            list[0]["NAME"].as_str(),
            list[0]["BY"].as_str()
        ),
        ("add", "임시공휴일", USER)
    );
    let remove = [
        "holiday",
        "remove",
        "KR",
        "2026-10-02",
        "--reason",
        "withdrawn",
    ];
    assert!(fx.slotguard(&remove).ok().contains("is no holiday from"));
    let json = fx.slotguard(&["holiday", "list", "--calendar", "KR", "--json"]);
    let line: Value = serde_json::from_str(json.ok().trim()).expect("one JSON line");
    assert_eq!(
        (&line["kind"], &line["reason"]),
        (&"remove".into(), &"withdrawn".into())
    );
    assert!(
        table(fx.slotguard(&["holiday", "list", "--calendar", "US"]).ok())
            .1
            .is_empty()
    );
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["calendar_remove", "calendar_add"]);

    let bad = |args: &[&str]| {
        let mut all = vec!["holiday", "add"];
        all.extend(args);
        fx.slotguard(&all).fails(2).to_owned()
    };
    let name = ["--name", "h", "--reason", "r"];
    let with = |calendar: &'static str, date: &'static str| {
        let mut args = vec![calendar, date];
        args.extend(name);
        args
    };
    assert!(bad(&with("XX", "2026-10-02")).starts_with("CALENDAR: unknown calendar `XX`"));
    assert!(bad(&with("KR", "2026-02-30")).starts_with("DATE: "));
    assert!(bad(&with("KR", "9999-01-01")).starts_with("DATE: year 9999"));
    let long = "x".repeat(2_000);
    let long_reason = ["KR", "2026-10-02", "--name", "h", "--reason", long.as_str()];
    assert!(bad(&long_reason).starts_with("invalid reason: is 2000 bytes"));
    assert_eq!(fx.audit().len(), 2, "nothing more was stored");

    // `next --calendar KR` with the store takes its overrides; without one, the shipped calendar.
    let late = [
        "holiday",
        "add",
        "KR",
        "2026-11-25",
        "--name",
        "임시공휴일",
        "--reason",
        "r",
    ];
    fx.slotguard(&late).ok();
    let flags = "--tz Asia/Seoul --calendar KR --adjust preceding --after 2026-11-01T00:00:00Z";
    let mut next = vec!["next", "0 2 25 11 *", "--count", "1"];
    next.extend(flags.split(' '));
    let with_store = fx.slotguard(&next);
    assert!(
        with_store.ok().contains("\n2026-11-23T17:00:00Z "),
        "{with_store:?}"
    );
    let offline = run(&next, &[]);
    assert!(
        offline.ok().contains("\n2026-11-24T17:00:00Z "),
        "{offline:?}"
    );

    // A company's holidays file on top of KR names the 25th itself: withdrawing Korea's holiday
    // moves Korea's payday back to the 25th, but not the company's.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let file = std::env::temp_dir().join(format!("acme-{}-{nanos}.csv", std::process::id()));
    std::fs::write(&file, "2026-11-25,founders day\n").expect("holidays file");
    let withdraw = ["holiday", "remove", "KR", "2026-11-25", "--reason", "r"];
    fx.slotguard(&withdraw).ok();
    assert!(fx.slotguard(&next).ok().contains("\n2026-11-24T17:00:00Z "));
    let mut company = next.clone();
    company.extend(["--holidays", file.to_str().expect("utf-8 path")]);
    let acme = fx.slotguard(&company);
    let _ = std::fs::remove_file(&file);
    assert!(acme.ok().contains("\n2026-11-23T17:00:00Z "), "{acme:?}");
}
