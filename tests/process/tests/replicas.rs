//! Replicas as real OS processes on real stores, with real signals. Every job body writes to an
//! effects ledger first, so duplicates are counted from what actually ran.

// Each test holds a guard that serializes the tests of this file (they start many processes and time
// recoveries); every test has its own runtime, so holding it across awaits cannot deadlock.
#![allow(clippy::await_holding_lock)]

use std::time::Duration;

use chrono::Utc;
use slotguard_process_tests::{
    Cluster, Effect, Node, drop_schema, every_second, executions, ledger_in, read_ledger,
    shared_pg_url, signal, unique,
};

const NODE: &str = env!("CARGO_BIN_EXE_sg-node");

/// The process tests start many processes and measure recovery times: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lock keys are per database, not per schema: each test derives its own from its own namespace.
fn namespace_of(store: &str) -> String {
    store
        .rsplit(['#', '/'])
        .next()
        .unwrap_or("default")
        .to_owned()
}

fn args(store: &str, instance: &str, ledger: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--namespace".into(),
        namespace_of(store),
        "--store".into(),
        store.into(),
        "--instance".into(),
        instance.into(),
        "--ledger".into(),
        ledger.to_string_lossy().into_owned(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

async fn connect(url: &str, schema: &str) -> slotguard_postgres::PgBackend {
    slotguard_postgres::PgBackend::builder(url)
        .schema(schema)
        .connect()
        .await
        .expect("connect")
}

/// Every run of the effect's job, and the run of its slot.
async fn run_row(
    url: &str,
    schema: &str,
    effect: &Effect,
) -> (Vec<slotguard_postgres::RunRow>, slotguard_postgres::RunRow) {
    let backend = connect(url, schema).await;
    let rows = backend.runs(Some(&effect.job)).await.expect("runs");
    backend.close().await;
    let row = rows
        .iter()
        .find(|r| r.key.scheduled_at.format("%Y-%m-%dT%H:%M:%SZ").to_string() == effect.slot)
        .cloned()
        .expect("the run row");
    (rows, row)
}

fn start_nodes(store: &str, ledger: &std::path::Path, n: usize, extra: &[&str]) -> Vec<Node> {
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| Node::spawn(NODE, &args(store, &format!("n{i}"), ledger, extra)))
        .collect();
    for node in &mut nodes {
        node.wait_for("ready", Duration::from_secs(60));
    }
    nodes
}

fn stop_all(nodes: Vec<Node>) {
    for node in &nodes {
        node.signal("TERM");
    }
    for node in nodes {
        let (lines, ok) = node.finish(Duration::from_secs(30));
        assert!(ok, "clean exit: {lines:?}");
    }
}

/// Runs `n` replicas for `secs` and checks every slot of every job in the steady window ran exactly
/// once. Returns the number of slots checked.
fn race(store: &str, n: usize, jobs: usize, secs: u64) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = ledger_in(dir.path());
    let jobs_arg = jobs.to_string();
    let nodes = start_nodes(store, &ledger, n, &["--jobs", &jobs_arg, "--work-ms", "20"]);
    // The steady window: every replica is up.
    let from = Utc::now() + chrono::Duration::seconds(1);
    std::thread::sleep(Duration::from_secs(secs));
    let to = Utc::now() - chrono::Duration::seconds(1);
    stop_all(nodes);

    let effects = read_ledger(&ledger);
    let runs = executions(&effects);
    let duplicates: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicates.is_empty(),
        "duplicate executions: {duplicates:?}"
    );
    let expected = every_second(from, to);
    let mut missed = Vec::new();
    for job in 0..jobs {
        let name = format!("job{job:03}");
        for slot in &expected {
            if !runs.contains_key(&(name.clone(), slot.clone())) {
                missed.push((name.clone(), slot.clone()));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "{} missed slots, e.g. {:?}",
        missed.len(),
        &missed[..missed.len().min(5)]
    );
    let ends = effects.iter().filter(|e| e.kind == "end").count();
    assert_eq!(
        ends,
        effects.iter().filter(|e| e.kind == "start").count(),
        "every run ended"
    );
    expected.len() * jobs
}

#[test]
fn three_replicas_on_one_sqlite_file_run_each_slot_once() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("slots.db").display());
    let slots = race(&store, 3, 10, 8);
    assert!(slots >= 50, "{slots}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_replicas_race_on_a_thousand_slots_on_postgres() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_race");
    let store = format!("postgres:{url}#{schema}");
    let slots = tokio::task::spawn_blocking(move || race(&store, 8, 60, 19))
        .await
        .expect("race");
    drop_schema(&url, &schema).await;
    assert!(slots >= 1_000, "only {slots} slots were checked");
}

