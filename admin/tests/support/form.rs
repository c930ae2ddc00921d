//! A dashboard form posted through the router in process, as a browser on the same site posts it.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// An answer: its status, headers and body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    /// Where a `303` sends the browser.
    pub(crate) fn location(&self) -> &str {
        assert_eq!(self.status, StatusCode::SEE_OTHER, "{}", self.body);
        self.headers[header::LOCATION].to_str().unwrap()
    }
}

/// `GET uri`, whatever it answers.
pub(crate) async fn fetch(app: &Router, uri: &str) -> Answer {
    call(app, Request::get(uri).body(Body::empty()).unwrap()).await
}

/// `POST uri` with `fields`, form-encoded, from the same origin.
pub(crate) async fn post(app: &Router, uri: &str, fields: &[(&str, &str)]) -> Answer {
    post_from(app, uri, fields, "same-origin").await
}

/// `POST uri` with `fields`, form-encoded, sent from `site` (`Sec-Fetch-Site`).
pub(crate) async fn post_from(
    app: &Router,
    uri: &str,
    fields: &[(&str, &str)],
    site: &str,
) -> Answer {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", site)
        .body(Body::from(body.join("&")))
        .unwrap();
    call(app, request).await
}

async fn call(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

/// Percent-encodes everything but unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
