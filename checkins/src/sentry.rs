//! [`SentryCrons`]: check-ins to Sentry's cron monitor endpoint.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Client, Url};
use serde_json::{Value, json};
use slotguard::monitor::{CheckIn, Monitor, MonitorConfig, MonitorError};

use crate::post::{CheckInError, client, post};

/// Reports each run to a Sentry Crons monitor: `in_progress` at its start, `ok` or `error` at its
/// end, both with the attempt's `check_in_id` so overlapping runs stay apart.
///
/// Each check-in is a `POST <base>/api/<project_id>/cron/<monitor_slug>/<public_key>/` with the
/// job's schedule as `monitor_config`, so Sentry creates or updates the monitor by itself (upsert):
/// the crontab, the zone, the margin (the job's deadline, else one minute) and the maximum runtime
/// (the job's timeout, if any), both in whole minutes. A schedule Sentry cannot read (six fields,
/// seconds) goes without `monitor_config`: create that monitor in Sentry by hand.
///
/// The monitor's slug is the job's name, lower-cased, with characters other than letters, digits,
/// `-` and `_` turned to `-`; [`slug`](Self::slug) names one job's monitor otherwise.
#[derive(Debug, Clone)]
pub struct SentryCrons {
    client: Client,
    base: Url,
    project_id: String,
    public_key: String,
    environment: Option<String>,
    slugs: HashMap<String, String>,
}

impl SentryCrons {
    /// Check-ins to the project of a Sentry DSN, `https://<public_key>@<host>/<project_id>`.
    ///
    /// # Errors
    /// [`CheckInError::Config`] when the DSN lacks its key, host or project id.
    pub fn from_dsn(dsn: &str) -> Result<Self, CheckInError> {
        let bad = |problem: &str| CheckInError::Config {
            what: "DSN",
            problem: problem.to_owned(),
        };
        let url = Url::parse(dsn).map_err(|e| bad(&e.to_string()))?;
        let public_key = url.username();
        let project_id = url
            .path()
            .trim_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        if public_key.is_empty() || project_id.is_empty() || url.host_str().is_none() {
            return Err(bad("expected https://<public_key>@<host>/<project_id>"));
        }
        let mut base = url.clone();
        base.set_path("/");
        base.set_query(None);
        let _ = base.set_username("");
        let _ = base.set_password(None);
        Ok(SentryCrons {
            client: client(),
            project_id: project_id.to_owned(),
            public_key: public_key.to_owned(),
            base,
            environment: None,
            slugs: HashMap::new(),
        })
    }

    /// Sends the check-ins to `base` (scheme, host and port, such as a relay or a test server)
    /// instead of the DSN's host.
    ///
    /// # Errors
    /// [`CheckInError::Config`] when `base` is not an absolute URL.
    pub fn base_url(mut self, base: &str) -> Result<Self, CheckInError> {
        self.base = Url::parse(base).map_err(|e| CheckInError::Config {
            what: "URL",
            problem: e.to_string(),
        })?;
        Ok(self)
    }

    /// The environment the check-ins are filed under (`production`, `staging`).
    #[must_use]
    pub fn environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = Some(environment.into());
        self
    }

    /// The monitor slug of the job named `job`, instead of the one derived from its name.
    #[must_use]
    pub fn slug(mut self, job: impl Into<String>, slug: impl Into<String>) -> Self {
        self.slugs.insert(job.into(), slug.into());
        self
    }

    /// The endpoint of `job`'s monitor.
    fn endpoint(&self, job: &str) -> Result<Url, CheckInError> {
        let slug = self
            .slugs
            .get(job)
            .cloned()
            .unwrap_or_else(|| derived_slug(job));
        let path = format!("api/{}/cron/{slug}/{}/", self.project_id, self.public_key);
        self.base.join(&path).map_err(|e| CheckInError::Config {
            what: "URL",
            problem: e.to_string(),
        })
    }

    /// The JSON body of `event`.
    fn body(&self, event: &CheckIn) -> Value {
        let mut body = json!({
            "check_in_id": event.id(),
            "status": event.status.as_str(),
        });
        if let Some(took) = event.duration {
            body["duration"] = json!(took.as_secs_f64());
        }
        if let Some(environment) = &self.environment {
            body["environment"] = json!(environment);
        }
        if let Some(config) = monitor_config(&event.config) {
            body["monitor_config"] = config;
        }
        body
    }
}

