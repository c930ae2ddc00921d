//! Faults: a holder cut off from Redis past its TTL, a Redis killed with `-9` and started again
//! empty or from its append-only file (`appendfsync always`), and a scheduler whose Redis goes away
//! and comes back. Each test has its own throwaway
//! `redis-server` (or a proxy that cuts one client off); none touches the server at 6379.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Mode, Persistence, Proxy, Server};
use slotguard::store::{LockStore, StoreError};
use slotguard::{GuardLevel, Job, JobContext, Scheduler};
use slotguard_redis::RedisLocks;
use tokio::time::{Instant, sleep, timeout};

fn locks(url: &str, ttl: Duration) -> RedisLocks {
    RedisLocks::new(url).expect("url").lease_ttl(ttl)
}

/// Retries `try_lock` until Redis answers (a restarted server takes a moment to be reconnected).
async fn lock_when_up(locks: &RedisLocks, owner: &str, key: i64) -> Option<i64> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match locks.try_lock(owner, &[key]).await {
            Ok(mut got) => return got.pop().flatten().map(|l| l.token.expect("token")),
            Err(e) if Instant::now() < until => {
                assert!(matches!(e, StoreError::Unavailable { .. }), "{e:?}");
                sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("Redis did not come back: {e}"),
        }
    }
}

#[tokio::test]
async fn a_holder_cut_off_past_its_ttl_is_told_lost_and_the_next_holder_has_a_higher_token() {
    let server = Server::start();
    let proxy = Proxy::start(server.port).await;
    let ttl = Duration::from_millis(900);
    let a = locks(&proxy.url(), ttl);
    let b = locks(&server.url(), ttl);
    let lease_a = a.try_lock("a", &[7]).await.expect("lock")[0]
        .clone()
        .expect("free");
    // Renewed while connected: held past its TTL.
    sleep(ttl * 2).await;
    assert!(!lease_a.lost.is_cancelled());
    assert!(b.try_lock("b", &[7]).await.expect("lock")[0].is_none());

    let cut_at = Instant::now();
    proxy.cut(true);
    timeout(ttl * 2, lease_a.lost.cancelled())
        .await
        .expect("a learns it lost the lease when its TTL runs out unrenewed");
    let told_after = cut_at.elapsed();
    assert!(
        told_after <= ttl + ttl / 3,
        "told {told_after:?} after the cut"
    );
    // Redis keeps the key until its own TTL ends, which is no earlier than a's deadline.
    let until = Instant::now() + ttl * 2;
    let lease_b = loop {
        if let Some(lease) = b.try_lock("b", &[7]).await.expect("lock")[0].clone() {
            break lease;
        }
        assert!(Instant::now() < until, "the lapsed lease was never free");
        sleep(Duration::from_millis(20)).await;
    };
    assert!(
        lease_b.token > lease_a.token,
        "{lease_b:?} after {lease_a:?}"
    );

    // The partition heals: a's late renewal must not take the lease back from b.
    proxy.cut(false);
    sleep(ttl).await;
    assert!(!lease_b.lost.is_cancelled());
    assert!(a.try_lock("a", &[7]).await.expect("lock")[0].is_none());
    assert_eq!(a.held(), 0);
}

#[tokio::test]
async fn a_lock_request_that_gets_no_answer_is_taken_back() {
    let server = Server::start();
    let proxy = Proxy::start(server.port).await;
    // A round trip of 2.4 s, past the 2 s a request may take with a 6 s TTL.
    let ttl = Duration::from_secs(6);
    let slow = locks(&proxy.url(), ttl);
    let b = locks(&server.url(), ttl);
    // Connected first: the request itself, not the connection's set-up, meets the latency.
    assert!(slow.try_lock("slow", &[8]).await.expect("lock")[0].is_some());
    slow.unlock("slow", &[8]).await.expect("unlock");
    proxy.set(Mode::Latency(Duration::from_millis(1_200)));
    let asked = Instant::now();
    let answer = slow.try_lock("slow", &[9]).await;
    assert!(
        matches!(answer, Err(StoreError::Unavailable { .. })),
        "{answer:?}"
    );
    // Redis granted the request 1.2 s after it was sent; left alone that grant would keep the key
    // until 7.2 s. Taken back, the key is free once the cancel has crossed the proxy.
    let freed = loop {
        if b.try_lock("b", &[9]).await.expect("lock")[0].is_some() {
            break asked.elapsed();
        }
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "the unanswered grant still held the key 5 s after it was asked"
        );
        sleep(Duration::from_millis(50)).await;
    };
    assert!(
        freed > Duration::from_millis(1_200),
        "freed after {freed:?}"
    );
    assert_eq!(slow.held(), 0);
}

