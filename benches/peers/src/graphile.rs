//! graphile-worker (Node.js): R replica processes (`graphile/replica.js`), each running graphile-worker
//! with its defaults and the crontab line `* * * * * peers_tick ?id=peers_every_minute` on one fresh
//! schema. graphile-worker's crontab has minute granularity (5 fields, no seconds), so this system runs
//! the every-minute job; `slotguard-minute` runs slotguard on the same schedule for comparison.
//!
//! Across workers, its crontab queues each minute once: every worker's cron loop upserts the item's
//! `_private_known_crontabs.last_execution` to the minute only where it is older, and adds the job only
//! when its upsert did that (one statement); whichever worker then fetches the job runs it.

use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::Args;
use crate::ledger::Ledger;

type Outcome = Result<(crate::Window, String), String>;

/// The npm package beside Cargo.toml: package.json, package-lock.json, replica.js.
const GRAPHILE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/graphile");

/// The versions found by the first successful [`setup`].
static VERSIONS: OnceLock<(String, String)> = OnceLock::new();

/// Checks for node and npm, runs `npm ci` if node_modules is missing, and returns the versions
/// (graphile-worker, node). main calls it once before the first system, so that an install does not
/// eat into a run's start.
pub async fn setup() -> Result<(String, String), String> {
    if let Some(versions) = VERSIONS.get() {
        return Ok(versions.clone());
    }
    let dir = Path::new(GRAPHILE_DIR);
    let node = Command::new("node")
        .arg("--version")
        .output()
        .await
        .map_err(|e| {
            format!(
                "graphile-worker needs Node.js 18+ (`node` and `npm` on PATH): `node --version` \
                 failed: {e}"
            )
        })?;
    let node_version = String::from_utf8_lossy(&node.stdout).trim().to_owned();
    if !dir
        .join("node_modules/graphile-worker/package.json")
        .exists()
    {
        eprintln!(
            "peers: graphile-worker: no node_modules, running `npm ci` in {}",
            dir.display()
        );
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .stdout(Stdio::from(std::io::stderr()))
            .status()
            .await
            .map_err(|e| {
                format!("graphile-worker needs npm (with Node.js 18+) to install its package: {e}")
            })?;
        if !status.success() {
            return Err(format!("`npm ci` in {} failed: {status}", dir.display()));
        }
    }
    let version = Command::new("node")
        .args(["-p", "require('graphile-worker/package.json').version"])
        .current_dir(dir)
        .output()
        .await
        .map_err(|e| format!("node: {e}"))?;
    let graphile_version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    if !version.status.success() || graphile_version.is_empty() {
        return Err(format!(
            "cannot read graphile-worker's version in {}/node_modules",
            dir.display()
        ));
    }
    let _ = VERSIONS.set((graphile_version.clone(), node_version.clone()));
    Ok((graphile_version, node_version))
}

struct Replica {
    index: usize,
    child: Child,
}

/// What every replica process gets.
struct Env<'a> {
    system: &'a str,
    url: &'a str,
    schema: &'a str,
    ledger: String,
    crontab_opts: String,
}

fn spawn(env: &Env<'_>, index: usize) -> Result<Replica, String> {
    let child = Command::new("node")
        .arg("replica.js")
        .current_dir(GRAPHILE_DIR)
        .env("PEERS_DATABASE_URL", env.url)
        .env("PEERS_GW_SCHEMA", env.schema)
        .env("PEERS_LEDGER", &env.ledger)
        .env("PEERS_SYSTEM", env.system)
        .env("PEERS_REPLICA", index.to_string())
        .env("PEERS_CRONTAB", "* * * * *")
        .env("PEERS_CRONTAB_OPTS", &env.crontab_opts)
        // Closing stdin asks the replica to stop gracefully.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn node replica.js: {e}"))?;
    Ok(Replica { index, child })
}

/// Waits for the replica's `ready` line (its `run()` resolved), then forwards its stdout to stderr.
async fn wait_ready(replica: &mut Replica) -> Result<(), String> {
    let index = replica.index;
    let stdout = replica
        .child
        .stdout
        .take()
        .ok_or("replica stdout not piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(line))) if line.trim() == "ready" => break,
            Ok(Ok(Some(line))) => eprintln!("graphile r{index}: {line}"),
            Ok(Ok(None)) => return Err(format!("replica {index} exited before it was ready")),
            Ok(Err(e)) => return Err(format!("replica {index} stdout: {e}")),
            Err(_) => return Err(format!("replica {index} not ready after 60 s")),
        }
    }
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("graphile r{index}: {line}");
        }
    });
    Ok(())
}

