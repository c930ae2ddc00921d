//! `/calendar-overrides`: a holiday added and removed over HTTP, listed as the latest of each date,
//! audited; hostile input (an unknown calendar, a bad date, an absurd year, a very long reason, an
//! unknown kind, an unnamed holiday) refused with 400 naming the field, and nothing stored.

use crate::support::*;

fn holiday(calendar: &str, date: &str, kind: &str, reason: &str) -> Value {
    json!({"calendar": calendar, "date": date, "kind": kind, "name": "임시공휴일",
           "reason": reason, "actor": "kim"})
}

#[tokio::test]
async fn a_holiday_is_added_removed_and_listed_with_who_and_why() {
    let (backend, app) = setup().await;
    let added = post(
        &app,
        "/internal/calendar-overrides",
        holiday("KR", "2026-10-02", "add", "decree"),
    )
    .await;
    let body = &added.expect(StatusCode::CREATED).body;
    assert_eq!(
        (
            &body["calendar"],
            &body["date"],
            &body["kind"],
            &body["changedBy"]
        ),
        (
            &json!("KR"),
            &json!("2026-10-02"),
            &json!("add"),
            &json!("kim")
        )
    );
    let removed = post(
        &app,
        "/internal/calendar-overrides",
        json!({"calendar": "KR", "date": "2026-10-02", "kind": "remove", "reason": "withdrawn"}),
    )
    .await;
    removed.expect(StatusCode::CREATED);
    let listed = get(&app, "/internal/calendar-overrides?calendar=KR").await;
    let overrides = listed.expect(StatusCode::OK).body["overrides"].clone();
    assert_eq!(overrides.as_array().map(Vec::len), Some(1), "{overrides}");
    assert_eq!(
        (&overrides[0]["kind"], &overrides[0]["changedBy"]),
        (&json!("remove"), &json!("http"))
    );
    let none = get(&app, "/internal/calendar-overrides?calendar=US").await;
    assert_eq!(none.expect(StatusCode::OK).body["overrides"], json!([]));
    use slotguard::store::AdminStoreExt as _;
    let trail = backend.audit_log(Some(""), 10).await.unwrap();
    let actions: Vec<_> = trail.iter().map(|r| r.entry.action.as_str()).collect();
    assert_eq!(actions, ["calendar_remove", "calendar_add"]);
}

#[tokio::test]
async fn hostile_overrides_are_refused_naming_the_field() {
    let (_backend, app) = setup().await;
    let long = "x".repeat(10_000);
    let cases = [
        (holiday("XX", "2026-10-02", "add", "r"), "calendar"),
        (holiday("KR", "2026-02-30", "add", "r"), "date"),
        (holiday("KR", "not a date", "add", "r"), "date"),
        (holiday("KR", "9999-01-01", "add", "r"), "date"),
        (holiday("KR", "2026-10-02", "add", &long), "reason"),
        (holiday("KR", "2026-10-02", "drop", "r"), "kind"),
        (
            json!({"calendar": "KR", "date": "2026-10-02", "kind": "add", "reason": "r"}),
            "name",
        ),
        (
            holiday(&"K".repeat(5_000), "2026-10-02", "add", "r"),
            "calendar",
        ),
    ];
    for (body, field) in cases {
        let answer = post(&app, "/internal/calendar-overrides", body.clone()).await;
        let answer = answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(
            (&answer.body["error"], &answer.body["field"]),
            (&json!("invalid"), &json!(field)),
            "{body}: {}",
            answer.raw
        );
    }
    let listed = get(&app, "/internal/calendar-overrides").await;
    assert_eq!(listed.expect(StatusCode::OK).body["overrides"], json!([]));
}
