//! A table in a SQLite database file, opened read-only.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::flavour::Flavour;
use super::rows::{Cell, Rows};
use super::sql::RemotePlan;
use super::{Backend, DatabaseType};
use crate::error::{DatabaseError, Result};
use dpkit_description::ColumnKind;

/// A SQLite table.
pub(crate) struct SqliteTable {
    connection: Mutex<Connection>,
    table: String,
    /// The columns whose every value had their declared type when the
    /// table was opened (see [`as_stored`]): read as they are stored when
    /// that type is the description's kind.
    as_stored: Vec<(String, DatabaseType)>,
}

/// How long a statement waits for a writer's lock before it fails.
const BUSY_WAIT: Duration = Duration::from_secs(5);

/// A failure that does not depend on the rows: the file cannot be opened,
/// read or locked. Refunded.
fn unreachable_error(reason: &str) -> DatabaseError {
    DatabaseError::Unreadable(format!("the SQLite database {reason} (an I/O failure)"))
}

impl SqliteTable {
    /// Opens `file` read-only and reads the table `table` from it.
    pub(crate) fn open(file: &Path, table: &str) -> Result<Self> {
        if !file.is_file() {
            return Err(DatabaseError::Unreadable(format!(
                "cannot read {}: no such file",
                file.display()
            )));
        }
        // Tables of the main schema: `main.t` is `t`.
        let table = match table.split_once('.') {
            Some((schema, name)) if schema.eq_ignore_ascii_case("main") => name,
            Some(_) => {
                return Err(DatabaseError::Description(format!(
                    "the SQLite table '{table}': dpkit reads tables of the main schema (name \
                     it without a schema, or as main.NAME)"
                )));
            }
            None => table,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(file, flags)
            .and_then(|c| c.busy_timeout(BUSY_WAIT).map(|()| c))
            .map_err(|_| unreachable_error("cannot be opened"))?;
        let as_stored =
            as_stored(&connection, table).map_err(|_| unreachable_error("cannot be read"))?;
        Ok(Self {
            connection: Mutex::new(connection),
            table: table.to_string(),
            as_stored,
        })
    }

    /// The connection, whoever held it last: a panic while reading an
    /// answer (a charged failure) leaves it usable, without the time limit
    /// of the statement it stopped.
    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|poisoned| {
            self.connection.clear_poison();
            let mut connection = poisoned.into_inner();
            let _ = connection.progress_handler(0, None::<fn() -> bool>);
            connection
        })
    }
}

/// The columns of a STRICT table that hold only their declared type (or
/// NULL), with that type; none for a table that is not STRICT. A column
/// with a default is left out: `ALTER TABLE … ADD COLUMN v INTEGER DEFAULT
/// 1.5` (or `'n/a'`) is accepted on a STRICT table, and every row older
/// than the column then reads the default, of whatever type. A schema
/// fact, not a row's.
fn as_stored(
    connection: &Connection,
    table: &str,
) -> rusqlite::Result<Vec<(String, DatabaseType)>> {
    if !is_strict(connection, table)? {
        return Ok(Vec::new());
    }
    column_types(connection, table, "WHERE dflt_value IS NULL")
}

/// The name and type of each column of `table` that `filter` (a `WHERE`
/// clause over `pragma_table_info`, or nothing) keeps.
fn column_types(
    connection: &Connection,
    table: &str,
    filter: &str,
) -> rusqlite::Result<Vec<(String, DatabaseType)>> {
    let mut statement = connection.prepare(&format!(
        "SELECT name, type FROM pragma_table_info(?1) {filter}"
    ))?;
    statement
        .query_map([table], |row| {
            Ok((
                row.get::<_, String>(0)?,
                affinity(&row.get::<_, String>(1)?),
            ))
        })?
        .collect()
}

/// Whether `table` is a STRICT table, whose columns refuse values of
/// another type (SQLite 3.37 and later). A schema fact, not a row's.
fn is_strict(connection: &Connection, table: &str) -> rusqlite::Result<bool> {
    let mut statement = connection.prepare(
        "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1 COLLATE NOCASE",
    )?;
    let flags = statement
        .query_map([table], |row| row.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(flags == [1])
}

/// A column's declared type in SQLite's rules of affinity.
fn affinity(declared: &str) -> DatabaseType {
    let upper = declared.to_ascii_uppercase();
    if upper.contains("INT") {
        DatabaseType::Integer
    } else if ["CHAR", "CLOB", "TEXT"].iter().any(|t| upper.contains(t)) {
        DatabaseType::Text
    } else if upper.contains("BLOB") {
        // SQLite's third rule, ahead of REAL: `FLOATBLOB` stores as given.
        DatabaseType::Other(declared.to_string())
    } else if ["REAL", "FLOA", "DOUB"].iter().any(|t| upper.contains(t)) {
        DatabaseType::Real
    } else {
        DatabaseType::Other(declared.to_string())
    }
}

/// The type `list` gives the column `name`, if it names it.
fn type_of<'a>(list: &'a [(String, DatabaseType)], name: &str) -> Option<&'a DatabaseType> {
    list.iter().find(|(n, _)| n == name).map(|(_, t)| t)
}

