//! Helpers for the multi-process tests: replicas as OS processes, real signals, the effects ledger,
//! and stores to run them on (a SQLite file, a schema of the shared PostgreSQL server, or a throwaway
//! PostgreSQL cluster a test may restart, or give a streaming standby to fail over to), and
//! throwaway Redis servers.

pub mod dst;
pub mod invariants;
pub mod lease;
pub mod pgbouncer;
pub mod proxy;
pub mod redis;
pub mod replication;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The shared PostgreSQL server (override with `SLOTGUARD_TEST_DATABASE_URL`).
pub fn shared_pg_url() -> String {
    std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A name no other test run uses, for schemas and files.
pub fn unique(prefix: &str) -> String {
    use std::hash::{BuildHasher, RandomState};
    let random = RandomState::new().hash_one(std::process::id()) & 0xffff_ffff;
    format!("{prefix}_{}_{random:08x}", std::process::id())
}

/// A replica process, its stdout read line by line on a thread.
pub struct Node {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every stdout line seen so far.
    pub seen: Vec<String>,
}

impl Node {
    /// Starts `program` with `args`.
    pub fn spawn(program: &str, args: &[String]) -> Node {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Node {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line starting with `prefix`; panics after `limit`.
    pub fn wait_for(&mut self, prefix: &str, limit: Duration) -> String {
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

    /// Takes in the lines printed so far without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    /// Sends a signal by name (`TERM`, `KILL`, `STOP`, `CONT`) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }

    /// Waits for the process to exit; returns its stdout lines and whether it exited successfully.
    pub fn finish(mut self, limit: Duration) -> (Vec<String>, bool) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(line);
                }
                return (std::mem::take(&mut self.seen), status.success());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("process did not exit within {limit:?}; saw {:?}", self.seen);
            }
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(line);
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Never leave a replica behind, whatever the test did.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal by name to a process with `kill(1)`.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// One line of the effects ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// `start`, `end`, `lost`, `cancelled` or `failed`.
    pub kind: String,
    /// The job.
    pub job: String,
    /// The slot, as written.
    pub slot: String,
    /// The attempt number.
    pub attempt: u32,
    /// The fencing token.
    pub token: i64,
    /// The replica's instance id.
    pub instance: String,
    /// The replica's process id.
    pub pid: u32,
    /// When the line was written, by the replica's system clock (the real one, never the skewed
    /// clock `--skew-ms` gives the scheduler); `None` in a ledger of the older 7-field format.
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// The run's partition key; empty when it has none (every run but a partition's or a stored
    /// schedule's).
    pub partition: String,
}

/// Reads the effects ledger written by `sg-node`: `kind job slot attempt token instance pid
/// [unix_us [partition]]`.
pub fn read_ledger(path: &Path) -> Vec<Effect> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            (7..=9).contains(&f.len()).then(|| Effect {
                kind: f[0].to_owned(),
                job: f[1].to_owned(),
                slot: f[2].to_owned(),
                attempt: f[3].parse().unwrap_or(0),
                token: f[4].parse().unwrap_or(0),
                instance: f[5].to_owned(),
                pid: f[6].parse().unwrap_or(0),
                at: f
                    .get(7)
                    .and_then(|us| us.parse().ok())
                    .and_then(chrono::DateTime::from_timestamp_micros),
                partition: f.get(8).map_or_else(String::new, |p| (*p).to_owned()),
            })
        })
        .collect()
}

/// Executions per (job, slot): how many bodies started for each.
pub fn executions(effects: &[Effect]) -> BTreeMap<(String, String), usize> {
    let mut count = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        *count.entry((e.job.clone(), e.slot.clone())).or_insert(0) += 1;
    }
    count
}

/// Slots (as `sg-node` writes them) of an every-second schedule between two instants, inclusive.
pub fn every_second(
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut t = from;
    while t <= to {
        out.insert(t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        t += chrono::Duration::seconds(1);
    }
    out
}

/// The path of an `sg-node` effects ledger in `dir`.
pub fn ledger_in(dir: &Path) -> PathBuf {
    dir.join("ledger.txt")
}

/// Drops a schema of the shared server (best effort, at the end of a test).
pub async fn drop_schema(url: &str, schema: &str) {
    if let Ok(pool) = sqlx::PgPool::connect(url).await {
        // Schema names here come from `unique()`: letters, digits and underscores only.
        if schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&pool).await;
        }
        pool.close().await;
    }
}

/// The directory holding `initdb` and `pg_ctl` (`/usr/lib/postgresql/<version>/bin`), if installed.
pub fn server_binaries() -> Option<PathBuf> {
    std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .find(|p| p.join("initdb").exists())
}

/// A PostgreSQL cluster of the test's own, in a temporary directory on a free port, run as the
/// `postgres` user (the server refuses to run as root). Stopped and removed on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    bin: PathBuf,
}

impl Cluster {
    /// `initdb` and start a new cluster. `None` when the server binaries are not installed.
    pub fn start() -> Option<Cluster> {
        let bin = server_binaries()?;
        let dir = tempfile::Builder::new().prefix("sg-pg-").tempdir().ok()?;
        let data = dir.path().join("data");
        // The postgres user must be able to write there.
        Command::new("chown")
            .args(["-R", "postgres:postgres", &dir.path().to_string_lossy()])
            .status()
            .ok()?;
        let port = free_port();
        let cluster = Cluster { dir, port, bin };
        cluster.as_postgres(
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        );
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\nfsync = off\n",
            cluster.dir.path().display()
        );
        std::fs::write(data.join("postgresql.auto.conf"), conf).ok()?;
        cluster.pg_ctl(&["start", "-w", "-t", "30"]);
        Some(cluster)
    }

    /// The URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port the cluster listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (fast shutdown: connections are terminated).
    pub fn stop(&self) {
        self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "30"]);
    }

    /// Starts the server again.
    pub fn restart(&self) {
        self.pg_ctl(&["start", "-w", "-t", "30"]);
    }

    /// Restarts the server at once (`pg_ctl restart -m immediate`): every backend is killed without
    /// a shutdown checkpoint, the server recovers and listens again. Returns when it accepts
    /// connections.
    pub fn restart_immediate(&self) {
        self.pg_ctl(&["restart", "-m", "immediate", "-w", "-t", "30"]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        let mut all = vec![
            "-D",
            data.to_str().expect("utf-8 path"),
            "-l",
            log.to_str().expect("utf-8 path"),
        ];
        all.extend_from_slice(args);
        self.as_postgres("pg_ctl", &all);
    }

    fn as_postgres(&self, program: &str, args: &[&str]) {
        let status = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(program))
            .args(args)
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .status()
            .expect("runuser");
        assert!(status.success(), "{program} {args:?} failed");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &data.to_string_lossy(), "stop", "-m", "immediate"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