/// The single slot of a job that fires once a minute at second 0 ... a minute is too long for a
/// test, so these use a job every 10 seconds with long work.
fn long_job(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec![
        "--jobs",
        "1",
        "--cron",
        "*/10 * * * * *",
        "--stale-ms",
        "2000",
        "--recovery-ms",
        "300",
    ];
    v.extend_from_slice(extra);
    v
}

fn wait_for_effect(
    ledger: &std::path::Path,
    limit: Duration,
    what: impl Fn(&Effect) -> bool,
) -> Effect {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(e) = read_ledger(ledger).into_iter().find(|e| what(e)) {
            return e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no such effect within {limit:?}: {:?}",
            read_ledger(ledger)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_owner_is_recovered_once_within_the_stale_threshold() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_kill");
    let store = format!("postgres:{url}#{schema}");
    let report = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = ledger_in(dir.path());
        let nodes = start_nodes(&store, &ledger, 2, &long_job(&["--work-ms", "4000"]));
        let first = wait_for_effect(&ledger, Duration::from_secs(15), |e| e.kind == "start");
        let killed_at = std::time::Instant::now();
        signal(first.pid, "KILL");
        let recovered = wait_for_effect(&ledger, Duration::from_secs(10), |e| {
            e.kind == "start" && e.slot == first.slot && e.attempt == 2
        });
        let recovery_took = killed_at.elapsed();
        let done = wait_for_effect(&ledger, Duration::from_secs(10), |e| {
            e.kind == "end" && e.slot == first.slot
        });
        let survivors: Vec<Node> = nodes.into_iter().filter(|n| n.pid() != first.pid).collect();
        stop_all(survivors);
        let effects = read_ledger(&ledger);
        (first, recovered, done, recovery_took, effects)
    })
    .await
    .expect("test");
    let (first, recovered, done, recovery_took, effects) = report;
    assert_ne!(recovered.pid, first.pid);
    assert!(recovered.token > first.token);
    assert_eq!(done.pid, recovered.pid);
    // Stale threshold (2 s) plus one recovery poll (0.3 s), with slack for a loaded machine.
    assert!(
        recovery_took < Duration::from_millis(2_000 + 300 + 1_500),
        "{recovery_took:?}"
    );
    let attempts: Vec<_> = effects
        .iter()
        .filter(|e| e.kind == "start" && e.slot == first.slot && e.job == first.job)
        .collect();
    assert_eq!(
        attempts.len(),
        2,
        "exactly one recovery attempt: {attempts:?}"
    );

    let (rows, row) = run_row(&url, &schema, &first).await;
    assert_eq!(
        row.status,
        slotguard::store::RunStatus::Succeeded,
        "{row:?}"
    );
    assert_eq!(row.attempt, 2);
    assert!(
        rows.iter()
            .all(|r| r.status != slotguard::store::RunStatus::Running
                || r.key.scheduled_at > Utc::now() - chrono::Duration::seconds(5))
    );
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_owner_is_fenced_when_it_wakes_up() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_stop");
    let store = format!("postgres:{url}#{schema}");
    let (first, effects) = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = ledger_in(dir.path());
        let nodes = start_nodes(&store, &ledger, 2, &long_job(&["--work-ms", "8000"]));
        let first = wait_for_effect(&ledger, Duration::from_secs(15), |e| e.kind == "start");
        signal(first.pid, "STOP");
        // Past the stale threshold: the other replica takes the slot over.
        wait_for_effect(&ledger, Duration::from_secs(10), |e| {
            e.kind == "start" && e.slot == first.slot && e.attempt == 2
        });
        signal(first.pid, "CONT");
        // The woken owner's next heartbeat is refused and its job is told.
        wait_for_effect(&ledger, Duration::from_secs(10), |e| {
            e.kind == "lost" && e.pid == first.pid
        });
        wait_for_effect(&ledger, Duration::from_secs(15), |e| {
            e.kind == "end" && e.slot == first.slot && e.attempt == 2
        });
        stop_all(nodes);
        (first, read_ledger(&ledger))
    })
    .await
    .expect("test");
    assert!(
        !effects
            .iter()
            .any(|e| e.kind == "end" && e.pid == first.pid && e.slot == first.slot),
        "the stopped owner did not complete its stale attempt: {effects:?}"
    );
    let (_, row) = run_row(&url, &schema, &first).await;
    assert_eq!(row.status, slotguard::store::RunStatus::Succeeded);
    assert_eq!(
        row.attempt, 2,
        "one accepted completion, by the second attempt"
    );
    assert_eq!(
        row.attempts[0].status,
        slotguard::store::RunStatus::Abandoned,
        "{row:?}"
    );
    drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_in_flight_runs_over_and_claims_nothing_after() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_term");
    let store = format!("postgres:{url}#{schema}");
    let (first, effects, signalled_at) = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = ledger_in(dir.path());
        let mut nodes = start_nodes(
            &store,
            &ledger,
            2,
            &long_job(&["--work-ms", "6000", "--grace-ms", "500"]),
        );
        let first = wait_for_effect(&ledger, Duration::from_secs(15), |e| e.kind == "start");
        let index = nodes
            .iter()
            .position(|n| n.pid() == first.pid)
            .expect("owner");
        let owner = nodes.remove(index);
        let signalled_at = Utc::now();
        owner.signal("TERM");
        let (lines, ok) = owner.finish(Duration::from_secs(10));
        assert!(ok, "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l == "stopped in_flight=1 finished_in_grace=false abandoned=1"),
            "{lines:?}"
        );
        // Handed over at once, not after the stale threshold.
        wait_for_effect(&ledger, Duration::from_secs(2), |e| {
            e.kind == "start" && e.slot == first.slot && e.attempt == 2
        });
        wait_for_effect(&ledger, Duration::from_secs(10), |e| {
            e.kind == "end" && e.slot == first.slot
        });
        stop_all(nodes);
        (first, read_ledger(&ledger), signalled_at)
    })
    .await
    .expect("test");
    let after: Vec<_> = effects
        .iter()
        .filter(|e| {
            e.kind == "start"
                && e.pid == first.pid
                && e.slot > signalled_at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
        })
        .collect();
    assert!(after.is_empty(), "claimed after the signal: {after:?}");
    let backend = connect(&url, &schema).await;
    let rows = backend.runs(None).await.expect("runs");
    assert!(
        rows.iter()
            .all(|r| r.status != slotguard::store::RunStatus::Running),
        "nothing left running: {rows:?}"
    );
    drop_schema(&url, &schema).await;
}

