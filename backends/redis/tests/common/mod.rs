//! Throwaway `redis-server`s (own port, own `--dir`) for tests that kill or stop Redis, a unique key
//! prefix per test on the shared server at 6379, and a TCP proxy that can cut a client off from
//! Redis or slow it down.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use slotguard_redis::RedisLocks;

/// The shared server the project's machine runs.
pub const SHARED: &str = "redis://127.0.0.1:6379";

/// A prefix no other test (or earlier run) uses.
pub fn unique_prefix(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "test:{test}:{}:{nanos}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Locks on the shared server under a fresh prefix.
pub fn shared_locks(test: &str, ttl: Duration) -> RedisLocks {
    RedisLocks::new(SHARED)
        .expect("url")
        .lease_ttl(ttl)
        .prefix(unique_prefix(test))
}

pub use slotguard_process_tests::redis::{Persistence, RedisServer as Server};

/// A TCP proxy in front of a Redis (the fault proxy of the process tests); while cut, it forwards
/// nothing in either direction (a network partition: connections stay open, answers never come), and
/// it can add latency.
pub struct Proxy(slotguard_process_tests::proxy::Proxy);

impl Proxy {
    pub async fn start(upstream: u16) -> Proxy {
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], upstream));
        Proxy(
            slotguard_process_tests::proxy::Proxy::start(upstream)
                .await
                .expect("proxy"),
        )
    }

    pub fn url(&self) -> String {
        format!("redis://{}", self.0.addr())
    }

    pub fn cut(&self, cut: bool) {
        self.set(if cut { Mode::Blackhole } else { Mode::Pass });
    }

    pub fn set(&self, mode: Mode) {
        self.0.set(mode);
    }
}

pub use slotguard_process_tests::proxy::Mode;
