//! `job_recovered` is logged for recoveries only: a worker's first attempt of a slot the
//! scheduler queued is its normal start, as `job_run_recovered_total` already counts it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::{MemoryBackend, TokioClock};

#[path = "support/scheduler_and_worker.rs"]
mod scheduler_and_worker;
use scheduler_and_worker::scheduler_and_worker;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The `(event, job)` fields of every event logged.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(String, String)>>>);

#[derive(Default)]
struct Fields {
    event: Option<String>,
    job: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "event" {
            self.event = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "event" => self.event = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "job" => self.job = Some(format!("{value:?}").trim_matches('"').to_owned()),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let (Some(event), Some(job)) = (fields.event, fields.job) {
            self.0.lock().unwrap().push((event, job));
        }
    }
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

#[tokio::test(start_paused = true)]
async fn a_workers_first_attempt_of_a_queued_slot_is_not_logged_as_a_recovery() {
    let events = Events::default();
    let _logs =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let handles = scheduler_and_worker(&store, clock).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for h in handles {
        h.shutdown().await;
    }
    let logged = events.0.lock().unwrap().clone();
    let count = |event: &str, job: &str| {
        logged
            .iter()
            .filter(|(e, j)| e == event && j == job)
            .count()
    };
    // The worker ran the queued slots (their first attempts), and logged none as a recovery.
    let ran = store
        .runs()
        .iter()
        .filter(|r| r.key.job == "queued" && r.status == slotguard::store::RunStatus::Succeeded)
        .count();
    assert!(ran >= 3, "{ran} runs of `queued` succeeded");
    assert_eq!(count("job_recovered", "queued"), 0, "{logged:?}");
    assert!(count("job_recovered", "flaky") >= 1, "{logged:?}");
}
