//! The routes of operators' holiday overrides (`/calendar-overrides`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use slotguard::store::CalendarOverride;

use super::error::{ApiError, json};
use super::extract::{ApiJson, ApiQuery, Authenticated};
use crate::{Admin, parse_holiday_date, parse_override_kind};

/// `POST /calendar-overrides`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct OverrideBody {
    calendar: String,
    date: String,
    kind: String,
    name: Option<String>,
    reason: String,
    actor: Option<String>,
}

/// `GET /calendar-overrides`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    calendar: Option<String>,
}

/// An override as every route answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OverrideDto {
    calendar: String,
    date: NaiveDate,
    kind: &'static str,
    name: String,
    reason: String,
    changed_by: String,
    changed_at: DateTime<Utc>,
    effective_at: DateTime<Utc>,
}

impl From<&CalendarOverride> for OverrideDto {
    fn from(o: &CalendarOverride) -> Self {
        OverrideDto {
            calendar: o.spec.calendar.clone(),
            date: o.spec.date,
            kind: o.spec.kind.as_str(),
            name: o.spec.name.clone(),
            reason: o.reason.clone(),
            changed_by: o.changed_by.clone(),
            changed_at: o.changed_at,
            effective_at: o.effective_at,
        }
    }
}

#[derive(Serialize)]
struct ListDto {
    overrides: Vec<OverrideDto>,
}

/// `GET /calendar-overrides?calendar=`: the overrides in force, by calendar and date.
pub(super) async fn list(
    State(admin): State<Admin>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let calendar = query.calendar.filter(|c| !c.is_empty());
    let overrides = admin.calendar_overrides(calendar.as_deref()).await?;
    let overrides = overrides.iter().map(OverrideDto::from).collect();
    Ok(json(StatusCode::OK, &ListDto { overrides }))
}

/// `POST /calendar-overrides`: adds or removes a holiday.
pub(super) async fn write(
    State(admin): State<Admin>,
    who: Authenticated,
    ApiJson(body): ApiJson<OverrideBody>,
) -> Result<Response, ApiError> {
    let date = parse_holiday_date(&body.date)?;
    let kind = parse_override_kind(&body.kind)?;
    let by = who.by(body.actor, body.reason);
    let written = admin
        .override_holiday(&body.calendar, date, kind, body.name.as_deref(), &by)
        .await?;
    Ok(json(StatusCode::CREATED, &OverrideDto::from(&written)))
}
