//! The operations against a live PostgreSQL server, run as a process: every scenario of
//! `common/ops.rs`, and how the CLI finds (or refuses) the server, the database and the schema.
//!
//! The server is `postgres://postgres@127.0.0.1:5432/test` unless `SLOTGUARD_TEST_DATABASE_URL` says
//! otherwise. Every test works in a schema of its own (`sg_cli_<random>`), dropped when it ends, pass
//! or fail; nothing else on the server is touched.

#[path = "common/ops.rs"]
mod ops;

use std::time::Duration;

use ops::{Fixture, run};
use slotguard_postgres::PgBackend;
use slotguard_process_tests::pgbouncer::PgBouncer;
use slotguard_tests::pg::{database_url, random_u64};
use sqlx::{Connection, PgConnection};

/// A schema name no other test uses.
fn schema_name() -> String {
    format!("sg_cli_{:016x}", random_u64())
}

async fn drop_schema(name: &str) {
    if let Err(e) = slotguard_tests::pg::drop_schema(name).await {
        eprintln!("could not drop test schema {name}: {e}");
    }
}

/// Whether a schema of that name exists on the server.
fn schema_exists(name: &str) -> bool {
    let name = name.to_owned();
    Fixture::runtime().block_on(async move {
        let mut conn = PgConnection::connect(&database_url())
            .await
            .expect("connect");
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
        )
        .bind(&name)
        .fetch_one(&mut conn)
        .await
        .expect("query");
        let _ = conn.close().await;
        exists
    })
}

/// A fresh store in a schema of its own, dropped when the fixture is dropped.
fn fixture() -> Fixture {
    fixture_via(database_url(), &[], None)
}

/// [`fixture`], with the command line reaching the store at `cli_url` with `cli_flags`; `bouncer`
/// (the pooler at `cli_url`) lives as long as the fixture. Seeding and checks go to the database
/// directly.
fn fixture_via(cli_url: String, cli_flags: &[&str], bouncer: Option<PgBouncer>) -> Fixture {
    let schema = schema_name();
    let url = database_url();
    let open = {
        let (url, schema) = (url.clone(), schema.clone());
        async move {
            PgBackend::builder(&url)
                .schema(schema)
                .pool_size(2)
                .connect()
                .await
                .expect("connect to the test database")
        }
    };
    let backdate = {
        let (url, schema) = (url.clone(), schema.clone());
        move || {
            let (url, schema) = (url.clone(), schema.clone());
            Box::pin(async move {
                let mut conn = PgConnection::connect(&url).await.expect("connect");
                let sql = format!("UPDATE \"{schema}\".jobs SET registered_at = $1");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(ops::instant(ops::FIRST_SEEN))
                    .execute(&mut conn)
                    .await
                    .expect("set the first registration back");
                let _ = conn.close().await;
            }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        }
    };
    Fixture::new(
        Fixture::runtime(),
        open,
        ["--database-url", &cli_url, "--schema", &schema]
            .into_iter()
            .chain(cli_flags.iter().copied())
            .map(str::to_owned)
            .collect(),
        async move {
            drop(bouncer);
            drop_schema(&schema).await
        },
    )
    .with_backdate(Box::new(backdate))
}

#[test]
fn runs_lists_and_filters() {
    ops::runs_lists_and_filters(&fixture());
}

#[test]
fn missed_lists_slots_without_rows() {
    ops::missed_lists_slots_without_rows(&fixture());
}

#[test]
fn missed_without_a_job_reads_every_job() {
    ops::missed_without_a_job_reads_every_job(&fixture());
}

#[test]
fn retry_makes_a_failed_run_pending() {
    ops::retry_makes_a_failed_run_pending(&fixture());
}

#[test]
fn pause_and_resume() {
    ops::pause_and_resume(&fixture());
}

#[test]
fn replicas_and_inactive_jobs() {
    ops::replicas_and_inactive_jobs(&fixture());
}

#[test]
fn trigger_creates_a_manual_run() {
    ops::trigger_creates_a_manual_run(&fixture());
}

#[test]
fn backfill_dry_run_then_execute() {
    ops::backfill_dry_run_then_execute(&fixture());
}

#[test]
fn backfill_refuses_year_zero_and_history_unless_asked() {
    ops::backfill_refuses_year_zero_and_history_unless_asked(&fixture());
}

#[test]
fn cancel_a_running_run() {
    ops::cancel_a_running_run(&fixture());
}

#[test]
fn audit_lists_changes() {
    ops::audit_lists_changes(&fixture());
}

#[test]
fn hostile_input_changes_nothing() {
    ops::hostile_input_changes_nothing(&fixture());
}

#[test]
fn limits_follow_the_admin_rule() {
    ops::limits_follow_the_admin_rule(&fixture());
}

#[test]
fn trigger_of_a_paused_job_says_it_waits() {
    ops::trigger_of_a_paused_job_says_it_waits(&fixture());
}

#[test]
fn the_documented_one_run_command_shows_that_run() {
    ops::the_documented_one_run_command_shows_that_run(&fixture());
}

#[test]
fn run_shows_one_run_with_its_attempts() {
    ops::run_shows_one_run_with_its_attempts(&fixture());
}

#[test]
fn retry_failed_retries_a_range() {
    ops::retry_failed_retries_a_range(&fixture());
}

#[test]
fn trigger_wait_follows_the_run() {
    ops::trigger_wait_follows_the_run(&fixture());
}

#[test]
fn input_is_checked_before_the_store() {
    ops::input_is_checked_before_the_store(&fixture());
}

/// Through a real PgBouncer in transaction mode: `jobs`, `pause` and `resume`, as directly, with
/// `--transaction-pooler`. (Without it the driver's prepared statements land on server sessions
/// that lack them or already hold them; `backends/postgres/tests/pg/pooler.rs`.)
#[test]
fn pause_and_resume_through_a_transaction_pooler() {
    let Some(bouncer) = PgBouncer::in_front_of(&database_url()) else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let url = bouncer.url();
    ops::pause_and_resume(&fixture_via(url, &["--transaction-pooler"], Some(bouncer)));
}

#[test]
fn an_unreachable_server_fails_fast_in_one_line() {
    // Nothing listens on port 1; the password must not appear in the message.
    let out = run(
        &[
            "jobs",
            "--database-url",
            "postgres://postgres:hunter2@127.0.0.1:1/x",
        ],
        &[],
    );
    let message = out.fails(1);
    assert!(
        message.starts_with("cannot connect to PostgreSQL at 127.0.0.1:1 (database `x`): "),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);

    // The same from the environment, for an operation that changes something.
    let out = run(
        &["pause", "report", "--reason", "r"],
        &[(
            "SLOTGUARD_DATABASE_URL",
            Some("postgresql://postgres@127.0.0.1:1/x"),
        )],
    );
    out.fails(1);
}

#[test]
fn a_server_that_never_answers_times_out_in_five_seconds() {
    // The kernel completes the TCP handshake (the listener's backlog), but nothing ever reads or
    // answers: the driver waits for the server's first byte until the CLI's timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/x");
    let out = run(&["jobs", "--database-url", &url], &[]);
    assert_eq!(
        out.fails(1),
        format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port} (database `x`): no answer within 5 s"
        )
    );
    assert!(
        out.elapsed >= Duration::from_secs(5) && out.elapsed < Duration::from_secs(9),
        "{:?}",
        out.elapsed
    );
    drop(listener);
}

