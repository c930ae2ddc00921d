//! The lock checks of the backend contract, against the Redis on 127.0.0.1:6379.

mod common;

use std::time::Duration;

use slotguard::store::LockStore;
use slotguard_redis::RedisLocks;

/// Keys under a prefix of their own per check, on the shared Redis.
async fn with_locks(check: impl AsyncFnOnce(&RedisLocks)) {
    let locks = common::shared_locks("contract", Duration::from_secs(10));
    check(&locks).await;
}

slotguard_tests::contract!(
    locks,
    #[tokio::test]
    with = with_locks
);

#[tokio::test]
async fn locks_are_exclusive_and_released_leases_are_forgotten() {
    let locks = common::shared_locks("exclusive", Duration::from_secs(10));
    slotguard_tests::locks_are_exclusive(&locks).await;
    assert_eq!(locks.held(), 0, "every lease released is forgotten");
}

#[tokio::test]
async fn every_lease_has_a_token_and_the_key_says_who_holds_it() {
    let locks = common::shared_locks("value", Duration::from_secs(10));
    let lease = locks.try_lock("replica a", &[42]).await.expect("lock")[0]
        .clone()
        .expect("free");
    let token = lease.token.expect("a Redis lease has a token");
    let client = redis::Client::open(common::SHARED).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let (lock, fence) = locks.redis_keys(42);
    let value: String = redis::cmd("GET")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .expect("get");
    // `<token> <request> <owner>`: the request id is 16 hex digits, the owner may hold spaces.
    let fields: Vec<&str> = value.splitn(3, ' ').collect();
    assert_eq!(fields[0], token.to_string(), "{value}");
    assert!(
        fields[1].len() == 16 && fields[1].chars().all(|c| c.is_ascii_hexdigit()),
        "{value}"
    );
    assert_eq!(fields[2], "replica a", "{value}");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .expect("pttl");
    assert!(
        ttl > 0 && ttl <= 10_000,
        "the lock has the lease's TTL: {ttl}"
    );
    let counter: i64 = redis::cmd("GET")
        .arg(&fence)
        .query_async(&mut conn)
        .await
        .expect("get");
    assert_eq!(counter, token);
    locks.unlock("replica", &[42]).await.expect("unlock");
    assert_eq!(locks.held(), 1, "another owner's unlock leaves it");
    locks.unlock("replica a", &[42]).await.expect("unlock");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .expect("exists");
    assert_eq!(exists, 0, "released by compare-and-delete");
}

#[tokio::test]
async fn a_renewed_lease_outlives_its_ttl() {
    let ttl = Duration::from_millis(600);
    let a = common::shared_locks("renewed", ttl);
    let b = a.clone();
    let lease = a.try_lock("a", &[1]).await.expect("lock")[0]
        .clone()
        .expect("free");
    tokio::time::sleep(ttl * 3).await;
    assert!(b.try_lock("b", &[1]).await.expect("lock")[0].is_none());
    assert!(!lease.lost.is_cancelled());
    a.unlock("a", &[1]).await.expect("unlock");
    assert!(b.try_lock("b", &[1]).await.expect("lock")[0].is_some());
}

#[tokio::test]
async fn a_lease_deleted_behind_its_holders_back_is_reported_lost() {
    let ttl = Duration::from_millis(600);
    let a = common::shared_locks("deleted", ttl);
    let lease = a.try_lock("a", &[5]).await.expect("lock")[0]
        .clone()
        .expect("free");
    let client = redis::Client::open(common::SHARED).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let () = redis::cmd("DEL")
        .arg(a.redis_keys(5).0)
        .query_async(&mut conn)
        .await
        .expect("del");
    tokio::time::timeout(ttl, lease.lost.cancelled())
        .await
        .expect("the next renewal finds the key gone");
    assert_eq!(a.held(), 0);
}

#[tokio::test]
async fn lock_keys_belong_to_one_job() {
    let locks = common::shared_locks("register", Duration::from_secs(10));
    let keys = [(1, "a".to_owned()), (2, "b".to_owned())];
    locks.register_lock_keys("ns", &keys).await.expect("first");
    locks.register_lock_keys("ns", &keys).await.expect("again");
    let err = locks
        .register_lock_keys("ns", &[(2, "c".to_owned())])
        .await
        .expect_err("key 2 is b's");
    assert!(
        err.to_string().contains("`b`") && err.to_string().contains("`c`"),
        "{err}"
    );
}
