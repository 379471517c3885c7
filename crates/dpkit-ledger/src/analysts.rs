//! A service's analysts and the hashes of their keys, kept in the ledger's
//! store beside their accounts, so that one store (a SQLite file, or a
//! PostgreSQL database several servers share) holds a service's whole
//! state, and one backup copies it. The keys themselves are never here:
//! the service makes them, shows each once, and keeps only its hash
//! (`dpkit_serve::analysts`).
//!
//! ```
//! use dpkit_ledger::{Analysts, Store};
//! # let dir = std::env::temp_dir().join(format!("doc-ledger-analysts-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # std::fs::create_dir_all(&dir).unwrap();
//! let analysts = Analysts::open(&Store::file(&dir.join("state.sqlite"))).unwrap();
//! assert!(analysts.add("ann", "hash-1").unwrap());
//! assert!(!analysts.add("ann", "hash-2").unwrap(), "a name is added once");
//! assert_eq!(analysts.named_by("hash-1").unwrap().as_deref(), Some("ann"));
//! assert!(analysts.revoke("ann").unwrap());
//! assert_eq!(analysts.named_by("hash-1").unwrap(), None);
//! # drop(analysts);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::sql::{Sql, SqlError, values};
use crate::{Result, Store, store_error};

/// The analysts of a store.
pub struct Analysts {
    sql: Box<dyn Sql>,
    store: Store,
}

/// One analyst, as a service lists them.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalystRow {
    /// The name.
    pub name: String,
    /// When the key was made (UTC, ISO 8601).
    pub created: String,
    /// When the key was revoked, if it was.
    pub revoked: Option<String>,
}

impl Analysts {
    /// Opens the analysts of `store`, making their table (and the
    /// ledger's) if it is not there. A PostgreSQL store's tables are made
    /// together, under a lock (`postgres::schema`); a SQLite file's here.
    pub fn open(store: &Store) -> Result<Self> {
        let sql = store.connect()?;
        let this = Self {
            sql,
            store: store.clone(),
        };
        if matches!(store, Store::File(_)) {
            this.sql
                .run(
                    "CREATE TABLE IF NOT EXISTS analysts (
                         name TEXT PRIMARY KEY,
                         key_hash TEXT NOT NULL UNIQUE,
                         created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
                         revoked TEXT)",
                    &[],
                )
                .map_err(|e| this.error(e))?;
        }
        Ok(this)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the connection has ended for good (a PostgreSQL server that
    /// closed its session): open the analysts again.
    pub fn is_closed(&self) -> bool {
        self.sql.is_closed()
    }

    fn error(&self, error: SqlError) -> crate::LedgerError {
        store_error(&self.store, error)
    }

    /// Adds `name` with the key whose hash is `key_hash`; `false` if an
    /// analyst has that name already (nothing is changed).
    pub fn add(&self, name: &str, key_hash: &str) -> Result<bool> {
        let added = self
            .sql
            .run(
                "INSERT INTO analysts (name, key_hash) VALUES (?1, ?2)
                 ON CONFLICT (name) DO NOTHING",
                values![name, key_hash],
            )
            .map_err(|e| self.error(e))?;
        Ok(added == 1)
    }

    /// Every analyst, by name.
    pub fn list(&self) -> Result<Vec<AnalystRow>> {
        let rows = self
            .sql
            .rows(
                "SELECT name, created, revoked FROM analysts ORDER BY name",
                &[],
            )
            .map_err(|e| self.error(e))?;
        rows.iter()
            .map(|row| {
                Ok(AnalystRow {
                    name: row.text(0)?,
                    created: row.text(1)?,
                    revoked: row.optional_text(2)?,
                })
            })
            .collect::<std::result::Result<_, SqlError>>()
            .map_err(|e| self.error(e))
    }

    /// Whether `name` is an analyst (revoked or not).
    pub fn exists(&self, name: &str) -> Result<bool> {
        let rows = self
            .sql
            .rows("SELECT name FROM analysts WHERE name = ?1", values![name])
            .map_err(|e| self.error(e))?;
        Ok(!rows.is_empty())
    }

    /// Revokes `name`'s key; `false` if there is no such analyst or the
    /// key was revoked already.
    pub fn revoke(&self, name: &str) -> Result<bool> {
        let sql = format!(
            "UPDATE analysts SET revoked = {} WHERE name = ?1 AND revoked IS NULL",
            self.sql.now()
        );
        let changed = self
            .sql
            .run(&sql, values![name])
            .map_err(|e| self.error(e))?;
        Ok(changed == 1)
    }

    /// Gives `name` the key whose hash is `key_hash`, live from now on,
    /// in place of the old one (revoked or not); `false` if there is no
    /// such analyst.
    pub fn rekey(&self, name: &str, key_hash: &str) -> Result<bool> {
        let sql = format!(
            "UPDATE analysts SET key_hash = ?2, revoked = NULL, created = {}
             WHERE name = ?1",
            self.sql.now()
        );
        let changed = self
            .sql
            .run(&sql, values![name, key_hash])
            .map_err(|e| self.error(e))?;
        Ok(changed == 1)
    }

    /// The analyst whose live key's hash is `key_hash`, if any.
    pub fn named_by(&self, key_hash: &str) -> Result<Option<String>> {
        let row = self
            .sql
            .first(
                "SELECT name FROM analysts WHERE key_hash = ?1 AND revoked IS NULL",
                values![key_hash],
            )
            .map_err(|e| self.error(e))?;
        row.map(|row| row.text(0))
            .transpose()
            .map_err(|e| self.error(e))
    }
}
