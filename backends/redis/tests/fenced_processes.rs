//! The diagram of the issue, with real processes: replica A holds the Redis lock and is `SIGSTOP`ped
//! past its TTL; replica B takes the lock with a higher token and writes; A wakes, its write is
//! refused by the target (a table written only `WHERE fence <= token`), and A is told `lost`.
//! With the same two replicas: A killed with `-9` (B takes over after the lease lapses, with a higher
//! token; a late write under A's token is refused), and a slow Redis between A and the server during
//! renewal (A keeps its lease under moderate latency; under latency past a third of the TTL it is
//! told `lost` before B's first write is accepted, and B takes over while A's link stays slow). Every test checks the target's log of accepted
//! writes: one holder at a time, in rising tokens.
//!
//! The replicas are this test binary run again with `SG_FENCED_REPLICA` set (see `replica`).

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use slotguard::{GuardLevel, Job, JobContext, Scheduler};
use slotguard_process_tests::Node;
use slotguard_process_tests::proxy::{Mode, Proxy};
use slotguard_redis::RedisLocks;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

const ROLE: &str = "SG_FENCED_REPLICA";
const TTL: Duration = Duration::from_millis(1_000);
/// The shared server: these tests stop, kill and slow down replicas, never Redis.
const SHARED: &str = "redis://127.0.0.1:6379";

/// The target system: one row, written only with a token at least as high as the last one, and a
/// log of the writes it accepted (token, writer, when in µs since the epoch).
async fn target(path: &str) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePool::connect_with(options).await.expect("target");
    for sql in [
        "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, fence INTEGER NOT NULL, writer TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS accepted (token INTEGER NOT NULL, writer TEXT NOT NULL, at_us INTEGER NOT NULL)",
        "INSERT OR IGNORE INTO ledger (id, fence, writer) VALUES (1, 0, '')",
    ] {
        sqlx::query(sql).execute(&pool).await.expect("schema");
    }
    pool
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// Writes as `writer` with `token`; `false` when the target has seen a higher token.
async fn fenced_write(pool: &SqlitePool, token: i64, writer: &str) -> bool {
    let mut tx = pool.begin().await.expect("begin");
    let done =
        sqlx::query("UPDATE ledger SET fence = ?1, writer = ?2 WHERE id = 1 AND fence <= ?1")
            .bind(token)
            .bind(writer)
            .execute(&mut *tx)
            .await
            .expect("write")
            .rows_affected()
            == 1;
    if done {
        sqlx::query("INSERT INTO accepted (token, writer, at_us) VALUES (?1, ?2, ?3)")
            .bind(token)
            .bind(writer)
            .bind(now_us())
            .execute(&mut *tx)
            .await
            .expect("log");
    }
    tx.commit().await.expect("commit");
    done
}

/// The rows `sql` reads from the target.
fn read_target<T>(db: &str, sql: &'static str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let pool = target(db).await;
        sqlx::query_as(sql).fetch_all(&pool).await.expect("read")
    })
}

/// The writes the target accepted, oldest first: `(token, writer, at_us)`.
fn accepted(db: &str) -> Vec<(i64, String, i64)> {
    read_target(
        db,
        "SELECT token, writer, at_us FROM accepted ORDER BY rowid",
    )
}

