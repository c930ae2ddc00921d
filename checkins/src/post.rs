//! The one HTTP call both monitors make: a JSON POST whose answer must be a success.

use std::time::Duration;

use reqwest::{Client, Url};

/// Why a check-in was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckInError {
    /// A URL or DSN that cannot be used.
    #[error("invalid {what}: {problem}")]
    Config {
        /// What was given: `DSN`, `URL`, `header`.
        what: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The request did not get an answer (connection refused, timeout, TLS).
    #[error("could not reach the monitor: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// The receiver answered with a status other than 2xx.
    #[error("the monitor answered {status}: {body}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
}

/// A client whose calls end by themselves a little after the scheduler gives up on them, so that
/// an abandoned call frees its connection.
pub(crate) fn client() -> Client {
    Client::builder()
        .timeout(slotguard::monitor::CALL_TIMEOUT + Duration::from_millis(500))
        .build()
        .unwrap_or_default()
}

/// POSTs `body` as JSON to `url` with `headers`.
pub(crate) async fn post(
    client: &Client,
    url: Url,
    headers: &reqwest::header::HeaderMap,
    body: &serde_json::Value,
) -> Result<(), CheckInError> {
    let answer = client
        .post(url)
        .headers(headers.clone())
        .json(body)
        .send()
        .await
        .map_err(CheckInError::Unreachable)?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    let body = answer.text().await.unwrap_or_default();
    let body = body.chars().take(200).collect();
    Err(CheckInError::Rejected {
        status: status.as_u16(),
        body,
    })
}
