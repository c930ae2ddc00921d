//! Operators' holiday overrides: written in order, read back after a `seq`, in force no sooner
//! than the fence and never before the override written before; each in the audit trail; hostile
//! input refused before anything is written.

use std::time::Duration;

use chrono::NaiveDate;
use slotguard::store::calendars::overrides_in_force;
use slotguard::store::{
    AdminStoreExt as _, AuditEntry, Backend, CalendarStamp, ClaimRequest, Enqueue, OverrideKind,
    OverrideSpec, SCHEDULE_FENCE, StoreError,
};

use super::store_now;

/// An override of calendar `KR` on `date`.
pub fn override_spec(date: &str, kind: OverrideKind, name: &str) -> OverrideSpec {
    OverrideSpec {
        calendar: "KR".to_owned(),
        date: NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date"),
        kind,
        name: name.to_owned(),
    }
}

/// Overrides are appended in order, each effective after the fence and never before the one
/// before it, read back after any `seq`, audited with their reason; the latest of a date decides
/// it; an override too long or too far is refused and leaves nothing behind.
pub async fn calendar_overrides_are_appended_in_order_and_audited(backend: &dyn Backend) {
    let before = store_now(backend).await;
    let fence = chrono::Duration::from_std(SCHEDULE_FENCE).expect("small");
    let add = override_spec("2026-10-02", OverrideKind::Add, "임시공휴일");
    let first = (backend.write_override(&add, "kim", "government decree"))
        .await
        .expect("add");
    assert_eq!((&first.spec, first.changed_by.as_str()), (&add, "kim"));
    assert!(first.effective_at >= before + fence, "{first:?}");
    let remove = override_spec("2026-10-02", OverrideKind::Remove, "");
    let second = (backend.write_override(&remove, "lee", "decree withdrawn"))
        .await
        .expect("remove");
    assert!(second.seq > first.seq && second.effective_at >= first.effective_at);

    let all = backend.override_changes(0, 100).await.expect("read");
    assert_eq!(all.overrides, [first.clone(), second.clone()]);
    assert!(all.fresh_at >= second.changed_at);
    let after = backend
        .override_changes(first.seq, 100)
        .await
        .expect("read");
    assert_eq!(after.overrides, std::slice::from_ref(&second));
    let page = backend.override_changes(0, 1).await.expect("read");
    assert_eq!(page.overrides, [first]);
    let force = overrides_in_force(&all.overrides, Some("KR"));
    assert_eq!(force, [&second]);

    for (spec, reason) in [
        (
            override_spec("2026-10-02", OverrideKind::Add, "h"),
            "x".repeat(1_025),
        ),
        (
            override_spec("9999-01-01", OverrideKind::Add, "h"),
            "far".to_owned(),
        ),
        (
            override_spec("2026-10-02", OverrideKind::Add, ""),
            "unnamed".to_owned(),
        ),
    ] {
        let refused = backend.write_override(&spec, "kim", &reason).await;
        assert!(
            matches!(refused, Err(StoreError::Rejected { .. })),
            "{refused:?}"
        );
    }
    let still = backend.override_changes(0, 100).await.expect("read");
    assert_eq!(still.overrides.len(), 2, "nothing refused was written");

    let trail = backend.audit_log(Some(""), 10).await.expect("audit");
    let actions: Vec<_> = trail
        .iter()
        .map(|r| (r.entry.action.as_str(), r.entry.actor.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("calendar_remove", "lee"), ("calendar_add", "kim")]
    );
    assert!(trail[1].entry.reason.contains("임시공휴일"), "{trail:?}");
    assert!(
        trail[1].entry.reason.contains("government decree"),
        "{trail:?}"
    );
}

/// A stamp with two nominal dates, a calendar name and a version that need quoting anywhere.
fn stamp(calendar: &str) -> CalendarStamp {
    CalendarStamp {
        nominal_dates: vec![
            NaiveDate::from_ymd_opt(2026, 9, 24).expect("date"),
            NaiveDate::from_ymd_opt(2026, 9, 25).expect("date"),
        ],
        calendar: calendar.to_owned(),
        version: "holidays 0.109 + override #'7\"".to_owned(),
    }
}

/// Every way a row is written keeps the calendar its slot was planned on (claimed, recorded
/// skipped, enqueued), and a row without one reads back without one.
pub async fn runs_keep_the_calendar_they_were_planned_on(backend: &dyn Backend) {
    let at = |s: &str| crate::request("stamped", s, Duration::from_secs(30));
    let claimed = CalendarStamp {
        nominal_dates: vec![NaiveDate::from_ymd_opt(2026, 9, 25).expect("date")],
        ..stamp("KR")
    };
    let with = |mut r: ClaimRequest, s: &CalendarStamp| {
        r.calendar = Some(s.clone());
        r
    };
    let one = with(at("2026-09-23T17:00:00Z"), &claimed);
    backend
        .claim("w", std::slice::from_ref(&one))
        .await
        .expect("claim");
    let skipped = with(at("2026-09-24T17:00:00Z"), &stamp("ACME; KR"));
    (backend.record_skipped(std::slice::from_ref(&skipped), "calendar: 추석"))
        .await
        .expect("record");
    let queued = with(at("2026-09-25T17:00:00Z"), &stamp("KR"));
    let audit = AuditEntry {
        action: "trigger".into(),
        actor: "kim".into(),
        reason: "test".into(),
    };
    let run = Enqueue {
        request: queued.clone(),
        not_before: queued.key.scheduled_at,
    };
    backend.enqueue(&[run], &audit).await.expect("enqueue");
    let plain = at("2026-09-26T17:00:00Z");
    backend
        .claim("w", std::slice::from_ref(&plain))
        .await
        .expect("claim");
    for (request, expected) in [
        (&one, Some(claimed)),
        (&skipped, Some(stamp("ACME; KR"))),
        (&queued, Some(stamp("KR"))),
        (&plain, None),
    ] {
        let run = super::run_of(backend, &request.key).await;
        assert_eq!(run.calendar, expected, "{:?}", request.key);
    }
}
