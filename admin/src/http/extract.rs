//! The router's extractors: axum's own, with this router's error answers, and who asks for a change.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::{Actor, DEFAULT_ACTOR};
use crate::ChangeRequest;

/// The operator the application's middleware authenticated (an [`Actor`] extension), if any.
pub(super) struct Authenticated(Option<Actor>);

impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Authenticated(parts.extensions.get::<Actor>().cloned()))
    }
}

impl Authenticated {
    /// Who asks, and why: the authenticated [`Actor`] if the middleware set one, else the body's
    /// actor, else [`DEFAULT_ACTOR`]. `Admin` validates both fields.
    pub(super) fn by(&self, actor: Option<String>, reason: String) -> ChangeRequest {
        let actor = match &self.0 {
            Some(Actor(actor)) => actor.clone(),
            None => actor.unwrap_or_else(|| DEFAULT_ACTOR.to_owned()),
        };
        ChangeRequest::new(actor, reason)
    }
}

/// What every change route reads: the job of its path, the operator the application's middleware
/// authenticated (an [`Actor`] extension, if any), and its JSON body, with this module's error
/// answers (the path's first, then the body's, as axum's own extractors would).
pub(super) struct JobChange<B> {
    pub(super) job: String,
    authenticated: Authenticated,
    pub(super) body: B,
}

impl<B> JobChange<B> {
    /// Who asks, and why ([`Authenticated::by`]).
    pub(super) fn by(&self, actor: Option<String>, reason: String) -> ChangeRequest {
        self.authenticated.by(actor, reason)
    }
}

impl<S, B> FromRequest<S> for JobChange<B>
where
    S: Send + Sync,
    B: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let ApiPath(job) = ApiPath::<String>::from_request_parts(&mut parts, state).await?;
        let authenticated = Authenticated(parts.extensions.get::<Actor>().cloned());
        let request = Request::from_parts(parts, body);
        let ApiJson(body) = ApiJson::<B>::from_request(request, state).await?;
        Ok(JobChange {
            job,
            authenticated,
            body,
        })
    }
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
