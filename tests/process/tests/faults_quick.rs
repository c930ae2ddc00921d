//! The CI subset of the fault-injection harness: `sg-faults --scenario all --quick --seed 1` (the
//! scenarios its table marks quick, at their small sizes) as a process, on a throwaway PostgreSQL
//! cluster of its own (and, for the Redis scenarios, throwaway `redis-server`s: Debian's
//! `redis-server`, which `.ci/run` installs). The full set is
//! `sg-faults --scenario all` (see docs/RELIABILITY.md).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far above the few minutes the subset takes, so that a hung scenario fails instead of hanging CI.
const LIMIT: Duration = Duration::from_secs(20 * 60);

#[test]
fn the_quick_fault_scenarios_pass() {
    if slotguard_process_tests::server_binaries().is_none() {
        println!(
            "skipped: no PostgreSQL server binaries (initdb) under /usr/lib/postgresql/*/bin, \
             so no throwaway cluster can be started"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sg-faults.out");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sg-faults"))
        // `all` with `--quick`: the scenarios the table (`src/bin/faults/table.rs`) marks quick.
        .args(["--scenario", "all", "--quick", "--seed", "1", "--node"])
        .arg(env!("CARGO_BIN_EXE_sg-node"))
        .stdout(Stdio::from(std::fs::File::create(&log).expect("log file")))
        .spawn()
        .expect("spawn sg-faults");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "sg-faults did not finish within {LIMIT:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    println!("{output}");
    assert!(
        status.success(),
        "sg-faults failed ({status}) after {:.0?}:\n{output}",
        started.elapsed()
    );
    // The first line names the scenarios it runs.
    let planned = output
        .lines()
        .find_map(|l| l.split(" scenarios=").nth(1))
        .map_or(0, |names| names.split(',').count());
    let results = output.lines().filter(|l| l.starts_with("RESULT ")).count();
    assert!(planned > 0, "no list of scenarios in:\n{output}");
    assert_eq!(results, planned, "one result per scenario");
}
