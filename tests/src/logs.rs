//! Operator text in the application's log: a reason, an operator's name or a partition is one field of
//! one log line, whatever it holds, so that nobody who may pause a job can write a line of their own
//! (`ok\n2026-12-02T12:00:00.000000Z ERROR slotguard::runtime: FORGED`) into the log.
//!
//! The check drives the admin API with generated text and captures every event the default `fmt`
//! subscriber writes: each must be exactly one line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use slotguard::Schedule;
use slotguard::store::{Backend, JobDefinition};
use slotguard_admin::{Admin, ChangeRequest};
use tracing_subscriber::fmt::MakeWriter;

/// The job the check pauses, triggers and cancels.
const JOB: &str = "forge-target";

/// Every event written, one string per event.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

/// The bytes of one event, handed to [`Events`] when the subscriber is done writing it.
struct EventWriter {
    events: Events,
    bytes: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.bytes).into_owned();
        self.events
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }
}

impl<'a> MakeWriter<'a> for Events {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> EventWriter {
        EventWriter {
            events: self.clone(),
            bytes: Vec::new(),
        }
    }
}

/// Text as an operator could send it: anything, and lines that look like a log's own.
fn operator_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ok\n2026-12-02T12:00:00.000000Z ERROR slotguard::runtime: FORGED".to_owned()),
        "[a-z ]{0,8}(\n|\r\n|\r|\u{2028}|\u{85}|\u{b}|\u{c})2026-12-02T12:00:00\\.000000Z (ERROR|WARN|INFO) [a-z:]{1,20}: [A-Z]{1,10}",
        "\\PC{0,40}",
        ".{0,40}",
    ]
}

/// A problem with one event's text: anything but one line ending in its newline.
fn forged(event: &str) -> Option<String> {
    let body = event.strip_suffix('\n').unwrap_or(event);
    let breaks = [
        '\n', '\r', '\u{2028}', '\u{2029}', '\u{85}', '\u{b}', '\u{c}',
    ];
    if !event.ends_with('\n') || body.contains(breaks) {
        return Some(format!("an event is not one line: {event:?}"));
    }
    None
}

/// The admin operations whose text an operator chooses, each allowed to be refused as bad input.
async fn operate(admin: &Admin, actor: &str, reason: &str, partition: &str) {
    let by = ChangeRequest::new(actor, reason);
    let _ = admin.pause(JOB, &by).await;
    let _ = admin.resume(JOB, &by).await;
    if let Ok(run) = admin.trigger(JOB, &by).await {
        let _ = admin.cancel(JOB, run.scheduled_at, partition, &by).await;
        let _ = admin.cancel(JOB, run.scheduled_at, "", &by).await;
        let _ = admin.retry(JOB, run.scheduled_at, partition, &by).await;
        let _ = admin.retry(JOB, run.scheduled_at, "", &by).await;
        let _ = admin.cancel(JOB, run.scheduled_at, "", &by).await;
    }
}

/// Drives pause, resume, trigger, cancel and retry of one job on the backend `open` gives with
/// generated operator names, reasons and partitions (`cases` of them, on a current-thread runtime,
/// so that the test's subscriber sees every event), and asserts that every event the default `fmt`
/// subscriber writes is one line: no input starts a line of its own, with a timestamp and a level
/// or anything else.
///
/// # Panics
/// When an input yields an event of more than one line (shrunk to the smallest such input), or the
/// job cannot be registered.
pub fn no_operator_text_forges_a_log_line<B, F>(open: impl FnOnce() -> F, cases: u32)
where
    B: Backend,
    F: std::future::Future<Output = B>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let backend: Arc<dyn Backend> = Arc::new(rt.block_on(open()));
    let fingerprint = Schedule::parse("0 2 * * *", "UTC")
        .expect("a schedule")
        .fingerprint();
    let definition = JobDefinition {
        name: JOB.to_owned(),
        cron: "0 2 * * *".to_owned(),
        zone: "UTC".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint,
        calendar: None,
    };
    rt.block_on(backend.register_jobs(&[definition]))
        .expect("register the job");
    let admin = Admin::shared(backend);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let inputs = (operator_text(), operator_text(), operator_text());
    let result = TestRunner::new(config).run(&inputs, |(actor, reason, partition)| {
        let events = Events::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .with_writer(events.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        rt.block_on(operate(&admin, &actor, &reason, &partition));
        drop(guard);
        let written = events.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for event in &written {
            if let Some(problem) = forged(event) {
                return Err(TestCaseError::fail(problem));
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
