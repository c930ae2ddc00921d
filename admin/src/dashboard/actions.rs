//! Changes: a form posts here once to see the confirmation page (a backfill's dry-run preview), and
//! once more with `confirm=yes` to make the change, audited under the operator's name.

use axum::extract::{Extension, Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Ui;
use super::input::{instant, present};
use super::page::{Base, admin_error, csrf_field, error_page, frame, html_response, utc};
use super::security::operator;
use crate::http::Actor;
use crate::{AdminError, BackfillOptions, BackfillReport, ChangeRequest};
use slotguard::store::{RunFilter, RunRecord, RunStatus};

/// Every field any change form sends.
#[derive(Deserialize, Debug, Default)]
pub(super) struct ChangeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
    slot: Option<String>,
    partition: Option<String>,
    from: Option<String>,
    to: Option<String>,
    per_second: Option<String>,
    before_first_seen: Option<String>,
    confirm: Option<String>,
}

/// The `from` and `to` fields.
fn range(
    form: &ChangeForm,
) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), AdminError> {
    Ok((
        instant("from", form.from.as_deref().unwrap_or(""))?,
        instant("to", form.to.as_deref().unwrap_or(""))?,
    ))
}

/// What the operator asked for, read from the form.
enum Change {
    Retry(chrono::DateTime<chrono::Utc>, String),
    Cancel(chrono::DateTime<chrono::Utc>, String),
    Trigger,
    Pause,
    Resume,
    /// From, to, runs per second, and whether it may reach before the job was first registered.
    Backfill(Instant, Instant, f64, bool),
    RetryFailed(Instant, Instant),
}

type Instant = chrono::DateTime<chrono::Utc>;

impl Change {
    fn read(action: &str, form: &ChangeForm) -> Result<Change, AdminError> {
        let slot = || -> Result<_, AdminError> {
            let text = present(form.slot.as_deref()).unwrap_or("");
            Ok((
                instant("scheduleSlot", text)?,
                form.partition.clone().unwrap_or_default(),
            ))
        };
        Ok(match action {
            "retry" => slot().map(|(s, p)| Change::Retry(s, p))?,
            "cancel" => slot().map(|(s, p)| Change::Cancel(s, p))?,
            "trigger" => Change::Trigger,
            "pause" => Change::Pause,
            "resume" => Change::Resume,
            "retry-failed" => {
                let (from, to) = range(form)?;
                Change::RetryFailed(from, to)
            }
            "backfill" => {
                let (from, to) = range(form)?;
                let rate = present(form.per_second.as_deref()).unwrap_or("1");
                let rate = rate.parse::<f64>().map_err(|_| AdminError::Invalid {
                    field: "perSecond",
                    problem: "is not a number".into(),
                })?;
                let early = present(form.before_first_seen.as_deref()).is_some();
                Change::Backfill(from, to, rate, early)
            }
            _ => {
                return Err(AdminError::Invalid {
                    field: "action",
                    problem: "no such change".into(),
                });
            }
        })
    }

    /// What the confirmation page says will happen.
    fn describe(&self, job: &str) -> String {
        match self {
            Change::Retry(slot, _) => format!("Retry the run of {job} at {}", utc(slot)),
            Change::Cancel(slot, _) => format!("Cancel the run of {job} at {}", utc(slot)),
            Change::Trigger => format!("Run {job} now (a manual run)"),
            Change::Pause => format!("Pause {job}: no replica claims its slots until resumed"),
            Change::Resume => format!("Resume {job}"),
            Change::Backfill(from, to, rate, early) => format!(
                "Backfill {job} from {} to {} at {rate} runs per second{}",
                utc(from),
                utc(to),
                if *early {
                    ", reaching before the job was first registered"
                } else {
                    ""
                }
            ),
            Change::RetryFailed(from, to) => format!(
                "Retry every failed or dead run of {job} from {} to {}",
                utc(from),
                utc(to)
            ),
        }
    }
}

