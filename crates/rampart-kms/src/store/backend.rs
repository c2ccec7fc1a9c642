//! The small interface the store logic ([`logic`](super::logic)) runs
//! over: statements with parameters inside one transaction (or on one
//! connection), the dialect they are spelled in, and the few steps only
//! one backend needs. SQLite's connection and PostgreSQL's client each
//! implement it in their own file.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::error::{KmsError, Result};

use super::rows::{Columns, Value};
use super::sql::{Dialect, Sql};

/// A statement parameter both drivers bind.
pub(crate) trait Param: Sync {
    fn sqlite(&self) -> &dyn rusqlite::ToSql;
    fn postgres(&self) -> &(dyn tokio_postgres::types::ToSql + Sync);
}

impl<T: rusqlite::ToSql + tokio_postgres::types::ToSql + Sync> Param for T {
    fn sqlite(&self) -> &dyn rusqlite::ToSql {
        self
    }

    fn postgres(&self) -> &(dyn tokio_postgres::types::ToSql + Sync) {
        self
    }
}

/// Parameters of a statement, `$1` first.
pub(crate) type Params<'a> = [&'a dyn Param];

/// One transaction, or one connection outside any, of a backend.
///
/// Not `Send` in general (a SQLite connection stays on its thread); a
/// PostgreSQL future built on it is, which the compiler checks where the
/// store boxes it.
#[allow(async_fn_in_trait)]
pub(crate) trait Tx {
    /// A result row.
    type Row<'r>: Columns;
    const DIALECT: Dialect;

    /// Every row of statement `text` (spelled for this dialect), decoded.
    async fn rows<T>(
        &self,
        text: &str,
        params: &Params<'_>,
        decode: impl FnMut(&Self::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>>;

    /// Runs statement `text`; how many rows it changed.
    async fn execute(&self, text: &str, params: &Params<'_>) -> Result<u64>;

    /// As [`Tx::execute`], a row already holding a unique value being a
    /// conflict over `what()`.
    async fn insert(
        &self,
        sql: &'static Sql,
        params: &Params<'_>,
        what: impl FnOnce() -> String,
    ) -> Result<u64>;

    /// What must happen to versions' material before they are destroyed
    /// (`$1` key, `$2` version or NULL for all), beyond dropping it.
    async fn shred_material(&self, name: &str, version: Option<i64>) -> Result<()>;

    /// Takes the audit chain's head as appenders do, so a prune waits for
    /// them and they for it.
    async fn lock_audit_head(&self) -> Result<()>;

    /// Lets this transaction delete audit entries; whether the guard was
    /// there, for [`Tx::restore_audit_guard`].
    async fn lift_audit_guard(&self) -> Result<bool>;

    /// Puts back the guard [`Tx::lift_audit_guard`] lifted.
    async fn restore_audit_guard(&self, lifted: bool) -> Result<()>;

    /// Every row of shared statement `sql`, decoded.
    async fn query<T>(
        &self,
        sql: &'static Sql,
        params: &Params<'_>,
        decode: impl FnMut(&Self::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql.spelled(Self::DIALECT), params, decode).await
    }

    /// The first row of shared statement `sql`, decoded.
    async fn one<T>(
        &self,
        sql: &'static Sql,
        params: &Params<'_>,
        decode: impl FnMut(&Self::Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.query(sql, params, decode).await?.into_iter().next())
    }

    /// Column 0 of the first row of shared statement `sql`.
    async fn scalar<T: Value>(&self, sql: &'static Sql, params: &Params<'_>) -> Result<Option<T>> {
        self.one(sql, params, |r| r.get(0)).await
    }

    /// Runs shared statement `sql`; how many rows it changed.
    async fn run(&self, sql: &'static Sql, params: &Params<'_>) -> Result<u64> {
        self.execute(sql.spelled(Self::DIALECT), params).await
    }
}

/// The value of a future that never waits: the store logic run on a
/// SQLite connection, whose every statement completes when called.
pub(crate) fn ready<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => Err(KmsError::Store("a SQLite statement did not complete".into())),
    }
}
