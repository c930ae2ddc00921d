//! One statement on the slot-row pool, directly or through a transaction-mode pooler.
//!
//! Directly, a statement is prepared once per connection and kept (the driver's statement cache).
//! Through a transaction-mode pooler (PgBouncer `pool_mode = transaction`,
//! [`PgBackendBuilder::transaction_pooler`](crate::PgBackendBuilder::transaction_pooler)) a
//! prepared statement would stay on whichever server session the pooler lent, and a later client
//! would meet it there (`prepared statement "sqlx_s_1" already exists`) or miss it. So there every
//! statement is unnamed (`persistent(false)`) and runs in a transaction of its own, which the
//! pooler keeps on one server session from its parse to its commit. [`OneStatement`] is what lets
//! the three kinds of query the driver builds (rows, tuples, scalars) go through that one door.

use std::future::Future;
use std::pin::Pin;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{FromRow, PgConnection, Postgres, Transaction};

use crate::PgBackend;

/// A query with its arguments bound, whatever it decodes its rows into.
pub(crate) trait OneStatement: Sized + Send {
    /// What one row decodes into.
    type Row: Send + Unpin + 'static;

    /// Whether the driver may prepare the statement under a name and keep it.
    fn persistent(self, value: bool) -> Self;

    /// Every row.
    fn all<'c>(
        self,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'c
    where
        Self: 'c;

    /// The first row, if any.
    fn optional<'c>(
        self,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send + 'c
    where
        Self: 'c;
}

/// The body of [`OneStatement`] for one of the driver's query types: each already has the three
/// methods by those names.
macro_rules! one_statement {
    ($query:ident) => {
        fn persistent(self, value: bool) -> Self {
            $query::persistent(self, value)
        }

        fn all<'c>(
            self,
            conn: &'c mut PgConnection,
        ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'c
        where
            Self: 'c,
        {
            self.fetch_all(conn)
        }

        fn optional<'c>(
            self,
            conn: &'c mut PgConnection,
        ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send + 'c
        where
            Self: 'c,
        {
            self.fetch_optional(conn)
        }
    };
}

impl OneStatement for Query<'_, Postgres, PgArguments> {
    type Row = PgRow;
    one_statement!(Query);
}

impl<O> OneStatement for QueryAs<'_, Postgres, O, PgArguments>
where
    O: for<'r> FromRow<'r, PgRow> + Send + Unpin + 'static,
{
    type Row = O;
    one_statement!(QueryAs);
}

impl<O> OneStatement for QueryScalar<'_, Postgres, O, PgArguments>
where
    (O,): for<'r> FromRow<'r, PgRow>,
    O: Send + Unpin + 'static,
{
    type Row = O;
    one_statement!(QueryScalar);
}

/// A statement's answer to come, boxed (see [`PgBackend::fetch_all`]).
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, sqlx::Error>> + Send + 'a>>;

impl PgBackend {
    /// Whether statements may be prepared and kept: not through a transaction pooler.
    pub(crate) fn prepared(&self) -> bool {
        !self.inner.pooler
    }

    /// A transaction on the slot-row pool; its statements must be `persistent(self.prepared())`.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.inner.pool.begin().await
    }

    /// Every row `statement` answers, as one statement (see the module's docs).
    ///
    /// Boxed, and `Send` said outright: the callers' futures then need not prove it through the
    /// statement's lifetime (rust-lang/rust#100013).
    pub(crate) fn fetch_all<'a, S: OneStatement + 'a>(
        &'a self,
        statement: S,
    ) -> Boxed<'a, Vec<S::Row>> {
        let statement = statement.persistent(self.prepared());
        Box::pin(async move {
            if self.prepared() {
                let mut conn = self.inner.pool.acquire().await?;
                return statement.all(&mut conn).await;
            }
            let mut tx = self.begin().await?;
            let rows = statement.all(&mut tx).await?;
            tx.commit().await?;
            Ok(rows)
        })
    }

    /// The first row `statement` answers, if any, as one statement (see the module's docs).
    pub(crate) fn fetch_optional<'a, S: OneStatement + 'a>(
        &'a self,
        statement: S,
    ) -> Boxed<'a, Option<S::Row>> {
        let statement = statement.persistent(self.prepared());
        Box::pin(async move {
            if self.prepared() {
                let mut conn = self.inner.pool.acquire().await?;
                return statement.optional(&mut conn).await;
            }
            let mut tx = self.begin().await?;
            let row = statement.optional(&mut tx).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    /// The first row `statement` answers; [`sqlx::Error::RowNotFound`] without one.
    pub(crate) fn fetch_one<'a, S: OneStatement + 'a>(&'a self, statement: S) -> Boxed<'a, S::Row> {
        let row = self.fetch_optional(statement);
        Box::pin(async move { row.await?.ok_or(sqlx::Error::RowNotFound) })
    }

    /// Runs `statement` for its effect; the rows it changed.
    pub(crate) fn execute<'a, 'q: 'a>(
        &'a self,
        statement: Query<'q, Postgres, PgArguments>,
    ) -> Boxed<'a, u64> {
        let statement = statement.persistent(self.prepared());
        Box::pin(async move {
            if self.prepared() {
                let mut conn = self.inner.pool.acquire().await?;
                return Ok(statement.execute(&mut *conn).await?.rows_affected());
            }
            let mut tx = self.begin().await?;
            let done = statement.execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok(done)
        })
    }
}
