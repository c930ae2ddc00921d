//! The routes of stored schedules (`/schedules`) and of skipping one slot (`/jobs/{job}/skip`,
//! `/jobs/{job}/unskip`).

use axum::extract::{FromRequest, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use slotguard::store::ScheduleVersion;

use super::dto::RunDto;
use super::error::{ApiError, json};
use super::extract::{ApiJson, ApiPath, ApiQuery, Authenticated, JobChange};
use crate::parse::instant;
use crate::{Admin, AdminError, ScheduleFields, StoredSchedule};

/// A present key, even `null`: `Some(None)` clears a field, an absent key keeps it.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The fields of a schedule in a body, as written.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct FieldsBody {
    job: Option<String>,
    cron: Option<String>,
    tz: Option<String>,
    dst: Option<String>,
    partition: Option<String>,
    #[serde(default, deserialize_with = "present")]
    start_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    end_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    remaining_runs: Option<Option<u32>>,
    paused: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    note: Option<Option<String>>,
    pause_on_failure: Option<bool>,
}

impl FieldsBody {
    fn fields(self) -> Result<ScheduleFields, AdminError> {
        let at = |field: &'static str, v: Option<Option<String>>| {
            v.map(|v| v.map(|text| instant(field, &text)).transpose())
                .transpose()
        };
        Ok(ScheduleFields {
            job: self.job,
            cron: self.cron,
            tz: self.tz,
            dst: self.dst,
            partition: self.partition,
            start_at: at("startAt", self.start_at)?,
            end_at: at("endAt", self.end_at)?,
            remaining_runs: self.remaining_runs,
            paused: self.paused,
            note: self.note,
            pause_on_failure: self.pause_on_failure,
        })
    }
}

/// `POST /schedules`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AddBody {
    id: String,
    #[serde(flatten)]
    fields: FieldsBody,
    reason: String,
    actor: Option<String>,
}

/// `PATCH /schedules/{id}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ChangeBody {
    version: i64,
    #[serde(flatten)]
    fields: FieldsBody,
    reason: String,
    actor: Option<String>,
}

/// `DELETE /schedules/{id}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RemoveBody {
    version: Option<i64>,
    reason: String,
    actor: Option<String>,
}

/// `POST /jobs/{job}/skip` and `/unskip`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SkipBody {
    #[serde(alias = "slot")]
    schedule_slot: String,
    partition: Option<String>,
    reason: String,
    actor: Option<String>,
}

/// `POST /schedules/preview`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PreviewBody {
    #[serde(flatten)]
    fields: FieldsBody,
    count: Option<usize>,
}

#[derive(Serialize)]
struct PreviewDto {
    next: Vec<DateTime<Utc>>,
}

#[derive(Serialize)]
struct HistoryDto {
    versions: Vec<ScheduleDto>,
}

/// `GET /schedules/{id}/history`: every version, oldest first.
pub(super) async fn history(
    State(admin): State<Admin>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let history = admin.schedule_history(&id).await?;
    let versions = history
        .iter()
        .map(|v| ScheduleDto::of(v, Vec::new()))
        .collect();
    Ok(json(StatusCode::OK, &HistoryDto { versions }))
}

/// `GET /schedules/{id}/missed`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MissedQuery {
    from: String,
    to: Option<String>,
    limit: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MissedDto {
    partition: String,
    missed: Vec<DateTime<Utc>>,
    next: Option<DateTime<Utc>>,
}

pub(super) async fn missed(
    State(admin): State<Admin>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<MissedQuery>,
) -> Result<Response, ApiError> {
    let limit = crate::parse::page(query.limit.as_deref())?;
    let from = instant("from", &query.from)?;
    let to =
        crate::parse::maybe_instant("to", query.to.as_deref())?.unwrap_or(DateTime::<Utc>::MAX_UTC);
    let page = admin.schedule_missed(&id, (from, to), limit).await?;
    let answer = MissedDto {
        partition: page.partition,
        missed: page.missed.iter().map(|m| m.scheduled_at).collect(),
        next: page.next,
    };
    Ok(json(StatusCode::OK, &answer))
}

/// `GET /schedules`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    job: Option<String>,
    after: Option<String>,
    limit: Option<String>,
}

/// A stored schedule as every route answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ScheduleDto {
    id: String,
    version: i64,
    source: &'static str,
    job: Option<String>,
    cron: Option<String>,
    tz: Option<String>,
    dst: Option<String>,
    partition: Option<String>,
    start_at: Option<DateTime<Utc>>,
    end_at: Option<DateTime<Utc>>,
    remaining_runs: Option<u32>,
    paused: bool,
    note: Option<String>,
    pause_on_failure: bool,
    removed: bool,
    effective_at: DateTime<Utc>,
    changed_by: String,
    changed_at: DateTime<Utc>,
    reason: String,
    next: Vec<DateTime<Utc>>,
}

impl ScheduleDto {
    fn of(version: &ScheduleVersion, next: Vec<DateTime<Utc>>) -> Self {
        let spec = version.spec.as_ref();
        ScheduleDto {
            id: version.id.clone(),
            version: version.version,
            source: "api",
            job: spec.map(|s| s.job.clone()),
            cron: spec.map(|s| s.cron.clone()),
            tz: spec.map(|s| s.zone.clone()),
            dst: spec.map(|s| s.dst.clone()),
            partition: spec.map(|s| s.partition.clone()),
            start_at: spec.and_then(|s| s.start_at),
            end_at: spec.and_then(|s| s.end_at),
            remaining_runs: spec.and_then(|s| s.remaining_runs),
            paused: spec.is_some_and(|s| s.paused),
            note: spec.and_then(|s| s.note.clone()),
            pause_on_failure: spec.is_some_and(|s| s.pause_on_failure),
            removed: spec.is_none(),
            effective_at: version.effective_at,
            changed_by: version.changed_by.clone(),
            changed_at: version.changed_at,
            reason: version.reason.clone(),
            next,
        }
    }
}

