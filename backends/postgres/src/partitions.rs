//! Time-partitioned history (docs/scale.md, "Partitioned history"): `job_runs` and
//! `job_run_attempts` partitioned by slot time, so that retention drops a partition whose every
//! row it would delete instead of deleting row by row.
//!
//! - **Conversion** ([`convert`]), once per schema, at connect, under the migration lock, in one
//!   transaction: the plain tables become the partition of every slot before the end of the span
//!   after the latest one (their rows are not copied), parents with the same columns and indexes
//!   take their names, and a default partition each takes slots that no partition covers.
//! - **Partitions ahead** ([`ensure`]): at connect and on every retention pass, the span of now
//!   and the next `ahead` spans; rows the default partition already holds for a span move into it.
//! - **Drops** ([`PgBackend::drop_partitions`]): a partition that ended longer ago than the longest
//!   retention, none of whose rows retention keeps, is detached (a short lock, skipped when busy),
//!   the rows a concurrent change made kept go back, and the rest is dropped.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};
use slotguard::store::{PruneSpec, Pruned};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use crate::sql::partitions as q;
use crate::{PgBackend, micros};

/// How many slots one partition holds: a UTC day, an ISO week (from Monday) or a calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartitionSpan {
    /// One UTC day.
    Day,
    /// One ISO week, Monday 00:00 UTC to Monday.
    Week,
    /// One calendar month in UTC.
    Month,
}

impl PartitionSpan {
    fn as_str(self) -> &'static str {
        match self {
            PartitionSpan::Day => "day",
            PartitionSpan::Week => "week",
            PartitionSpan::Month => "month",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "day" => Some(PartitionSpan::Day),
            "week" => Some(PartitionSpan::Week),
            "month" => Some(PartitionSpan::Month),
            _ => None,
        }
    }

    /// The first day of the span that holds `at`.
    fn start_of(self, at: DateTime<Utc>) -> NaiveDate {
        let day = at.date_naive();
        match self {
            PartitionSpan::Day => day,
            PartitionSpan::Week => day - Days::new(u64::from(day.weekday().num_days_from_monday())),
            PartitionSpan::Month => day.with_day(1).unwrap_or(day),
        }
    }

    /// The first day of the span after the one starting on `start`.
    fn next(self, start: NaiveDate) -> NaiveDate {
        match self {
            PartitionSpan::Day => start + Days::new(1),
            PartitionSpan::Week => start + Days::new(7),
            PartitionSpan::Month => start + Months::new(1),
        }
    }
}

/// Partitioned history for [`PgBackendBuilder::partitioned_history`](crate::PgBackendBuilder::partitioned_history):
/// the span of each partition, and how many spans after the current one have their partitions
/// made ahead (default 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryPartitions {
    pub(crate) span: PartitionSpan,
    pub(crate) ahead: u32,
}

impl HistoryPartitions {
    /// Partitions of `span`, two made ahead.
    pub fn new(span: PartitionSpan) -> Self {
        HistoryPartitions { span, ahead: 2 }
    }

    /// One partition per UTC day: for jobs that run every second or minute, with days of
    /// retention.
    pub fn daily() -> Self {
        Self::new(PartitionSpan::Day)
    }

    /// One partition per ISO week.
    pub fn weekly() -> Self {
        Self::new(PartitionSpan::Week)
    }

    /// One partition per calendar month: for retention of months.
    pub fn monthly() -> Self {
        Self::new(PartitionSpan::Month)
    }

    /// How many spans after the current one have their partitions made ahead (1 to 366; default
    /// 2). Slots beyond them go to the default partition, and move into their partition once it
    /// is made.
    pub fn ahead(mut self, spans: u32) -> Self {
        self.ahead = spans.clamp(1, 366);
        self
    }

    /// The span of each partition.
    pub fn span(&self) -> PartitionSpan {
        self.span
    }
}

/// A schema's partitioned layout, as stored in `history_layout`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    span: PartitionSpan,
    legacy_end: Option<DateTime<Utc>>,
}

