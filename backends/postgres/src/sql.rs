//! Every statement the backend runs, with `{schema}` standing for the library's schema.
//!
//! The schema is the only thing spliced into SQL text, once, at connect time, after validation
//! (lower-case letters, digits and `_`) and quoting. Every value — job names included — is a bound
//! parameter.

use std::sync::Arc;

use sqlx::AssertSqlSafe;

/// Claims a batch of slots in one statement.
///
/// Parameters: `$1` owner, then one array per request field, all of the batch's length: `$2` job
/// names, `$3` slot instants, `$4` partition keys, `$5` triggers, `$6` zones, `$7` wall times, `$8`
/// business dates, `$9` fingerprints, `$10` stale-after in microseconds.
///
/// How it stays exclusive with any number of claimers:
/// - `req` draws one fencing token per request, in request order (so a batch's tokens rise in its
///   order), and `first` keeps one request per slot (a slot twice in a batch is won at most once).
/// - `ins` inserts every slot; a slot whose row exists is left alone (`DO NOTHING`: no row lock, no
///   new row version). When two claimers insert the same new slot, the second waits for the first
///   to commit and then does nothing. Rows are inserted in slot-key order, so two claimers with
///   overlapping batches wait on each other in one direction only and cannot deadlock.
/// - `stale` finds existing rows that are `running` with an expired heartbeat (database clock) and
///   locks them `FOR UPDATE SKIP LOCKED`: of two claimers racing for one abandoned row, one locks
///   it and the other skips it (`Taken`); a claimer that comes after the winner committed re-reads
///   the row, finds its fresh heartbeat and skips it too. Claims therefore never wait on row locks.
/// - `upd` re-claims the locked rows: new owner, the request's token, attempt + 1. Its WHERE
///   repeats the staleness test and demands a higher token, as a second line of defence.
/// - `abandon` closes the previous attempt of each re-claimed run; `attempts` opens an attempt row
///   for every win.
/// - The final SELECT answers per request, in order. A request that won carries its lease. One
///   that lost carries the row's status as of the statement's snapshot; a row that is not even in
///   the snapshot was inserted by a concurrent claim, which always inserts `running` (NULL here).
pub(crate) const CLAIM: &str = r#"
WITH req AS (
    SELECT r.*, nextval('{schema}.fencing_tokens') AS token
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[])
         WITH ORDINALITY
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us, ord)
),
first AS (
    SELECT DISTINCT ON (job_name, scheduled_at, partition_key) *
    FROM req
    ORDER BY job_name, scheduled_at, partition_key, ord
),
ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, started_at, zone, wall_time, business_date, "trigger",
         schedule_fingerprint)
    SELECT job_name, scheduled_at, partition_key, 'running', 1, $1, token, now(),
           stale_after_us * interval '1 microsecond', now(), now(), now(), zone, wall_time,
           business_date, trigger_kind, fingerprint
    FROM first
    ORDER BY job_name, scheduled_at, partition_key
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.attempt, j.fencing_token
),
stale AS (
    SELECT j.id, f.ord, f.token, f.stale_after_us
    FROM {schema}.job_runs j
    JOIN first f
      ON f.job_name = j.job_name
     AND f.scheduled_at = j.scheduled_at
     AND f.partition_key = j.partition_key
    WHERE j.status = 'running'
      AND j.heartbeat_at + j.stale_after < now()
    FOR UPDATE OF j SKIP LOCKED
),
upd AS (
    UPDATE {schema}.job_runs j
    SET attempt = j.attempt + 1,
        owner = $1,
        fencing_token = s.token,
        heartbeat_at = now(),
        stale_after = s.stale_after_us * interval '1 microsecond',
        started_at = now(),
        updated_at = now(),
        next_attempt_at = NULL
    FROM stale s
    WHERE j.id = s.id
      AND j.status = 'running'
      AND j.heartbeat_at + j.stale_after < now()
      AND j.fencing_token < s.token
    RETURNING j.id, j.attempt, j.fencing_token, s.ord
),
abandon AS (
    UPDATE {schema}.job_run_attempts a
    SET status = 'abandoned', finished_at = now(), message = 'heartbeat expired'
    FROM upd u
    WHERE a.run_id = u.id AND a.attempt = u.attempt - 1 AND a.status = 'running'
),
attempts AS (
    INSERT INTO {schema}.job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
    SELECT id, attempt, $1, fencing_token, 'running', now() FROM ins
    UNION ALL
    SELECT id, attempt, $1, fencing_token, 'running', now() FROM upd
)
SELECT r.ord,
       COALESCE(i.id, u.id) AS run_id,
       COALESCE(i.attempt, u.attempt) AS attempt,
       COALESCE(i.fencing_token, u.fencing_token) AS token,
       cur.status AS seen_status
