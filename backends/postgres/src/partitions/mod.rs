//! Time-partitioned history (docs/scale.md, "Partitioned history"): `job_runs` and
//! `job_run_attempts` partitioned by slot time, so that retention drops a partition whose every
//! row it would delete instead of deleting row by row.
//!
//! - **Conversion** (`convert.rs`), once per schema, at connect: the old attempts get their slot
//!   times in batches while the replicas go on; then, under the migration lock, in one
//!   transaction, the plain tables become the partition of every slot before the end of the span
//!   after the latest one (their rows are not copied), parents with the same columns and indexes
//!   take their names, and a default partition each takes slots that no partition covers.
//! - **Partitions ahead** (`maintain.rs`): at connect and on every retention pass, the span of now
//!   and the next `ahead` spans; rows the default partition already holds for a span move into it.
//! - **Drops** (`maintain.rs`): a partition that ended longer ago than the longest
//!   retention, none of whose rows retention keeps, is detached (a short lock, skipped when busy),
//!   the rows a concurrent change made kept go back, and the rest is dropped.

mod convert;
mod maintain;

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};
use slotguard::store::PruneSpec;
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use crate::micros;
use crate::sql::partitions as q;

pub(crate) use convert::convert;
pub(crate) use maintain::ensure;

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

/// [`layout`] in a transaction of its own: through a transaction pooler a lone statement may be
/// parsed in one server session and run in another.
pub(crate) async fn read_layout(
    conn: &mut PgConnection,
    names: (&str, &str),
    prepared: bool,
) -> Result<Option<Layout>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let found = layout(&mut tx, names, prepared).await?;
    tx.commit().await?;
    Ok(found)
}

/// The schema's layout, if it is partitioned.
pub(crate) async fn layout(
    conn: &mut PgConnection,
    (schema, quoted): (&str, &str),
    prepared: bool,
) -> Result<Option<Layout>, sqlx::Error> {
    let row = sqlx::query(AssertSqlSafe(render(q::LAYOUT, schema, quoted, &[])))
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

/// The partition-like tables of the schema: name, and whether it is attached. In a transaction
/// of its own, as [`read_layout`].
async fn tables(
    conn: &mut PgConnection,
    schema: &str,
    prepared: bool,
) -> Result<Vec<(String, bool)>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let rows = sqlx::query(q::PARTITIONS)
        .persistent(prepared)
        .bind(schema)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| Ok((r.try_get("name")?, r.try_get("attached")?)))
        .collect()
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
    /// What the templates over a partition splice: its two tables.
    fn names(&self) -> [(&str, &str); 2] {
        [
            ("{runs}", self.runs.as_str()),
            ("{attempts}", self.attempts.as_str()),
        ]
    }

    /// `template` (over `{runs}` and `{attempts}`) for this partition, with retention's specs
    /// bound as `$1` (jobs) and `$2` (keeps in microseconds).
    fn judged(
        &self,
        template: &str,
        (schema, quoted): (&str, &str),
        specs: &[PruneSpec],
    ) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let (jobs, keeps): (Vec<String>, Vec<i64>) = specs
            .iter()
            .map(|s| (s.job.clone(), micros(s.keep)))
            .unzip();
        sqlx::query(AssertSqlSafe(render(
            template,
            schema,
            quoted,
            &self.names(),
        )))
        .persistent(false)
        .bind(jobs)
        .bind(keeps)
    }

    /// `template` (over `{runs}` and `{attempts}`) for this partition.
    fn ddl(&self, template: &str, (schema, quoted): (&str, &str)) -> String {
        render(template, schema, quoted, &self.names())
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