pub(super) async fn submit(
    State(ui): State<Ui>,
    base: Base,
    Path((job, action)): Path<(String, String)>,
    headers: HeaderMap,
    actor: Option<Extension<Actor>>,
    Form(form): Form<ChangeForm>,
) -> Response {
    let actor = actor.map(|Extension(a)| a);
    let by = match operator(&ui.settings, &headers, actor.as_ref(), &form.csrf) {
        Ok(name) => ChangeRequest::new(name, form.reason.trim()),
        Err(refusal) => return error_page(&base, refusal.status(), refusal.message()),
    };
    let change = match by.validate().and_then(|()| Change::read(&action, &form)) {
        Ok(change) => change,
        Err(e) => return admin_error(&base, &e),
    };
    if form.confirm.as_deref() != Some("yes") {
        return confirm(&ui, &base, &job, &action, &change, &form).await;
    }
    match apply(&ui, &job, &change, &by).await {
        Ok(()) => {
            let target = match &change {
                Change::Retry(slot, p) | Change::Cancel(slot, p) => base.run(&job, slot, p),
                _ => base.job(&job),
            };
            let sep = if target.contains('?') { '&' } else { '?' };
            let location = format!("{target}{sep}done={action}");
            (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
        }
        Err(e) => admin_error(&base, &e),
    }
}

async fn apply(ui: &Ui, job: &str, change: &Change, by: &ChangeRequest) -> Result<(), AdminError> {
    let admin = &ui.admin;
    match change {
        Change::Retry(slot, p) => admin.retry(job, *slot, p, by).await.map(drop),
        Change::Cancel(slot, p) => admin.cancel(job, *slot, p, by).await.map(drop),
        Change::Trigger => admin.trigger(job, by).await.map(drop),
        Change::Pause => admin.pause(job, by).await.map(drop),
        Change::Resume => admin.resume(job, by).await.map(drop),
        Change::Backfill(from, to, rate, early) => {
            let options = BackfillOptions {
                dry_run: false,
                per_second: *rate,
                before_first_seen: *early,
            };
            admin.backfill(job, *from, *to, options, by).await.map(drop)
        }
        Change::RetryFailed(from, to) => admin
            .retry_failed(job, (*from, *to), None, by)
            .await
            .map(drop),
    }
}

/// The confirmation page: what will happen (for a backfill, the dry run), and the button that does it.
async fn confirm(
    ui: &Ui,
    base: &Base,
    job: &str,
    action: &str,
    change: &Change,
    form: &ChangeForm,
) -> Response {
    let preview = match change {
        Change::Backfill(from, to, rate, early) => {
            let options = BackfillOptions {
                dry_run: true,
                per_second: *rate,
                before_first_seen: *early,
            };
            let by = ChangeRequest::new("preview", form.reason.trim());
            match ui.admin.backfill(job, *from, *to, options, &by).await {
                Ok(report) => Some(preview(&report, *early)),
                Err(e) => return admin_error(base, &e),
            }
        }
        Change::RetryFailed(from, to) => match failed_runs(ui, job, *from, *to).await {
            Ok(runs) => Some(failed_preview(&runs)),
            Err(e) => return admin_error(base, &e),
        },
        _ => None,
    };
    let body = html! {
        h1 { "Confirm: " (action) }
        p.confirm { (change.describe(job)) "." }
        p { "Reason: " q { (form.reason.trim()) } }
        @if let Some(preview) = preview { (preview) }
        form.change id="confirm" method="post" action=(format!("{}/{action}", base.job(job))) {
            (csrf_field(&ui.settings.csrf_token))
            @for (name, value) in hidden_fields(form) {
                input type="hidden" name=(name) value=(value);
            }
            input type="hidden" name="confirm" value="yes";
            button type="submit" { "Confirm " (action) }
            " "
            a href=(base.job(job)) { "Back, change nothing" }
        }
    };
    html_response(StatusCode::OK, frame(base, "Confirm", body))
}

fn hidden_fields(form: &ChangeForm) -> Vec<(&'static str, &str)> {
    let optional = [
        ("slot", &form.slot),
        ("partition", &form.partition),
        ("from", &form.from),
        ("to", &form.to),
        ("per_second", &form.per_second),
        ("before_first_seen", &form.before_first_seen),
    ];
    let mut out = vec![("reason", form.reason.as_str())];
    out.extend(
        optional
            .into_iter()
            .filter_map(|(name, value)| value.as_deref().map(|v| (name, v))),
    );
    out
}

fn preview(report: &BackfillReport, before_first_seen: bool) -> Markup {
    html! {
        div.preview id="preview" {
            p { strong { (report.slots.len()) " slot(s) would be created" }
                ", " (report.existing) " already have a row and are left alone." }
            p.before-first-seen {
                @if before_first_seen {
                    strong { "Reaches before the job was first registered: " } "yes, history from before the job existed is backfilled."
                } @else {
                    "Before the job was first registered: no, the range starts after it."
                }
            }
            @if !report.slots.is_empty() {
                ul.slots {
                    @for slot in report.slots.iter().take(100) {
                        li { (utc(&slot.scheduled_at)) " · " small { (slot.wall.to_string()) " local" } }
                    }
                    @if report.slots.len() > 100 { li { "… and " (report.slots.len() - 100) " more" } }
                }
            }
        }
    }
}

/// The failed and dead runs of `job` in `[from, to)` (at most 1,000 of each), oldest first.
async fn failed_runs(
    ui: &Ui,
    job: &str,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<RunRecord>, AdminError> {
    let mut runs = Vec::new();
    for status in [RunStatus::Failed, RunStatus::Dead] {
        let filter = RunFilter {
            job: Some(job.to_owned()),
            status: Some(status),
            from: Some(from),
            to: Some(to),
            limit: crate::MAX_PAGE,
            ..RunFilter::default()
        };
        runs.extend(ui.admin.runs(filter).await?);
    }
    runs.sort_by_key(|r| (r.key.scheduled_at, r.key.partition.clone()));
    Ok(runs)
}

fn failed_preview(runs: &[RunRecord]) -> Markup {
    html! {
        div.preview id="preview" {
            p { strong { (runs.len()) " run(s) would be retried" } ", each a new attempt of the same slot." }
            ul.slots {
                @for run in runs.iter().take(100) {
                    li { (utc(&run.key.scheduled_at))
                        @if !run.key.partition.is_empty() { " · " code { (run.key.partition) } }
                        " · " (run.status.as_str()) }
                }
                @if runs.len() > 100 { li { "… and " (runs.len() - 100) " more" } }
            }
        }
    }
}
