//! The CI subset of the fault-injection harness: `sg-faults --quick --seed 1` as a process, on a
//! throwaway PostgreSQL cluster of its own (and, for `redisrows` and `redislock`, throwaway
//! `redis-server`s: Debian's `redis-server`, which `.ci/run` installs). The full set is
//! `sg-faults --scenario all` (see docs/RELIABILITY.md).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every scenario, at its quick size.
const QUICK: &str = "race,kill9,sigstop,terminate,restart,overrun,retries,catchup,catchupkill,skew,clockjump,proxy,pool,dst,rolling,busykill,busystop,locksession,tickrestart,spread,redisrows,redislock,redisrestart";

/// Far above the few minutes the subset takes, so that a hung scenario fails instead of hanging CI.
const LIMIT: Duration = Duration::from_secs(15 * 60);

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
        .args(["--scenario", QUICK, "--quick", "--seed", "1", "--node"])
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
    let results = output.lines().filter(|l| l.starts_with("RESULT ")).count();
    assert_eq!(results, QUICK.split(',').count(), "one result per scenario");
}
