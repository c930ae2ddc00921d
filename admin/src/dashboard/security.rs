//! What keeps the dashboard's answers and changes safe: the response headers, the CSRF token, the
//! read-only switch and the operator a change is audited under.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Settings;
use crate::http::Actor;

/// Scripts, styles and forms from the dashboard only; nothing inline, no frames around it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to every answer.
pub(super) async fn headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// 32 random bytes in hex; from the time and the process id if the OS has no randomness to give
/// (logged: set [`Dashboard::csrf_token`](super::Dashboard::csrf_token) then).
pub(super) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    if let Err(error) = getrandom::fill(&mut bytes) {
        tracing::error!(%error, "slotguard dashboard: no randomness for the CSRF token");
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        for (i, b) in seed.bytes().enumerate() {
            bytes[i % 32] ^= b;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a change was refused before it reached the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    ReadOnly,
    CrossSite,
    BadToken,
    NoOperator,
}

impl Refusal {
    pub(super) fn status(self) -> StatusCode {
        StatusCode::FORBIDDEN
    }

    pub(super) fn message(self) -> &'static str {
        match self {
            Refusal::ReadOnly => "this dashboard is read-only: it changes nothing",
            Refusal::CrossSite => "the browser says this form came from another site; refused",
            Refusal::BadToken => {
                "the form's CSRF token is missing or stale; reload the page and submit it again"
            }
            Refusal::NoOperator => {
                "no operator: the application's authentication layer set no Actor, so the change \
                 could not be audited under a name"
            }
        }
    }
}

/// The operator a change is audited under, if every check passes.
pub(super) fn operator(
    settings: &Settings,
    headers: &HeaderMap,
    actor: Option<&Actor>,
    token: &str,
) -> Result<String, Refusal> {
    if settings.read_only {
        return Err(Refusal::ReadOnly);
    }
    // Browsers send it on every request; a cross-site form post says `cross-site`.
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("same-origin");
    if site == "cross-site" || site == "same-site" {
        return Err(Refusal::CrossSite);
    }
    if !same(token.as_bytes(), settings.csrf_token.as_bytes()) {
        return Err(Refusal::BadToken);
    }
    actor.map(|a| a.0.clone()).ok_or(Refusal::NoOperator)
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(read_only: bool) -> Settings {
        Settings {
            read_only,
            csrf_token: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn a_change_needs_the_token_an_operator_and_a_same_origin_request() {
        let alice = Actor("alice".into());
        let mut headers = HeaderMap::new();
        let ok = operator(&settings(false), &headers, Some(&alice), "0123456789abcdef");
        assert_eq!(ok, Ok("alice".into()));
        let stale = operator(&settings(false), &headers, Some(&alice), "0123456789abcdeX");
        assert_eq!(stale, Err(Refusal::BadToken));
        let empty = operator(&settings(false), &headers, Some(&alice), "");
        assert_eq!(empty, Err(Refusal::BadToken));
        let nobody = operator(&settings(false), &headers, None, "0123456789abcdef");
        assert_eq!(nobody, Err(Refusal::NoOperator));
        let read_only = operator(&settings(true), &headers, Some(&alice), "0123456789abcdef");
        assert_eq!(read_only, Err(Refusal::ReadOnly));
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        let cross = operator(&settings(false), &headers, Some(&alice), "0123456789abcdef");
        assert_eq!(cross, Err(Refusal::CrossSite));
    }

    #[test]
    fn random_tokens_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