#[test]
fn a_missing_schema_is_not_created() {
    let schema = schema_name();
    let out = run(
        &[
            "runs",
            "report",
            "--database-url",
            &database_url(),
            "--schema",
            &schema,
        ],
        &[],
    );
    let message = out.fails(2);
    assert!(
        message.starts_with(&format!(
            "no slotguard store in schema `{schema}` of PostgreSQL at "
        )),
        "{message}"
    );
    assert!(message.ends_with("check --schema (a scheduler creates it when it first starts)"));
    assert!(!schema_exists(&schema), "the CLI created schema {schema}");

    // A name the backend would refuse: the same answer, nothing created.
    let out = run(
        &[
            "jobs",
            "--database-url",
            &database_url(),
            "--schema",
            "x\"; DROP SCHEMA public; --",
        ],
        &[],
    );
    assert!(
        out.fails(2)
            .contains("no slotguard store in schema `x\"; DROP SCHEMA public; --`"),
        "{out:?}"
    );
    assert!(schema_exists("public"));
}

#[test]
fn a_missing_database_or_a_bad_url_is_bad_input() {
    let mut url = database_url();
    let slash = url.rfind('/').expect("a database in the URL");
    url.truncate(slash);
    url.push_str("/sg_cli_no_such_database");
    let out = run(&["jobs", "--database-url", &url], &[]);
    let message = out.fails(2);
    assert!(message.contains("sg_cli_no_such_database"), "{message}");

    let out = run(
        &[
            "jobs",
            "--database-url",
            "postgres://u:secret@host:notaport/db",
        ],
        &[],
    );
    let message = out.fails(2);
    assert!(message.starts_with("invalid PostgreSQL URL: "), "{message}");
    assert!(!message.contains("secret"), "{message}");
}

#[test]
fn two_schemas_are_two_stores() {
    // The schema of one fixture does not see the jobs of another.
    let (a, b) = (fixture(), fixture());
    a.seed();
    let jobs = a.slotguard(&["jobs"]);
    assert_eq!(ops::table(jobs.ok()).1.len(), 3);
    b.slotguard(&["runs", "report"]).fails(3);
    // Nor the job table a scheduler of another schema registered: `b` is empty.
    let jobs = b.slotguard(&["jobs"]);
    assert_eq!(ops::table(jobs.ok()).1.len(), 0);
}

#[test]
fn missed_with_no_job_countable_fails() {
    ops::missed_with_no_job_countable_fails(&fixture());
}

#[test]
fn cancel_says_what_happens_to_a_pending_run() {
    ops::cancel_says_what_happens_to_a_pending_run(&fixture());
}

#[test]
fn a_second_pause_and_a_needless_resume_are_refused() {
    ops::a_second_pause_and_a_needless_resume_are_refused(&fixture());
}

#[test]
fn stored_schedules_add_change_remove() {
    ops::stored_schedules_add_change_remove(&fixture());
}

#[test]
fn schedule_input_names_the_argument() {
    ops::schedule_input_names_the_argument(&fixture());
}

#[test]
fn schedule_preview_stores_nothing() {
    ops::schedule_preview_stores_nothing(&fixture());
}

#[test]
fn holidays_are_added_removed_and_listed() {
    ops::holidays_are_added_removed_and_listed(&fixture());
}

#[test]
fn skip_and_unskip_a_slot() {
    ops::skip_and_unskip_a_slot(&fixture());
}
