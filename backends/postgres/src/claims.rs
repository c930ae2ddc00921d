//! Claims and due claims on PostgreSQL: one statement per call (`CLAIM` in `sql/claim.rs`,
//! `CLAIM_DUE` in `sql/due.rs`) carries out the rules of [`slotguard::store::rules`]; this module
//! binds the requests, reads the answers, and logs the events the rules imply from what the
//! statement says it did.

use std::collections::HashSet;
use std::sync::Arc;

use slotguard::Overlap;
use slotguard::store::rules::Event;
use slotguard::store::{
    CalendarStamp, Claim, ClaimRequest, DueClaim, DueSpec, Lease, RunStatus, SlotKey, StoreError,
};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row};

use crate::error::PgError;
use crate::sql::claim::{LOCK_JOBS, TRY_LOCK_JOBS};
use crate::sql::sql;
use crate::{MAX_STALE_AFTER, PgBackend, inspect, micros, spec_columns};

impl PgBackend {
    /// `CLAIM` for `requests`: claimed for `owner`, or with `queue` enqueued for workers.
    ///
    /// Requests that wait for a claim of their job in flight and requests that give way to it
    /// ([`defer_if_contended`](ClaimRequest::defer_if_contended)) go in transactions of their own,
    /// those that give way first: they never wait, so a batch's waiting part never holds them up.
    pub(crate) async fn claim_rows(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        queue: bool,
    ) -> Result<Vec<Claim>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        if !queue {
            self.hold_presence();
        }
        let waits = |r: &ClaimRequest| queue || !r.defer_if_contended;
        if requests.iter().all(waits) {
            return self.claim_waiting(owner, requests, queue).await;
        }
        if !requests.iter().any(waits) {
            return self.claim_giving_way(owner, requests).await;
        }
        let (wait, give): (Vec<ClaimRequest>, Vec<ClaimRequest>) =
            requests.iter().cloned().partition(waits);
        let mut gave = self.claim_giving_way(owner, &give).await?.into_iter();
        let mut waited = self.claim_waiting(owner, &wait, queue).await?.into_iter();
        let answers: Option<Vec<Claim>> = requests
            .iter()
            .map(|r| if waits(r) { waited.next() } else { gave.next() })
            .collect();
        answers.ok_or_else(|| StoreError::rejected("claim answered too few rows"))
    }

    /// `CLAIM` after the claim locks of the jobs whose overlap is not `allow`, waiting for them.
    async fn claim_waiting(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        queue: bool,
    ) -> Result<Vec<Claim>, StoreError> {
        let args = ClaimArgs::new(requests);
        let query = args.query(sql(&self.inner.statements.claim), owner, queue);
        let rows = self
            .fetch_serialized(&exclusive_jobs(requests), query)
            .await?;
        self.answers(&rows, &requests.iter().collect::<Vec<_>>())
    }

    /// `CLAIM` for the requests whose jobs' claim locks are free; [`Claim::Contended`] for the
    /// others, with nothing written for them.
    async fn claim_giving_way(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        let exclusive = exclusive_jobs(requests);
        if exclusive.is_empty() {
            return self.claim_waiting(owner, requests, false).await;
        }
        let (contended, rows) = self.claim_uncontended(owner, requests, &exclusive).await?;
        let claimed: Vec<&ClaimRequest> = requests
            .iter()
            .zip(&contended)
            .filter_map(|(r, c)| (!c).then_some(r))
            .collect();
        let mut answers = self.answers(&rows, &claimed)?.into_iter();
        let answers: Option<Vec<Claim>> = contended
            .iter()
            .map(|&c| {
                if c {
                    Some(Claim::Contended)
                } else {
                    answers.next()
                }
            })
            .collect();
        answers.ok_or_else(|| StoreError::rejected("claim answered too few rows"))
    }

    /// The answers of `CLAIM`'s `rows` to `requests`, in order; logs the events they imply.
    fn answers(
        &self,
        rows: &[PgRow],
        requests: &[&ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        if rows.len() != requests.len() {
            return Err(StoreError::rejected(format!(
                "claim answered {} rows for {} requests",
                rows.len(),
                requests.len()
            )));
        }
        let mut answers = Vec::with_capacity(rows.len());
        for (row, request) in rows.iter().zip(requests) {
            Event::emit_all(&claim_events(row, request)?);
            let answer = claim_answer(row, &request.key)?;
            if let Claim::Won(lease) = &answer {
                self.inner.watch.saw_token(lease.token);
            }
            answers.push(answer);
        }
        Ok(answers)
    }

    /// `CLAIM` for the requests whose jobs' claim locks are free ([`TRY_LOCK_JOBS`], in one
    /// transaction with the claim): whether each request's job was contended (another claim of it
    /// in flight; not claimed), and the answer rows of the others, in order. Nothing waits for a
    /// lock, so claims of overlapping sets of jobs never queue behind each other.
    async fn claim_uncontended(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        exclusive: &[&str],
    ) -> Result<(Vec<bool>, Vec<PgRow>), PgError> {
        let p = self.prepared();
        let mut tx = self.begin().await?;
        let busy: Vec<String> = sqlx::query_scalar(TRY_LOCK_JOBS)
            .persistent(p)
            .bind(exclusive)
            .fetch_all(&mut *tx)
            .await?;
        let busy: HashSet<String> = busy.into_iter().collect();
        let contended: Vec<bool> = requests
            .iter()
            .map(|r| r.overlap != Overlap::Allow && busy.contains(&r.key.job))
            .collect();
        let kept: Vec<ClaimRequest> = requests
            .iter()
            .zip(&contended)
            .filter(|(_, c)| !**c)
            .map(|(r, _)| r.clone())
            .collect();
        let mut rows = Vec::new();
        if !kept.is_empty() {
            let args = ClaimArgs::new(&kept);
            let query = args.query(sql(&self.inner.statements.claim), owner, false);
            rows = query.persistent(p).fetch_all(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok((contended, rows))
    }

    /// `CLAIM_DUE`: the runs claimed for `owner`; the runs it buried are logged.
    pub(crate) async fn claim_due_rows(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        if specs.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        self.hold_presence();
        let (jobs, max_attempts, overlaps) = spec_columns(specs);
        // A cluster-wide limit counts the job's running runs: its claimers take turns too.
        let exclusive: Vec<&str> = specs
            .iter()
            .filter(|s| s.overlap != Overlap::Allow || s.cluster_limit.is_some())
            .map(|s| s.job.as_str())
            .collect();
        let int = |n: Option<u32>| n.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
        let limits: Vec<Option<i32>> = specs.iter().map(|s| int(s.limit)).collect();
        let cluster: Vec<Option<i32>> = specs.iter().map(|s| int(s.cluster_limit)).collect();
        // Jobs that run freely need no window, no numbering and no count: the lighter statement.
        let statements = &self.inner.statements;
        let statement = if exclusive.is_empty() {
            &statements.claim_due_free
        } else {
            &statements.claim_due
        };
        let query = sqlx::query(sql(statement))
            .bind(owner)
            .bind(&jobs)
            .bind(&max_attempts)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(&overlaps)
            .bind(&limits)
            .bind(&cluster)
            .bind(crate::leads(specs));
        let decides = specs.iter().any(|s| s.overlap != Overlap::Allow);
        let (decided, rows) = if decides {
            let decide = sqlx::query(sql(&self.inner.statements.decide_queued))
                .bind(&jobs)
                .bind(&overlaps);
            self.decide_then_claim(&exclusive, decide, query).await?
        } else {
            (Vec::new(), self.fetch_serialized(&exclusive, query).await?)
        };
        emit_decisions(&decided)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let (buried, max_attempts, due) = due_row(row)?;
            self.inner.watch.saw_token(due.lease.token);
            if row.try_get::<bool, _>("fenced").map_err(PgError::from)? {
                Event::Fenced {
                    key: &due.key,
                    run_id: due.lease.run_id,
                }
                .emit();
            } else if buried {
                Event::Dead {
                    key: &due.key,
                    run_id: due.lease.run_id,
                    attempt: due.lease.attempt,
                    max_attempts,
                }
                .emit();
            } else {
                claimed.push(due);
            }
        }
        Ok(claimed)
    }
}

impl PgBackend {
    /// Runs a claim statement; when `jobs` (those whose overlap is not `allow`) is not empty, in a
    /// transaction that first takes each job's transaction-level claim lock ([`LOCK_JOBS`]).
    /// A claim statement reads one snapshot: without the lock, two claims of *different* slots of
    /// one job at the same instant would not see each other's rows and could both run. With it,
    /// the second claim of a job waits for the first to commit and then sees its row.
    ///
    /// Cancel safe: dropping the future rolls the transaction back.
    async fn fetch_serialized<'q>(
        &self,
        jobs: &[&str],
        query: PgQuery<'q>,
    ) -> Result<Vec<PgRow>, PgError> {
        if jobs.is_empty() {
            return Ok(self.fetch_all(query).await?);
        }
        let p = self.prepared();
        let mut tx = self.begin().await?;
        let lock = sqlx::query(LOCK_JOBS).persistent(p).bind(jobs);
        lock.execute(&mut *tx).await?;
        let rows = query.persistent(p).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// `RECORD_SKIPPED` for `requests`, with `reason`: one statement for the batch.
    pub(crate) async fn record_skipped_rows(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        if requests.is_empty() {
            return Ok(());
        }
        let cols = RequestColumns::new(requests);
        let query = cols
            .bind(sqlx::query(sql(&self.inner.statements.record_skipped)).bind(reason))
            .bind(max_early_us());
        self.execute(cols.bind_calendars(query))
            .await
            .map_err(PgError::from)?;
        Ok(())
    }

    /// `DECIDE_QUEUED` then `CLAIM_DUE`, in one transaction after the jobs' claim locks: the
    /// decisions' rows and the claim's.
    async fn decide_then_claim<'q>(
        &self,
        jobs: &[&str],
        decide: PgQuery<'q>,
        claim: PgQuery<'q>,
    ) -> Result<(Vec<PgRow>, Vec<PgRow>), PgError> {
        let p = self.prepared();
        let mut tx = self.begin().await?;
        let lock = sqlx::query(LOCK_JOBS).persistent(p).bind(jobs);
        lock.execute(&mut *tx).await?;
        let decided = decide.persistent(p).fetch_all(&mut *tx).await?;
        let claimed = claim.persistent(p).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok((decided, claimed))
    }
}

