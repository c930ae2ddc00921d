//! `peers`: the same every-second job on R in-process replicas, for slotguard and its Rust peers, on one
//! PostgreSQL server, and an every-minute job for graphile-worker (R Node.js processes; its crontab has
//! no seconds field) beside slotguard on the same minute schedule. Each execution writes a ledger row;
//! the table printed at the end counts executions, distinct slots, duplicates, missed slots and start
//! lag per system.
//!
//! See README.md beside Cargo.toml for what is measured and the fairness notes.

mod graphile;
mod ledger;
mod systems;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ledger::{Ledger, Summary};

/// The command line: `--replicas R --seconds D --minutes M --systems a,b,c --url URL`.
#[derive(Debug, Clone)]
pub struct Args {
    pub replicas: usize,
    pub seconds: u64,
    pub minutes: u64,
    pub systems: Vec<String>,
    pub url: String,
    pub keep: bool,
    /// graphile-worker's crontab `fill=` option (backfill period, a time phrase such as `2m`).
    pub graphile_fill: Option<String>,
}

/// Systems with the every-second job (`*/1 * * * * *`), run for `--seconds` each.
const SECOND_SYSTEMS: &[&str] = &[
    "slotguard",
    "slotguard-claim-ahead",
    "tokio-cron-scheduler",
    "tokio-cron-scheduler-memory",
    "apalis",
    "apalis-idempotency",
];

/// Systems with the every-minute job (`* * * * *`), run for `--minutes` each. graphile-worker's crontab
/// has minute granularity, so it is measured at that schedule, beside slotguard on the same one.
const MINUTE_SYSTEMS: &[&str] = &[
    "slotguard-minute",
    "graphile-worker",
    "graphile-worker-restart",
];

/// Run when `--systems` is not given: all but the restart variant.
fn default_systems() -> Vec<String> {
    SECOND_SYSTEMS
        .iter()
        .chain(MINUTE_SYSTEMS)
        .filter(|s| **s != "graphile-worker-restart")
        .map(|s| s.to_string())
        .collect()
}

pub fn is_minute_system(system: &str) -> bool {
    MINUTE_SYSTEMS.contains(&system)
}

fn usage() -> ! {
    eprintln!(
        "usage: peers [--replicas R (3)] [--seconds D (30)] [--minutes M (10)] [--systems {},{}]\n\
         \x20            [--url URL] [--keep] [--graphile-fill TIME_PHRASE]\n\
         URL defaults to $PEERS_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test",
        SECOND_SYSTEMS.join(","),
        MINUTE_SYSTEMS.join(",")
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        replicas: 3,
        seconds: 30,
        minutes: 10,
        systems: default_systems(),
        url: std::env::var("PEERS_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
        keep: false,
        graphile_fill: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--replicas" => args.replicas = value().parse().unwrap_or_else(|_| usage()),
            "--seconds" => args.seconds = value().parse().unwrap_or_else(|_| usage()),
            "--minutes" => args.minutes = value().parse().unwrap_or_else(|_| usage()),
            "--systems" => {
                args.systems = value().split(',').map(|s| s.trim().to_owned()).collect();
                if let Some(bad) = args
                    .systems
                    .iter()
                    .find(|s| !SECOND_SYSTEMS.contains(&s.as_str()) && !is_minute_system(s))
                {
                    eprintln!("unknown system {bad:?}");
                    usage();
                }
            }
            "--url" => args.url = value(),
            "--keep" => args.keep = true,
            "--graphile-fill" => {
                let fill = value();
                if fill.is_empty() || !fill.chars().all(|c| c.is_ascii_alphanumeric()) {
                    eprintln!("--graphile-fill takes a time phrase such as 2m or 1h30m");
                    usage();
                }
                args.graphile_fill = Some(fill);
            }
            _ => usage(),
        }
    }
    if args.replicas == 0 || args.seconds < 8 || args.minutes < 2 {
        eprintln!("need at least 1 replica, 8 seconds and 2 minutes");
        usage();
    }
    if args.minutes < 4 && args.systems.iter().any(|s| s == "graphile-worker-restart") {
        eprintln!("graphile-worker-restart needs --minutes 4 or more");
        usage();
    }
    args
}

/// The measured window of one system: slots `first..=last`, one every `step_secs` seconds. Missed
/// slots are counted over the window less `margin` slots at each end.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub step_secs: i64,
    pub margin: i64,
}

/// Waits until just after the next whole second (+50 ms), so every system starts at the same phase.
async fn align_to_second() {
    let now = Utc::now();
    let into = now.timestamp_subsec_millis() as u64;
    tokio::time::sleep(Duration::from_millis(1000 - into + 50)).await;
}

/// Waits until 15 s (+50 ms) into a minute, for the every-minute systems: their first slot is then
/// 45 s after the start, and the run stops 15 s after its last slot.
async fn align_to_minute() {
    let now = Utc::now();
    let into_ms = (now.timestamp() % 60) as u64 * 1000 + now.timestamp_subsec_millis() as u64;
    let target_ms = 15_050;
    let wait = (target_ms + 60_000 - into_ms) % 60_000;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args();
    let run_id = format!("{:x}", Utc::now().timestamp());
    let ledger = Ledger::create(&args.url, &run_id).await?;
    eprintln!(
        "peers: run {run_id}, {} replicas, {} s per every-second system, {} min per every-minute \
         system, ledger {}",
        args.replicas,
        args.seconds,
        args.minutes,
        ledger.table()
    );

    if args
        .systems
        .iter()
        .any(|s| s.starts_with("graphile-worker"))
    {
        // Installs graphile-worker's npm package if needed (the error, if any, is the row's again).
        if let Err(e) = graphile::setup().await {
            eprintln!("peers: {e}");
        }
    }

    let mut summaries: Vec<(String, Result<Summary, String>, String)> = Vec::new();
    for system in &args.systems {
        if is_minute_system(system) {
            align_to_minute().await;
        } else {
            align_to_second().await;
        }
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
        "{} replicas. Job every second: {} s per system (slots counted over the whole window, missed \
         slots over it less its first and last 2 s). Job every minute: {} min per system (missed \
         slots over the whole window).",
        args.replicas, args.seconds, args.minutes
    );
    println!();
    println!(
        "| system | schedule | executions | distinct slots | duplicates / 1,000 slots | missed slots | start lag p50 (ms) | start lag p99 (ms) | slot = |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|");
    for (system, summary, note) in rows {
        let schedule = if is_minute_system(system) {
            "`* * * * *`"
        } else {
            "`*/1 * * * * *`"
        };
        match summary {
            Ok(s) => println!(
                "| {system} | {schedule} | {} | {} | {:.0} | {} of {} | {:.1} | {:.1} | {note} |",
                s.executions,
                s.distinct_slots,
                s.duplicates_per_1000(),
                s.missed,
                s.missed_of,
                s.lag_p50_ms,
                s.lag_p99_ms
            ),
            Err(e) => println!("| {system} | {schedule} | failed: {e} | | | | | | |"),
        }
    }
}
