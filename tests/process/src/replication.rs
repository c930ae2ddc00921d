//! Streaming replication of a throwaway [`Cluster`]: a standby made with `pg_basebackup -R`, its
//! promotion, and the primary's crash (`kill -9` of its postmaster). The standby is a [`Cluster`]
//! too (its own temporary directory and free port, run as the `postgres` user, stopped and removed
//! on drop).

use std::path::Path;
use std::process::Command;

use crate::{Cluster, free_port};

impl Cluster {
    /// A streaming standby of this cluster: `pg_basebackup -R` into a directory of its own, its
    /// WAL streamed from `127.0.0.1:via` (this cluster's port, or a proxy in front of it) under
    /// `application_name` `name` (which `synchronous_standby_names` may list), started. Panics
    /// when a step fails.
    pub fn standby(&self, via: u16, name: &str) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("sg-pg-standby-")
            .tempdir()
            .expect("tempdir");
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres", &dir.path().to_string_lossy()])
            .status()
            .expect("chown");
        assert!(status.success(), "chown {}", dir.path().display());
        let standby = Cluster {
            dir,
            port: free_port(),
            bin: self.bin.clone(),
        };
        let data = standby.dir.path().join("data");
        let port = self.port.to_string();
        standby.as_postgres(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &data.to_string_lossy(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
            ],
        );
        // Later lines win: the primary's port and socket directory, and the connection `-R` wrote.
        let conf = format!(
            "port = {}\nunix_socket_directories = '{}'\n\
             primary_conninfo = 'host=127.0.0.1 port={via} user=postgres application_name={name}'\n",
            standby.port,
            standby.dir.path().display()
        );
        append(&data.join("postgresql.auto.conf"), &conf);
        standby.pg_ctl(&["start", "-w", "-t", "30"]);
        standby
    }

    /// Promotes this standby to a primary (`pg_ctl promote`), returning once it accepts writes.
    pub fn promote(&self) {
        self.pg_ctl(&["promote", "-w", "-t", "30"]);
    }

    /// The postmaster's process id, from `postmaster.pid`; `None` when the server is not running.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let pid_file = self.dir.path().join("data").join("postmaster.pid");
        std::fs::read_to_string(pid_file)
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// Crashes the server: `kill -9` of its postmaster, as a machine that dies would. Its other
    /// processes (backends, WAL senders) notice and exit on their own; answers their ids, for
    /// [`reap`]. Panics when the server is not running.
    pub fn kill_postmaster(&self) -> Vec<u32> {
        let pid = self.postmaster_pid().expect("a running server");
        let children = children_of(pid);
        crate::signal(pid, "KILL");
        children
    }
}

/// Sends `kill -9` to those of `pids` (a crashed server's processes, from
/// [`Cluster::kill_postmaster`]) that are still `postgres` processes: none should outlive the
/// test.
pub fn reap(pids: &[u32]) {
    for pid in pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "postgres" {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| parent_of(*child) == Some(pid))
        .collect()
}

/// The parent process id of `pid`, from `/proc/<pid>/stat` (its fourth field, after the name in
/// parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
