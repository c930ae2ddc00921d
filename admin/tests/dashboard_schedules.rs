//! Stored schedules in the dashboard, through its router on the memory backend: a job's page lists
//! them, each linking to its page (fields, next slots, history); the add form stores one, and a bad
//! field is answered 400 naming it, storing nothing; a change read at a stale version is answered
//! 409 and changes nothing; pause, resume and remove go through the forms with the version read;
//! a slot is skipped and unskipped through the forms.
#![cfg(feature = "dashboard")]

use axum::Router;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use slotguard::Schedule;
use slotguard::store::{JobDefinition, RunStatus};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use slotguard_admin::{Admin, AdminError, ChangeRequest, ScheduleFields};

#[path = "support/form.rs"]
mod form;
use form::{Answer, encode, fetch, post};

#[path = "support/page.rs"]
mod page;
use page::{get, part};

#[path = "support/registered.rs"]
mod registered;

const JOB: &str = "daily-settlement";
const ID: &str = "acme-report";
const TOKEN: &str = "test-token-0123456789";
const CSRF: (&str, &str) = ("csrf", TOKEN);

/// The settlement job (02:00 in Seoul, `slot` level), and the dashboard at `/ui` for alice.
async fn setup(read_only: bool) -> (Admin, Router) {
    let definition = JobDefinition {
        name: JOB.to_owned(),
        cron: "0 2 * * *".to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse("0 2 * * *", "Asia/Seoul")
            .unwrap()
            .fingerprint(),
        calendar: None,
    };
    let backend = registered::registered_a_year_ago(&[definition]).await;
    let dashboard = Dashboard::new(Admin::new(backend.clone()))
        .read_only(read_only)
        .csrf_token(TOKEN);
    let app = Router::new()
        .nest("/ui", dashboard.router())
        .layer(axum::Extension(Actor("alice".to_owned())));
    (Admin::new(backend), app)
}

/// 09:00 in New York for tenant acme, three runs.
fn acme() -> ScheduleFields {
    ScheduleFields {
        job: Some(JOB.to_owned()),
        cron: Some("0 9 * * *".to_owned()),
        tz: Some("America/New_York".to_owned()),
        partition: Some("acme".to_owned()),
        remaining_runs: Some(Some(3)),
        ..ScheduleFields::default()
    }
}