impl From<&StoredSchedule> for ScheduleDto {
    fn from(s: &StoredSchedule) -> Self {
        ScheduleDto::of(&s.version, s.next.clone())
    }
}

#[derive(Serialize)]
struct SchedulesDto {
    schedules: Vec<ScheduleDto>,
    next: Option<String>,
}

pub(super) async fn list(
    State(admin): State<Admin>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let limit = crate::parse::page(query.limit.as_deref())?;
    let job = crate::parse::present(query.job.as_deref());
    let after = crate::parse::present(query.after.as_deref());
    let page = admin.schedules(job, after, limit).await?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|s| s.version.id.clone()))
        .flatten();
    let schedules = page.iter().map(ScheduleDto::from).collect();
    Ok(json(StatusCode::OK, &SchedulesDto { schedules, next }))
}

pub(super) async fn add(
    State(admin): State<Admin>,
    who: Authenticated,
    ApiJson(body): ApiJson<AddBody>,
) -> Result<Response, ApiError> {
    let by = who.by(body.actor, body.reason);
    let added = admin
        .add_schedule(&body.id, body.fields.fields()?, &by)
        .await?;
    Ok(json(StatusCode::CREATED, &ScheduleDto::from(&added)))
}

pub(super) async fn preview(
    State(admin): State<Admin>,
    ApiJson(body): ApiJson<PreviewBody>,
) -> Result<Response, ApiError> {
    let count = body.count.unwrap_or(crate::PREVIEW_SLOTS);
    let next = admin.preview_schedule(body.fields.fields()?, count).await?;
    Ok(json(StatusCode::OK, &PreviewDto { next }))
}

pub(super) async fn get_one(
    State(admin): State<Admin>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let schedule = admin.schedule(&id).await?;
    Ok(json(StatusCode::OK, &ScheduleDto::from(&schedule)))
}

pub(super) async fn change(
    State(admin): State<Admin>,
    change: JobChange<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change.by(change.body.actor.clone(), change.body.reason.clone());
    let JobChange { job: id, body, .. } = change;
    let changed = admin
        .change_schedule(&id, body.version, body.fields.fields()?, &by)
        .await?;
    Ok(json(StatusCode::OK, &ScheduleDto::from(&changed)))
}

/// `DELETE /schedules/{id}?reason=&version=&actor=`: the same fields as the body, for clients
/// that send no body with a `DELETE`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RemoveQuery {
    version: Option<String>,
    reason: Option<String>,
    actor: Option<String>,
}

pub(super) async fn remove(
    State(admin): State<Admin>,
    ApiPath(id): ApiPath<String>,
    who: Authenticated,
    ApiQuery(query): ApiQuery<RemoveQuery>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    // A body says what it is; a DELETE without one names its fields in the query.
    let has_body = request
        .headers()
        .contains_key(axum::http::header::CONTENT_TYPE);
    let body = if has_body {
        let ApiJson(body) = ApiJson::<RemoveBody>::from_request(request, &()).await?;
        body
    } else {
        let version = query
            .version
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| AdminError::Invalid {
                    field: "version",
                    problem: format!("`{}` is not a version number", crate::shown(&v)),
                })
            })
            .transpose()?;
        RemoveBody {
            version,
            reason: query.reason.unwrap_or_default(),
            actor: query.actor,
        }
    };
    let by = who.by(body.actor, body.reason);
    let removed = admin.remove_schedule(&id, body.version, &by).await?;
    Ok(json(StatusCode::OK, &ScheduleDto::of(&removed, Vec::new())))
}

/// The slot and partition of a skip body.
fn slot_of(body: &SkipBody) -> Result<(DateTime<Utc>, String), AdminError> {
    let slot = instant("scheduleSlot", &body.schedule_slot)?;
    Ok((slot, body.partition.clone().unwrap_or_default()))
}

pub(super) async fn skip(
    State(admin): State<Admin>,
    change: JobChange<SkipBody>,
) -> Result<Response, ApiError> {
    let by = change.by(change.body.actor.clone(), change.body.reason.clone());
    let (slot, partition) = slot_of(&change.body)?;
    let run = admin.skip(&change.job, slot, &partition, &by).await?;
    Ok(json(StatusCode::OK, &RunDto::from(&run)))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UnskippedDto {
    job: String,
    schedule_slot: DateTime<Utc>,
    partition: String,
    unskipped: bool,
}

pub(super) async fn unskip(
    State(admin): State<Admin>,
    change: JobChange<SkipBody>,
) -> Result<Response, ApiError> {
    let by = change.by(change.body.actor.clone(), change.body.reason.clone());
    let (slot, partition) = slot_of(&change.body)?;
    admin.unskip(&change.job, slot, &partition, &by).await?;
    let answer = UnskippedDto {
        job: change.job,
        schedule_slot: slot,
        partition,
        unskipped: true,
    };
    Ok(json(StatusCode::OK, &answer))
}
