//! A real PgBouncer in transaction mode (`pool_mode = transaction`) in front of the test server,
//! started by the test on a free port in a directory of its own, for the pooler tests.

pub(crate) use slotguard_process_tests::pgbouncer::PgBouncer as Bouncer;

/// A PgBouncer in front of the test server's database (`SLOTGUARD_TEST_DATABASE_URL`, or
/// 127.0.0.1:5432/test), or `None` without PgBouncer (`.ci/run` installs it).
pub(crate) fn start() -> Option<Bouncer> {
    Bouncer::in_front_of(&slotguard_tests::pg::database_url())
}