/// Midnight UTC of `day`.
fn utc(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// `at` as an SQL literal that reads the same in every session time zone.
fn literal(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string()
}

/// The two tables of the partition starting on `start`.
fn tables_of(start: NaiveDate) -> (String, String) {
    let day = start.format("%Y%m%d");
    (
        format!("job_runs_p{day}"),
        format!("job_run_attempts_p{day}"),
    )
}

/// A template of `sql/partitions.rs` for the schema, with `extra` spliced too.
fn render(template: &str, schema: &str, quoted: &str, extra: &[(&str, &str)]) -> String {
    let mut text = template
        .replace("{schema}", quoted)
        .replace("{schema_name}", schema)
        .replace("{now}", crate::sql::NOW);
    for (key, value) in extra {
        text = text.replace(key, value);
    }
    text
}

/// Runs a rendered multi-statement template (DDL: never prepared).
async fn run(conn: &mut PgConnection, text: String) -> Result<(), sqlx::Error> {
    // Safe: the templates of `sql/partitions.rs`, a validated schema name, and names and instants
    // this module formats.
    sqlx::raw_sql(AssertSqlSafe(text)).execute(conn).await?;
    Ok(())
}

/// The schema's layout, if it is partitioned.
pub(crate) async fn layout(
    conn: &mut PgConnection,
    quoted: &str,
    prepared: bool,
) -> Result<Option<Layout>, sqlx::Error> {
    let row = sqlx::query(AssertSqlSafe(q::LAYOUT.replace("{schema}", quoted)))
        .persistent(prepared)
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let span: String = row.try_get("span")?;
    let span = PartitionSpan::parse(&span).ok_or_else(|| {
        sqlx::Error::Decode(format!("unknown history_layout.span {span:?}").into())
    })?;
    Ok(Some(Layout {
        span,
        legacy_end: row.try_get("legacy_end")?,
    }))
}

/// Where a conversion failed: the step, and what the database said.
type StepError = (&'static str, sqlx::Error);

fn step(name: &'static str) -> impl Fn(sqlx::Error) -> StepError {
    move |e| (name, e)
}

/// Partitions the schema's history as `wanted` says, unless it is already (then its layout
/// stands, whatever `wanted` says). One transaction under the migration lock: replicas that start
/// together convert once.
pub(crate) async fn convert(
    conn: &mut PgConnection,
    schema: &str,
    quoted: &str,
    wanted: HistoryPartitions,
    prepared: bool,
) -> Result<Layout, StepError> {
    let mut tx = conn.begin().await.map_err(step("begin"))?;
    let stored = layout(&mut tx, quoted, prepared)
        .await
        .map_err(step("read the layout"))?;
    tx.commit().await.map_err(step("commit"))?;
    if stored.is_none() {
        stamp_attempts(conn, (schema, quoted), prepared).await?;
    }
    let mut tx = conn.begin().await.map_err(step("begin"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .persistent(prepared)
        .bind(crate::migrate::MIGRATION_LOCK_CLASS)
        .bind(schema)
        .execute(&mut *tx)
        .await
        .map_err(step("take the migration lock"))?;
    if let Some(stored) = layout(&mut tx, quoted, prepared)
        .await
        .map_err(step("read the layout"))?
    {
        if stored.span != wanted.span {
            tracing::warn!(
                schema,
                stored = stored.span.as_str(),
                wanted = wanted.span.as_str(),
                "the history is partitioned by another span already; keeping it"
            );
        }
        tx.commit().await.map_err(step("commit"))?;
        return Ok(stored);
    }
    let legacy_end = legacy_end(&mut tx, quoted, wanted.span, prepared).await?;
    rebuild(&mut tx, (schema, quoted), legacy_end).await?;
    sqlx::query(AssertSqlSafe(q::RECORD_LAYOUT.replace("{schema}", quoted)))
        .persistent(prepared)
        .bind(wanted.span.as_str())
        .bind(legacy_end)
        .execute(&mut *tx)
        .await
        .map_err(step("record the layout"))?;
    tx.commit().await.map_err(step("commit"))?;
    tracing::info!(
        schema,
        span = wanted.span.as_str(),
        legacy_end = ?legacy_end,
        "history partitioned by slot time"
    );
    Ok(Layout {
        span: wanted.span,
        legacy_end,
    })
}

/// The attempts' slot times per range of ids (`STAMP_ATTEMPTS`), each range in a transaction of
/// its own, while the replicas go on: the conversion's exclusive lock then has only the attempts
/// written meanwhile without one (none, from replicas of this version) to stamp.
async fn stamp_attempts(
    conn: &mut PgConnection,
    (schema, quoted): (&str, &str),
    prepared: bool,
) -> Result<(), StepError> {
    const IDS: i64 = 50_000;
    let read = step("find the attempts without a slot time");
    let mut tx = conn.begin().await.map_err(&read)?;
    let bounds = sqlx::query(AssertSqlSafe(q::UNSTAMPED.replace("{schema}", quoted)))
        .persistent(prepared)
        .fetch_one(&mut *tx)
        .await
        .map_err(&read)?;
    tx.commit().await.map_err(&read)?;
    let (lo, hi): (Option<i64>, Option<i64>) = (
        bounds.try_get("lo").map_err(&read)?,
        bounds.try_get("hi").map_err(&read)?,
    );
    let (Some(mut from), Some(hi)) = (lo, hi) else {
        return Ok(());
    };
    tracing::info!(
        schema,
        from,
        to = hi,
        "giving the attempts their slot times"
    );
    let stamp = q::STAMP_ATTEMPTS.replace("{schema}", quoted);
    while from <= hi {
        let mut tx = conn.begin().await.map_err(step("stamp the attempts"))?;
        sqlx::query(AssertSqlSafe(stamp.clone()))
            .persistent(prepared)
            .bind(from)
            .bind(from.saturating_add(IDS))
            .execute(&mut *tx)
            .await
            .map_err(step("stamp the attempts"))?;
        tx.commit().await.map_err(step("stamp the attempts"))?;
        from = from.saturating_add(IDS);
    }
    Ok(())
}

/// The end of the legacy partition: the end of the span after the latest slot of the plain table
/// (or after now, if that is later); `None` when the table is empty.
async fn legacy_end(
    conn: &mut PgConnection,
    quoted: &str,
    span: PartitionSpan,
    prepared: bool,
) -> Result<Option<DateTime<Utc>>, StepError> {
    let extent = sqlx::query(AssertSqlSafe(q::EXTENT.replace("{schema}", quoted)))
        .persistent(prepared)
        .fetch_one(conn)
        .await
        .map_err(step("read the table's extent"))?;
    let read = step("read the table's extent");
    let any: bool = extent.try_get("any").map_err(&read)?;
    let latest: Option<DateTime<Utc>> = extent.try_get("latest").map_err(&read)?;
    let now: DateTime<Utc> = extent.try_get("now").map_err(&read)?;
    Ok(any.then(|| {
        let last = latest.map_or(now, |l| l.max(now));
        utc(span.next(span.start_of(last)))
    }))
}

/// The plain tables retired, the partitioned parents made, and the plain tables' rows kept as the
/// legacy partition (or the empty tables dropped).
async fn rebuild(
    conn: &mut PgConnection,
    (schema, quoted): (&str, &str),
    legacy_end: Option<DateTime<Utc>>,
) -> Result<(), StepError> {
    let end = legacy_end.map(literal).unwrap_or_default();
    let ddl = |template: &str| render(template, schema, quoted, &[("{legacy_end}", &end)]);
    run(conn, ddl(q::RETIRE_PLAIN))
        .await
        .map_err(step("retire the plain tables"))?;
    run(conn, ddl(q::PARENTS))
        .await
        .map_err(step("create the partitioned tables"))?;
    let last = if legacy_end.is_some() {
        q::ATTACH_LEGACY
    } else {
        q::DROP_LEGACY
    };
    run(conn, ddl(last))
        .await
        .map_err(step("keep the plain tables' rows"))
}

/// The partition-like tables of the schema: name, and whether it is attached.
async fn tables(
    conn: &mut PgConnection,
    schema: &str,
    prepared: bool,
) -> Result<Vec<(String, bool)>, sqlx::Error> {
    let rows = sqlx::query(q::PARTITIONS)
        .persistent(prepared)
        .bind(schema)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get("name")?, r.try_get("attached")?)))
        .collect()
}

/// Makes the partitions of the span of `from` and of the `ahead` spans after it that do not exist
/// yet (none that the legacy partition covers); answers how many it made. A partition whose making
/// waits more than a second for a lock (the default partition is busy) is left for the next call.
pub(crate) async fn ensure(
    conn: &mut PgConnection,
    (schema, quoted): (&str, &str),
    layout: Layout,
    from: DateTime<Utc>,
    ahead: u32,
    prepared: bool,
) -> Result<u32, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let existing: HashSet<String> = tables(&mut tx, schema, prepared)
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    tx.commit().await?;
    let span = layout.span;
    let mut start = span.start_of(from);
    let mut made = 0;
    for _ in 0..=ahead {
        let (end, (runs, attempts)) = (span.next(start), tables_of(start));
        let covered = layout.legacy_end.is_some_and(|l| utc(end) <= l);
        if !covered && !existing.contains(&runs) {
            let (lo, hi) = (literal(utc(start)), literal(utc(end)));
            let names = [
                ("{runs}", runs.as_str()),
                ("{attempts}", attempts.as_str()),
                ("{lo}", lo.as_str()),
                ("{hi}", hi.as_str()),
            ];
            let mut tx = conn.begin().await?;
            run(&mut tx, "SET LOCAL lock_timeout = '1s'".to_owned()).await?;
            match run(&mut tx, render(q::CREATE_PARTITION, schema, quoted, &names)).await {
                Ok(()) => {
                    tx.commit().await?;
                    made += 1;
                }
                Err(e) if is_lock_timeout(&e) => {
                    tracing::debug!(schema, partition = runs, "partition left for later: busy");
                    return Ok(made);
                }
                Err(e) => return Err(e),
            }
        }
        start = end;
    }
    Ok(made)
}