/// The jobs of `requests` whose overlap is not `allow`: their claims take the jobs' claim locks.
fn exclusive_jobs(requests: &[ClaimRequest]) -> Vec<&str> {
    requests
        .iter()
        .filter(|r| r.overlap != Overlap::Allow)
        .map(|r| r.key.job.as_str())
        .collect()
}

/// A query with its arguments bound.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Logs the events of `DECIDE_QUEUED`'s answer, as
/// [`DuePlan::events`](slotguard::store::rules::DuePlan::events) implies them.
fn emit_decisions(rows: &[PgRow]) -> Result<(), PgError> {
    let rows: Vec<(String, SlotKey, String)> = rows
        .iter()
        .map(|row| -> Result<_, PgError> {
            let key = SlotKey {
                job: row.try_get("job_name")?,
                scheduled_at: row.try_get("scheduled_at")?,
                partition: row.try_get("partition_key")?,
            };
            Ok((row.try_get("what")?, key, row.try_get("status")?))
        })
        .collect::<Result<_, _>>()?;
    let pair = |a: &SlotKey, b: &SlotKey| a.job == b.job && a.partition == b.partition;
    let count = |key: &SlotKey, wanted: &dyn Fn(&str, &str) -> bool| {
        rows.iter()
            .filter(|(what, k, status)| pair(k, key) && wanted(what, status))
            .count()
    };
    for (what, key, status) in &rows {
        let waits = count(key, &|w, s| w == "decided" && s == "pending") > 0;
        match (what.as_str(), status.as_str()) {
            ("decided", "pending") => Event::Buffered {
                key,
                superseded: count(key, &|w, s| {
                    w == "superseded" || (w == "decided" && s == "skipped")
                }),
            }
            .emit(),
            ("decided", _) if !waits => Event::Skipped { key }.emit(),
            ("replacer", _) => Event::Replaced {
                key,
                replaced: count(key, &|w, _| w == "replaced"),
            }
            .emit(),
            _ => {}
        }
    }
    Ok(())
}

