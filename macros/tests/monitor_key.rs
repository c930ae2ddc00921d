//! `monitor = <expression>`: the job's check-ins go to the monitor the expression makes, evaluated
//! once per process, whatever the scheduler's own monitor is.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use slotguard::monitor::MonitorError;
use slotguard::{
    CheckIn, CheckInStatus, MemoryBackend, Monitor, Scheduler, TokioClock, jobs, scheduled,
};

/// Every check-in it is sent: job and status.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, CheckInStatus)>>);

#[slotguard::async_trait]
impl Monitor for Recorder {
    async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError> {
        let mut seen = self.0.lock().unwrap();
        seen.push((event.job.to_string(), event.status));
        Ok(())
    }
}

/// The job's own monitor, made once.
fn recorder() -> Arc<Recorder> {
    static ONE: OnceLock<Arc<Recorder>> = OnceLock::new();
    Arc::clone(ONE.get_or_init(Arc::default))
}

#[scheduled("* * * * * *", guard = local, monitor = recorder())]
async fn watched() {}

#[scheduled("* * * * * *", guard = local)]
async fn unwatched() {}

#[tokio::test(start_paused = true)]
async fn a_job_with_a_monitor_key_checks_in_there() {
    let start = "2026-03-08T06:59:00Z".parse().unwrap();
    let scheduler_monitor = Arc::new(Recorder::default());
    let handle = Scheduler::builder()
        .jobs(jobs![watched, unwatched])
        .backend(MemoryBackend::new())
        .clock(TokioClock::starting_at(start))
        .monitor(Arc::clone(&scheduler_monitor) as Arc<dyn Monitor>)
        .build()
        .unwrap()
        .start();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    handle.shutdown().await;

    let own = recorder().0.lock().unwrap().clone();
    assert!(own.len() >= 4, "{own:?}");
    assert!(own.iter().all(|(job, _)| job == "watched"), "{own:?}");
    assert!(own.iter().any(|(_, s)| *s == CheckInStatus::Ok), "{own:?}");
    let others = scheduler_monitor.0.lock().unwrap().clone();
    assert!(
        !others.is_empty() && others.iter().all(|(job, _)| job == "unwatched"),
        "{others:?}"
    );
}
