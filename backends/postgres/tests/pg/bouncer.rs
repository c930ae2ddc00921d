//! A real PgBouncer in transaction mode (`pool_mode = transaction`) in front of the test server,
//! started by the test on a free port in a directory of its own, for the pooler tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A PgBouncer in transaction mode on a free port, in front of the test server; stopped on drop.
pub(crate) struct Bouncer {
    child: Child,
    pub(crate) port: u16,
    ini: PathBuf,
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
pub(crate) fn start() -> Option<Bouncer> {
    let binary = binary()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let ini = config(dir.path(), port);
    let _ = Command::new("chown")
        .arg("-R")
        .arg("postgres")
        .arg(dir.path())
        .status();
    let child = spawn(&binary, &ini, port);
    Some(Bouncer {
        child,
        port,
        ini,
        _dir: dir,
    })
}

impl Bouncer {
    /// The test database through this PgBouncer.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/test", self.port)
    }

    /// Kills PgBouncer (every client and server connection through it ends) and starts it again on
    /// the same port.
    pub(crate) fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let binary = binary().expect("pgbouncer ran before");
        self.child = spawn(&binary, &self.ini, self.port);
    }
}

/// Runs PgBouncer with `ini` as the `postgres` user (it refuses to run as root) until it listens.
/// It switches user itself (`-u`), so that the child is PgBouncer and killing it ends it: under
/// `runuser` the kill would end `runuser` alone and leave PgBouncer holding its server sessions.
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
