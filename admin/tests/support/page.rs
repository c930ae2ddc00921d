//! A dashboard page read through the router in process.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// The body of `GET uri`, which must answer 200.
pub(crate) async fn get(app: &Router, uri: &str) -> String {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{uri}");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The part of `page` from `start` to the next `end`.
// Not every test that reads pages reads a part of one.
#[allow(dead_code)]
pub(crate) fn part<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
    let from = page
        .find(start)
        .unwrap_or_else(|| panic!("no {start}: {page}"));
    let rest = &page[from..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}