async fn start_all(env: &Env<'_>, replicas: &mut Vec<Replica>, count: usize) -> Result<(), String> {
    // Spawned together (their schema migrations race, which graphile-worker handles), then awaited.
    let first = replicas.len();
    for index in 0..count {
        replicas.push(spawn(env, index)?);
    }
    for replica in &mut replicas[first..] {
        wait_ready(replica).await?;
    }
    Ok(())
}

/// Graceful stop: close stdin (the replica calls `runner.stop()`), wait up to 15 s, then SIGKILL.
async fn stop_all(replicas: &mut Vec<Replica>) {
    for replica in replicas.iter_mut() {
        drop(replica.child.stdin.take());
    }
    for mut replica in replicas.drain(..) {
        match tokio::time::timeout(Duration::from_secs(15), replica.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => eprintln!("peers: graphile replica {}: {status}", replica.index),
            Ok(Err(e)) => eprintln!("peers: graphile replica {}: {e}", replica.index),
            Err(_) => {
                eprintln!(
                    "peers: graphile replica {} did not stop in 15 s; killing it",
                    replica.index
                );
                let _ = replica.child.kill().await;
            }
        }
    }
}

/// SIGKILL, no graceful stop: the crash of every replica at once.
async fn kill_all(replicas: &mut Vec<Replica>) {
    for mut replica in replicas.drain(..) {
        let _ = replica.child.kill().await;
    }
}

/// `restart`: every replica is SIGKILLed M/2 minutes (rounded down) after the start, about 16 s past
/// a minute, and started again 60 s later, so one minute boundary passes with no replica alive. Without
/// `--graphile-fill` (its default: no backfill) that slot is not run; with it, the restarted replicas
/// backfill it.
pub async fn run(
    system: &str,
    args: &Args,
    run_id: &str,
    ledger: &Ledger,
    restart: bool,
) -> Outcome {
    let (graphile_version, node_version) = setup().await?;
    eprintln!("peers: {system}: graphile-worker {graphile_version}, node {node_version}");
    let schema = format!("peers_{run_id}_gw{}", if restart { "r" } else { "" });
    let env = Env {
        system,
        url: &args.url,
        schema: &schema,
        ledger: ledger.table(),
        crontab_opts: args
            .graphile_fill
            .as_ref()
            .map(|f| format!("&fill={f}"))
            .unwrap_or_default(),
    };
    let mut replicas = Vec::new();
    let started_result = start_all(&env, &mut replicas, args.replicas).await;
    let started = Utc::now();
    let outcome = match started_result {
        Err(e) => Err(e),
        Ok(()) if !restart => {
            tokio::time::sleep(Duration::from_secs(args.minutes * 60)).await;
            Ok(())
        }
        Ok(()) => {
            let total = Duration::from_secs(args.minutes * 60);
            // The run starts about 15 s into a minute: kill at +k min (15 s into minute k), restart
            // 60 s later (15 s into minute k + 1), so the boundary of minute k + 1 has no replica.
            let kill_at = Duration::from_secs(args.minutes / 2 * 60);
            tokio::time::sleep(kill_at).await;
            eprintln!("peers: {system}: SIGKILL all {} replicas", replicas.len());
            kill_all(&mut replicas).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            eprintln!("peers: {system}: starting {} replicas again", args.replicas);
            match start_all(&env, &mut replicas, args.replicas).await {
                Err(e) => Err(e),
                Ok(()) => {
                    let elapsed = (Utc::now() - started).to_std().unwrap_or_default();
                    tokio::time::sleep(total.saturating_sub(elapsed)).await;
                    Ok(())
                }
            }
        }
    };
    let stopped = Utc::now();
    stop_all(&mut replicas).await;

    let left: Result<(i64, i64), _> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*), count(locked_at) FROM \"{schema}\"._private_jobs"
    )))
    .fetch_one(ledger.pool())
    .await;
    if let Ok((jobs, locked)) = left {
        eprintln!("peers: {system}: {jobs} jobs left in the queue at the stop ({locked} locked)");
    }
    if !args.keep {
        let res = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
        )))
        .execute(ledger.pool())
        .await;
        if let Err(e) = res {
            eprintln!("peers: could not drop schema {schema}: {e}");
        }
    }
    outcome?;
    let fill = match &args.graphile_fill {
        Some(f) => format!(", `fill={f}`"),
        None => String::new(),
    };
    Ok((
        crate::systems::minute_window(started, stopped),
        format!(
            "scheduled minute (`payload._cron.ts`); graphile-worker {graphile_version}, node \
             {node_version}{fill}"
        ),
    ))
}