/// One row of `CLAIM`'s answer, for the request of slot `key`.
fn claim_answer(row: &PgRow, key: &SlotKey) -> Result<Claim, PgError> {
    let run_id: Option<i64> = row.try_get("run_id")?;
    if row.try_get::<bool, _>("not_due")? {
        return Ok(Claim::NotDue);
    }
    if row.try_get::<bool, _>("queued")? {
        return Ok(Claim::Queued);
    }
    if row.try_get::<bool, _>("busy")? {
        return Ok(Claim::Busy);
    }
    Ok(match run_id {
        Some(run_id) => {
            let attempt: i32 = row.try_get("attempt")?;
            Claim::Won(Lease {
                run_id,
                attempt: u32::try_from(attempt).unwrap_or(0),
                token: row.try_get("token")?,
                key: key.clone(),
            })
        }
        None => {
            let seen: Option<String> = row.try_get("seen_status")?;
            Claim::Taken {
                status: match seen {
                    Some(s) => inspect::parse_status(&s)?,
                    // Inserted by a concurrent claim after this statement's snapshot; claims
                    // insert `running` unless the overlap policy said otherwise.
                    None => RunStatus::Running,
                },
            }
        }
    })
}

/// The events of one request, from what `CLAIM` says it did: the same as
/// [`ClaimPlan::events`](slotguard::store::rules::ClaimPlan::events).
fn claim_events<'a>(row: &PgRow, request: &'a ClaimRequest) -> Result<Vec<Event<'a>>, PgError> {
    let key = &request.key;
    if !row.try_get::<bool, _>("inserted")? {
        return Ok(Vec::new());
    }
    let fenced: Option<Vec<i64>> = row.try_get("fenced")?;
    let mut events: Vec<Event<'a>> = fenced
        .unwrap_or_default()
        .into_iter()
        .map(|run_id| Event::Fenced { key, run_id })
        .collect();
    let count = |column: &str| -> Result<usize, PgError> {
        Ok(usize::try_from(row.try_get::<i64, _>(column)?).unwrap_or(0))
    };
    let decision: Option<String> = row.try_get("decision")?;
    match decision.as_deref() {
        Some("skip") => events.push(Event::Skipped { key }),
        Some("buffer_one") => events.push(Event::Buffered {
            key,
            superseded: count("superseded")?,
        }),
        Some("replace") if count("replaced")? > 0 => events.push(Event::Replaced {
            key,
            replaced: count("replaced")?,
        }),
        _ => {}
    }
    Ok(events)
}