/// A stored value as the declared type, or NULL. SQLite columns hold any
/// type in any row, and its CAST turns `'abc'` into 0: a value is read only
/// in its declared form, as the embedded engine's `TRY_CAST` reads a file.
/// A STRICT column (`stored`) of the kind needs no look at each value's
/// type: SQLite refused every other type when the row was written.
/// `declared` is the column's type as the table declares it.
fn read_as(
    column: &str,
    kind: ColumnKind,
    stored: Option<&DatabaseType>,
    declared: Option<&DatabaseType>,
) -> String {
    match (kind, stored) {
        (ColumnKind::Integer, Some(DatabaseType::Integer))
        | (ColumnKind::Real, Some(DatabaseType::Real)) => return column.to_string(),
        (ColumnKind::Text, Some(DatabaseType::Text)) => return format!("{column} COLLATE BINARY"),
        _ => {}
    }
    // SQLite orders every number below every text, and every text below
    // every BLOB, and NULL compares as NULL: `< ''` keeps the numbers,
    // `< x''` the numbers and the texts. One comparison, where `typeof` was
    // a function call and a comparison of its name (see the book's
    // benchmark of the backends, docs/book/src/speed/databases.md).
    match kind {
        ColumnKind::Integer => format!("CASE WHEN typeof({column}) = 'integer' THEN {column} END"),
        // A column of REAL affinity reads every number as a real (an
        // integer is only how SQLite stores a whole one on disk).
        ColumnKind::Real if declared == Some(&DatabaseType::Real) => {
            format!("CASE WHEN {} THEN {column} END", below(column, "''"))
        }
        ColumnKind::Real => format!(
            "CASE WHEN {} THEN CAST({column} AS REAL) END",
            below(column, "''")
        ),
        // Compared byte by byte, as in the embedded engine, whatever the
        // column's collation (NOCASE would make `a` and `A` one group).
        ColumnKind::Text => format!(
            "(CASE WHEN {} THEN CAST({column} AS TEXT) END) COLLATE BINARY",
            below(column, "x''")
        ),
    }
}

/// `column` read as text (as [`read_as`] reads it for a text column) and
/// cut to `length` characters: `SUBSTR` of that read, written so that
/// SQLite computes the read once and copies a text only when it is longer.
/// A text of at most `length` bytes has at most `length` characters, so it
/// is its own cut; `octet_length` gives a number's bytes as text, and a
/// text's from its stored size (of whatever bytes, NULs included) without
/// reading it (in the database's encoding: two bytes or more a character
/// in UTF-16, still at least one).
///
/// `SUBSTR` stops at a NUL, where the embedded engine's cut counts it as a
/// character: a longer text that holds one is NULL here rather than cut
/// short at it (`instr` of two texts looks for the character, whatever the
/// encoding; a BLOB's bytes would hold a 0 for every letter in UTF-16).
/// A short one is whole, as on the embedded engine. (A person
/// column's check that its id is whole also cuts one character further,
/// by `SUBSTR`, which stops at the NUL: an id that holds one is no one's,
/// never read as the id before its NUL, someone else's.)
fn cut_as(column: &str, stored: Option<&DatabaseType>, length: u32) -> String {
    let cut = |text: &str| {
        format!(
            "CASE WHEN octet_length({column}) <= {length} THEN {text} \
             WHEN instr({text}, char(0)) = 0 THEN SUBSTR({text}, 1, {length}) END"
        )
    };
    match stored {
        Some(DatabaseType::Text) => format!("({}) COLLATE BINARY", cut(column)),
        _ => format!(
            "(CASE WHEN {} THEN {} END) COLLATE BINARY",
            below(column, "x''"),
            cut(&format!("CAST({column} AS TEXT)"))
        ),
    }
}

