//! [`contract!`](crate::contract): the backend contract as one list of checks, expanded into one
//! test per check in each backend's test file, so a check added here reaches every backend.

/// One `#[test]` per check of the backend contract, each running the check against a store that
/// `with` sets up and tears down.
///
/// `with` is an `async fn(check: impl AsyncFnOnce(&Store))` that opens the store (a schema, a
/// file), awaits `check(&store)` and closes it. The attributes before it go on every test (e.g.
/// `#[tokio::test(start_paused = true)]`). `slots` runs the slot checks and the lock checks, with
/// `stale` the staleness threshold the slot checks use (real time against a database, whose clock
/// judges it; paused time for memory); `slot_rows` the slot checks only, for a store whose locks
/// are kept elsewhere (PostgreSQL through a transaction pooler); `locks` runs the lock checks only,
/// for a lock store.
///
/// ```ignore
/// async fn with_backend(check: impl AsyncFnOnce(&SqliteBackend)) {
///     let dir = tempfile::tempdir().expect("temp dir");
///     check(&backend(&dir).await).await;
/// }
///
/// slotguard_tests::contract!(slots, #[tokio::test] with = with_backend, stale = Duration::from_secs(1));
/// ```
#[macro_export]
macro_rules! contract {
    (slots, $(#[$attr:meta])* with = $with:path, stale = $stale:expr $(,)?) => {
        $crate::contract!(slot_rows, $(#[$attr])* with = $with, stale = $stale);
        $crate::contract!(locks, $(#[$attr])* with = $with);
    };
    (slot_rows, $(#[$attr:meta])* with = $with:path, stale = $stale:expr $(,)?) => {
        $crate::contract!(@checks [$(#[$attr])*] $with, $stale;
            claims_are_exclusive(),
            writes_are_fenced(stale),
            retries_become_due(),
            abandoned_runs_are_recovered(stale),
            overlap_is_decided_by_the_store(),
            slots_ahead_of_the_store_clock_are_not_due(),
            batched_finishes_are_fenced(),
            fenced_writes_check_the_slot(),
            due_work_is_one_at_a_time(),
            newer_slots_fence_stale_runs(stale),
            recovered_runs_fence_other_stale_runs(stale),
            existing_slots_are_found(),
            slots_are_queued_once(),
            due_work_keeps_its_limits(),
        );
    };
    (locks, $(#[$attr:meta])* with = $with:path $(,)?) => {
        $crate::contract!(@checks [$(#[$attr])*] $with, ();
            locks_are_exclusive(),
            lock_tokens_rise(),
        );
    };
    (@checks [$(#[$attr:meta])*] $with:path, $stale:expr;) => {};
    (@checks [$(#[$attr:meta])*] $with:path, $stale:expr; $check:ident(stale), $($rest:tt)*) => {
        $(#[$attr])*
        async fn $check() {
            $with(async |store| $crate::$check(store, $stale).await).await;
        }
        $crate::contract!(@checks [$(#[$attr])*] $with, $stale; $($rest)*);
    };
    (@checks [$(#[$attr:meta])*] $with:path, $stale:expr; $check:ident(), $($rest:tt)*) => {
        $(#[$attr])*
        async fn $check() {
            $with(async |store| $crate::$check(store).await).await;
        }
        $crate::contract!(@checks [$(#[$attr])*] $with, $stale; $($rest)*);
    };
}
