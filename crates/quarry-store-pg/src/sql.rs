//! Small helpers of the statements: typed columns, `bigint` counts, advisory locks.

use quarry_core::{Error, Result};

use crate::error::db_err;
use crate::pool::PgTransaction;

/// Column `i` of a row, its type checked (a mismatch is a storage error, not a panic).
pub(crate) fn col<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
) -> Result<T> {
    row.try_get(i).map_err(db_err)
}

/// A count or size as `bigint`; past its range is the caller's error.
pub(crate) fn to_i64<T: TryInto<i64> + std::fmt::Display + Copy>(n: T, what: &str) -> Result<i64> {
    n.try_into()
        .map_err(|_| Error::invalid(format!("{what} {n} is too large to store")))
}

/// Takes a transaction-level advisory lock (released at commit or rollback).
pub(crate) fn lock(tx: &mut PgTransaction<'_>, key: i64) -> Result<()> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&key])
        .map_err(db_err)?;
    Ok(())
}
