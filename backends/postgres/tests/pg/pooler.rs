//! Through a transaction-mode pooler: a real PgBouncer (`pool_mode = transaction`) between the
//! backend and the test database. slotguard needs a server session of its own per connection (its
//! prepared statements, its session locks); through such a pooler the driver's prepared statements
//! land on server sessions that do not have them, and every such failure must say what is wrong.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slotguard::store::{SlotKey, SlotStore};

use crate::common::TestSchema;

/// A PgBouncer in transaction mode on a free port, in front of the test server; stopped on drop.
struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `pgbouncer`, when installed (`.ci/run` installs it).
fn binary() -> Option<PathBuf> {
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn config(dir: &Path, port: u16) -> PathBuf {
    let ini = dir.join("pgbouncer.ini");
    let users = dir.join("users.txt");
    std::fs::write(&users, "\"postgres\" \"\"\n").expect("users");
    let text = format!(
        "[databases]\ntest = host=127.0.0.1 port=5432 dbname=test user=postgres\n\
         [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n\
         auth_file = {}\npool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 50\n\
         ignore_startup_parameters = extra_float_digits,options\nunix_socket_dir =\n",
        users.display()
    );
    std::fs::write(&ini, text).expect("ini");
    ini
}

/// Starts PgBouncer as the `postgres` user (it refuses to run as root), or `None` without it.
fn start() -> Option<Bouncer> {
    let binary = binary()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let ini = config(dir.path(), port);
    let _ = Command::new("chown")
        .arg("-R")
        .arg("postgres")
        .arg(dir.path())
        .status();
    let mut cmd = if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&binary);
        c
    } else {
        Command::new(&binary)
    };
    let child = cmd
        .arg(&ini)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pgbouncer");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "pgbouncer did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Bouncer {
        child,
        port,
        _dir: dir,
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_transaction_pooler_every_failure_names_the_pooler() {
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let url = format!("postgres://postgres@127.0.0.1:{}/test", bouncer.port);
    let connected = slotguard_postgres::PgBackend::builder(&url)
        .schema(schema.name.clone())
        .pool_size(4)
        .connect()
        .await;
    let errors = match connected {
        Err(e) => vec![e.to_string()],
        Ok(backend) => statements(&backend).await,
    };
    assert!(
        !errors.is_empty(),
        "40 statements through the pooler all worked"
    );
    for error in &errors {
        assert!(error.contains("transaction-mode pooler"), "{error}");
    }
}

/// 40 reads from 8 tasks at once through `backend`'s pool: the errors they met.
async fn statements(backend: &slotguard_postgres::PgBackend) -> Vec<String> {
    let key = SlotKey {
        job: "pooled".into(),
        scheduled_at: chrono::Utc::now(),
        partition: String::new(),
    };
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (backend, key) = (backend.clone(), key.clone());
        set.spawn(async move {
            let mut errors = Vec::new();
            for _ in 0..5 {
                if let Err(e) = backend.existing_slots(std::slice::from_ref(&key)).await {
                    errors.push(e.to_string());
                }
            }
            errors
        });
    }
    set.join_all().await.into_iter().flatten().collect()
}
