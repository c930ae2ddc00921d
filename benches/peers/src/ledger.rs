//! The ledger: one row per execution, `(system, replica, slot_second, started_at)`, in a fresh schema per
//! run (`peers_<run id>.peers_ledger`).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use crate::Window;

#[derive(Clone)]
pub struct Ledger {
    pool: PgPool,
    schema: String,
}

/// The figures of one system.
#[derive(Debug, Clone)]
pub struct Summary {
    pub executions: usize,
    pub distinct_slots: usize,
    pub missed: usize,
    pub missed_of: usize,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
}

impl Summary {
    pub fn duplicates_per_1000(&self) -> f64 {
        if self.distinct_slots == 0 {
            return 0.0;
        }
        (self.executions - self.distinct_slots) as f64 * 1000.0 / self.distinct_slots as f64
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Ledger {
    pub async fn create(url: &str, run_id: &str) -> Result<Ledger, sqlx::Error> {
        let pool = PgPoolOptions::new().max_connections(8).connect(url).await?;
        let schema = format!("peers_{run_id}");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE SCHEMA {schema};
             CREATE TABLE {schema}.peers_ledger (
                 system text NOT NULL,
                 replica int NOT NULL,
                 slot_second timestamptz NOT NULL,
                 started_at timestamptz NOT NULL
             );"
        )))
        .execute(&pool)
        .await?;
        Ok(Ledger { pool, schema })
    }

    pub fn table(&self) -> String {
        format!("{}.peers_ledger", self.schema)
    }

    /// The run's own schema, for systems whose tables can be put anywhere.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Records one execution. `started_at` is taken by the caller at the top of the job body, before
    /// this insert.
    pub async fn record(
        &self,
        system: &str,
        replica: usize,
        slot_second: DateTime<Utc>,
        started_at: DateTime<Utc>,
    ) {
        let sql = format!(
            "INSERT INTO {}.peers_ledger (system, replica, slot_second, started_at) VALUES ($1, $2, $3, $4)",
            self.schema
        );
        let res = sqlx::query(AssertSqlSafe(sql))
            .bind(system)
            .bind(replica as i32)
            .bind(slot_second)
            .bind(started_at)
            .execute(&self.pool)
            .await;
        if let Err(e) = res {
            eprintln!("peers: ledger insert failed ({system}, replica {replica}): {e}");
        }
    }

    pub async fn summarize(&self, system: &str, window: Window) -> Result<Summary, sqlx::Error> {
        let sql = format!(
            "SELECT slot_second, started_at FROM {}.peers_ledger
             WHERE system = $1 AND slot_second >= $2 AND slot_second <= $3",
            self.schema
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(system)
            .bind(window.first)
            .bind(window.last)
            .fetch_all(&self.pool)
            .await?;
        let mut per_slot: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
        let mut lags = Vec::with_capacity(rows.len());
        for row in &rows {
            let slot: DateTime<Utc> = row.try_get(0)?;
            let started: DateTime<Utc> = row.try_get(1)?;
            *per_slot.entry(slot).or_default() += 1;
            lags.push((started - slot).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0);
        }
        lags.sort_by(|a, b| a.total_cmp(b));
        let mut missed = 0;
        let mut missed_of = 0;
        let step = ChronoDuration::seconds(window.step_secs);
        let mut s = window.first + step * window.margin as i32;
        let end = window.last - step * window.margin as i32;
        while s <= end {
            missed_of += 1;
            if !per_slot.contains_key(&s) {
                missed += 1;
            }
            s += step;
        }
        Ok(Summary {
            executions: rows.len(),
            distinct_slots: per_slot.len(),
            missed,
            missed_of,
            lag_p50_ms: percentile(&lags, 50.0),
            lag_p99_ms: percentile(&lags, 99.0),
        })
    }

    /// Drops the run's schema (the ledger and the peers' tables kept in it).
    pub async fn drop_all(&self) {
        let res = sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            self.schema
        )))
        .execute(&self.pool)
        .await;
        if let Err(e) = res {
            eprintln!("peers: could not drop schema {}: {e}", self.schema);
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}
