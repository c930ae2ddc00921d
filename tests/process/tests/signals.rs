//! Graceful shutdown of a real process on a real SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Replica {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Replica {
    fn spawn(args: &[&str]) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sg-replica"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sg-replica");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Replica {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line starting with `prefix`; panics after `limit`.
    fn wait_for(&mut self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!("no `{prefix}` line within {limit:?}; saw {:?}", self.seen),
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Collects the rest of the output and the exit status.
    fn finish(mut self, limit: Duration) -> (Vec<String>, bool, Duration) {
        let started = Instant::now();
        let deadline = started + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(line);
                }
                return (self.seen, status.success(), started.elapsed());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("replica did not exit within {limit:?}; saw {:?}", self.seen);
            }
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(line);
            }
        }
    }
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
    let mut replica = Replica::spawn(&["* * * * * *", "2", "10"]);
    replica.wait_for("ready", Duration::from_secs(30));
    let started = replica.wait_for("started", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    replica.signal("TERM");
    let (lines, ok, took) = replica.finish(Duration::from_secs(15));
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
    let mut replica = Replica::spawn(&["* * * * * *", "60", "1", "1"]);
    replica.wait_for("ready", Duration::from_secs(30));
    replica.wait_for("started", Duration::from_secs(5));
    replica.signal("TERM");
    let (lines, ok, took) = replica.finish(Duration::from_secs(10));
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
