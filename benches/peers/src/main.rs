//! `peers`: the same every-second job on R in-process replicas, for slotguard and its Rust peers, on one
//! PostgreSQL server. Each execution writes a ledger row; the table printed at the end counts
//! executions, distinct slots, duplicates, missed slots and start lag per system.
//!
//! See README.md beside Cargo.toml for what is measured and the fairness notes.

mod ledger;
mod systems;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ledger::{Ledger, Summary};

/// The command line: `--replicas R --seconds D --systems a,b,c --url URL`.
#[derive(Debug, Clone)]
pub struct Args {
    pub replicas: usize,
    pub seconds: u64,
    pub systems: Vec<String>,
    pub url: String,
    pub keep: bool,
}

const ALL_SYSTEMS: &[&str] = &[
    "slotguard",
    "slotguard-claim-ahead",
    "tokio-cron-scheduler",
    "tokio-cron-scheduler-memory",
    "apalis",
    "apalis-idempotency",
];

fn usage() -> ! {
    eprintln!(
        "usage: peers [--replicas R (3)] [--seconds D (30)] [--systems {}] [--url URL] [--keep]\n\
         URL defaults to $PEERS_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test",
        ALL_SYSTEMS.join(",")
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        replicas: 3,
        seconds: 30,
        systems: ALL_SYSTEMS.iter().map(|s| s.to_string()).collect(),
        url: std::env::var("PEERS_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--replicas" => args.replicas = value().parse().unwrap_or_else(|_| usage()),
            "--seconds" => args.seconds = value().parse().unwrap_or_else(|_| usage()),
            "--systems" => {
                args.systems = value().split(',').map(|s| s.trim().to_owned()).collect();
                if let Some(bad) = args
                    .systems
                    .iter()
                    .find(|s| !ALL_SYSTEMS.contains(&s.as_str()))
                {
                    eprintln!("unknown system {bad:?}");
                    usage();
                }
            }
            "--url" => args.url = value(),
            "--keep" => args.keep = true,
            _ => usage(),
        }
    }
    if args.replicas == 0 || args.seconds < 8 {
        eprintln!("need at least 1 replica and 8 seconds");
        usage();
    }
    args
}

/// The measured window of one system: whole-second slots `first..=last`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
}

/// Waits until just after the next whole second (+50 ms), so every system starts at the same phase.
async fn align_to_second() {
    let now = Utc::now();
    let into = now.timestamp_subsec_millis() as u64;
    tokio::time::sleep(Duration::from_millis(1000 - into + 50)).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args();
    let run_id = format!("{:x}", Utc::now().timestamp());
    let ledger = Ledger::create(&args.url, &run_id).await?;
    eprintln!(
        "peers: run {run_id}, {} replicas, {} s per system, ledger {}",
        args.replicas,
        args.seconds,
        ledger.table()
    );

    let mut summaries: Vec<(String, Result<Summary, String>, String)> = Vec::new();
    for system in &args.systems {
        align_to_second().await;
        eprintln!("peers: {system}: starting {} replicas", args.replicas);
        let outcome = systems::run(system, &args, &run_id, &ledger).await;
        let row = match outcome {
            Ok((window, note)) => {
                // Late ledger inserts (a body still running at the stop) land within a second.
                tokio::time::sleep(Duration::from_millis(500)).await;
                let summary = ledger.summarize(system, window).await;
                (system.clone(), summary.map_err(|e| e.to_string()), note)
            }
            Err(e) => (system.clone(), Err(e), String::new()),
        };
        match &row.1 {
            Ok(s) => eprintln!("peers: {system}: {s:?}"),
            Err(e) => eprintln!("peers: {system}: FAILED: {e}"),
        }
        summaries.push(row);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    print_table(&args, &summaries);
    if !args.keep {
        ledger.drop_all().await;
    }
    Ok(())
}

fn print_table(args: &Args, rows: &[(String, Result<Summary, String>, String)]) {
    println!();
    println!(
        "{} replicas, job every second, {} s per system (slots counted over the whole window, \
         missed slots over it less its first and last 2 s)",
        args.replicas, args.seconds
    );
    println!();
    println!(
        "| system | executions | distinct slots | duplicates / 1,000 slots | missed slots | start lag p50 (ms) | start lag p99 (ms) | slot = |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (system, summary, note) in rows {
        match summary {
            Ok(s) => println!(
                "| {system} | {} | {} | {:.0} | {} of {} | {:.1} | {:.1} | {note} |",
                s.executions,
                s.distinct_slots,
                s.duplicates_per_1000(),
                s.missed,
                s.missed_of,
                s.lag_p50_ms,
                s.lag_p99_ms
            ),
            Err(e) => println!("| {system} | failed: {e} | | | | | | |"),
        }
    }
}