/// Whether `e` is a lock wait that ran out (`lock_not_available`).
fn is_lock_timeout(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

/// A partition: its tables, and the end of its slots.
struct Partition {
    runs: String,
    attempts: String,
    end: DateTime<Utc>,
}

impl Partition {
    /// `template` (over `{runs}` and `{attempts}`) for this partition, with retention's specs
    /// bound as `$1` (jobs) and `$2` (keeps in microseconds).
    fn judged(
        &self,
        template: &str,
        (schema, quoted): (&str, &str),
        specs: &[PruneSpec],
    ) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let names = [
            ("{runs}", self.runs.as_str()),
            ("{attempts}", self.attempts.as_str()),
        ];
        let (jobs, keeps): (Vec<String>, Vec<i64>) = specs
            .iter()
            .map(|s| (s.job.clone(), micros(s.keep)))
            .unzip();
        sqlx::query(AssertSqlSafe(render(template, schema, quoted, &names)))
            .persistent(false)
            .bind(jobs)
            .bind(keeps)
    }

    /// `template` (over `{runs}` and `{attempts}`) for this partition.
    fn ddl(&self, template: &str, (schema, quoted): (&str, &str)) -> String {
        let names = [
            ("{runs}", self.runs.as_str()),
            ("{attempts}", self.attempts.as_str()),
        ];
        render(template, schema, quoted, &names)
    }
}

