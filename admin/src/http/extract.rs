//! The router's extractors: axum's own, with this router's error answers, and who asks for a change.

use axum::extract::{Extension, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::{Actor, DEFAULT_ACTOR};
use crate::ChangeRequest;

/// The change request of a body: the authenticated [`Actor`] if the middleware set one, else the
/// body's actor, else [`DEFAULT_ACTOR`]. `Admin` validates both fields.
pub(super) fn change_request(
    authenticated: Option<Extension<Actor>>,
    actor: Option<String>,
    reason: String,
) -> ChangeRequest {
    let actor = match authenticated {
        Some(Extension(Actor(actor))) => actor,
        None => actor.unwrap_or_else(|| DEFAULT_ACTOR.to_owned()),
    };
    ChangeRequest::new(actor, reason)
}

/// `axum::Json` with this module's error answers.
pub(super) struct ApiJson<T>(pub(super) T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}

/// `axum::extract::Query` with this module's error answers.
pub(super) struct ApiQuery<T>(pub(super) T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}

/// `axum::extract::Path` with this module's error answers.
pub(super) struct ApiPath<T>(pub(super) T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}