#[async_trait::async_trait]
impl Monitor for SentryCrons {
    async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError> {
        let url = self.endpoint(&event.job)?;
        post(&self.client, url, &HeaderMap::new(), &self.body(event)).await?;
        Ok(())
    }
}

/// Sentry's `monitor_config` for a job; `None` for a schedule that is not a crontab Sentry reads.
fn monitor_config(config: &MonitorConfig) -> Option<Value> {
    let cron = config.cron.trim();
    if !(cron.starts_with('@') || cron.split_whitespace().count() == 5) {
        return None;
    }
    let mut value = json!({
        "schedule": { "type": "crontab", "value": cron },
        "checkin_margin": minutes(config.margin),
        "timezone": config.zone,
    });
    if let Some(limit) = config.max_runtime {
        value["max_runtime"] = json!(minutes(limit));
    }
    Some(value)
}

/// Whole minutes, rounded up, at least one: Sentry's unit for margins and runtimes.
fn minutes(span: Duration) -> u64 {
    span.as_secs().div_ceil(60).max(1)
}

/// A Sentry slug from a job name: lower case, letters, digits, `-` and `_`.
fn derived_slug(job: &str) -> String {
    job.chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '_') => c,
            _ => '-',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsn_names_the_endpoint() {
        let sentry = SentryCrons::from_dsn("https://abc123@o7.ingest.sentry.io/42").unwrap();
        let url = sentry.endpoint("Daily Settlement").unwrap();
        assert_eq!(
            url.as_str(),
            "https://o7.ingest.sentry.io/api/42/cron/daily-settlement/abc123/"
        );
        let relayed = sentry.base_url("http://127.0.0.1:9000").unwrap();
        assert_eq!(
            relayed.endpoint("a_b").unwrap().as_str(),
            "http://127.0.0.1:9000/api/42/cron/a_b/abc123/"
        );
    }

    #[test]
    fn a_dsn_without_key_or_project_is_refused() {
        assert!(SentryCrons::from_dsn("https://o7.ingest.sentry.io/42").is_err());
        assert!(SentryCrons::from_dsn("https://key@o7.ingest.sentry.io/").is_err());
        assert!(SentryCrons::from_dsn("not a url").is_err());
    }

    #[test]
    fn a_crontab_goes_as_monitor_config_in_minutes() {
        let config = MonitorConfig::new("0 2 * * *", "Asia/Seoul")
            .with_margin(Duration::from_secs(90))
            .with_max_runtime(Duration::from_secs(600));
        assert_eq!(
            monitor_config(&config).unwrap(),
            json!({
                "schedule": { "type": "crontab", "value": "0 2 * * *" },
                "checkin_margin": 2,
                "max_runtime": 10,
                "timezone": "Asia/Seoul",
            })
        );
        let daily = monitor_config(&MonitorConfig::new("@daily", "UTC")).unwrap();
        assert_eq!(daily["checkin_margin"], 1);
        assert!(daily.get("max_runtime").is_none());
        assert_eq!(
            monitor_config(&MonitorConfig::new("*/5 * * * * *", "UTC")),
            None
        );
    }

    #[test]
    fn minutes_round_up_to_at_least_one() {
        assert_eq!(minutes(Duration::from_secs(1)), 1);
        assert_eq!(minutes(Duration::from_secs(60)), 1);
        assert_eq!(minutes(Duration::from_secs(61)), 2);
    }
}