/// The partition `name` names, with the end of its slots (`None`: not one of ours).
fn partition(name: &str, layout: Layout) -> Option<Partition> {
    if name == "job_runs_legacy" {
        return Some(Partition {
            runs: name.to_owned(),
            attempts: "job_run_attempts_legacy".to_owned(),
            end: layout.legacy_end?,
        });
    }
    let digits = name.strip_prefix("job_runs_p")?;
    if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let start = NaiveDate::parse_from_str(digits, "%Y%m%d").ok()?;
    let (runs, attempts) = tables_of(start);
    Some(Partition {
        runs,
        attempts,
        end: utc(layout.span.next(start)),
    })
}

/// The most partitions one retention pass drops.
const DROPS_PER_PASS: usize = 4;

/// The most partitions one retention pass reads to see whether it may drop them, oldest first: a
/// partition that keeps a row (a job no replica prunes any more) is read again every pass, and
/// must not stop the ones after it from being dropped.
const CHECKS_PER_PASS: usize = 16;

impl PgBackend {
    /// One retention pass over a partitioned history (nothing on a plain one): the partitions
    /// ahead, then the drops (see the module's docs). Answers the runs dropped per job.
    pub(crate) async fn drop_partitions(
        &self,
        specs: &[PruneSpec],
    ) -> Result<Vec<Pruned>, sqlx::Error> {
        let (schema, quoted, prepared) = (self.schema(), &self.inner.quoted, self.prepared());
        let mut conn = self.inner.pool.acquire().await?;
        // Reads in a transaction too: through a transaction pooler a statement outside one may
        // be parsed in one server session and run in another.
        let mut tx = conn.begin().await?;
        let Some(layout) = layout(&mut tx, quoted, prepared).await? else {
            return Ok(Vec::new());
        };
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT statement_timestamp()")
            .persistent(prepared)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        ensure(
            &mut conn,
            (schema, quoted),
            layout,
            now,
            self.inner.ahead,
            prepared,
        )
        .await?;
        let Some(keep) = specs.iter().map(|s| s.keep).max() else {
            return Ok(Vec::new());
        };
        let horizon = chrono::TimeDelta::from_std(keep)
            .ok()
            .and_then(|keep| now.checked_sub_signed(keep));
        let mut dropped = BTreeMap::<String, u64>::new();
        let mut due = Vec::new();
        let mut tx = conn.begin().await?;
        let found = tables(&mut tx, schema, prepared).await?;
        tx.commit().await?;
        for (name, attached) in found {
            let Some(p) = partition(&name, layout) else {
                continue;
            };
            if !attached {
                // A drop that stopped after its detach: finish it.
                self.finish_drop(&mut conn, &p, specs, &mut dropped).await?;
            } else if horizon.is_some_and(|h| p.end <= h) {
                due.push(p);
            }
        }
        due.sort_by_key(|p| p.end);
        let mut drops = 0;
        for p in due.into_iter().take(CHECKS_PER_PASS) {
            if drops == DROPS_PER_PASS {
                break;
            }
            if self.detach_if_unkept(&mut conn, &p, specs).await? {
                self.finish_drop(&mut conn, &p, specs, &mut dropped).await?;
                drops += 1;
            }
        }
        Ok(dropped
            .into_iter()
            .map(|(job, runs)| Pruned { job, runs })
            .collect())
    }

