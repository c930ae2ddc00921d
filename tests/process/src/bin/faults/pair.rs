//! The failover scenarios' own database: a throwaway primary, a streaming standby of it, the proxy
//! the replicas connect through (moved to the standby when it is promoted, as a virtual IP or a
//! DNS name would be) and, under asynchronous replication, a proxy on the standby's WAL stream
//! that can hold it back. Never the harness's cluster: this primary is crashed.

use std::net::SocketAddr;

use slotguard_process_tests::Cluster;
use slotguard_process_tests::proxy::{Mode, Proxy};
use slotguard_process_tests::replication::reap;

use crate::prelude::*;

/// The standby's `application_name`, which `synchronous_standby_names` lists.
const STANDBY: &str = "sg_standby";

/// How commits reach the standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replication {
    /// `synchronous_standby_names` lists the standby, `synchronous_commit = on`: a commit is
    /// acknowledged once the standby has flushed it.
    Sync,
    /// The default: the primary does not wait, and the standby streams through a proxy.
    Async,
}

/// A primary, its standby and the proxies in front of them.
pub(crate) struct Pair {
    pub(crate) primary: Cluster,
    pub(crate) standby: Cluster,
    /// What the replicas connect to: the primary, then the promoted standby.
    pub(crate) front: Proxy,
    /// Between the standby's WAL receiver and the primary (asynchronous replication only).
    wal: Option<Proxy>,
    /// The crashed primary's other processes, reaped on drop.
    crashed: Vec<u32>,
}

/// When the failover's steps happened (harness clock).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failover {
    /// `kill -9` of the primary's postmaster (read after the signal was sent).
    pub(crate) killed: DateTime<Utc>,
    /// `pg_ctl promote` returned: the standby accepts writes.
    pub(crate) promoted: DateTime<Utc>,
    /// The front proxy sends new connections to the promoted standby.
    pub(crate) retargeted: DateTime<Utc>,
}

fn local(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

impl Pair {
    /// A new primary and a standby streaming from it (through a proxy under `Async`), in sync
    /// under `Sync`, and the front proxy. Panics when a step fails.
    pub(crate) fn start(sc: &Sc, replication: Replication) -> Pair {
        let primary = Cluster::start().expect("initdb and pg_ctl under /usr/lib/postgresql");
        let wal = (replication == Replication::Async).then(|| {
            let proxy = Proxy::start(local(primary.port()));
            sc.h.rt.block_on(proxy).expect("WAL proxy")
        });
        let via = wal.as_ref().map_or(primary.port(), |p| p.addr().port());
        let standby = primary.standby(via, STANDBY);
        let pool = connect(sc, &primary.url());
        wait_for_standby(sc, &pool, "async");
        if replication == Replication::Sync {
            make_synchronous(sc, &pool);
        }
        sc.h.rt.block_on(pool.close());
        let front = sc.h.rt.block_on(Proxy::start(local(primary.port())));
        Pair {
            primary,
            standby,
            front: front.expect("front proxy"),
            wal,
            crashed: Vec::new(),
        }
    }

    /// The port the replicas connect to.
    pub(crate) fn port(&self) -> u16 {
        self.front.addr().port()
    }

    /// From now on no WAL reaches the standby (asynchronous replication only): its stream is
    /// blackholed, the connection left open, so the standby neither catches up nor notices.
    pub(crate) fn hold_wal(&self) {
        self.wal
            .as_ref()
            .expect("asynchronous replication")
            .set(Mode::Blackhole);
    }

    /// `kill -9` of the primary's postmaster; 250 ms later the standby is promoted and the front
    /// proxy sent to it (its open connections reset).
    pub(crate) fn fail_over(&mut self) -> Failover {
        self.crashed = self.primary.kill_postmaster();
        let killed = Utc::now();
        sleep(Duration::from_millis(250));
        self.standby.promote();
        let promoted = Utc::now();
        self.front.retarget(local(self.standby.port()));
        Failover {
            killed,
            promoted,
            retargeted: Utc::now(),
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        reap(&self.crashed);
    }
}

fn connect(sc: &Sc, url: &str) -> sqlx::PgPool {
    let url = format!("{url}?application_name=sg-faults");
    sc.h.rt
        .block_on(sqlx::PgPool::connect(&url))
        .expect("connect to the primary")
}

/// Waits (30 s at most) until the primary streams to the standby with `sync_state` `state`.
fn wait_for_standby(sc: &Sc, pool: &sqlx::PgPool, state: &str) {
    let deadline = Instant::now() + secs(30);
    loop {
        let streaming: i64 =
            sc.h.rt
                .block_on(
                    sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_replication \
                         WHERE application_name = $1 AND state = 'streaming' AND sync_state = $2",
                    )
                    .bind(STANDBY)
                    .bind(state)
                    .fetch_one(pool),
                )
                .expect("pg_stat_replication");
        if streaming == 1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the standby is not streaming ({state}) after 30 s"
        );
        sleep(Duration::from_millis(100));
    }
}

/// Lists the standby in `synchronous_standby_names` with `synchronous_commit = on`, and waits
/// until the primary treats it as synchronous.
fn make_synchronous(sc: &Sc, pool: &sqlx::PgPool) {
    let names = format!("ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'");
    for sql in [
        names.as_str(),
        "ALTER SYSTEM SET synchronous_commit = 'on'",
        "SELECT pg_reload_conf()",
    ] {
        let statement = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()));
        sc.h.rt
            .block_on(statement.execute(pool))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    wait_for_standby(sc, pool, "sync");
}