#[tokio::test]
async fn tokens_rise_across_a_kill_9_of_a_redis_that_keeps_nothing() {
    let mut server = Server::start();
    let a = locks(&server.url(), Duration::from_secs(5));
    let mut before = Vec::new();
    for _ in 0..20 {
        let token = lock_when_up(&a, "a", 3).await.expect("free");
        a.unlock("a", &[3]).await.expect("unlock");
        before.push(token);
    }
    assert!(before.windows(2).all(|w| w[0] < w[1]), "{before:?}");
    server.kill9();
    assert!(matches!(
        a.try_lock("a", &[3]).await,
        Err(StoreError::Unavailable { .. })
    ));
    server.restart();
    let after = lock_when_up(&a, "a", 3)
        .await
        .expect("free: the server is empty");
    let highest = before.iter().max().copied().unwrap_or_default();
    assert!(
        after > highest,
        "token {after} after the restart, {highest} before"
    );

    // The same when only the counter vanishes (evicted, or deleted by hand).
    a.unlock("a", &[3]).await.expect("unlock");
    let client = redis::Client::open(server.url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let () = redis::cmd("DEL")
        .arg(a.redis_keys(3).1)
        .query_async(&mut conn)
        .await
        .expect("del");
    let again = lock_when_up(&a, "a", 3).await.expect("free");
    assert!(
        again > after,
        "token {again} after the counter vanished, {after} before"
    );
}

#[tokio::test]
async fn a_scheduler_skips_while_redis_is_gone_and_resumes_when_it_is_back() {
    let mut server = Server::start();
    let ttl = Duration::from_millis(900);
    let runs = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (count, seen) = (Arc::clone(&runs), Arc::clone(&tokens));
    let job = Job::new("tick", "* * * * * *", move |ctx: JobContext| {
        let (count, seen) = (Arc::clone(&count), Arc::clone(&seen));
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            seen.lock().expect("tokens").push(ctx.fencing_token());
        }
    })
    .guard(GuardLevel::Lock);
    let handle = Scheduler::builder()
        .lock_store(locks(&server.url(), ttl))
        .job(job)
        .build()
        .expect("a lock store alone gives the lock level")
        .try_start()
        .await
        .expect("start");
    sleep(Duration::from_millis(2_500)).await;
    let up = runs.load(Ordering::SeqCst);
    assert!(up >= 2, "{up} runs while Redis was up");

    server.kill9();
    sleep(Duration::from_millis(300)).await;
    let at_kill = runs.load(Ordering::SeqCst);
    sleep(Duration::from_millis(3_000)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        at_kill,
        "no body runs without its lock"
    );

    server.restart();
    sleep(Duration::from_millis(4_000)).await;
    let after = runs.load(Ordering::SeqCst);
    assert!(
        after >= at_kill + 2,
        "runs resumed: {after} after {at_kill}"
    );
    handle.shutdown().await;

    let tokens = tokens.lock().expect("tokens").clone();
    let tokens: Vec<i64> = tokens
        .into_iter()
        .map(|t| t.expect("ctx.fencing_token() at the lock level"))
        .collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test]
async fn with_appendfsync_always_a_kill_9_keeps_the_counter_and_the_held_lease() {
    let mut server = Server::start_with(Persistence::AofAlways);
    let a = locks(&server.url(), Duration::from_secs(10));
    let b = locks(&server.url(), Duration::from_secs(10));
    let mut tokens = Vec::new();
    for _ in 0..20 {
        tokens.push(lock_when_up(&a, "a", 4).await.expect("free"));
        a.unlock("a", &[4]).await.expect("unlock");
    }
    // The last grant is held through the crash.
    let held = lock_when_up(&a, "a", 4).await.expect("free");
    tokens.push(held);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");

    server.kill9();
    server.restart();
    // Every acknowledged write was in the append-only file: the counter is the last token.
    let client = redis::Client::open(server.url()).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let counter: Option<i64> = redis::cmd("GET")
        .arg(a.redis_keys(4).1)
        .query_async(&mut conn)
        .await
        .expect("get");
    assert_eq!(
        counter,
        Some(held),
        "the fence counter came back from the file"
    );
    // The lease came back too: nobody else takes the key, and its holder keeps renewing it.
    assert_eq!(lock_when_up(&b, "b", 4).await, None, "the key is still a's");
    let until = Instant::now() + Duration::from_secs(5);
    while a.renew_now().await.is_err() {
        assert!(
            Instant::now() < until,
            "a never reached the restarted server"
        );
        sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(a.held(), 1, "a's renewal found its lease after the restart");

    a.unlock("a", &[4]).await.expect("unlock");
    let next = lock_when_up(&b, "b", 4).await.expect("free after a let go");
    assert!(next > held, "token {next} after the restart, {held} before");
}