/// One row of `CLAIM_DUE`'s answer: whether the run was buried, its job's `max_attempts` then,
/// and the run.
fn due_row(row: &PgRow) -> Result<(bool, u32, DueClaim), PgError> {
    let attempt: i32 = row.try_get("attempt")?;
    let trigger: String = row.try_get("trigger")?;
    let max_attempts: i32 = row.try_get("max_attempts")?;
    let key = SlotKey {
        job: row.try_get("job_name")?,
        scheduled_at: row.try_get("scheduled_at")?,
        partition: row.try_get("partition_key")?,
    };
    let claim = DueClaim {
        lease: Lease {
            run_id: row.try_get("id")?,
            attempt: u32::try_from(attempt).unwrap_or(0),
            token: row.try_get("fencing_token")?,
            key: key.clone(),
        },
        key,
        trigger: inspect::parse_trigger(&trigger)?,
        zone: row.try_get("zone")?,
        wall: row.try_get("wall_time")?,
        business_date: row.try_get("business_date")?,
        trace_parent: row.try_get("trace_parent")?,
    };
    Ok((
        row.try_get("buried")?,
        u32::try_from(max_attempts).unwrap_or(0),
        claim,
    ))
}

/// [`MAX_EARLY`](slotguard::store::MAX_EARLY) in microseconds, as `CLAIM` and `RECORD_SKIPPED`
/// take it.
pub(crate) fn max_early_us() -> i64 {
    i64::try_from(slotguard::store::MAX_EARLY.as_micros()).unwrap_or(i64::MAX)
}

