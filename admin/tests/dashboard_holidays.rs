//! Operators' holiday overrides changed through the dashboard's forms, on the memory backend: the
//! holidays page offers the known calendars (the builtin ones and a registered job's); a holiday is
//! added, and one removed, after a confirmation page, stored with the operator and the reason and
//! audited; a form without the CSRF token, from another site or without an operator is refused; a
//! bad field is answered 400 naming it; a read-only dashboard shows no form and refuses the posts.
//! Nothing refused stores anything.
#![cfg(feature = "dashboard")]

use axum::Router;
use axum::http::StatusCode;
use chrono::NaiveDate;
use slotguard::store::{JobDefinition, OverrideKind};
use slotguard::{CalendarDefinition, Schedule};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use slotguard_admin::{Admin, ChangeRequest};

#[path = "support/form.rs"]
mod form;
use form::{Answer, fetch, post, post_from};

#[path = "support/page.rs"]
mod page;
use page::{get, part};

#[path = "support/registered.rs"]
mod registered;

const TOKEN: &str = "test-token-0123456789";
const CSRF: (&str, &str) = ("csrf", TOKEN);
/// The calendar of a registered job, built in code, with a name that is markup.
const ACME: &str = "acme <b>closing</b>";

/// The add form's fields: Korea's temporary holiday of 2026-10-02.
const ADD: [(&str, &str); 5] = [
    CSRF,
    ("reason", "decree of 2026-09-15"),
    ("calendar", "KR"),
    ("date", "2026-10-02"),
    ("name", "임시공휴일"),
];

/// A job on ACME's calendar, and the store it is registered in.
async fn backend() -> slotguard::MemoryBackend {
    let definition = JobDefinition {
        name: "payday".to_owned(),
        cron: "0 2 25 * *".to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse("0 2 25 * *", "Asia/Seoul")
            .unwrap()
            .fingerprint(),
        calendar: Some(CalendarDefinition {
            name: ACME.to_owned(),
            version: String::new(),
            digest: 7,
            adjust: "preceding".to_owned(),
            shift: 0,
        }),
    };
    registered::registered_a_year_ago(&[definition]).await
}

/// The dashboard at `/ui`, for `operator` (if any).
fn app(backend: &slotguard::MemoryBackend, operator: Option<&str>, read_only: bool) -> Router {
    let dashboard = Dashboard::new(Admin::new(backend.clone()))
        .read_only(read_only)
        .csrf_token(TOKEN);
    let router = Router::new().nest("/ui", dashboard.router());
    match operator {
        Some(name) => router.layer(axum::Extension(Actor(name.to_owned()))),
        None => router,
    }
}

/// The store, and the dashboard for alice.
async fn setup(read_only: bool) -> (Admin, Router) {
    let backend = backend().await;
    let app = app(&backend, Some("alice"), read_only);
    (Admin::new(backend), app)
}

fn date(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
}

