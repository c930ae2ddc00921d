//! Every statement the backend runs, with `{schema}` standing for the library's schema and `{now}`
//! for the database clock as the statement reads it (`statement_timestamp()`): one file
//! per concern, each statement with its doc comment (what it does, which rule it carries out,
//! which index it walks). The modules that run them import from here, never the other way round.
//!
//! The schema is the only thing spliced into SQL text, once, at connect time, after validation
//! (lower-case letters, digits and `_`) and quoting. Every value — job names included — is a bound
//! parameter.
//!
//! # Why `statement_timestamp()`, never `now()`
//!
//! `now()` is the time the *transaction* began. A claim runs in a transaction that first waits for
//! its jobs' claim locks, behind other claimers, for as long as they take: a heartbeat written as
//! `now()` after that wait is already that old when the claim commits, and with a wait longer than
//! the run's stale threshold another replica finds the new run stale and takes it over while its
//! body runs (the claim storm's duplicate executions; `tests/pg/clock.rs`). The statement's own
//! start comes after the wait, and the statement's snapshot is taken then too, so every judgment it
//! makes ("stale", "fresh", "due") and every time it writes agree with what it sees.
//!
//! Operators' changes (`admin.rs`, `jobs.rs`) keep `now()`: they wait for no claim lock, and a
//! change and its audit record, written by two statements of one transaction, share its instant.

//! # Slot times beside run ids
//!
//! Where a statement joins runs to their attempts, or a CTE's runs back to `job_runs`, it matches
//! the slot time too (`a.scheduled_at = r.scheduled_at OR a.scheduled_at IS NULL`: attempts
//! written before migration 17 have none). On a plain table the id alone finds the row; on a
//! partitioned history (`partitions.rs`) the slot time lets the executor look only in the
//! partition that holds it, instead of probing every partition's index.

/// `$name AS (…)`: the `running` attempts of the runs in `$runs` (with `id`, `scheduled_at` and
/// `attempt`, the run's current attempt) closed `abandoned` with the message `$reason` (one of the
/// `{…}` reasons of `with_reasons`). Every statement that takes a run from its attempt
/// (abandoned, fenced, replaced, buried) closes the attempt with it.
macro_rules! close_attempts {
    ($name:literal, $runs:literal, $reason:literal) => {
        concat!(
            $name,
            " AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = {now}, message = ",
            $reason,
            "
    FROM ",
            $runs,
            " r
    WHERE a.run_id = r.id AND (a.scheduled_at = r.scheduled_at OR a.scheduled_at IS NULL)
      AND a.attempt = r.attempt AND a.status = 'running'
)"
        )
    };
}

/// `$alias` is `running`, tested as a value rather than as a column an index could serve: for a
/// join that finds its rows by key (the run id) and then checks the status. With a plain
/// `status = 'running'` and statistics that expect few running runs, as they are when a storm
/// starts, the planner may lead the join with the partial index of running runs and read the
/// whole input once per running run: `FINISH_MANY` of 300 runs read 100,000 rows that way beside
/// 10,000 running runs (`sql::by_key`). Not for lookups by job: those want that index.
macro_rules! running {
    ($alias:literal) => {
        concat!(
            "(CASE WHEN ",
            $alias,
            ".status = 'running' THEN true ELSE false END)"
        )
    };
}

pub(crate) mod admin;
pub(crate) mod calendars;
pub(crate) mod checkpoint;
pub(crate) mod claim;
pub(crate) mod due;
pub(crate) mod finish;
pub(crate) mod jobs;
pub(crate) mod lease;
pub(crate) mod locks;
pub(crate) mod partitions;
pub(crate) mod presence;
pub(crate) mod replicas;
pub(crate) mod retention;
pub(crate) mod runs;
pub(crate) mod schedules;
pub(crate) mod slots;
pub(crate) mod trace;

#[cfg(test)]
mod by_key;
#[cfg(test)]
mod head_of_queue;