/// Terminates the PostgreSQL session holding the advisory lock of the job a single replica at
/// `guard` is running (8 s bodies); returns the ledger, the first execution, the nodes and the pool.
async fn terminate_lock_session_of_running_job(
    url: &str,
    schema: &str,
    guard: &'static str,
) -> (
    std::path::PathBuf,
    Effect,
    Vec<Node>,
    sqlx::PgPool,
    tempfile::TempDir,
) {
    let store = format!("postgres:{url}#{schema}");
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = ledger_in(dir.path());
    let ledger2 = ledger.clone();
    let nodes = tokio::task::spawn_blocking(move || {
        // Retries need the `slot` level: one attempt at `lock`.
        let attempts = if guard == "lock" { "1" } else { "5" };
        let args = long_job(&[
            "--work-ms",
            "8000",
            "--lock-check-ms",
            "300",
            "--guard",
            guard,
            "--max-attempts",
            attempts,
        ]);
        start_nodes(&store, &ledger2, 1, &args)
    })
    .await
    .expect("start");
    let l = ledger.clone();
    let first = tokio::task::spawn_blocking(move || {
        wait_for_effect(&l, Duration::from_secs(15), |e| e.kind == "start")
    })
    .await
    .expect("start");
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let key = slotguard::derive_lock_key(schema, &first.job);
    let terminated: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_locks \
         WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint = $1 AND objid::bigint = $2",
    )
    .bind((key >> 32) & 0xffff_ffff)
    .bind(key & 0xffff_ffff)
    .fetch_all(&pool)
    .await
    .expect("terminate");
    assert!(!terminated.is_empty(), "the lock session was found");
    (ledger, first, nodes, pool, dir)
}

