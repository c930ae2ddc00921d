//! [`Webhook`]: each check-in POSTed as JSON to a URL.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Url};
use serde_json::{Value, json};
use slotguard::monitor::{CheckIn, Monitor, MonitorError};

use crate::post::{CheckInError, client, post};

/// POSTs every check-in as a JSON object to one URL, with the headers you add (a token, a
/// signature):
///
/// ```json
/// {
///   "check_in_id": "5f0c…", "job": "daily_settlement", "status": "ok",
///   "scheduled_at": "2026-03-08T17:00:00Z", "partition": null, "attempt": 1, "run_id": 7,
///   "trigger": "schedule", "error": null, "duration": 12.5,
///   "monitor": { "cron": "0 2 * * *", "zone": "Asia/Seoul", "margin": 60, "max_runtime": null }
/// }
/// ```
///
/// `status` is `in_progress`, `ok` or `error`; `duration`, `margin` and `max_runtime` are in
/// seconds; `duration` is `null` at the start. Any 2xx answer takes the check-in.
#[derive(Debug, Clone)]
pub struct Webhook {
    client: Client,
    url: Url,
    headers: HeaderMap,
}

impl Webhook {
    /// Check-ins to `url`.
    ///
    /// # Errors
    /// [`CheckInError::Config`] when `url` is not an absolute URL.
    pub fn new(url: &str) -> Result<Self, CheckInError> {
        let url = Url::parse(url).map_err(|e| CheckInError::Config {
            what: "URL",
            problem: e.to_string(),
        })?;
        Ok(Webhook {
            client: client(),
            url,
            headers: HeaderMap::new(),
        })
    }

    /// Adds a header to every request.
    ///
    /// # Errors
    /// [`CheckInError::Config`] when the name or the value is not valid in HTTP.
    pub fn header(mut self, name: &str, value: &str) -> Result<Self, CheckInError> {
        let bad = |e: &dyn std::fmt::Display| CheckInError::Config {
            what: "header",
            problem: format!("{name}: {e}"),
        };
        let name = HeaderName::try_from(name).map_err(|e| bad(&e))?;
        let mut value = HeaderValue::try_from(value).map_err(|e| bad(&e))?;
        value.set_sensitive(true);
        self.headers.append(name, value);
        Ok(self)
    }
}

#[async_trait::async_trait]
impl Monitor for Webhook {
    async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError> {
        post(&self.client, self.url.clone(), &self.headers, &body(event)).await?;
        Ok(())
    }
}

/// The JSON object of one check-in.
fn body(event: &CheckIn) -> Value {
    let config = &event.config;
    json!({
        "check_in_id": event.id(),
        "job": &*event.job,
        "status": event.status.as_str(),
        "scheduled_at": event.scheduled_at.to_rfc3339_opts(slotguard::chrono::SecondsFormat::AutoSi, true),
        "partition": (!event.partition.is_empty()).then(|| &*event.partition),
        "attempt": event.attempt,
        "run_id": event.run_id,
        "trigger": event.trigger.as_str(),
        "error": event.error,
        "duration": event.duration.map(|d| d.as_secs_f64()),
        "monitor": {
            "cron": config.cron,
            "zone": config.zone,
            "margin": config.margin.as_secs_f64(),
            "max_runtime": config.max_runtime.map(|d| d.as_secs_f64()),
        },
    })
}