/// A backend on `schema` of the test server, and a connection of its own beside it: for the plan
/// checks of this module's tests, which drop indexes or prepare statements on that connection.
#[cfg(test)]
async fn test_backend(schema: &str, pool: u32) -> (crate::PgBackend, sqlx::PgConnection) {
    use sqlx::Connection as _;
    let url = slotguard_tests::pg::database_url();
    let backend = crate::PgBackend::builder(&url)
        .schema(schema)
        .pool_size(pool)
        .connect()
        .await
        .expect("connect");
    let conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    (backend, conn)
}

use std::sync::Arc;

use slotguard::store::rules::reason;
use sqlx::AssertSqlSafe;

/// The database clock in every statement: the statement's start (see the module's doc).
pub(crate) const NOW: &str = "statement_timestamp()";

/// The statements of this module's files, for one schema.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) claim: Arc<str>,
    pub(crate) claim_due: Arc<str>,
    pub(crate) claim_due_free: Arc<str>,
    pub(crate) decide_queued: Arc<str>,
    pub(crate) due_jobs: Arc<str>,
    pub(crate) next_due: Arc<str>,
    pub(crate) existing_slots: Arc<str>,
    pub(crate) break_stale_locks: Arc<str>,
    pub(crate) record_skipped: Arc<str>,
    pub(crate) heartbeat: Arc<str>,
    pub(crate) finish: Arc<str>,
    pub(crate) finish_many: Arc<str>,
    pub(crate) register_keys: Arc<str>,
    pub(crate) registered_keys: Arc<str>,
    pub(crate) touch_keys: Arc<str>,
    pub(crate) runs: Arc<str>,
    pub(crate) register_jobs: Arc<str>,
    pub(crate) jobs: Arc<str>,
    pub(crate) set_paused: Arc<str>,
    pub(crate) list_runs: Arc<str>,
    pub(crate) latest_runs: Arc<str>,
    pub(crate) slot_times: Arc<str>,
    pub(crate) slot_times_of: Arc<str>,
    pub(crate) latest_slots: Arc<str>,
    pub(crate) run_counts: Arc<str>,
    pub(crate) retry: Arc<str>,
    pub(crate) run_status: Arc<str>,
    pub(crate) enqueue: Arc<str>,
    pub(crate) cancel_run: Arc<str>,
    pub(crate) cancel_attempt: Arc<str>,
    pub(crate) audit_log: Arc<str>,
    pub(crate) save_checkpoint: Arc<str>,
    pub(crate) load_checkpoint: Arc<str>,
    pub(crate) record_replica: Arc<str>,
    pub(crate) remove_replica: Arc<str>,
    pub(crate) replicas: Arc<str>,
    pub(crate) forget_replicas: Arc<str>,
    pub(crate) prune_runs: Arc<str>,
    pub(crate) keep_traces: Arc<str>,
    pub(crate) latest_schedule: Arc<str>,
    pub(crate) insert_schedule: Arc<str>,
    pub(crate) schedule_changes: Arc<str>,
    pub(crate) schedules: Arc<str>,
    pub(crate) schedule_history: Arc<str>,
    pub(crate) skip_slot: Arc<str>,
    pub(crate) unskip_slot: Arc<str>,
    pub(crate) expire_gone: Arc<str>,
    pub(crate) last_override: Arc<str>,
    pub(crate) insert_override: Arc<str>,
    pub(crate) override_changes: Arc<str>,
    pub(crate) lease_take: Arc<str>,
    pub(crate) lease_renew: Arc<str>,
    pub(crate) lease_release: Arc<str>,
}