    /// Makes the partitions of a partitioned history for the slots from `from` to `until` (at
    /// most 1,000 spans) that do not exist yet, moving in the rows the default partition holds for
    /// them; answers how many it made (none on a plain history). For a backfill far from now, whose
    /// rows would otherwise wait in the default partition, where no drop reaches them.
    ///
    /// # Errors
    ///
    /// [`PgError::Query`](crate::PgError::Query) when the database refuses; a partition whose lock
    /// does not come within a second is left out (call again).
    pub async fn make_history_partitions(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<u32, crate::PgError> {
        let (schema, quoted, prepared) = (self.schema(), &self.inner.quoted, self.prepared());
        let mut conn = self.inner.pool.acquire().await?;
        let mut tx = conn.begin().await?;
        let Some(layout) = layout(&mut tx, quoted, prepared).await? else {
            return Ok(0);
        };
        tx.commit().await?;
        let mut spans = 0;
        let mut start = layout.span.start_of(from);
        while utc(layout.span.next(start)) < until && spans < 999 {
            start = layout.span.next(start);
            spans += 1;
        }
        Ok(ensure(&mut conn, (schema, quoted), layout, from, spans, prepared).await?)
    }

    /// Detaches `p` if retention keeps none of its rows and the parents' lock comes within half a
    /// second; whether it did.
    async fn detach_if_unkept(
        &self,
        conn: &mut PgConnection,
        p: &Partition,
        specs: &[PruneSpec],
    ) -> Result<bool, sqlx::Error> {
        let names = (self.schema(), self.inner.quoted.as_str());
        let mut tx = conn.begin().await?;
        let keeps_any: bool = p
            .judged(&q::keeps_any(), names, specs)
            .fetch_one(&mut *tx)
            .await?
            .try_get("keeps")?;
        tx.commit().await?;
        if keeps_any {
            return Ok(false);
        }
        let mut tx = conn.begin().await?;
        run(&mut tx, "SET LOCAL lock_timeout = '500ms'".to_owned()).await?;
        match run(&mut tx, p.ddl(q::DETACH, names)).await {
            Ok(()) => {
                tx.commit().await?;
                Ok(true)
            }
            Err(e) if is_lock_timeout(&e) => {
                tracing::debug!(
                    schema = names.0,
                    partition = p.runs,
                    "drop left for later: busy"
                );
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// On detached `p`: the kept rows back into the parents, the audit records of the others gone,
    /// both tables dropped, in one transaction; adds the runs dropped to `dropped`.
    async fn finish_drop(
        &self,
        conn: &mut PgConnection,
        p: &Partition,
        specs: &[PruneSpec],
        dropped: &mut BTreeMap<String, u64>,
    ) -> Result<(), sqlx::Error> {
        let names = (self.schema(), self.inner.quoted.as_str());
        let mut tx = conn.begin().await?;
        let rows = p
            .judged(&q::finish_drop(), names, specs)
            .fetch_all(&mut *tx)
            .await?;
        run(&mut tx, p.ddl(q::DROP, names)).await?;
        tx.commit().await?;
        for row in rows {
            let runs: i64 = row.try_get("runs")?;
            *dropped.entry(row.try_get("job_name")?).or_default() +=
                u64::try_from(runs).unwrap_or(0);
        }
        tracing::info!(
            schema = names.0,
            partition = p.runs,
            "history partition dropped"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("instant").to_utc()
    }

    #[test]
    fn spans_start_and_end_in_utc() {
        let t = at("2026-12-04T13:05:00+09:00");
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date");
        assert_eq!(PartitionSpan::Day.start_of(t), d("2026-12-04"));
        assert_eq!(PartitionSpan::Week.start_of(t), d("2026-11-30"));
        assert_eq!(PartitionSpan::Month.start_of(t), d("2026-12-01"));
        assert_eq!(PartitionSpan::Month.next(d("2026-12-01")), d("2027-01-01"));
        assert_eq!(PartitionSpan::Week.next(d("2026-11-30")), d("2026-12-07"));
        // 00:30 in Seoul is the day before in UTC.
        let early = at("2026-12-04T00:30:00+09:00");
        assert_eq!(PartitionSpan::Day.start_of(early), d("2026-12-03"));
    }

    #[test]
    fn partition_names_give_back_their_range() {
        let layout = Layout {
            span: PartitionSpan::Week,
            legacy_end: Some(at("2026-11-30T00:00:00Z")),
        };
        let start = PartitionSpan::Week.start_of(at("2026-12-04T10:00:00Z"));
        let (runs, attempts) = tables_of(start);
        assert_eq!(runs, "job_runs_p20261130");
        let p = partition(&runs, layout).expect("ours");
        assert_eq!(
            (p.attempts.as_str(), p.end),
            (attempts.as_str(), at("2026-12-07T00:00:00Z"))
        );
        let legacy = partition("job_runs_legacy", layout).expect("legacy");
        assert_eq!(legacy.end, at("2026-11-30T00:00:00Z"));
        assert!(partition("job_runs_default", layout).is_none());
        assert!(partition("job_runs_p2026113", layout).is_none());
        assert_eq!(
            literal(at("2026-12-07T00:00:00Z")),
            "2026-12-07 00:00:00.000000+00"
        );
    }
}