/// What `CLAIM` takes for a batch of requests: the request columns and the two per-request
/// arrays of its own (overlap policies, whether made ahead).
pub(crate) struct ClaimArgs<'a> {
    cols: RequestColumns<'a>,
    overlaps: Vec<&'a str>,
    ahead: Vec<bool>,
}

impl<'a> ClaimArgs<'a> {
    pub(crate) fn new(requests: &'a [ClaimRequest]) -> Self {
        ClaimArgs {
            cols: RequestColumns::new(requests),
            overlaps: requests.iter().map(|r| r.overlap.as_str()).collect(),
            ahead: requests.iter().map(|r| r.ahead).collect(),
        }
    }

    /// `statement` (`CLAIM`) with every parameter bound: claimed for `owner`, or with `queue`
    /// enqueued.
    pub(crate) fn query<'q>(
        &'q self,
        statement: AssertSqlSafe<Arc<str>>,
        owner: &'q str,
        queue: bool,
    ) -> PgQuery<'q> {
        let query = self
            .cols
            .bind(sqlx::query(statement).bind(owner))
            .bind(&self.overlaps)
            .bind(max_early_us())
            .bind(queue);
        self.cols.bind_calendars(query).bind(&self.ahead)
    }
}

/// The fields of a batch of requests, one array per column, as `CLAIM` and `RECORD_SKIPPED` take
/// them (`$2` to `$10`, and the calendar's three after the statement's own parameters).
pub(crate) struct RequestColumns<'a> {
    jobs: Vec<&'a str>,
    slots: Vec<chrono::DateTime<chrono::Utc>>,
    partitions: Vec<&'a str>,
    triggers: Vec<&'static str>,
    zones: Vec<&'a str>,
    walls: Vec<chrono::NaiveDateTime>,
    dates: Vec<chrono::NaiveDate>,
    fingerprints: Vec<i64>,
    stale: Vec<i64>,
    nominal: Vec<Option<String>>,
    calendars: Vec<Option<&'a str>>,
    versions: Vec<Option<&'a str>>,
}

impl<'a> RequestColumns<'a> {
    pub(crate) fn new(requests: &'a [ClaimRequest]) -> Self {
        let n = requests.len();
        let mut cols = RequestColumns {
            jobs: Vec::with_capacity(n),
            slots: Vec::with_capacity(n),
            partitions: Vec::with_capacity(n),
            triggers: Vec::with_capacity(n),
            zones: Vec::with_capacity(n),
            walls: Vec::with_capacity(n),
            dates: Vec::with_capacity(n),
            fingerprints: Vec::with_capacity(n),
            stale: Vec::with_capacity(n),
            nominal: Vec::with_capacity(n),
            calendars: Vec::with_capacity(n),
            versions: Vec::with_capacity(n),
        };
        for r in requests {
            cols.jobs.push(r.key.job.as_str());
            cols.slots.push(r.key.scheduled_at);
            cols.partitions.push(r.key.partition.as_str());
            cols.triggers.push(r.trigger.as_str());
            cols.zones.push(r.zone.as_str());
            cols.walls.push(r.wall);
            cols.dates.push(r.business_date);
            cols.fingerprints
                .push(inspect::fingerprint_to_db(r.fingerprint));
            cols.stale.push(micros(r.stale_after.min(MAX_STALE_AFTER)));
            let stamp = r.calendar.as_ref();
            cols.nominal.push(stamp.map(CalendarStamp::nominal_text));
            cols.calendars.push(stamp.map(|s| s.calendar.as_str()));
            cols.versions.push(stamp.map(|s| s.version.as_str()));
        }
        cols
    }

    /// Binds `$2` to `$10` onto a query whose `$1` is bound.
    pub(crate) fn bind<'q>(
        &'q self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(&self.jobs)
            .bind(&self.slots)
            .bind(&self.partitions)
            .bind(&self.triggers)
            .bind(&self.zones)
            .bind(&self.walls)
            .bind(&self.dates)
            .bind(&self.fingerprints)
            .bind(&self.stale)
    }

    /// Binds the calendar columns (nominal dates, calendar names, versions), the statement's last
    /// three parameters.
    pub(crate) fn bind_calendars<'q>(
        &'q self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(&self.nominal)
            .bind(&self.calendars)
            .bind(&self.versions)
    }
}