impl Statements {
    /// The statements of one backend: its schema, and its presence key written on the attempts it
    /// starts (`{presence}`; see `presence.rs`), or none (`NULL`: through a transaction pooler,
    /// where no session of its own holds a key, its attempts wait out their stale threshold).
    pub(crate) fn new(quoted_schema: &str, presence: Option<i32>) -> Self {
        let presence = presence.map_or_else(|| "NULL::integer".to_owned(), |key| key.to_string());
        let s = |sql: &str| {
            Arc::<str>::from(with_reasons(
                &sql.replace("{schema}", quoted_schema)
                    .replace("{now}", NOW)
                    .replace("{presence}", &presence),
            ))
        };
        Statements {
            claim: s(claim::CLAIM),
            claim_due: s(due::CLAIM_DUE),
            claim_due_free: s(due::CLAIM_DUE_FREE),
            decide_queued: s(due::DECIDE_QUEUED),
            due_jobs: s(due::DUE_JOBS),
            next_due: s(due::NEXT_DUE),
            existing_slots: s(slots::EXISTING_SLOTS),
            break_stale_locks: s(locks::BREAK_STALE_LOCKS),
            record_skipped: s(slots::RECORD_SKIPPED),
            heartbeat: s(finish::HEARTBEAT),
            finish: s(finish::FINISH),
            finish_many: s(finish::FINISH_MANY),
            register_keys: s(locks::REGISTER_KEYS),
            registered_keys: s(locks::REGISTERED_KEYS),
            touch_keys: s(locks::TOUCH_KEYS),
            runs: s(runs::RUNS),
            register_jobs: s(jobs::REGISTER_JOBS),
            jobs: s(jobs::JOBS),
            set_paused: s(jobs::SET_PAUSED),
            list_runs: s(runs::LIST_RUNS),
            latest_runs: s(runs::LATEST_RUNS),
            slot_times: s(runs::SLOT_TIMES),
            slot_times_of: s(runs::SLOT_TIMES_OF),
            latest_slots: s(runs::LATEST_SLOTS),
            run_counts: s(runs::RUN_COUNTS),
            retry: s(admin::RETRY),
            run_status: s(admin::RUN_STATUS),
            enqueue: s(admin::ENQUEUE),
            cancel_run: s(admin::CANCEL_RUN),
            cancel_attempt: s(admin::CANCEL_ATTEMPT),
            audit_log: s(admin::AUDIT_LOG),
            save_checkpoint: s(checkpoint::SAVE_CHECKPOINT),
            load_checkpoint: s(checkpoint::LOAD_CHECKPOINT),
            record_replica: s(replicas::RECORD_REPLICA),
            remove_replica: s(replicas::REMOVE_REPLICA),
            replicas: s(replicas::REPLICAS),
            forget_replicas: s(replicas::FORGET_REPLICAS),
            prune_runs: s(retention::PRUNE_RUNS),
            keep_traces: s(trace::KEEP_TRACES),
            latest_schedule: s(schedules::LATEST_SCHEDULE),
            insert_schedule: s(schedules::INSERT_SCHEDULE),
            schedule_changes: s(schedules::SCHEDULE_CHANGES),
            schedules: s(schedules::SCHEDULES),
            schedule_history: s(schedules::SCHEDULE_HISTORY),
            skip_slot: s(schedules::SKIP_SLOT),
            unskip_slot: s(schedules::UNSKIP_SLOT),
            expire_gone: s(presence::EXPIRE_GONE),
            last_override: s(calendars::LAST_OVERRIDE),
            insert_override: s(calendars::INSERT_OVERRIDE),
            override_changes: s(calendars::OVERRIDE_CHANGES),
            lease_take: s(lease::TAKE),
            lease_renew: s(lease::RENEW),
            lease_release: s(lease::RELEASE),
        }
    }
}

/// A statement, ready for `sqlx::query`.
pub(crate) fn sql(statement: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    // Safe: built only from the constants of this module's files and a validated, quoted schema
    // name.
    AssertSqlSafe(Arc::clone(statement))
}