/// Posts `fields` to `uri` as the form does (the confirmation page answers, storing nothing),
/// then as the confirmation page does; answers the second.
async fn confirmed(admin: &Admin, app: &Router, uri: &str, fields: &[(&str, &str)]) -> Answer {
    let before = admin.calendar_overrides(None).await.unwrap();
    let first = post(app, uri, fields).await;
    assert_eq!(first.status, StatusCode::OK, "{uri}: {}", first.body);
    assert!(first.body.contains(r#"name="confirm" value="yes""#));
    let after = admin.calendar_overrides(None).await.unwrap();
    assert_eq!(before, after, "the confirmation page stores nothing");
    let mut fields = fields.to_vec();
    fields.push(("confirm", "yes"));
    post(app, uri, &fields).await
}

/// Nothing was written: no override, no audit record.
async fn nothing_stored(admin: &Admin) {
    let overrides = admin.calendar_overrides(None).await.unwrap();
    assert!(overrides.is_empty(), "{overrides:?}");
    let audit = admin.audit(None, 10).await.unwrap();
    assert!(audit.is_empty(), "{audit:?}");
}

#[tokio::test]
async fn the_page_has_both_forms_over_the_known_calendars() {
    let (_, app) = setup(false).await;
    let page = get(&app, "/ui/holidays").await;
    for (id, action) in [("add-holiday", "add"), ("remove-holiday", "remove")] {
        let form = part(&page, &format!(r#"id="form-{id}""#), "</form>");
        assert!(form.contains(&format!(r#"action="/ui/holidays/{action}""#)));
        assert!(form.contains(&format!(r#"name="csrf" value="{TOKEN}""#)));
        assert!(form.contains(r#"name="reason" required"#), "{form}");
        assert!(form.contains(r#"name="date" required"#), "{form}");
        let calendars = part(form, r#"<select name="calendar""#, "</select>");
        for calendar in ["KR", "US", "acme &lt;b&gt;closing&lt;/b&gt;"] {
            let option = format!(r#"value="{calendar}">{calendar}</option>"#);
            assert!(calendars.contains(&option), "{calendar}: {calendars}");
        }
        assert!(!calendars.contains("<b>"), "{calendars}");
    }
    let add = part(&page, r#"id="form-add-holiday""#, "</form>");
    assert!(add.contains(r#"name="name" required"#), "{add}");
    let remove = part(&page, r#"id="form-remove-holiday""#, "</form>");
    assert!(!remove.contains(r#"name="name""#), "{remove}");
}

#[tokio::test]
async fn a_holiday_is_added_through_the_form_after_a_confirmation() {
    let (admin, app) = setup(false).await;
    let preview = post(&app, "/ui/holidays/add", &ADD).await;
    assert!(
        preview
            .body
            .contains("Make 2026-10-02 a holiday named 임시공휴일 on calendar KR"),
        "{}",
        preview.body
    );
    let done = confirmed(&admin, &app, "/ui/holidays/add", &ADD).await;
    assert_eq!(done.location(), "/ui/holidays?done=add-holiday");
    let stored = admin.calendar_overrides(Some("KR")).await.unwrap();
    let [added] = stored.as_slice() else {
        panic!("one override: {stored:?}");
    };
    assert_eq!(added.spec.date, date("2026-10-02"));
    assert_eq!(added.spec.kind, OverrideKind::Add);
    assert_eq!(added.spec.name, "임시공휴일");
    assert_eq!(added.changed_by, "alice");
    assert_eq!(added.reason, "decree of 2026-09-15");
    let audit = admin.audit(None, 10).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].entry.action, "calendar_add");
    assert_eq!(audit[0].entry.actor, "alice");

    let page = get(&app, done.location()).await;
    assert!(page.contains("Holiday added"), "{page}");
    let table = part(&page, "<table", "</table>");
    for text in [
        "2026-10-02",
        "added: 임시공휴일",
        "alice",
        "decree of 2026-09-15",
    ] {
        assert!(table.contains(text), "{text}: {table}");
    }
}

#[tokio::test]
async fn a_holiday_is_removed_through_the_form_after_a_confirmation() {
    let (admin, app) = setup(false).await;
    let by = ChangeRequest::new("bob", "company closing day");
    let day = date("2026-12-31");
    admin.add_holiday(ACME, day, "closing", &by).await.unwrap();
    let fields = [
        CSRF,
        ("reason", "we work that day after all"),
        ("calendar", ACME),
        ("date", "2026-12-31"),
    ];
    let done = confirmed(&admin, &app, "/ui/holidays/remove", &fields).await;
    assert_eq!(done.location(), "/ui/holidays?done=remove-holiday");
    let stored = admin.calendar_overrides(Some(ACME)).await.unwrap();
    let [removed] = stored.as_slice() else {
        panic!("one override in force: {stored:?}");
    };
    assert_eq!(
        (removed.spec.date, removed.spec.kind),
        (day, OverrideKind::Remove)
    );
    assert_eq!(removed.changed_by, "alice");
    assert_eq!(removed.reason, "we work that day after all");
    let audit = admin.audit(None, 10).await.unwrap();
    assert_eq!(audit[0].entry.action, "calendar_remove");
    assert_eq!(audit[0].entry.actor, "alice");

    let page = get(&app, done.location()).await;
    assert!(page.contains("Holiday removed"), "{page}");
    let table = part(&page, "<table", "</table>");
    assert!(table.contains("acme &lt;b&gt;closing&lt;/b&gt;"), "{table}");
    assert!(
        table.contains("removed") && table.contains("alice"),
        "{table}"
    );
    assert!(!table.contains("<b>"), "{table}");
}

#[tokio::test]
async fn a_form_without_the_token_from_another_site_or_without_an_operator_is_refused() {
    let backend = backend().await;
    let admin = Admin::new(backend.clone());
    let alice = app(&backend, Some("alice"), false);
    let nobody = app(&backend, None, false);
    let fields = ADD[1..].to_vec();
    let mut guessed = fields.clone();
    guessed.push(("csrf", "guess-0123456789abcdef"));
    for confirm in [false, true] {
        let with = |fields: &[(&'static str, &'static str)]| {
            let mut fields = fields.to_vec();
            if confirm {
                fields.push(("confirm", "yes"));
            }
            fields
        };
        for uri in ["/ui/holidays/add", "/ui/holidays/remove"] {
            let refused = [
                post(&alice, uri, &with(&fields)).await,
                post(&alice, uri, &with(&guessed)).await,
                post_from(&alice, uri, &with(&ADD), "cross-site").await,
                post(&nobody, uri, &with(&ADD)).await,
            ];
            for answer in refused {
                assert_eq!(
                    answer.status,
                    StatusCode::FORBIDDEN,
                    "{uri}: {}",
                    answer.body
                );
            }
        }
    }
    let missing = post(&alice, "/ui/holidays/add", &fields).await;
    assert!(
        missing.body.contains("CSRF token is missing"),
        "{}",
        missing.body
    );
    nothing_stored(&admin).await;
}

#[tokio::test]
async fn a_bad_field_is_answered_400_naming_it_and_nothing_is_stored() {
    let (admin, app) = setup(false).await;
    let long_name = "x".repeat(201);
    let long_reason = "r".repeat(1025);
    for (action, field, value, problem) in [
        ("add", "calendar", "XX", "unknown calendar `XX`"),
        ("add", "calendar", "", "1 to 64 characters"),
        ("add", "date", "2026-13-01", "YYYY-MM-DD"),
        ("add", "date", "02/10/2026", "YYYY-MM-DD"),
        ("add", "date", "", "YYYY-MM-DD"),
        ("add", "date", "1969-12-31", "year 1969 is outside"),
        ("add", "date", "2201-01-01", "year 2201 is outside"),
        ("add", "name", "", "1 to 200 characters"),
        ("add", "name", &long_name, "1 to 200 characters"),
        ("add", "name", "a\u{7}b", "without control characters"),
        ("add", "reason", &long_reason, "is 1025 bytes"),
        ("add", "reason", " ", "must not be empty"),
        ("remove", "calendar", "Mars", "unknown calendar `Mars`"),
        ("remove", "date", "tomorrow", "YYYY-MM-DD"),
        ("remove", "reason", "", "must not be empty"),
    ] {
        let mut bad = ADD.to_vec();
        bad.retain(|(name, _)| *name != field);
        bad.push((field, value));
        let uri = format!("/ui/holidays/{action}");
        let named = format!("invalid {field}: ");
        // The form, and its confirmation posted as if the first step had passed.
        for step in [&bad, &[bad.as_slice(), &[("confirm", "yes")]].concat()] {
            let answer = post(&app, &uri, step).await;
            let said = &answer.body;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}: {said}");
            assert!(said.contains(&named), "{uri}: {named}: {said}");
            assert!(said.contains(problem), "{uri}: {problem}: {said}");
        }
    }
    let unknown = post(&app, "/ui/holidays/rename", &ADD).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.body);
    assert!(unknown.body.contains("invalid action"), "{}", unknown.body);
    nothing_stored(&admin).await;
}

#[tokio::test]
async fn a_read_only_dashboard_shows_no_form_and_refuses_the_changes() {
    let (admin, app) = setup(true).await;
    let page = get(&app, "/ui/holidays").await;
    assert!(page.contains("Holiday overrides"), "{page}");
    assert!(!page.contains(r#"method="post""#), "{page}");
    assert!(!page.contains("form-add-holiday"), "{page}");
    let confirmed = [ADD.as_slice(), &[("confirm", "yes")]].concat();
    for uri in ["/ui/holidays/add", "/ui/holidays/remove"] {
        for fields in [&ADD[..], &confirmed] {
            let refused = post(&app, uri, fields).await;
            assert_eq!(
                refused.status,
                StatusCode::FORBIDDEN,
                "{uri}: {}",
                refused.body
            );
            assert!(refused.body.contains("read-only"), "{}", refused.body);
        }
    }
    nothing_stored(&admin).await;
    let not_a_page = fetch(&app, "/ui/holidays/add").await;
    assert_ne!(not_a_page.status, StatusCode::OK);
}