fn bob(reason: &str) -> ChangeRequest {
    ChangeRequest::new("bob", reason)
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Posts `fields` to `uri` as the form does (the confirmation page answers), then as the
/// confirmation page does; answers the second.
async fn confirmed(app: &Router, uri: &str, fields: &[(&str, &str)]) -> Answer {
    let first = post(app, uri, fields).await;
    assert_eq!(first.status, StatusCode::OK, "{uri}: {}", first.body);
    assert!(first.body.contains(r#"name="confirm" value="yes""#));
    let mut fields = fields.to_vec();
    fields.push(("confirm", "yes"));
    post(app, uri, &fields).await
}

/// The values of the skip form's list of upcoming slots.
fn skippable(page: &str) -> Vec<String> {
    part(page, r#"name="next""#, "</select>")
        .split(r#"<option value=""#)
        .skip(1)
        .map(|o| o[..o.find('"').unwrap()].to_owned())
        .collect()
}

#[tokio::test]
async fn the_job_page_lists_its_stored_schedules_each_linking_to_its_page() {
    let (admin, app) = setup(false).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding acme"))
        .await
        .unwrap();
    let page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    let list = part(&page, r#"id="schedules""#, "</table>");
    for text in [
        r#"href="/ui/schedules/acme-report">acme-report</a>"#,
        "<code>acme</code>",
        "daily at 09:00",
        "<code>0 9 * * *</code>",
        "America/New_York · DST vixie",
        r#"<span class="badge s-active">active</span>"#,
        r#"<td class="n">3</td>"#,
        "bob",
    ] {
        assert!(list.contains(text), "{text}: {list}");
    }
    // Its next slots, in New York's time and in UTC.
    assert!(
        list.contains(" EST · ") || list.contains(" EDT · "),
        "{list}"
    );

    let page = get(&app, "/ui/schedules/acme-report").await;
    let facts = part(&page, r#"id="schedule""#, "</dl>");
    assert!(facts.contains(r#"href="/ui/jobs/daily-settlement""#));
    assert!(facts.contains("by bob at "), "{facts}");
    assert!(facts.contains("onboarding acme"), "{facts}");
    let next = part(&page, r#"id="next""#, "</ul>");
    assert_eq!(next.matches("<li>").count(), 3, "its three runs: {next}");
    for form in ["form-skip", "form-pause", "form-change", "form-remove"] {
        assert!(page.contains(&format!(r#"id="{form}""#)), "{form}: {page}");
    }
    assert!(page.contains(r#"name="version" value="1""#), "{page}");

    let later = ScheduleFields {
        cron: Some("30 9 * * *".to_owned()),
        ..ScheduleFields::default()
    };
    admin
        .change_schedule(ID, 1, later, &bob("later"))
        .await
        .unwrap();
    let page = get(&app, "/ui/schedules/acme-report").await;
    let history = part(&page, r#"id="history""#, "</table>");
    assert_eq!(
        history.matches("<tr>").count(),
        3,
        "a head and two versions"
    );
    assert!(history.contains("<code>30 9 * * *</code>"), "{history}");
    assert!(history.contains("onboarding acme"), "{history}");
}

/// The add form's fields for acme's schedule.
const ADD: [(&str, &str); 8] = [
    CSRF,
    ("reason", "onboarding acme"),
    ("id", ID),
    ("cron", "0 9 * * *"),
    ("tz", "America/New_York"),
    ("partition", "acme"),
    ("remaining_runs", "3"),
    ("pause_on_failure", "yes"),
];

#[tokio::test]
async fn a_schedule_is_added_through_the_form_after_a_preview_of_its_slots() {
    let (admin, app) = setup(false).await;
    let page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    assert!(page.contains(r#"id="form-add-schedule""#), "{page}");
    let uri = format!("/ui/jobs/{JOB}/add-schedule");
    let preview = post(&app, &uri, &ADD).await;
    let said = &preview.body;
    assert!(said.contains("Its next 3 slot(s)"), "{said}");
    assert!(
        said.contains(" EST · ") || said.contains(" EDT · "),
        "{said}"
    );
    let none = admin.schedules(Some(JOB), None, 10).await.unwrap();
    assert!(none.is_empty(), "a preview stores nothing");

    let done = confirmed(&app, &uri, &ADD).await;
    assert_eq!(
        done.location(),
        "/ui/schedules/acme-report?done=add-schedule"
    );
    let stored = admin.schedule(ID).await.unwrap();
    assert_eq!(stored.version.version, 1);
    assert_eq!(stored.version.changed_by, "alice");
    assert_eq!(stored.version.reason, "onboarding acme");
    let spec = stored.version.spec.unwrap();
    assert_eq!(
        (spec.cron.as_str(), spec.zone.as_str()),
        ("0 9 * * *", "America/New_York")
    );
    assert_eq!(spec.partition, "acme");
    assert_eq!(spec.remaining_runs, Some(3));
    assert!(spec.pause_on_failure && !spec.paused);
    let page = get(&app, done.location()).await;
    assert!(page.contains("Added: its slots start"), "{page}");
    // The id is taken now.
    let taken = post(&app, &uri, &ADD).await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.body);
    assert!(taken.body.contains("exists already"), "{}", taken.body);
}

#[tokio::test]
async fn a_bad_field_of_the_add_form_is_answered_400_naming_it_and_nothing_is_stored() {
    let (admin, app) = setup(false).await;
    let uri = format!("/ui/jobs/{JOB}/add-schedule");
    for (field, value, named) in [
        ("cron", "61 * * * *", "invalid cron"),
        ("cron", "", "invalid cron: is required"),
        ("tz", "Mars/Olympus", "invalid tz"),
        ("remaining_runs", "many", "invalid remainingRuns"),
        ("remaining_runs", "100001", "invalid remainingRuns"),
        ("partition", "a\u{7}b", "invalid partition"),
        ("id", "a:b", "invalid id"),
        ("reason", " ", "invalid reason"),
    ] {
        let mut bad = ADD.to_vec();
        bad.retain(|(name, _)| *name != field);
        bad.push((field, value));
        // The form, and its confirmation posted as if the first step had passed.
        for step in [&bad, &[bad.as_slice(), &[("confirm", "yes")]].concat()] {
            let answer = post(&app, &uri, step).await;
            let said = &answer.body;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{field}: {said}");
            assert!(said.contains(named), "{field}: {said}");
        }
    }
    let none = admin.schedules(Some(JOB), None, 10).await.unwrap();
    assert!(none.is_empty(), "nothing was stored: {none:?}");
}

#[tokio::test]
async fn a_change_read_at_a_stale_version_is_refused_and_changes_nothing() {
    let (admin, app) = setup(false).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding"))
        .await
        .unwrap();
    let page = get(&app, "/ui/schedules/acme-report").await;
    assert!(page.contains(r#"name="version" value="1""#), "{page}");
    // Bob changes it while alice's form is open at version 1.
    let earlier = ScheduleFields {
        cron: Some("15 9 * * *".to_owned()),
        ..ScheduleFields::default()
    };
    admin
        .change_schedule(ID, 1, earlier, &bob("earlier"))
        .await
        .unwrap();
    let uri = "/ui/schedules/acme-report/change";
    let mut fields = vec![
        CSRF,
        ("reason", "later"),
        ("version", "1"),
        ("cron", "30 9 * * *"),
        ("tz", "America/New_York"),
    ];
    for step in [
        fields.clone(),
        [fields.as_slice(), &[("confirm", "yes")]].concat(),
    ] {
        let stale = post(&app, uri, &step).await;
        assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
        assert!(
            stale.body.contains("it changed since you read it"),
            "{}",
            stale.body
        );
        assert!(stale.body.contains("version 2, not 1"), "{}", stale.body);
        assert!(stale.body.contains(r#"href="/ui/schedules/acme-report""#));
    }
    let now = admin.schedule(ID).await.unwrap().version;
    assert_eq!((now.version, now.changed_by.as_str()), (2, "bob"));
    assert_eq!(now.spec.unwrap().cron, "15 9 * * *");
    let audit = admin.audit(Some(JOB), 10).await.unwrap();
    assert!(audit.iter().all(|a| a.entry.actor == "bob"), "{audit:?}");

    // Read again, at version 2: the change is made.
    fields[2] = ("version", "2");
    let done = confirmed(&app, uri, &fields).await;
    assert_eq!(done.location(), "/ui/schedules/acme-report?done=change");
    let now = admin.schedule(ID).await.unwrap().version;
    assert_eq!((now.version, now.changed_by.as_str()), (3, "alice"));
    assert_eq!(now.spec.unwrap().cron, "30 9 * * *");
}

#[tokio::test]
async fn pause_and_resume_go_through_the_forms_with_the_version_read() {
    let (admin, app) = setup(false).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding"))
        .await
        .unwrap();
    let uri = |action: &str| format!("/ui/schedules/{ID}/{action}");
    let pause = [
        CSRF,
        ("reason", "freeze"),
        ("version", "1"),
        ("note", "month-end freeze"),
    ];
    let done = confirmed(&app, &uri("pause"), &pause).await;
    assert_eq!(done.location(), "/ui/schedules/acme-report?done=pause");
    let spec = admin.schedule(ID).await.unwrap().version.spec.unwrap();
    assert!(spec.paused);
    assert_eq!(spec.note.as_deref(), Some("month-end freeze"));
    let page = get(&app, done.location()).await;
    assert!(page.contains("Paused: no slots"), "{page}");
    assert!(part(&page, r#"id="schedule""#, "</dl>").contains("month-end freeze"));
    assert!(
        part(&page, r#"id="next""#, "</div>").contains("None"),
        "{page}"
    );
    assert!(page.contains(r#"id="form-resume""#), "{page}");

    let resume = [CSRF, ("reason", "freeze over"), ("version", "2")];
    confirmed(&app, &uri("resume"), &resume).await.location();
    let stored = admin.schedule(ID).await.unwrap();
    let spec = stored.version.spec.unwrap();
    assert!(!spec.paused && spec.note.is_none());
    assert_eq!(stored.next.len(), 3, "its three remaining runs");
}

#[tokio::test]
async fn a_removed_schedule_leaves_the_job_page_and_keeps_its_history() {
    let (admin, app) = setup(false).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding"))
        .await
        .unwrap();
    let uri = format!("/ui/schedules/{ID}/remove");
    let remove = [CSRF, ("reason", "acme left"), ("version", "1")];
    let done = confirmed(&app, &uri, &remove).await;
    assert_eq!(
        done.location(),
        "/ui/jobs/daily-settlement?done=remove-schedule"
    );
    let gone = admin.schedule(ID).await;
    assert!(
        matches!(gone, Err(AdminError::UnknownSchedule { .. })),
        "{gone:?}"
    );
    let page = get(&app, done.location()).await;
    assert!(page.contains("Schedule removed"), "{page}");
    assert!(page.contains("No stored schedule"), "{page}");
    // Its page still shows its history, and no form.
    let page = get(&app, "/ui/schedules/acme-report").await;
    assert!(page.contains("removed</span> at version 2"), "{page}");
    let history = part(&page, r#"id="history""#, "</table>");
    assert_eq!(history.matches("<tr>").count(), 3, "{history}");
    assert!(history.contains("acme left"), "{history}");
    assert!(!page.contains(r#"method="post""#), "{page}");
    let missing = fetch(&app, "/ui/schedules/no-such-schedule").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
}

#[tokio::test]
async fn a_slot_is_skipped_then_unskipped_through_the_forms() {
    let (admin, app) = setup(false).await;
    let page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    // The code schedule's next slots, soonest first and chosen.
    let code = skippable(&page)[0].clone();
    assert!(page.contains(&format!(r#"<option value="{code}" selected>"#)));
    let skip = format!("/ui/jobs/{JOB}/skip");
    let fields = [CSRF, ("reason", "bank holiday"), ("next", code.as_str())];
    let done = confirmed(&app, &skip, &fields).await;
    assert_eq!(done.location(), "/ui/jobs/daily-settlement?done=skip");
    let run = admin.run(JOB, at(&code), "").await.unwrap();
    assert_eq!(run.status, RunStatus::Skipped);
    let message = run.error_message.as_deref();
    assert_eq!(message, Some("skipped by an operator: bank holiday"));

    let page = get(&app, done.location()).await;
    let runs = part(&page, r#"id="runs""#, "</table>");
    assert!(runs.contains("skipped by an operator: bank holiday"));
    let run_page = format!("/ui/jobs/{JOB}/runs/{}", encode(&code));
    let link = format!(r#"href="{run_page}#form-unskip">Unskip…"#);
    assert!(runs.contains(&link), "{runs}");
    let page = get(&app, &run_page).await;
    assert!(page.contains(r#"id="form-unskip""#), "{page}");
    assert!(!page.contains(r#"id="form-retry""#), "{page}");
    let twice = [fields.as_slice(), &[("confirm", "yes")]].concat();
    let again = post(&app, &skip, &twice).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);

    let unskip = format!("/ui/jobs/{JOB}/unskip");
    let slot = [("slot", code.as_str()), ("partition", "")];
    let fields = [&[CSRF, ("reason", "not a holiday")], slot.as_slice()].concat();
    let done = confirmed(&app, &unskip, &fields).await;
    assert_eq!(done.location(), "/ui/jobs/daily-settlement?done=unskip");
    let gone = admin.run(JOB, at(&code), "").await;
    let gone = matches!(gone, Err(AdminError::UnknownRun { .. }));
    assert!(gone, "the slot has no row again");
    let page = get(&app, "/ui/jobs/daily-settlement?done=unskip").await;
    assert!(page.contains("Unskipped"), "{page}");
}

#[tokio::test]
async fn a_stored_schedules_slot_is_skipped_in_its_partition() {
    let (admin, app) = setup(false).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding"))
        .await
        .unwrap();
    // The job page offers acme's slots beside the code's; the schedule's page, its own.
    let job_page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    let listed = skippable(&job_page);
    assert!(listed.iter().any(|v| !v.contains(' ')), "{listed:?}");
    let page = get(&app, "/ui/schedules/acme-report").await;
    let own = skippable(&page);
    assert_eq!(own.len(), 3, "{own:?}");
    assert!(
        own.iter()
            .all(|v| v.ends_with(" acme") && listed.contains(v))
    );
    assert!(page.contains("partition acme · schedule acme-report"));

    let fields = [CSRF, ("reason", "acme holiday"), ("next", own[0].as_str())];
    let done = confirmed(&app, &format!("/ui/jobs/{JOB}/skip"), &fields).await;
    done.location();
    let (slot, _) = own[0].split_once(' ').unwrap();
    let run = admin.run(JOB, at(slot), "acme").await.unwrap();
    assert_eq!(run.status, RunStatus::Skipped);
    assert!(
        admin.run(JOB, at(slot), "").await.is_err(),
        "not the job's own"
    );
    let page = get(&app, "/ui/schedules/acme-report").await;
    let next = part(&page, r#"id="next""#, "</ul>");
    assert!(
        next.contains("skipped by an operator: acme holiday"),
        "{next}"
    );
    assert!(next.contains("#form-unskip\">Unskip…"), "{next}");
}

#[tokio::test]
async fn read_only_shows_no_schedule_form_and_refuses_their_changes() {
    let (admin, app) = setup(true).await;
    admin
        .add_schedule(ID, acme(), &bob("onboarding"))
        .await
        .unwrap();
    for uri in [
        format!("/ui/jobs/{JOB}"),
        "/ui/schedules/acme-report".to_owned(),
    ] {
        let page = get(&app, &uri).await;
        assert!(!page.contains(r#"method="post""#), "{uri}: {page}");
    }
    let fields = [CSRF, ("reason", "x"), ("version", "1"), ("confirm", "yes")];
    for uri in [
        "/ui/schedules/acme-report/pause".to_owned(),
        format!("/ui/jobs/{JOB}/add-schedule"),
    ] {
        let refused = post(&app, &uri, &fields).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{uri}: {}",
            refused.body
        );
    }
    assert_eq!(admin.schedule(ID).await.unwrap().version.version, 1);
}

#[tokio::test]
async fn hostile_ids_partitions_and_notes_are_rendered_as_text() {
    let (admin, app) = setup(false).await;
    let id = "<script>alert('x')</script>";
    let fields = ScheduleFields {
        partition: Some("<img src=x onerror=alert(1)>\"'&".to_owned()),
        paused: Some(true),
        note: Some(Some("<b>freeze</b>".to_owned())),
        ..acme()
    };
    admin
        .add_schedule(id, fields, &bob("<i>why</i>"))
        .await
        .unwrap();
    let link = format!("/ui/schedules/{}", encode(id));
    let job = get(&app, &format!("/ui/jobs/{JOB}")).await;
    assert!(job.contains(&format!(r#"href="{link}""#)), "{job}");
    let page = get(&app, &link).await;
    for page in [&job, &page] {
        assert!(page.contains("&lt;script&gt;alert('x')&lt;/script&gt;"));
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;&quot;'&amp;"));
        assert!(page.contains("&lt;b&gt;freeze&lt;/b&gt;"), "{page}");
        assert_eq!(page.matches("<script").count(), 1, "{page}");
        assert!(!page.contains("<img") && !page.contains("<b>"), "{page}");
    }
    assert!(page.contains("&lt;i&gt;why&lt;/i&gt;"), "{page}");
}