/// `schema` checked and quoted for splicing into SQL.
pub(crate) fn quote_schema(schema: &str) -> Option<String> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (first_ok && rest_ok && schema.len() <= 63).then(|| format!("\"{schema}\""))
}

/// `sql` with the rulebook's reasons (`{skipped_overlap}`, `{waiting}`, `{superseded}`,
/// `{replaced}`, `{heartbeat_expired}`, and `{exhausted}`, a `format()` pattern) as SQL string
/// literals: the statements record the words [`rules::reason`](reason) spells.
fn with_reasons(sql: &str) -> String {
    let literal = |text: &str| format!("'{}'", text.replace('\'', "''"));
    sql.replace("{skipped_overlap}", &literal(reason::SKIPPED_OVERLAP))
        .replace("{waiting}", &literal(reason::WAITING))
        .replace("{superseded}", &literal(reason::SUPERSEDED))
        .replace("{replaced}", &literal(reason::REPLACED))
        .replace("{heartbeat_expired}", &literal(reason::HEARTBEAT_EXPIRED))
        .replace("{exhausted}", &literal(&reason::exhausted("%s", "%s")))
}

#[cfg(test)]
mod tests {
    use super::{Statements, quote_schema};

    /// No statement of a run's life reads the transaction's start: a claim's would be as old as
    /// its lock wait.
    #[test]
    fn run_statements_read_the_clock_at_their_own_start() {
        let s = Statements::new("\"s\"", Some(7));
        let runs = [
            &s.claim,
            &s.claim_due,
            &s.claim_due_free,
            &s.decide_queued,
            &s.due_jobs,
            &s.next_due,
            &s.break_stale_locks,
            &s.record_skipped,
            &s.heartbeat,
            &s.finish,
            &s.finish_many,
            &s.expire_gone,
        ];
        for sql in runs {
            let sql = sql.to_lowercase();
            assert!(sql.contains("statement_timestamp()"), "{sql}");
            for stale in [
                "now()",
                "current_timestamp",
                "transaction_timestamp",
                "{now}",
            ] {
                assert!(!sql.contains(stale), "{stale} in {sql}");
            }
        }
    }

    /// The presence key is spliced into the statements that start attempts, and nowhere is a
    /// placeholder left.
    #[test]
    fn attempts_carry_the_presence_key() {
        let s = Statements::new("\"s\"", Some(-42));
        for sql in [&s.claim, &s.claim_due, &s.claim_due_free] {
            assert!(sql.contains("presence = -42"), "{sql}");
        }
        assert!(s.claim.contains("ELSE -42 END"));
        for sql in [
            &s.claim,
            &s.claim_due,
            &s.claim_due_free,
            &s.expire_gone,
            &s.record_skipped,
        ] {
            assert!(!sql.contains('{'), "a placeholder is left in {sql}");
        }
    }

    /// Without a presence session (through a transaction pooler) attempts carry no key, so no
    /// other backend can judge them gone: they wait out their stale threshold.
    #[test]
    fn without_presence_attempts_carry_no_key() {
        let s = Statements::new("\"s\"", None);
        for sql in [&s.claim, &s.claim_due, &s.claim_due_free] {
            assert!(sql.contains("presence = NULL::integer"), "{sql}");
        }
        assert!(s.claim.contains("ELSE NULL::integer END"));
    }

    #[test]
    fn only_plain_identifiers_are_schemas() {
        assert_eq!(quote_schema("slotguard").as_deref(), Some("\"slotguard\""));
        assert_eq!(quote_schema("sg_t_01ab").as_deref(), Some("\"sg_t_01ab\""));
        for bad in [
            "",
            "1abc",
            "Slotguard",
            "a-b",
            "a\"; DROP SCHEMA public; --",
            "ä",
        ] {
            assert_eq!(quote_schema(bad), None, "{bad}");
        }
        assert!(quote_schema(&"a".repeat(63)).is_some());
        assert!(quote_schema(&"a".repeat(64)).is_none());
    }
}
