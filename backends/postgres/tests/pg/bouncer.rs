//! A real PgBouncer in transaction mode (`pool_mode = transaction`) in front of the test server,
//! started by the test on a free port in a directory of its own, for the pooler tests.

pub(crate) use slotguard_process_tests::pgbouncer::PgBouncer as Bouncer;

/// A PgBouncer in front of the test server's `test` database, or `None` without PgBouncer
/// (`.ci/run` installs it).
pub(crate) fn start() -> Option<Bouncer> {
    Bouncer::start(5432, "test")
}
