//! The rule events the stores log, captured from `tracing`.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The events the rulebook implies; anything else a store logs is not compared.
const RULE_EVENTS: [&str; 5] = [
    "job_skipped",
    "job_buffered",
    "job_replaced",
    "job_fenced",
    "job_dead",
];

/// The rule events logged since the last [`Events::take`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    /// The events logged since the last call, sorted.
    pub(crate) fn take(&self) -> Vec<String> {
        let mut taken = std::mem::take(&mut *self.0.lock().expect("events"));
        taken.sort();
        taken
    }
}

struct Capture(Events);

struct EventField(Option<String>);

impl Visit for EventField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "event" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut field = EventField(None);
        event.record(&mut field);
        if let Some(name) = field.0.filter(|n| RULE_EVENTS.contains(&n.as_str())) {
            (self.0).0.lock().expect("events").push(name);
        }
    }
}

/// Captures the rule events logged on this thread from now on (the test runs its stores on a
/// current-thread runtime, so every store call logs here).
pub(crate) fn install() -> Events {
    let events = Events::default();
    let subscriber = tracing_subscriber::registry().with(Capture(events.clone()));
    // Held for the whole test: the default subscriber of this thread.
    std::mem::forget(tracing::subscriber::set_default(subscriber));
    events
}
