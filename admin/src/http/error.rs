//! The router's error answers, `{"error": kind, "message": text}` with their status, and the one
//! writer of every JSON answer.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use slotguard::store::RunStatus;

use super::MAX_BODY_BYTES;
use crate::AdminError;

/// An error answer: `{"error": kind, "message": text}` with its status.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
    pub(super) field: Option<&'static str>,
    run_status: Option<RunStatus>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorDto<'a> {
    error: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_status: Option<&'a str>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        ApiError {
            status,
            kind,
            message,
            field: None,
            run_status: None,
        }
    }

    /// An extractor's rejection, in this module's shape: malformed input is `400 invalid` (axum
    /// answers 422 for JSON of the wrong shape), an oversized body `413`, a body that is not JSON
    /// `415`.
    fn rejected(status: StatusCode, text: String) -> Self {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                status,
                "payload_too_large",
                format!("{text} (at most {MAX_BODY_BYTES} bytes are accepted)"),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::new(status, "unsupported_media_type", text)
            }
            s if s.is_client_error() => ApiError::new(StatusCode::BAD_REQUEST, "invalid", text),
            s => ApiError::new(s, "internal", text),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(error: AdminError) -> Self {
        let message = error.to_string();
        match error {
            AdminError::UnknownJob { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_job", message)
            }
            AdminError::UnknownRun { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_run", message)
            }
            AdminError::Refused { status, .. } => ApiError {
                run_status: Some(status),
                ..ApiError::new(StatusCode::CONFLICT, "refused", message)
            },
            AdminError::PauseState { .. } => {
                ApiError::new(StatusCode::CONFLICT, "refused", message)
            }
            AdminError::UnknownSchedule { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_schedule", message)
            }
            AdminError::ScheduleExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, "exists", message)
            }
            AdminError::StaleVersion { .. } => {
                ApiError::new(StatusCode::CONFLICT, "stale_version", message)
            }
            AdminError::Invalid { field, .. } => ApiError {
                field: Some(field),
                ..ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
            },
            AdminError::Store(_) => {
                tracing::warn!(error = %message, "slotguard admin API: store error");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", message)
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json(
            self.status,
            &ErrorDto {
                error: self.kind,
                message: &self.message,
                field: self.field,
                run_status: self.run_status.map(RunStatus::as_str),
            },
        )
    }
}

/// A JSON answer. `<`, `>` and `&` are written as `\u003c`, `\u003e` and `\u0026` (they can only
/// occur inside JSON strings, where the escapes mean the same), so that echoed input can never be
/// read as markup, whatever a client sniffs.
pub(super) fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let (status, text) = match serde_json::to_string(body) {
        Ok(text) => (status, text),
        Err(error) => {
            tracing::error!(%error, "slotguard admin API: could not write an answer");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                r#"{"error":"internal","message":"could not write the answer"}"#.to_owned(),
            )
        }
    };
    let text = text
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut response = (status, text).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