/// `column < literal` compared as stored. The unary `+` takes the column's
/// affinity away, which would otherwise turn a stored text such as `'12'`
/// into a number for the comparison (a text a numeric column can hold when
/// its rows were written under another declaration); `COLLATE BINARY`
/// takes its collation away, which dpkit's connection may not have.
fn below(column: &str, literal: &str) -> String {
    format!("(+{column}) COLLATE BINARY < {literal}")
}

impl Backend for SqliteTable {
    fn flavour(&self) -> Flavour {
        Flavour::Sqlite
    }

    fn identity(&self) -> Result<String> {
        // SQLite finds table names whatever their case.
        Ok(self.table.to_lowercase())
    }

    fn columns(&self) -> Result<Vec<(String, DatabaseType)>> {
        let columns = column_types(&self.connection(), &self.table, "")
            .map_err(|_| unreachable_error("cannot be read"))?;
        if columns.is_empty() {
            return Err(DatabaseError::Description(format!(
                "the SQLite database has no table '{}'",
                self.table
            )));
        }
        Ok(columns)
    }

    fn source(
        &self,
        columns: &[(String, ColumnKind)],
        found: &[(String, DatabaseType)],
        cuts: &[(String, u32)],
    ) -> String {
        let quote = |name: &str| Flavour::Sqlite.quote(name);
        let typed = columns.iter().map(|(name, kind)| {
            let stored = type_of(&self.as_stored, name);
            let declared = type_of(found, name);
            let read = read_as(&quote(name), *kind, stored, declared);
            format!("{read} AS {}", quote(name))
        });
        let cut = cuts.iter().map(|(name, length)| {
            let stored = type_of(&self.as_stored, name);
            let read = cut_as(&quote(name), stored, *length);
            format!("{read} AS {}", quote(&crate::cut_column(name)))
        });
        let list: Vec<String> = typed.chain(cut).collect();
        format!(
            "SELECT {} FROM {}",
            list.join(", "),
            Flavour::Sqlite.quote(&self.table)
        )
    }

    fn check(&self, plan: &RemotePlan, _schema: &SchemaRef) -> Result<()> {
        let connection = self.connection();
        // Columns read as stored rely on the table staying STRICT, and on
        // none of them gaining a default (dropped and added again).
        if !self.as_stored.is_empty()
            && as_stored(&connection, &self.table)
                .map_err(|_| unreachable_error("cannot be read"))?
                != self.as_stored
        {
            return Err(DatabaseError::Description(
                "the SQLite table is no longer STRICT as it was opened: open its description again"
                    .into(),
            ));
        }
        register(&connection, plan)?;
        connection
            .prepare(&plan.sql)
            .map(drop)
            .map_err(|e| super::cannot_run(Flavour::Sqlite, &e.to_string()))
    }

    fn run(
        &self,
        plan: &RemotePlan,
        schema: SchemaRef,
        timeout: Option<Duration>,
    ) -> Result<RecordBatch> {
        let mut connection = self.connection();
        register(&connection, plan)?;
        let deadline = timeout.map(|limit| Instant::now() + limit);
        connection
            .progress_handler(
                10_000,
                deadline.map(|deadline| move || Instant::now() > deadline),
            )
            .map_err(|_| unreachable_error("cannot be prepared"))?;
        let outcome = collect(&connection, &plan.sql, schema);
        let _ = connection.progress_handler(0, None::<fn() -> bool>);
        outcome.map_err(|error| run_error(error, deadline))?
    }
}

/// Registers the functions `plan` calls that dpkit computes.
fn register(connection: &Connection, plan: &RemotePlan) -> Result<()> {
    for function in &plan.functions {
        function
            .register(connection)
            .map_err(|_| unreachable_error("cannot be prepared"))?;
    }
    Ok(())
}

/// The statement's rows as one batch of `schema`.
fn collect(
    connection: &Connection,
    sql: &str,
    schema: SchemaRef,
) -> rusqlite::Result<Result<RecordBatch>> {
    let mut rows = match Rows::new(schema) {
        Ok(rows) => rows,
        Err(error) => return Ok(Err(error)),
    };
    let mut statement = connection.prepare(sql)?;
    let order = match rows.order(statement.column_names()) {
        Ok(order) => order,
        Err(error) => return Ok(Err(error)),
    };
    let mut cursor = statement.query([])?;
    while let Some(row) = cursor.next()? {
        for (i, &column) in order.iter().enumerate() {
            let cell = match row.get_ref(i)? {
                ValueRef::Null | ValueRef::Blob(_) => Cell::Null,
                ValueRef::Integer(v) => Cell::Integer(v),
                ValueRef::Real(v) => Cell::Real(v),
                // Bytes that are not UTF-8 are no text: read as NULL (no
                // key), never as another key such as "".
                ValueRef::Text(t) => std::str::from_utf8(t).map_or(Cell::Null, Cell::Text),
            };
            if let Err(error) = rows.push(column, cell) {
                return Ok(Err(error));
            }
        }
    }
    Ok(rows.finish())
}

