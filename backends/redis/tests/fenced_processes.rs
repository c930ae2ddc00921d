//! The diagram of the issue, with real processes: replica A holds the Redis lock and is `SIGSTOP`ped
//! past its TTL; replica B takes the lock with a higher token and writes; A wakes, its write is
//! refused by the target (a table written only `WHERE fence <= token`), and A is told `lost`.
//!
//! The replicas are this test binary run again with `SG_FENCED_REPLICA` set (see `replica`).

use std::process::Command;
use std::time::Duration;

use slotguard::{GuardLevel, Job, JobContext, Scheduler};
use slotguard_process_tests::Node;
use slotguard_redis::RedisLocks;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

const ROLE: &str = "SG_FENCED_REPLICA";
const TTL: Duration = Duration::from_millis(1_000);

/// The target system: one row, written only with a token at least as high as the last one.
async fn target(path: &str) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePool::connect_with(options).await.expect("target");
    sqlx::query("CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, fence INTEGER NOT NULL, writer TEXT NOT NULL)")
        .execute(&pool)
        .await
        .expect("create");
    sqlx::query("INSERT OR IGNORE INTO ledger (id, fence, writer) VALUES (1, 0, '')")
        .execute(&pool)
        .await
        .expect("seed");
    pool
}

/// Writes as `writer` with `token`; `false` when the target has seen a higher token.
async fn fenced_write(pool: &SqlitePool, token: i64, writer: &str) -> bool {
    sqlx::query("UPDATE ledger SET fence = ?1, writer = ?2 WHERE id = 1 AND fence <= ?1")
        .bind(token)
        .bind(writer)
        .execute(pool)
        .await
        .expect("write")
        .rows_affected()
        == 1
}

/// One replica: a `lock`-level job on Redis that writes to the target every 200 ms for as long as it
/// runs, printing what happens. Returns at once unless run as a replica.
#[test]
fn replica() {
    let Ok(args) = std::env::var(ROLE) else {
        return;
    };
    let args: Vec<String> = args.split('|').map(str::to_owned).collect();
    let [url, prefix, db, name] = args.as_slice() else {
        panic!("{ROLE}: url|prefix|db|name");
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(run_replica(url, prefix, db, name));
}

async fn run_replica(url: &str, prefix: &str, db: &str, name: &str) {
    let pool = target(db).await;
    let locks = RedisLocks::new(url)
        .expect("url")
        .lease_ttl(TTL)
        .prefix(prefix);
    let name = name.to_owned();
    let job = Job::new("fenced", "* * * * * *", move |ctx: JobContext| {
        let (pool, name) = (pool.clone(), name.clone());
        async move {
            let token = ctx.fencing_token().expect("a Redis lease token");
            println!("started {token}");
            for _ in 0..150 {
                // Work first, then look: a paused process wakes up in the middle of its work.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if fenced_write(&pool, token, &name).await {
                    println!("wrote {token}");
                } else {
                    println!("refused {token}");
                }
                if ctx.is_lost() {
                    println!("lost {token}");
                    return;
                }
            }
        }
    })
    .guard(GuardLevel::Lock);
    let handle = Scheduler::builder()
        .lock_store(locks)
        .grace_period(Duration::from_millis(100))
        .kill_after(Duration::from_millis(100))
        .job(job)
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    // libtest has written `test replica ... ` without a newline.
    println!("\nready");
    let _ = tokio::signal::ctrl_c().await;
    handle.shutdown().await;
}

/// Starts this test binary again as a replica. `Node::spawn` takes no environment, so the role goes
/// through `env(1)`.
fn spawn(url: &str, prefix: &str, db: &str, name: &str) -> Node {
    let exe = std::env::current_exe().expect("test binary");
    let args = vec![
        format!("{ROLE}={}", [url, prefix, db, name].join("|")),
        exe.display().to_string(),
        "replica".to_owned(),
        "--exact".to_owned(),
        "--nocapture".to_owned(),
        "--test-threads=1".to_owned(),
    ];
    Node::spawn("env", &args)
}

fn token_of(line: &str) -> i64 {
    line.rsplit(' ')
        .next()
        .and_then(|t| t.parse().ok())
        .expect("token")
}

#[test]
fn a_holder_stopped_past_its_ttl_is_fenced_off_and_told_lost() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    assert!(
        Command::new("redis-cli").arg("ping").output().is_ok(),
        "redis-cli"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("target.db").display().to_string();
    let url = "redis://127.0.0.1:6379";
    let prefix = format!(
        "fenced:{}:{}",
        std::process::id(),
        slotguard_process_tests::unique("p")
    );

    let mut a = spawn(url, &prefix, &db, "a");
    a.wait_for("ready", Duration::from_secs(30));
    let token_a = token_of(&a.wait_for("started", Duration::from_secs(5)));
    a.wait_for("wrote", Duration::from_secs(5));
    let mut b = spawn(url, &prefix, &db, "b");
    b.wait_for("ready", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        !b.seen.iter().any(|l| l.starts_with("started")),
        "b ran while a held the lock: {:?}",
        b.seen
    );

    a.signal("STOP");
    let token_b = token_of(&b.wait_for("started", TTL * 2 + Duration::from_secs(3)));
    assert!(token_b > token_a, "b's token {token_b} after a's {token_a}");
    b.wait_for("wrote", Duration::from_secs(2));

    a.signal("CONT");
    let refused = a.wait_for("refused", Duration::from_secs(3));
    assert_eq!(token_of(&refused), token_a);
    a.wait_for("lost", Duration::from_secs(3));
    assert!(
        !a.seen
            .iter()
            .skip_while(|l| !l.starts_with("refused"))
            .any(|l| l.starts_with("wrote")),
        "a wrote after it woke: {:?}",
        a.seen
    );
    // b is not disturbed by a's late renewal attempts: it keeps writing.
    std::thread::sleep(Duration::from_millis(600));
    b.wait_for("wrote", Duration::from_secs(2));
    assert!(
        !b.seen
            .iter()
            .any(|l| l.starts_with("refused") || l.starts_with("lost")),
        "{:?}",
        b.seen
    );

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (fence, writer): (i64, String) = rt.block_on(async {
        let pool = target(&db).await;
        sqlx::query_as("SELECT fence, writer FROM ledger WHERE id = 1")
            .fetch_one(&pool)
            .await
            .expect("read")
    });
    assert_eq!((fence, writer.as_str()), (token_b, "b"));
    a.signal("INT");
    b.signal("INT");
    let (_, a_ok) = a.finish(Duration::from_secs(10));
    let (_, b_ok) = b.finish(Duration::from_secs(10));
    assert!(a_ok && b_ok);
}