FROM req r
LEFT JOIN ins i ON i.fencing_token = r.token
LEFT JOIN upd u ON u.ord = r.ord
LEFT JOIN {schema}.job_runs cur
       ON cur.job_name = r.job_name
      AND cur.scheduled_at = r.scheduled_at
      AND cur.partition_key = r.partition_key
ORDER BY r.ord
"#;

/// Refreshes the heartbeat of every attempt `$1` holds with a token in `$2`.
pub(crate) const HEARTBEAT: &str = "
UPDATE {schema}.job_runs
SET heartbeat_at = now()
WHERE owner = $1 AND fencing_token = ANY($2) AND status = 'running'
RETURNING fencing_token
";

/// Records an attempt's outcome on the run and on its attempt row, only while `$3` holds run `$1`
/// with token `$2`. Answers how many run rows matched (0 or 1).
///
/// `$4` run status, `$5` attempt status, `$6` error class, `$7` message.
pub(crate) const FINISH: &str = "
WITH run AS (
    UPDATE {schema}.job_runs
    SET status = $4,
        error_class = $6,
        error_message = $7,
        finished_at = now(),
        updated_at = now()
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
    RETURNING id, attempt, fencing_token
),
attempt AS (
    UPDATE {schema}.job_run_attempts a
    SET status = $5, finished_at = now(), message = $7
    FROM run
    WHERE a.run_id = run.id AND a.attempt = run.attempt AND a.fencing_token = run.fencing_token
    RETURNING a.id
)
SELECT (SELECT count(*) FROM run) AS runs
";

/// Registers keys `$2` for jobs `$3` of namespace `$1`; a key already registered is left as it is.
pub(crate) const REGISTER_KEYS: &str = "
INSERT INTO {schema}.lock_keys (lock_key, namespace, job_name)
SELECT k, $1, j FROM unnest($2::bigint[], $3::text[]) AS r(k, j)
ORDER BY k
ON CONFLICT (lock_key) DO NOTHING
";

/// Who holds keys `$1` now (a separate statement, so that keys registered concurrently are seen).
pub(crate) const REGISTERED_KEYS: &str = "
SELECT lock_key, namespace, job_name FROM {schema}.lock_keys WHERE lock_key = ANY($1)
";

/// Marks keys `$1` of namespace `$2` as still in use.
pub(crate) const TOUCH_KEYS: &str = "
UPDATE {schema}.lock_keys SET seen_at = now() WHERE lock_key = ANY($1) AND namespace = $2
";

/// Every run (of job `$1`, when not NULL) with its attempts.
pub(crate) const RUNS: &str = r#"
SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner,
       r.fencing_token, r.heartbeat_at, (extract(epoch FROM r.stale_after) * 1000000)::bigint AS stale_after_us,
       r.next_attempt_at, r.created_at, r.updated_at, r.started_at, r.finished_at, r.error_class,
       r.error_message, r.zone, r.wall_time, r.business_date, r."trigger", r.schedule_fingerprint,
       a.attempt AS a_attempt, a.owner AS a_owner, a.fencing_token AS a_token,
       a.started_at AS a_started_at, a.finished_at AS a_finished_at, a.status AS a_status,
       a.message AS a_message
FROM {schema}.job_runs r
LEFT JOIN {schema}.job_run_attempts a ON a.run_id = r.id
WHERE $1::text IS NULL OR r.job_name = $1
ORDER BY r.job_name, r.scheduled_at, r.partition_key, a.attempt
"#;

/// The statements above, for one schema.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) claim: Arc<str>,
    pub(crate) heartbeat: Arc<str>,
    pub(crate) finish: Arc<str>,
    pub(crate) register_keys: Arc<str>,
    pub(crate) registered_keys: Arc<str>,
    pub(crate) touch_keys: Arc<str>,
    pub(crate) runs: Arc<str>,
}

impl Statements {
    pub(crate) fn new(quoted_schema: &str) -> Self {
        let s = |sql: &str| Arc::<str>::from(sql.replace("{schema}", quoted_schema));
        Statements {
            claim: s(CLAIM),
            heartbeat: s(HEARTBEAT),
            finish: s(FINISH),
            register_keys: s(REGISTER_KEYS),
            registered_keys: s(REGISTERED_KEYS),
            touch_keys: s(TOUCH_KEYS),
            runs: s(RUNS),
        }
    }
}

/// A statement, ready for `sqlx::query`.
pub(crate) fn sql(statement: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    // Safe: built only from the constants above and a validated, quoted schema name.
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

#[cfg(test)]
mod tests {
    use super::quote_schema;

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
