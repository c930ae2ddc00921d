//! The conversion of a plain history to a partitioned one, once per schema (see the module above).

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use super::{
    HistoryPartitions, Layout, PartitionSpan, layout, literal, read_layout, render, run, utc,
};
use crate::sql::partitions as q;

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
    let stored = read_layout(conn, (schema, quoted), prepared)
        .await
        .map_err(step("read the layout"))?;
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
    if let Some(stored) = layout(&mut tx, (schema, quoted), prepared)
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
    let legacy_end = legacy_end(&mut tx, (schema, quoted), wanted.span, prepared).await?;
    rebuild(&mut tx, (schema, quoted), legacy_end).await?;
    sqlx::query(AssertSqlSafe(render(q::RECORD_LAYOUT, schema, quoted, &[])))
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
    let bounds = sqlx::query(AssertSqlSafe(render(q::UNSTAMPED, schema, quoted, &[])))
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
    let stamp = render(q::STAMP_ATTEMPTS, schema, quoted, &[]);
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
    (schema, quoted): (&str, &str),
    span: PartitionSpan,
    prepared: bool,
) -> Result<Option<DateTime<Utc>>, StepError> {
    let extent = sqlx::query(AssertSqlSafe(render(q::EXTENT, schema, quoted, &[])))
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
