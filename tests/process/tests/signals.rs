//! Graceful shutdown of a real process on a real SIGTERM.

use std::time::{Duration, Instant};

use slotguard_process_tests::Node;

fn replica(args: &[&str]) -> Node {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    Node::spawn(env!("CARGO_BIN_EXE_sg-replica"), &args)
}

/// Waits for the process to exit; returns its lines, whether it exited cleanly, and how long it took.
fn finish(node: Node, limit: Duration) -> (Vec<String>, bool, Duration) {
    let started = Instant::now();
    let (lines, ok) = node.finish(limit);
    (lines, ok, started.elapsed())
}

fn after_signal(lines: &[String]) -> &[String] {
    let at = lines
        .iter()
        .position(|l| l == "signal")
        .expect("signal line");
    &lines[at + 1..]
}

#[test]
fn sigterm_lets_running_jobs_finish_and_claims_nothing_new() {
    // A 2-second job every second, 10-second grace.
    let mut replica = replica(&["* * * * * *", "2", "10"]);
    replica.wait_for("ready", Duration::from_secs(30));
    let started = replica.wait_for("started", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    replica.signal("TERM");
    let (lines, ok, took) = finish(replica, Duration::from_secs(15));
    assert!(ok, "clean exit: {lines:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let rest = after_signal(&lines);
    assert!(
        !rest.iter().any(|l| l.starts_with("started")),
        "claimed after the signal: {lines:?}"
    );
    let slot = started.trim_start_matches("started ");
    assert!(
        lines.iter().any(|l| *l == format!("finished {slot}")),
        "the in-flight run finished: {lines:?}"
    );
    assert!(
        rest.iter()
            .any(|l| l == "shutdown in_flight=1 finished_in_grace=true abandoned=0"),
        "{lines:?}"
    );
}

#[test]
fn sigterm_past_grace_tells_the_job_to_stop() {
    // A 60-second job; 1-second grace, then 1 second to return.
    let mut replica = replica(&["* * * * * *", "60", "1", "1"]);
    replica.wait_for("ready", Duration::from_secs(30));
    replica.wait_for("started", Duration::from_secs(5));
    replica.signal("TERM");
    let (lines, ok, took) = finish(replica, Duration::from_secs(10));
    assert!(ok, "{lines:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    let rest = after_signal(&lines);
    assert!(rest.iter().any(|l| l.starts_with("cancelled")), "{lines:?}");
    assert!(
        rest.iter()
            .any(|l| l == "shutdown in_flight=1 finished_in_grace=false abandoned=1"),
        "{lines:?}"
    );
}