/// A SQLite failure while running: refunded only when it cannot depend on
/// the rows (the file is locked by a writer, which SQLite finds before it
/// reads a row); every other failure keeps its cost and withholds its
/// details. An I/O failure mid-query is kept too: a sort that spills to a
/// temporary file grows with the rows, and one row could make it fail.
fn run_error(error: rusqlite::Error, deadline: Option<Instant>) -> DatabaseError {
    use rusqlite::ErrorCode::*;
    let code = error.sqlite_error_code();
    match code {
        Some(OperationInterrupted) if deadline.is_some() => {
            DatabaseError::FailedWhileRunning("it ran longer than the time limit".into())
        }
        Some(DatabaseBusy | DatabaseLocked) => unreachable_error("is locked by a writer"),
        _ => DatabaseError::FailedWhileRunning(
            "details withheld: they could quote private values".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of stored value, in columns of every affinity, read as
    /// each kind of the description, against the rule written plainly with
    /// `typeof`: a number as the kind (as text for text), a text as itself
    /// for text, everything else NULL. Each table is written twice: through
    /// its declaration, and as an untyped table declared afterwards (as a
    /// file written under another schema is), so that a numeric column
    /// holds texts such as `'12'`; `foo` is a collation dpkit's connection
    /// does not have.
    #[test]
    fn every_stored_value_reads_as_its_kind_or_null_in_every_affinity() {
        let declarations = [
            "TEXT",
            "VARCHAR(10)",
            "TEXT COLLATE NOCASE",
            "TEXT COLLATE foo",
            "REAL",
            "DOUBLE",
            "REAL COLLATE foo",
            "FLOATBLOB",
            "INTEGER",
            "NUMERIC",
            "BLOB",
            "",
        ];
        for declared in declarations {
            with_every_kind("affinity", declared, |connection| {
                every_kind_reads_by_the_rule(connection, declared)
            });
        }
    }

    /// `check` on a table of every kind of value in a column `declared`,
    /// written through the declaration and declared afterwards, in files
    /// named by `test` (tests of one process run at once).
    fn with_every_kind(test: &str, declared: &str, check: impl Fn(&Connection)) {
        for afterwards in [false, true] {
            let file = std::env::temp_dir().join(format!(
                "dpkit-{test}-{}-{}-{afterwards}.sqlite",
                std::process::id(),
                declared.replace(' ', "_")
            ));
            let _ = std::fs::remove_file(&file);
            write_every_kind(&file, declared, afterwards);
            let connection = Connection::open(&file).unwrap();
            check(&connection);
            drop(connection);
            std::fs::remove_file(&file).unwrap();
        }
    }

    /// A table `t (c declared)` holding a value of every kind, declared
    /// `afterwards` (written untyped, then its schema rewritten).
    fn write_every_kind(file: &Path, declared: &str, afterwards: bool) {
        let connection = Connection::open(file).unwrap();
        let values = [
            "NULL",
            "5",
            "-7",
            "9223372036854775807",
            "5.5",
            "-0.0",
            "1e300",
            "'abc'",
            "'12'",
            "' 5.5 '",
            "'-4'",
            "''",
            "x'00ff'",
            "x''",
            "'abcdé'",
            "'a' || char(0) || 'bcdef'",
            "CAST(x'ff6162e9' AS TEXT)",
            "'日本語のテキスト'",
            "123456",
            "-0.5e-7",
        ];
        let typed = if afterwards { "" } else { declared };
        connection
            .execute_batch(&format!(
                "CREATE TABLE t (c {})",
                typed.replace("foo", "NOCASE")
            ))
            .unwrap();
        for value in values {
            connection
                .execute(&format!("INSERT INTO t VALUES ({value})"), [])
                .unwrap();
        }
        if afterwards || declared.contains("foo") {
            connection
                .execute_batch(&format!(
                    "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = \
                     'CREATE TABLE t (c {declared})' WHERE name = 't'"
                ))
                .unwrap();
        }
    }

    /// A text column read cut is `SUBSTR` of its typed read, to the byte,
    /// for every stored value in columns of every affinity (letters of two
    /// and three bytes, bytes that are not UTF-8, numbers, BLOBs), at
    /// lengths below, at and above each value's; and in a STRICT column
    /// read as stored; and in UTF-16 databases, where every letter of ASCII
    /// has a zero byte. A text with a NUL is the exception: `SUBSTR` stops
    /// at it, while the cut keeps such a text whole when it is short
    /// enough, as the embedded engine's cut does, and is NULL otherwise.
    #[test]
    fn a_cut_read_is_substr_of_the_typed_read() {
        for declared in ["TEXT", "REAL", "INTEGER", "NUMERIC", "BLOB", ""] {
            with_every_kind("cut", declared, |connection| {
                let found = column_types(connection, "t", "").unwrap();
                cut_is_substr(connection, None, Some(&found[0].1), declared);
            });
        }
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch(
                "CREATE TABLE t (c TEXT) STRICT; INSERT INTO t VALUES (NULL), (''), ('abc'), \
                 ('abcdé'), ('a' || char(0) || 'bcdef'), (CAST(x'ff6162e9' AS TEXT)), \
                 ('日本語のテキスト'), ('12')",
            )
            .unwrap();
        let text = Some(&DatabaseType::Text);
        cut_is_substr(&connection, text, text, "STRICT TEXT");
        for encoding in ["UTF-16le", "UTF-16be"] {
            let connection = Connection::open_in_memory().unwrap();
            connection
                .execute_batch(&format!(
                    "PRAGMA encoding = '{encoding}'; CREATE TABLE t (c TEXT); \
                     INSERT INTO t VALUES (NULL), (''), ('Oslo'), ('Copenhagen'), ('abcdé'), \
                     ('a' || char(0) || 'bcdef'), ('日本語のテキスト'), ('😀😀😀'), (12), (5.5), \
                     (x'00ff')"
                ))
                .unwrap();
            cut_is_substr(&connection, None, text, encoding);
        }
    }

    fn cut_is_substr(
        connection: &Connection,
        stored: Option<&DatabaseType>,
        declared: Option<&DatabaseType>,
        label: &str,
    ) {
        let read = read_as("c", ColumnKind::Text, stored, declared);
        for length in 1..=12 {
            let cut = cut_as("c", stored, length);
            let nul = "instr(r, char(0)) > 0";
            let differing: i64 = connection
                .query_row(
                    &format!(
                        "SELECT count(*) FROM (SELECT {cut} AS a, CASE WHEN NOT {nul} \
                         THEN SUBSTR(r, 1, {length}) WHEN octet_length(r) <= {length} THEN r END \
                         AS b FROM (SELECT *, {read} AS r FROM t)) \
                         WHERE NOT (typeof(a) = typeof(b) AND CAST(a AS BLOB) IS CAST(b AS BLOB))"
                    ),
                    [],
                    |row| row.get(0),
                )
                .unwrap_or_else(|e| panic!("{label:?} cut at {length} by {cut}: {e}"));
            assert_eq!(differing, 0, "{label:?} cut at {length} by {cut}");
        }
    }

    fn every_kind_reads_by_the_rule(connection: &Connection, declared: &str) {
        let rules = [
            (
                ColumnKind::Text,
                "CASE WHEN typeof(c) IN ('integer', 'real') THEN CAST(c AS TEXT) \
                 WHEN typeof(c) = 'text' THEN c END",
            ),
            (
                ColumnKind::Real,
                "CASE WHEN typeof(c) IN ('integer', 'real') THEN CAST(c AS REAL) END",
            ),
            (
                ColumnKind::Integer,
                "CASE WHEN typeof(c) = 'integer' THEN c END",
            ),
        ];
        let found = column_types(connection, "t", "").unwrap();
        for (kind, rule) in rules {
            let read = read_as("c", kind, None, Some(&found[0].1));
            let differing: i64 = connection
                .query_row(
                    &format!(
                        "SELECT count(*) FROM (SELECT {read} AS a, {rule} AS b FROM t) \
                         WHERE NOT (typeof(a) = typeof(b) AND quote(a) IS quote(b))"
                    ),
                    [],
                    |row| row.get(0),
                )
                .unwrap_or_else(|e| panic!("{declared:?} read as {kind:?} by {read}: {e}"));
            assert_eq!(differing, 0, "{declared:?} read as {kind:?} by {read}");
        }
    }
}
