//! The partitions of a partitioned history made ahead, and those past retention dropped (see the
//! module above).

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use slotguard::store::{PruneSpec, Pruned};
use sqlx::{Connection, PgConnection, Row};

use super::{
    Layout, Partition, is_lock_timeout, layout, literal, partition, read_layout, render, run,
    tables, tables_of, utc,
};
use crate::PgBackend;
use crate::sql::partitions as q;

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
    let found = tables(conn, schema, prepared).await?;
    make_ahead(conn, (schema, quoted), layout, &found, (from, ahead)).await
}

/// [`ensure`], given the schema's tables (`found`, as [`tables`] reads them).
async fn make_ahead(
    conn: &mut PgConnection,
    (schema, quoted): (&str, &str),
    layout: Layout,
    found: &[(String, bool)],
    (from, ahead): (DateTime<Utc>, u32),
) -> Result<u32, sqlx::Error> {
    let existing: HashSet<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
    let span = layout.span;
    let mut start = span.start_of(from);
    let mut made = 0;
    for _ in 0..=ahead {
        let (end, (runs, attempts)) = (span.next(start), tables_of(start));
        let covered = layout.legacy_end.is_some_and(|l| utc(end) <= l);
        if !covered && !existing.contains(runs.as_str()) {
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
        let (names, prepared) = ((self.schema(), self.inner.quoted.as_str()), self.prepared());
        let mut conn = self.inner.pool.acquire().await?;
        // In a transaction, as `read_layout`.
        let mut tx = conn.begin().await?;
        let Some(layout) = layout(&mut tx, names, prepared).await? else {
            return Ok(Vec::new());
        };
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT statement_timestamp()")
            .persistent(prepared)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let found = tables(&mut conn, names.0, prepared).await?;
        make_ahead(&mut conn, names, layout, &found, (now, self.inner.ahead)).await?;
        let Some(keep) = specs.iter().map(|s| s.keep).max() else {
            return Ok(Vec::new());
        };
        let horizon = chrono::TimeDelta::from_std(keep)
            .ok()
            .and_then(|keep| now.checked_sub_signed(keep));
        let mut dropped = BTreeMap::<String, u64>::new();
        let mut due = Vec::new();
        for (name, attached) in &found {
            let Some(p) = partition(name, layout) else {
                continue;
            };
            if !attached {
                // A drop that stopped after its detach: finish it.
                self.finish_drop(&mut conn, &p, specs, &mut dropped).await?;
            } else if horizon.is_some_and(|h| p.end <= h) {
                due.push(p);
            }
        }
        self.drop_due(&mut conn, due, specs, &mut dropped).await?;
        Ok(dropped
            .into_iter()
            .map(|(job, runs)| Pruned { job, runs })
            .collect())
    }

    /// The oldest of `due` that retention keeps nothing of, detached and dropped: at most
    /// [`DROPS_PER_PASS`] out of the [`CHECKS_PER_PASS`] oldest.
    async fn drop_due(
        &self,
        conn: &mut PgConnection,
        mut due: Vec<Partition>,
        specs: &[PruneSpec],
        dropped: &mut BTreeMap<String, u64>,
    ) -> Result<(), sqlx::Error> {
        due.sort_by_key(|p| p.end);
        let mut drops = 0;
        for p in due.iter().take(CHECKS_PER_PASS) {
            if drops == DROPS_PER_PASS {
                break;
            }
            if self.detach_if_unkept(conn, p, specs).await? {
                self.finish_drop(conn, p, specs, dropped).await?;
                drops += 1;
            }
        }
        Ok(())
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
        let Some(layout) = read_layout(&mut conn, (schema, quoted), prepared).await? else {
            return Ok(0);
        };
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
            .judged(q::KEEPS_ANY, names, specs)
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
            .judged(q::FINISH_DROP, names, specs)
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
