//! Where a ledger keeps its accounts: a SQLite file, or (with the
//! `postgres` feature) a PostgreSQL database that several processes on
//! several machines share. Both run the same statements (see
//! [`crate::sql`]), so every rule of the budget holds in either.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::sql::Sql;
use crate::{Result, ledger_error, schema};

/// Where a ledger keeps its accounts.
///
/// ```
/// use dpkit_ledger::{Ledger, Store};
/// # let dir = std::env::temp_dir().join(format!("doc-store-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # std::fs::create_dir_all(&dir).unwrap();
/// let store = Store::file(&dir.join("state.sqlite"));
/// Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
/// let ledger = Ledger::open_account_in(&store, "ann/adult").unwrap();
/// assert_eq!(ledger.state().unwrap().total_epsilon, 1.0);
/// # drop(ledger);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum Store {
    /// A SQLite file, made with the ledger's tables if it is not there.
    File(PathBuf),
    /// A PostgreSQL database, by its connection string (libpq `key=value`
    /// pairs or a `postgresql://` URL), whose tables are made if they are
    /// not there. The string may hold a password: it is never shown, in an
    /// error or in `Debug`.
    #[cfg(feature = "postgres")]
    Postgres(String),
}

impl Store {
    /// The SQLite file at `path`.
    pub fn file(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }

    /// A new connection to the store, its tables made.
    pub(crate) fn connect(&self) -> Result<Box<dyn Sql>> {
        match self {
            Self::File(path) => {
                let mut connection =
                    crate::cached::open(path).map_err(|e| ledger_error(path, e))?;
                schema::create(&mut connection).map_err(|e| ledger_error(path, e))?;
                Ok(Box::new(connection))
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(connection) => Ok(Box::new(
                crate::postgres::Postgres::connect(connection)
                    .map_err(|e| crate::store_error(self, e))?,
            )),
        }
    }
}

/// The file's path, or "PostgreSQL" (never the connection string).
impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => f.write_str("PostgreSQL"),
        }
    }
}

/// As [`fmt::Display`]: a connection string is never shown.
impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}
