//! `sg-faults`: the fault-injection harness. It starts one throwaway PostgreSQL cluster on loopback
//! (and a throwaway `redis-server` for each Redis scenario), runs each scenario in a schema of its
//! own with `sg-node` replica processes, injects faults by process id (`kill -9`, `SIGSTOP`), by SQL
//! (`pg_terminate_backend`), by server restart and through a TCP fault proxy, and checks the
//! invariants of [`invariants`](slotguard_process_tests::invariants) over the effects ledger and the
//! runs table. One result line per scenario; exits 1 when any scenario fails, 2 when it cannot run.
//!
//! ```text
//! cargo run -p slotguard-process-tests --bin sg-faults -- --scenario all --seed 1 [--quick]
//! cargo run -p slotguard-process-tests --bin sg-faults -- --scenario kill9,sigstop --seed 7
//! ```
//!
//! Every random choice (which replica, when, how long) comes from `--seed` and the scenario's name, so
//! a scenario picks the same faults whether it runs alone or in `all`; the timing of the processes
//! themselves is the machine's.
//!
//! The harness (`faults/harness.rs`: arguments, selection, running and reporting; `faults/sc.rs`: a
//! scenario's schema, ledger, seed and replicas; `faults/util.rs`: shared helpers) is apart from the
//! scenarios, which `faults/table.rs` lists, one file each (or a few closely related ones together).

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

// The crate root's modules resolve next to it: these live in `faults/`.
#[path = "faults/harness.rs"]
mod harness;
#[path = "faults/prelude.rs"]
mod prelude;
#[path = "faults/sc.rs"]
mod sc;
#[path = "faults/table.rs"]
mod table;
#[path = "faults/util.rs"]
mod util;

#[path = "faults/busy.rs"]
mod busy;
#[path = "faults/catchup.rs"]
mod catchup;
#[path = "faults/catchup_kill.rs"]
mod catchup_kill;
#[path = "faults/clock.rs"]
mod clock;
#[path = "faults/dead_owner.rs"]
mod dead_owner;
#[path = "faults/dst.rs"]
mod dst;
#[path = "faults/dst_check.rs"]
mod dst_check;
#[path = "faults/failover.rs"]
mod failover;
#[path = "faults/kill9.rs"]
mod kill9;
#[path = "faults/lock_session.rs"]
mod lock_session;
#[path = "faults/once_abandoned.rs"]
mod once_abandoned;
#[path = "faults/overrun.rs"]
mod overrun;
#[path = "faults/pair.rs"]
mod pair;
#[path = "faults/pool.rs"]
mod pool;
#[path = "faults/pooler.rs"]
mod pooler;
#[path = "faults/proxy.rs"]
mod proxy;
#[path = "faults/race.rs"]
mod race;
#[path = "faults/redis.rs"]
mod redis;
#[path = "faults/restart.rs"]
mod restart;
#[path = "faults/retries.rs"]
mod retries;
#[path = "faults/rolling.rs"]
mod rolling;
#[path = "faults/sched_edits.rs"]
mod sched_edits;
#[path = "faults/sigstop.rs"]
mod sigstop;
#[path = "faults/terminate.rs"]
mod terminate;
#[path = "faults/tick_restart.rs"]
mod tick_restart;
#[path = "faults/worker_overlap.rs"]
mod worker_overlap;
#[path = "faults/workers.rs"]
mod workers;

use harness::{Cli, Harness};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        harness::list();
        return ExitCode::SUCCESS;
    }
    let scenarios = match harness::select(&cli.scenario, cli.quick) {
        Ok(scenarios) => scenarios,
        Err(unknown) => {
            eprintln!("sg-faults: unknown scenario `{unknown}`; --list shows them");
            return ExitCode::from(2);
        }
    };
    let prepared = cli
        .node
        .clone()
        .map_or_else(harness::find_node, Ok)
        .and_then(|node| Ok((node, harness::start_cluster()?)));
    let (node, cluster) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("sg-faults: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let h = Harness {
        rt,
        cluster,
        node,
        quick: cli.quick,
        replicas: cli.replicas.clamp(2, 12),
        seed: cli.seed,
    };
    let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
    println!(
        "sg-faults seed={} quick={} replicas={} cluster=127.0.0.1:{} scenarios={}",
        h.seed,
        h.quick,
        h.replicas,
        h.cluster.port(),
        names.join(",")
    );
    let started = Instant::now();
    let failed: Vec<&str> = scenarios
        .iter()
        .filter(|s| !harness::run(&h, s))
        .map(|s| s.name)
        .collect();
    harness::summary(names.len(), &failed, started)
}