/// At the `lock` level the lock is all there is: losing its session tells the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_the_lock_session_tells_a_lock_level_job() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_lock");
    let (ledger, first, nodes, pool, _dir) =
        terminate_lock_session_of_running_job(&url, &schema, "lock").await;
    let l = ledger.clone();
    let lost = tokio::task::spawn_blocking(move || {
        wait_for_effect(&l, Duration::from_secs(5), |e| e.kind == "lost")
    })
    .await
    .expect("lost");
    assert_eq!(
        (lost.slot.as_str(), lost.pid),
        (first.slot.as_str(), first.pid)
    );
    tokio::task::spawn_blocking(move || stop_all(nodes))
        .await
        .expect("stop");
    pool.close().await;
    drop_schema(&url, &schema).await;
}

/// At the `slot` level the row is the authority: when only the lock's session dies, the job goes on
/// (not told `lost`), its one attempt succeeds, and the lock is taken again on a fresh session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_only_the_lock_session_lets_a_slot_level_job_go_on() {
    let _serial = serial();
    let url = shared_pg_url();
    let schema = unique("sg_lock");
    let (ledger, first, nodes, pool, _dir) =
        terminate_lock_session_of_running_job(&url, &schema, "slot").await;
    let key = slotguard::derive_lock_key(&schema, &first.job);
    let held_again = async {
        for _ in 0..50 {
            let held: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND objsubid = 1 AND classid::bigint = $1 AND objid::bigint = $2)",
            )
            .bind((key >> 32) & 0xffff_ffff)
            .bind(key & 0xffff_ffff)
            .fetch_one(&pool)
            .await
            .expect("pg_locks");
            if held {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(held_again.await, "the lock was taken again within 5 s");
    let l = ledger.clone();
    let ended = tokio::task::spawn_blocking(move || {
        wait_for_effect(&l, Duration::from_secs(12), |e| {
            (e.kind == "end" || e.kind == "lost") && e.token == first.token
        })
    })
    .await
    .expect("end");
    assert_eq!(ended.kind, "end", "the body ran to its end, not told lost");
    tokio::task::spawn_blocking(move || stop_all(nodes))
        .await
        .expect("stop");
    let (_, row) = run_row(&url, &schema, &first).await;
    assert_eq!(
        row.status,
        slotguard::store::RunStatus::Succeeded,
        "{row:?}"
    );
    assert_eq!(row.attempts.len(), 1, "one attempt, not retried: {row:?}");
    pool.close().await;
    drop_schema(&url, &schema).await;
}

#[test]
fn replicas_survive_a_postgres_restart_without_duplicates() {
    let _serial = serial();
    let Some(cluster) = Cluster::start() else {
        panic!("PostgreSQL server binaries (initdb, pg_ctl) are needed for this test");
    };
    let store = format!("postgres:{}#slotguard", cluster.url());
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = ledger_in(dir.path());
    let nodes = start_nodes(&store, &ledger, 3, &["--jobs", "5", "--work-ms", "20"]);
    std::thread::sleep(Duration::from_secs(3));
    cluster.stop();
    std::thread::sleep(Duration::from_secs(3));
    cluster.restart();
    let back = Utc::now();
    std::thread::sleep(Duration::from_secs(6));
    stop_all(nodes);
    let effects = read_ledger(&ledger);
    let runs = executions(&effects);
    let duplicates: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicates: {duplicates:?}");
    // Work resumed once the database was back (allow a few seconds to reconnect).
    let resumed = effects
        .iter()
        .filter(|e| {
            e.kind == "start"
                && e.slot
                    > (back + chrono::Duration::seconds(3))
                        .format("%Y-%m-%dT%H:%M:%SZ")
                        .to_string()
        })
        .count();
    assert!(resumed >= 5, "runs after the restart: {resumed}");
}
