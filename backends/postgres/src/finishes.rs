//! The arguments of `FINISH_MANY` (`sql/finish.rs`): one array per column, bound in order.

use std::sync::Arc;

use slotguard::ErrorClass;
use slotguard::store::{Finish, Lease};
use sqlx::AssertSqlSafe;

use crate::{MAX_STALE_AFTER, micros};

/// A query with its arguments bound, answering one column.
type PgScalar<'q, T> = sqlx::query::QueryScalar<'q, sqlx::Postgres, T, sqlx::postgres::PgArguments>;

/// The columns of a batch of finishes.
pub(crate) struct FinishArgs<'a> {
    pub(crate) ids: Vec<i64>,
    tokens: Vec<i64>,
    statuses: Vec<&'static str>,
    attempt_statuses: Vec<&'static str>,
    classes: Vec<Option<&'static str>>,
    messages: Vec<Option<&'a str>>,
    retries: Vec<Option<i64>>,
    jobs: Vec<&'a str>,
    slots: Vec<chrono::DateTime<chrono::Utc>>,
    partitions: Vec<&'a str>,
}

impl<'a> FinishArgs<'a> {
    pub(crate) fn new(finishes: &'a [(Lease, Finish)]) -> Self {
        FinishArgs {
            ids: finishes.iter().map(|(l, _)| l.run_id).collect(),
            tokens: finishes.iter().map(|(l, _)| l.token).collect(),
            statuses: finishes.iter().map(|(_, f)| f.status.as_str()).collect(),
            attempt_statuses: finishes
                .iter()
                .map(|(_, f)| f.attempt_status.as_str())
                .collect(),
            classes: finishes
                .iter()
                .map(|(_, f)| f.error_class.map(ErrorClass::as_str))
                .collect(),
            messages: finishes.iter().map(|(_, f)| f.message.as_deref()).collect(),
            retries: finishes
                .iter()
                .map(|(_, f)| f.retry_in.map(|d| micros(d.min(MAX_STALE_AFTER))))
                .collect(),
            jobs: finishes.iter().map(|(l, _)| l.key.job.as_str()).collect(),
            slots: finishes.iter().map(|(l, _)| l.key.scheduled_at).collect(),
            partitions: finishes
                .iter()
                .map(|(l, _)| l.key.partition.as_str())
                .collect(),
        }
    }

    /// `statement` (`FINISH_MANY`) for `owner`, with every parameter bound.
    pub(crate) fn query<'q, T>(
        &'q self,
        statement: AssertSqlSafe<Arc<str>>,
        owner: &'q str,
    ) -> PgScalar<'q, T>
    where
        (T,): for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    {
        sqlx::query_scalar(statement)
            .bind(owner)
            .bind(&self.ids)
            .bind(&self.tokens)
            .bind(&self.statuses)
            .bind(&self.attempt_statuses)
            .bind(&self.classes)
            .bind(&self.messages)
            .bind(&self.retries)
            .bind(&self.jobs)
            .bind(&self.slots)
            .bind(&self.partitions)
    }
}