/// The first write the target accepted under a token above `token`, `(token, at_us)`, waiting up to
/// `limit` for one.
fn first_write_above(db: &str, token: i64, limit: Duration) -> Option<(i64, i64)> {
    let until = std::time::Instant::now() + limit;
    loop {
        let found = accepted(db)
            .into_iter()
            .find(|(t, _, _)| *t > token)
            .map(|(t, _, at)| (t, at));
        if found.is_some() || std::time::Instant::now() > until {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks that the target never accepted two holders at once: the accepted writes, in the order
/// the target took them, go by holder in rising tokens, each holder's writes in one block.
fn one_holder_at_a_time(writes: &[(i64, String, i64)]) {
    let mut blocks: Vec<(i64, &str)> = Vec::new();
    for (token, writer, _) in writes {
        if blocks.last() != Some(&(*token, writer.as_str())) {
            blocks.push((*token, writer));
        }
    }
    assert!(
        blocks.windows(2).all(|w| w[0].0 < w[1].0),
        "holders interleaved at the target: {blocks:?}"
    );
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
            println!("started {token} {}", now_us());
            for _ in 0..150 {
                // Work first, then look: a paused process wakes up in the middle of its work.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if fenced_write(&pool, token, &name).await {
                    println!("wrote {token} {}", now_us());
                } else {
                    println!("refused {token} {}", now_us());
                }
                if ctx.is_lost() {
                    println!("lost {token} {}", now_us());
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

/// Field `n` of a replica's line `<what> <token> <unix µs>` (1: the token, 2: the time).
fn field(line: &str, n: usize) -> i64 {
    line.split(' ')
        .nth(n)
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("field {n} of {line:?}"))
}

fn token_of(line: &str) -> i64 {
    field(line, 1)
}

/// Replica `a` on `url_a` holding the lock and writing, replica `b` on `url_b` waiting for it, one
/// target; a's token.
struct Pair {
    a: Node,
    b: Node,
    token_a: i64,
    db: String,
    _dir: tempfile::TempDir,
}

impl Pair {
    fn start(url_a: &str, url_b: &str) -> Pair {
        assert!(
            Command::new("redis-cli").arg("ping").output().is_ok(),
            "redis-cli"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("target.db").display().to_string();
        let prefix = format!(
            "fenced:{}:{}",
            std::process::id(),
            slotguard_process_tests::unique("p")
        );
        let mut a = spawn(url_a, &prefix, &db, "a");
        a.wait_for("ready", Duration::from_secs(30));
        let token_a = token_of(&a.wait_for("started", Duration::from_secs(5)));
        a.wait_for("wrote", Duration::from_secs(5));
        let mut b = spawn(url_b, &prefix, &db, "b");
        b.wait_for("ready", Duration::from_secs(30));
        let mut pair = Pair {
            a,
            b,
            token_a,
            db,
            _dir: dir,
        };
        pair.b_waits(Duration::from_millis(1_500));
        pair
    }

    /// Watches b for `d`: it must not start while a holds the lock.
    fn b_waits(&mut self, d: Duration) {
        std::thread::sleep(d);
        self.b.drain();
        assert!(
            !self.b.seen.iter().any(|l| l.starts_with("started")),
            "b ran while a held the lock: {:?}",
            self.b.seen
        );
    }

    /// Stops both replicas (those still alive) with SIGINT and checks they exit cleanly.
    fn finish(self, a_alive: bool) {
        if a_alive {
            self.a.signal("INT");
            assert!(self.a.finish(Duration::from_secs(10)).1, "a exited cleanly");
        }
        self.b.signal("INT");
        assert!(self.b.finish(Duration::from_secs(10)).1, "b exited cleanly");
    }
}

/// The row the target holds now: `(fence, writer)`.
fn final_row(db: &str) -> (i64, String) {
    read_target(db, "SELECT fence, writer FROM ledger WHERE id = 1")
        .pop()
        .expect("the row")
}

#[test]
fn a_holder_stopped_past_its_ttl_is_fenced_off_and_told_lost() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let mut p = Pair::start(SHARED, SHARED);
    let (a, b, token_a) = (&mut p.a, &mut p.b, p.token_a);

    a.signal("STOP");
    let stopped = now_us();
    let started = b.wait_for("started", TTL * 2 + Duration::from_secs(3));
    println!(
        "figure: b started {} ms after a was stopped",
        (field(&started, 2) - stopped) / 1_000
    );
    let token_b = token_of(&started);
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
    assert_eq!(final_row(&p.db), (token_b, "b".to_owned()));
    one_holder_at_a_time(&accepted(&p.db));
    p.finish(true);
}

#[test]
fn a_holder_killed_with_9_is_followed_by_one_with_a_higher_token() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let mut p = Pair::start(SHARED, SHARED);
    let token_a = p.token_a;

    p.a.signal("KILL");
    let killed_at = now_us();
    // The dead holder's lease lapses after its TTL, not before: b waits for it.
    let started = p.b.wait_for("started", TTL * 2 + Duration::from_secs(3));
    let token_b = token_of(&started);
    assert!(token_b > token_a, "b's token {token_b} after a's {token_a}");
    let waited = field(&started, 2) - killed_at;
    assert!(
        waited >= 0 && u128::try_from(waited).unwrap_or(0) + 50_000 >= TTL.as_micros() / 2,
        "b started {waited} µs after the kill, with a lease of {TTL:?} renewed every third of it"
    );
    println!("figure: b started {} ms after a was killed", waited / 1_000);
    p.b.wait_for("wrote", Duration::from_secs(2));
    p.b.wait_for("wrote", Duration::from_secs(2));

    // A late write of the dead holder (a request still in flight, a retry) is refused.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let late = rt.block_on(async { fenced_write(&target(&p.db).await, token_a, "a").await });
    assert!(!late, "a write with the dead holder's token was accepted");

    let writes = accepted(&p.db);
    one_holder_at_a_time(&writes);
    assert!(
        writes.iter().all(|(t, w, at)| if w == "a" {
            *t == token_a && *at < killed_at
        } else {
            *t == token_b && *at > killed_at
        }),
        "{writes:?}"
    );
    assert_eq!(final_row(&p.db), (token_b, "b".to_owned()));
    p.finish(false);
}

#[test]
fn a_slow_redis_during_renewal_keeps_the_lease_or_tells_the_holder_before_another_writes() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let proxy = rt
        .block_on(Proxy::start(SocketAddr::from(([127, 0, 0, 1], 6379))))
        .expect("proxy");
    let via_proxy = format!("redis://{}", proxy.addr());
    let mut p = Pair::start(&via_proxy, SHARED);

    // 60 ms each way: a renewal takes 120 ms or more, well within its third of the TTL.
    proxy.set(Mode::Latency(Duration::from_millis(60)));
    p.b_waits(TTL * 3);
    p.a.drain();
    assert!(
        !p.a.seen.iter().any(|l| l.starts_with("lost")),
        "a lost its lease to 120 ms round trips: {:?}",
        p.a.seen
    );
    let before = p.a.seen.iter().filter(|l| l.starts_with("wrote")).count();
    println!("figure: a wrote {before} times, b never started, under 60 ms each way");
    p.a.wait_for("wrote", Duration::from_secs(2));
    assert!(before > 0, "a kept writing under latency: {:?}", p.a.seen);

    // 400 ms each way: no renewal answers within a third of the TTL, so a's lease runs out.
    proxy.set(Mode::Latency(Duration::from_millis(400)));
    let slowed = now_us();
    let lost = field(&p.a.wait_for("lost", TTL * 3), 2);
    // b takes over while a's link stays slow. a's requests reach Redis late: its renewals only
    // delay b, and what its unanswered lock requests were granted is taken back.
    let (token, first) =
        first_write_above(&p.db, p.token_a, Duration::from_secs(15)).expect("b wrote after a");
    assert_eq!(final_row(&p.db).1, "b", "the next holder is b");
    println!(
        "figure: a told lost {} ms after the latency rose to 400 ms; b's first write {} ms after that",
        (lost - slowed) / 1_000,
        (first - lost) / 1_000
    );
    assert!(
        lost < first,
        "a was told lost at {lost} µs, after token {token} was first accepted at {first} µs"
    );
    let writes = accepted(&p.db);
    one_holder_at_a_time(&writes);
    assert!(
        writes
            .iter()
            .filter(|(t, _, _)| *t == p.token_a)
            .all(|(_, _, at)| *at < first),
        "{writes:?}"
    );
    proxy.set(Mode::Pass);
    p.finish(true);
}
