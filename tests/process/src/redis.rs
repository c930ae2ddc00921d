//! A throwaway `redis-server` for tests that kill or restart Redis: its own free port on 127.0.0.1,
//! its own directory, killed when dropped. It never touches the shared server on 6379.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What a throwaway server keeps on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing (`--save "" --appendonly no`): a restart starts empty, like the machine's Redis.
    None,
    /// An append-only file written and fsynced before every answer (`--appendonly yes
    /// --appendfsync always`): a restart, even after `kill -9`, replays every acknowledged write.
    AofAlways,
}

/// A `redis-server` of its own, killed with `-9` when dropped.
#[derive(Debug)]
pub struct RedisServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    persistence: Persistence,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server that keeps nothing on disk.
    pub fn start() -> RedisServer {
        RedisServer::start_with(Persistence::None)
    }

    /// Starts a server with `persistence`, and waits until it answers.
    pub fn start_with(persistence: Persistence) -> RedisServer {
        let mut server = RedisServer {
            port: crate::free_port(),
            persistence,
            dir: tempfile::Builder::new()
                .prefix("sg-redis-")
                .tempdir()
                .expect("temp dir"),
            child: None,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its directory (the append-only file is there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the server (again) on the same port and directory, and waits until it answers.
    ///
    /// # Panics
    /// When it is running, or does not answer within 5 s.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""]);
        match self.persistence {
            Persistence::None => command.args(["--appendonly", "no"]),
            Persistence::AofAlways => {
                command.args(["--appendonly", "yes", "--appendfsync", "always"])
            }
        };
        let child = command
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        self.child = Some(child);
        for _ in 0..200 {
            if self.answers() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server on {} did not start", self.port);
    }

    /// Whether it answers `PING` with `PONG` (not only accepts: a server loading its file answers
    /// `-LOADING`).
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 64];
        s.write_all(b"PING\r\n").is_ok()
            && s.read(&mut buf)
                .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
    }

    /// How many keys match `pattern` (`KEYS`, for tests: the server holds few).
    ///
    /// # Panics
    /// When the server does not answer with an array.
    pub fn count_keys(&self, pattern: &str) -> usize {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let command = format!("*2\r\n$4\r\nKEYS\r\n${}\r\n{pattern}\r\n", pattern.len());
        s.write_all(command.as_bytes()).expect("send");
        let mut first = String::new();
        BufReader::new(s).read_line(&mut first).expect("answer");
        first
            .trim_end()
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("KEYS answered {first:?}"))
    }

    /// `kill -9`: what is only in memory is gone, as on a crash.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}
