//! A throwaway PgBouncer in transaction mode (`pool_mode = transaction`) in front of a PostgreSQL
//! server, for the tests that run slotguard through a transaction pooler: its own free port on
//! 127.0.0.1 and its own directory, killed when dropped. Debian's `pgbouncer` (`.ci/run` installs
//! it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A PgBouncer in transaction mode on a free port; killed on drop.
#[derive(Debug)]
pub struct PgBouncer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    database: String,
    user: String,
    ini: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's `pgbouncer`, when installed.
fn binary() -> Option<PathBuf> {
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

impl PgBouncer {
    /// Starts one in front of database `database` of the server on 127.0.0.1:`upstream` (user
    /// `postgres`, trust), with 4 server sessions; `None` when PgBouncer is not installed.
    pub fn start(upstream: u16, database: &str) -> Option<PgBouncer> {
        let server = Upstream {
            host: "127.0.0.1".to_owned(),
            port: upstream,
            database: database.to_owned(),
            user: "postgres".to_owned(),
        };
        Self::start_for(server)
    }

    /// Starts one in front of the server and database `url` names (its host, port, database and
    /// user; the server must trust that user, as the test server does), with 4 server sessions;
    /// `None` when PgBouncer is not installed.
    pub fn in_front_of(url: &str) -> Option<PgBouncer> {
        let options: sqlx::postgres::PgConnectOptions = url.parse().expect("a PostgreSQL URL");
        let server = Upstream {
            host: options.get_host().to_owned(),
            port: options.get_port(),
            database: options.get_database().unwrap_or("postgres").to_owned(),
            user: options.get_username().to_owned(),
        };
        Self::start_for(server)
    }

    fn start_for(server: Upstream) -> Option<PgBouncer> {
        let binary = binary()?;
        let dir = tempfile::Builder::new()
            .prefix("sg-bouncer-")
            .tempdir()
            .expect("temp dir");
        let port = crate::free_port();
        let ini = config(dir.path(), port, &server);
        // It runs as `postgres` and writes nothing, but reads its files.
        let _ = Command::new("chown")
            .arg("-R")
            .arg("postgres")
            .arg(dir.path())
            .status();
        let child = spawn(&binary, &ini, port);
        Some(PgBouncer {
            port,
            database: server.database,
            user: server.user,
            ini,
            child,
            _dir: dir,
        })
    }

    /// The database through this PgBouncer.
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    /// Kills PgBouncer with `-9` (every client and server connection through it ends) and starts
    /// it again on the same port.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let binary = binary().expect("pgbouncer ran before");
        self.child = spawn(&binary, &self.ini, self.port);
    }
}

/// The server and database a PgBouncer stands in front of.
struct Upstream {
    host: String,
    port: u16,
    database: String,
    user: String,
}

fn config(dir: &Path, port: u16, server: &Upstream) -> PathBuf {
    let ini = dir.join("pgbouncer.ini");
    let users = dir.join("users.txt");
    std::fs::write(&users, format!("\"{}\" \"\"\n", server.user)).expect("users");
    let Upstream {
        host,
        port: upstream,
        database,
        user,
    } = server;
    let text = format!(
        "[databases]\n{database} = host={host} port={upstream} dbname={database} user={user}\n\
         [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n\
         auth_file = {}\npool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 100\n\
         ignore_startup_parameters = extra_float_digits,options\nunix_socket_dir =\n",
        users.display()
    );
    std::fs::write(&ini, text).expect("ini");
    ini
}

/// Runs PgBouncer with `ini` until it listens. As root it switches to `postgres` itself (`-u`; it
/// refuses to run as root), so that the child is PgBouncer and a kill ends it: under `runuser`
/// the kill would end `runuser` alone and leave PgBouncer holding its port and server sessions.
fn spawn(binary: &Path, ini: &Path, port: u16) -> Child {
    let mut cmd = Command::new(binary);
    if running_as_root() {
        cmd.args(["-u", "postgres"]);
    }
    let child = cmd
        .arg(ini)
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
    child
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Ends every session of the database at `direct_url` whose application name starts with
/// `prefix`: the server sessions a PgBouncer holds for clients that gave such a name (PgBouncer
/// passes it on). Answers the number ended.
pub async fn end_sessions(direct_url: &str, prefix: &str) -> i64 {
    let pool = sqlx::PgPool::connect(direct_url)
        .await
        .expect("connect directly");
    let ended = sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND starts_with(application_name, $1)",
    )
    .bind(prefix)
    .fetch_one(&pool)
    .await
    .expect("end the sessions");
    pool.close().await;
    ended
}
