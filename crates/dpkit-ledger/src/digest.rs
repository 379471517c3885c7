//! A chained digest (SHA-256) over each account's charges and totals, kept
//! beside them, so that a ledger edited outside dpkit is refused instead of
//! charged.
//!
//! Every change to an account's charges is an event in its chain, numbered
//! from 1: a charge (its row's `chained`, `link`) and a refund (the same
//! row's `refund_chained`, `refund_link`). An event's link is the digest of
//! the link before it (the account's genesis for the first) and the event's
//! own fields: for a charge its id, time, query, ε, δ and concentrated
//! form; for a refund the charge's id and link. The account keeps the
//! number of events (`links`) and the last link (`head`), and its `seal`:
//! the digest of its name, its totals, its running sums, `links` and `head`.
//! A refund is an update of a row, so it is an event of its own, appended
//! to the chain, rather than an edit of the charge's link, which every later
//! link depends on.
//!
//! What is checked, and when. Every read of an account's budget and every
//! charge or refund checks the seal (one digest of one row, microseconds),
//! so a total raised or a sum lowered by hand is refused at once, in a
//! process that has run for days as in a new one. Opening an account checks
//! its whole chain: every event numbered 1 to `links` once, every link
//! recomputed from its fields, the last one the head, and a row's status
//! matching whether it has a refund event. A charge row deleted, inserted,
//! edited (its ε, δ, query, time, id or form) or marked refunded is refused
//! then: dpkit query opens its ledger for every query, and dpkit serve when
//! it opens a connection to an account. A charge's fields edited in a file
//! that a running server has open are found when it next opens that account.
//!
//! What is not: the digest has no key, so someone who can write the ledger
//! and computes the digests as dpkit does (its source is public) can
//! rewrite an account whole, consistently, and it verifies. So can one who
//! deletes the file, or an account with every charge of it (it then reads
//! as never granted), or who makes the file look like one of an older
//! layout (the chain's columns dropped, the layout number lowered), which
//! is upgraded as it stands; a layout number lowered alone is refused (see
//! `crate::schema`). Kept answers (`replays`) are not covered.
//!
//! Why no key. A key in a file beside the ledger would not change this:
//! whoever can write the ledger can read a key kept beside it (the same
//! user, the same folder, the same backups), and the analyst who runs
//! `dpkit query` owns both. A key would help where the ledger and the key
//! are apart, a PostgreSQL ledger whose database others administer with the
//! key on dpkit's servers only; that is not built. What the digest does
//! give is that no edit by hand or by a tool that does not know the chain
//! (sqlite3, psql, a script, a partly restored copy) goes unnoticed.

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::sql::{Row, Sql, SqlError, SqlResult, values};

/// How to put a ledger that is not whole back, for every refusal to say.
pub(crate) const RESTORE: &str = "restore the ledger from a backup \
     (a service's state: `dpkit serve restore <backup> --forget-later-changes` with the server \
     stopped; a `dpkit query` ledger: put a copy of the file back with no dpkit running; \
     PostgreSQL: the database's own backup)";

/// Why an account is refused. Never holds a value of the ledger: only
/// which account, and which part failed.
#[derive(Debug, Error, PartialEq)]
pub(crate) enum Damage {
    /// The account's totals or sums are not the ones its seal covers.
    #[error(
        "account '{0}' does not verify (its totals or sums were changed outside dpkit) \
         and is refused: {RESTORE}"
    )]
    Seal(String),
    /// The account's charges are not the ones its chain covers.
    #[error(
        "account '{0}' does not verify (its charges were changed, deleted or added outside \
         dpkit) and is refused: {RESTORE}"
    )]
    Chain(String),
    /// Charges of an account that has no row: it was deleted.
    #[error(
        "account '{0}' was deleted but its charges were not, so it is not granted anew: {RESTORE}"
    )]
    Orphaned(String),
}

/// Feeds typed values into SHA-256, each with a tag and, for text, its
/// length, so that no two sequences of values hash the same bytes.
struct Hasher(Sha256);

impl Hasher {
    fn new(domain: &str) -> Self {
        let mut hasher = Self(Sha256::new());
        hasher.text(domain);
        hasher
    }

    fn text(&mut self, value: &str) -> &mut Self {
        self.0.update([b't']);
        self.0.update((value.len() as u64).to_le_bytes());
        self.0.update(value.as_bytes());
        self
    }

    fn integer(&mut self, value: i64) -> &mut Self {
        self.0.update([b'i']);
        self.0.update(value.to_le_bytes());
        self
    }

    fn real(&mut self, value: f64) -> &mut Self {
        // A store may keep -0 as 0 (SQLite writes a whole REAL as an
        // integer): the sign of a zero is no part of the ledger.
        let value = if value == 0.0 { 0.0 } else { value };
        self.0.update([b'r']);
        self.0.update(value.to_bits().to_le_bytes());
        self
    }

    fn optional_real(&mut self, value: Option<f64>) -> &mut Self {
        match value {
            Some(value) => self.real(value),
            None => self.null(),
        }
    }

    fn optional_integer(&mut self, value: Option<i64>) -> &mut Self {
        match value {
            Some(value) => self.integer(value),
            None => self.null(),
        }
    }

    fn null(&mut self) -> &mut Self {
        self.0.update([b'n']);
        self
    }

    fn hex(&mut self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let digest = std::mem::take(&mut self.0).finalize();
        let mut hex = String::with_capacity(2 * digest.len());
        for byte in digest {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }
}

/// The link before an account's first event.
pub(crate) fn genesis(account: &str) -> String {
    Hasher::new("dpkit ledger genesis 1").text(account).hex()
}

/// A charge's fields, as its row keeps them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Charged {
    pub id: i64,
    pub at: String,
    pub query: String,
    pub units: i64,
    pub delta: f64,
    pub rho: Option<f64>,
    pub spread: Option<f64>,
    pub tail: Option<f64>,
    pub layout: Option<i64>,
    pub keys: Option<f64>,
}

/// The link of `account`'s event `number`, the charge `charged`, after `prev`.
pub(crate) fn charge_link(prev: &str, account: &str, number: i64, charged: &Charged) -> String {
    Hasher::new("dpkit ledger charge 1")
        .text(prev)
        .text(account)
        .integer(number)
        .integer(charged.id)
        .text(&charged.at)
        .text(&charged.query)
        .integer(charged.units)
        .real(charged.delta)
        .optional_real(charged.rho)
        .optional_real(charged.spread)
        .optional_real(charged.tail)
        .optional_integer(charged.layout)
        .optional_real(charged.keys)
        .hex()
}

/// The link of `account`'s event `number`, the refund of the charge `id`
/// whose link is `charge`, after `prev`.
pub(crate) fn refund_link(prev: &str, account: &str, number: i64, id: i64, charge: &str) -> String {
    Hasher::new("dpkit ledger refund 1")
        .text(prev)
        .text(account)
        .integer(number)
        .integer(id)
        .text(charge)
        .hex()
}

/// The columns of an account's row that its seal covers, then the seal:
/// what every statement that reads or changes an account selects or
/// returns, in this order.
pub(crate) const ACCOUNT: &str = "epsilon_units, delta, spent_units, spent_delta, queries,
     accounting, spent_rho, spent_spread, spent_tail, formless, concentrated_terms, thresholds,
     spent_keys, links, head, seal";

/// Where the chain's columns are in a row of [`ACCOUNT`].
const LINKS: usize = 13;
const HEAD: usize = 14;
const SEAL: usize = 15;

/// The chain's state of an account, from its row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Head {
    /// Events so far.
    pub links: i64,
    /// The last event's link (the genesis before the first).
    pub head: String,
}

/// The seal of `account`'s row (of [`ACCOUNT`]): every column before it.
fn seal_of(account: &str, row: &Row) -> SqlResult<String> {
    let mut hasher = Hasher::new("dpkit ledger seal 1");
    hasher
        .text(account)
        .integer(row.integer(0)?)
        .real(row.real(1)?)
        .integer(row.integer(2)?)
        .real(row.real(3)?)
        .integer(row.integer(4)?)
        .text(&row.text(5)?);
    for real in 6..=8 {
        hasher.real(row.real(real)?);
    }
    for integer in 9..=11 {
        hasher.integer(row.integer(integer)?);
    }
    Ok(hasher
        .real(row.real(12)?)
        .integer(row.integer(LINKS)?)
        .text(&row.text(HEAD)?)
        .hex())
}

/// The chain's state of `account`'s row (of [`ACCOUNT`]), if its seal
/// verifies; else [`Damage::Seal`], as an error of the store.
pub(crate) fn verified(account: &str, row: &Row) -> SqlResult<Head> {
    let damaged = || SqlError(Damage::Seal(account.to_string()).to_string());
    let sealed = row.optional_text(SEAL)?.ok_or_else(damaged)?;
    let head = row.optional_text(HEAD)?.ok_or_else(damaged)?;
    if seal_of(account, row).ok() != Some(sealed) {
        return Err(damaged());
    }
    Ok(Head {
        links: row.integer(LINKS)?,
        head,
    })
}

/// Seals `account`'s row after a change: the statement `update` (which
/// must set `seal = NULL` and end `RETURNING` [`ACCOUNT`]) with `params`,
/// then its seal written.
pub(crate) fn reseal(
    sql: &dyn Sql,
    account: &str,
    update: &str,
    params: &[crate::sql::Value],
) -> SqlResult<()> {
    let row = sql
        .first(update, params)?
        .ok_or_else(|| SqlError(format!("no account '{account}' to seal")))?;
    sql.run(
        "UPDATE accounts SET seal = ?2 WHERE account = ?1",
        values![account, seal_of(account, &row)?],
    )
    .map(drop)
}

/// An account's row (of [`ACCOUNT`], its charge's columns NULL) and each
/// of its charges with its events (their account's columns NULL): one
/// statement, so one snapshot, in either store. Not a join, which would
/// send the account's columns again with every charge (an open of 10,000
/// charges took 65 ms so in PostgreSQL, and 52 ms as one; in SQLite 20-36
/// ms and 18).
const CHAIN: &str = "SELECT epsilon_units, delta, spent_units, spent_delta, queries, accounting,
         spent_rho, spent_spread, spent_tail, formless, concentrated_terms, thresholds,
         spent_keys, links, head, seal,
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
     FROM accounts WHERE account = ?1
     UNION ALL
     SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL, NULL,
         id, at, query, epsilon_units, delta, rho, spread, tail, layout, keys, status, chained,
         link, refund_chained, refund_link
     FROM spends WHERE account = ?1";

/// Where a charge's columns begin in a row of [`CHAIN`].
const CHARGE: usize = 16;

/// One event of a chain, with the link stored for it.
enum Event {
    Charge(Charged, String),
    Refund {
        id: i64,
        charge: String,
        link: String,
    },
}

/// Verifies `account`'s seal and whole chain (see the module's text);
/// `false` if the account has no row. A damaged account is
/// [`Damage::Seal`] or [`Damage::Chain`], as an error of the store.
pub(crate) fn verify(sql: &dyn Sql, account: &str) -> SqlResult<bool> {
    let rows = sql.rows(CHAIN, values![account])?;
    let damaged = || SqlError(Damage::Chain(account.to_string()).to_string());
    let (mut found, mut events) = (None, Vec::new());
    for row in &rows {
        match row.optional_integer(CHARGE)? {
            None => found = Some(row),
            Some(_) => events.extend(events_of(row).map_err(|_| damaged())?),
        }
    }
    let Some(found) = found else {
        return Ok(false);
    };
    let head = verified(account, found)?;
    events.sort_by_key(|(number, _)| *number);
    let numbered = events
        .iter()
        .enumerate()
        .all(|(i, (number, _))| *number == i as i64 + 1);
    if !numbered || events.len() as i64 != head.links {
        return Err(damaged());
    }
    let mut prev = genesis(account);
    for (number, event) in &events {
        let (expected, stored) = match event {
            Event::Charge(charged, link) => (charge_link(&prev, account, *number, charged), link),
            Event::Refund { id, charge, link } => {
                (refund_link(&prev, account, *number, *id, charge), link)
            }
        };
        if &expected != stored {
            return Err(damaged());
        }
        prev = expected;
    }
    if prev != head.head {
        return Err(damaged());
    }
    Ok(true)
}

/// A charge's row of [`CHAIN`]: its charge, and its refund if it was
/// refunded, each with its number. An error if its events are not whole.
fn events_of(row: &Row) -> SqlResult<Vec<(i64, Event)>> {
    let at = |i: usize| CHARGE + i;
    let charged = charged_at(row, CHARGE)?;
    let link = row.text(at(12))?;
    let refund = (row.optional_integer(at(13))?, row.optional_text(at(14))?);
    let refund = match (row.text(at(10))?.as_str(), refund) {
        ("charged", (None, None)) => None,
        ("refunded", (Some(number), Some(refund))) => Some((number, refund)),
        _ => return Err(SqlError("a charge's status and its refund disagree".into())),
    };
    let id = charged.id;
    let mut events = vec![(row.integer(at(11))?, Event::Charge(charged, link.clone()))];
    if let Some((number, refund)) = refund {
        events.push((
            number,
            Event::Refund {
                id,
                charge: link,
                link: refund,
            },
        ));
    }
    Ok(events)
}

/// Fails with [`Damage::Orphaned`] if `account`, which has no row, has
/// charges: it was deleted, and must not be granted anew over them.
pub(crate) fn no_orphans(sql: &dyn Sql, account: &str) -> SqlResult<()> {
    let orphans = sql
        .first(
            "SELECT COUNT(*) FROM spends WHERE account = ?1",
            values![account],
        )?
        .map_or(Ok(0), |row| row.integer(0))?;
    if orphans > 0 {
        return Err(SqlError(Damage::Orphaned(account.to_string()).to_string()));
    }
    Ok(())
}

/// Computes every account's chain over the charges it holds, once, when a
/// ledger of an older layout is upgraded: its charges in the order of their
/// ids, then its refunds in the same order (the order they happened in was
/// not kept), and seals it. What is there is taken as it stands.
pub(crate) fn chain_existing(sql: &dyn Sql) -> SqlResult<()> {
    let accounts = sql.rows("SELECT account FROM accounts ORDER BY account", &[])?;
    for account in accounts {
        chain_account(sql, &account.text(0)?)?;
    }
    Ok(())
}

fn chain_account(sql: &dyn Sql, account: &str) -> SqlResult<()> {
    let rows = sql.rows(
        "SELECT id, at, query, epsilon_units, delta, rho, spread, tail, layout, keys, status
         FROM spends WHERE account = ?1 ORDER BY id",
        values![account],
    )?;
    let mut prev = genesis(account);
    let mut number = 0;
    let mut refunded = Vec::new();
    for row in &rows {
        let charged = charged_at(row, 0)?;
        number += 1;
        prev = charge_link(&prev, account, number, &charged);
        sql.run(
            "UPDATE spends SET chained = ?2, link = ?3, refund_chained = NULL, refund_link = NULL
             WHERE id = ?1",
            values![charged.id, number, &prev],
        )?;
        if row.text(10)? == "refunded" {
            refunded.push((charged.id, prev.clone()));
        }
    }
    for (id, charge) in refunded {
        number += 1;
        prev = refund_link(&prev, account, number, id, &charge);
        sql.run(
            "UPDATE spends SET refund_chained = ?2, refund_link = ?3 WHERE id = ?1",
            values![id, number, &prev],
        )?;
    }
    reseal(
        sql,
        account,
        &format!(
            "UPDATE accounts SET links = ?2, head = ?3, seal = NULL WHERE account = ?1
             RETURNING {ACCOUNT}"
        ),
        values![account, number, &prev],
    )
}

/// A charge's fields from a row whose ten columns from `first` on are
/// `id, at, query, epsilon_units, delta, rho, spread, tail, layout, keys`.
pub(crate) fn charged_at(row: &Row, first: usize) -> SqlResult<Charged> {
    Ok(Charged {
        id: row.integer(first)?,
        at: row.text(first + 1)?,
        query: row.text(first + 2)?,
        units: row.integer(first + 3)?,
        delta: row.real(first + 4)?,
        rho: row.optional_real(first + 5)?,
        spread: row.optional_real(first + 6)?,
        tail: row.optional_real(first + 7)?,
        layout: row.optional_integer(first + 8)?,
        keys: row.optional_real(first + 9)?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use rusqlite::Connection;

    use crate::tests::{pure, temporary};
    use crate::{Charge, Ledger, LedgerError, Once, Restore};

    /// A ledger of account "" with a total of 1, 20 charges of 0.01 of
    /// which two are refunded, and a kept answer.
    fn charged(name: &str) -> (PathBuf, Vec<Charge>) {
        let path = temporary(name);
        let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
        let charges: Vec<Charge> = (0..20)
            .map(|i| ledger.charge(pure(0.01), &format!("SELECT {i}")).unwrap())
            .collect();
        ledger.refund(charges[3]).unwrap();
        ledger.refund(charges[15]).unwrap();
        let Once::Charged(kept) = ledger.charge_once(pure(0.01), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        ledger.keep_answer(kept, "the answer").unwrap();
        (path, charges)
    }

    /// Runs `sql` on the file, as someone with sqlite3 would (which does
    /// not enforce foreign keys unless asked).
    fn by_hand(path: &Path, sql: &str) -> rusqlite::Result<()> {
        Connection::open(path)?.execute_batch(&format!("PRAGMA foreign_keys = OFF; {sql}"))
    }

    /// Runs `sql` past the file's guard on accounts, put back after.
    fn past_the_guard(path: &Path, sql: &str) {
        by_hand(
            path,
            &format!(
                "DROP TRIGGER accounts_sealed; {sql};
                 CREATE TRIGGER accounts_sealed BEFORE UPDATE ON accounts
                 WHEN NEW.seal IS OLD.seal BEGIN SELECT RAISE(ABORT, 'sealed'); END;"
            ),
        )
        .unwrap();
    }

    /// `outcome` is the refusal of a ledger that is not whole: one line
    /// that names the file, says `what`, and how to restore it, with no
    /// value of the ledger in it.
    fn refused<T>(outcome: crate::Result<T>, path: &Path, what: &str) {
        let Err(LedgerError::Storage {
            path: named,
            reason,
        }) = outcome
        else {
            panic!("{what}: not refused");
        };
        assert_eq!(named, path.display().to_string());
        assert!(reason.contains(what), "{reason}");
        assert!(
            reason.contains("restore the ledger from a backup"),
            "{reason}"
        );
        assert!(!reason.contains('\n'), "{reason}");
        for value in ["0.01", "SELECT", "answer", "1000"] {
            assert!(!reason.contains(value), "{reason}");
        }
    }

    /// Removes the file and its write-ahead log.
    fn remove(path: &Path) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn a_ledger_missing_a_table_or_column_or_of_an_unknown_layout_is_refused_not_made_anew() {
        for (tamper, what) in [
            ("DROP TABLE spends", "table spends is missing"),
            ("DROP TABLE accounts", "table accounts is missing"),
            ("DROP TABLE replays", "table replays is missing"),
            ("ALTER TABLE spends DROP COLUMN link", "column spends.link"),
            ("DROP TRIGGER accounts_sealed", "trigger accounts_sealed"),
            ("PRAGMA user_version = 9", "has layout 9"),
            ("PRAGMA user_version = 3", "layout number was changed"),
            ("PRAGMA user_version = 0", "layout number was changed"),
        ] {
            let (path, _) = charged("not-whole");
            by_hand(&path, tamper).unwrap();
            refused(Ledger::open(&path, 1.0, 0.0), &path, what);
            refused(Ledger::open_account(&path, ""), &path, what);
            refused(Ledger::account_state(&path, ""), &path, what);
            // Nothing was made anew: the file is as it was left.
            if let Some(table) = tamper.strip_prefix("DROP TABLE ") {
                let made: i64 = Connection::open(&path)
                    .unwrap()
                    .query_row(
                        "SELECT COUNT(*) FROM sqlite_master WHERE name = ?1",
                        [table],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(made, 0, "{table} was made anew");
            }
            remove(&path);
        }
        // A new, empty file is still made.
        let path = temporary("new-file");
        std::fs::File::create(&path).unwrap();
        assert_eq!(
            Ledger::open(&path, 1.0, 0.0)
                .unwrap()
                .state()
                .unwrap()
                .total_epsilon,
            1.0
        );
        remove(&path);
    }

    #[test]
    fn a_total_raised_or_a_sum_lowered_in_the_file_is_refused() {
        let (path, _) = charged("raised");
        let running = Ledger::open(&path, 1.0, 0.0).unwrap();
        // The file itself refuses an account changed without its seal.
        let plain = by_hand(
            &path,
            "UPDATE accounts SET epsilon_units = 100000000000000000",
        );
        assert!(plain.unwrap_err().to_string().contains("newer dpkit"));
        for tamper in [
            "UPDATE accounts SET epsilon_units = 100000000000000000",
            "UPDATE accounts SET spent_units = 0",
            "UPDATE accounts SET delta = 0.5",
        ] {
            let copy = temporary("raised-copy");
            std::fs::copy(&path, &copy).unwrap();
            past_the_guard(&copy, tamper);
            let what = "totals or sums were changed outside dpkit";
            refused(Ledger::open_declared(&copy, 1.0, 0.0, false), &copy, what);
            refused(Ledger::open_account(&copy, ""), &copy, what);
            // Nor is it sealed again by a grant.
            refused(Ledger::grant(&copy, "", 1.0, 0.0), &copy, what);
            remove(&copy);
        }
        // A ledger open while the file is edited refuses its next charge.
        past_the_guard(
            &path,
            "UPDATE accounts SET epsilon_units = 100000000000000000",
        );
        let what = "totals or sums";
        refused(running.charge(pure(0.01), "q"), &path, what);
        refused(running.state(), &path, what);
        refused(running.how_many_more(pure(0.01)), &path, what);
        remove(&path);
    }

    #[test]
    fn a_charge_deleted_edited_added_or_marked_refunded_is_refused() {
        let (path, charges) = charged("charges");
        let id = |i: usize| charges[i].0;
        for tamper in [
            format!("DELETE FROM spends WHERE id = {}", id(5)),
            format!("DELETE FROM spends WHERE id = {}", id(19) + 1),
            format!("UPDATE spends SET epsilon_units = 1 WHERE id = {}", id(5)),
            format!("UPDATE spends SET delta = 0.5 WHERE id = {}", id(5)),
            format!("UPDATE spends SET query = 'x' WHERE id = {}", id(5)),
            format!("UPDATE spends SET status = 'refunded' WHERE id = {}", id(6)),
            format!("UPDATE spends SET status = 'charged' WHERE id = {}", id(3)),
            format!("UPDATE spends SET id = 1000 WHERE id = {}", id(7)),
            "INSERT INTO spends (account, query, epsilon_units, delta, status, layout)
             VALUES ('', 'q', 1, 0.0, 'charged', 4)"
                .to_string(),
        ] {
            let copy = temporary("charges-copy");
            std::fs::copy(&path, &copy).unwrap();
            by_hand(&copy, &tamper).unwrap();
            let what = "charges were changed, deleted or added outside dpkit";
            refused(Ledger::open(&copy, 1.0, 0.0), &copy, what);
            refused(Ledger::account_state(&copy, ""), &copy, what);
            remove(&copy);
        }
        // The account's row deleted: not granted anew over its charges.
        past_the_guard(&path, "DELETE FROM accounts");
        refused(Ledger::open(&path, 1.0, 0.0), &path, "was deleted");
        refused(Ledger::grant(&path, "", 1.0, 0.0), &path, "was deleted");
        remove(&path);
    }

    #[test]
    fn refunds_kept_answers_and_a_restored_backup_verify() {
        let (path, charges) = charged("refunds");
        let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
        ledger.refund(charges[0]).unwrap();
        ledger.refund(charges[0]).unwrap();
        let state = ledger.state().unwrap();
        assert_eq!((state.queries, state.spent_epsilon), (18, 0.18));
        drop(ledger);
        let folder = temporary("refunds-folder");
        std::fs::create_dir_all(&folder).unwrap();
        let copy = folder.join("copy.sqlite");
        Ledger::backup(&path, &copy).unwrap();
        let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
        ledger.charge(pure(0.01), "after the backup").unwrap();
        drop(ledger);
        // Edited in place: no backup of it is made, and it is put back only
        // when what it did since is forgotten.
        by_hand(&path, "DROP TABLE replays; DROP TABLE spends").unwrap();
        assert!(Ledger::backup(&path, &folder.join("of-edited.sqlite")).is_err());
        let kept = Ledger::restore(&copy, &path, Restore::KeepLaterChanges);
        assert!(kept.unwrap_err().to_string().contains("cannot be read"));
        Ledger::restore(&copy, &path, Restore::ForgetLaterChanges).unwrap();
        let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
        assert_eq!(ledger.state().unwrap().queries, 18);
        assert_eq!(
            ledger.charge_once(pure(0.01), "q", "r").unwrap(),
            Once::Answered("the answer".into())
        );
        ledger.charge(pure(0.01), "after the restore").unwrap();
        drop(ledger);
        // Edited in a way that still reads: a restore without forgetting
        // is refused, since what it says it did cannot be trusted.
        let second = folder.join("second.sqlite");
        Ledger::backup(&path, &second).unwrap();
        past_the_guard(&path, "UPDATE accounts SET spent_units = 0");
        let kept = Ledger::restore(&second, &path, Restore::KeepLaterChanges);
        assert!(kept.unwrap_err().to_string().contains("does not verify"));
        Ledger::restore(&second, &path, Restore::ForgetLaterChanges).unwrap();
        assert!(Ledger::open(&path, 1.0, 0.0).is_ok());
        std::fs::remove_dir_all(&folder).unwrap();
        remove(&path);
    }

    #[test]
    fn charges_and_refunds_racing_from_connections_and_a_writer_leave_a_chain_that_verifies() {
        let path = temporary("racing-chain");
        Ledger::grant(&path, "ann/adult", 100.0, 0.0).unwrap();
        let writer = crate::GroupCommit::open(&path).unwrap();
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let ledger = match i % 2 {
                    0 => Ledger::open_account(&path, "ann/adult").unwrap(),
                    _ => writer.open_account("ann/adult").unwrap(),
                };
                std::thread::spawn(move || {
                    for j in 0..30 {
                        let charge = ledger.charge(pure(0.01), &format!("{i} {j}")).unwrap();
                        if j % 3 == 0 {
                            ledger.refund(charge).unwrap();
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Opened anew, the account's whole chain is verified.
        let state = Ledger::account_state(&path, "ann/adult").unwrap().unwrap();
        assert_eq!(state.queries, 6 * 20);
        // A ledger of the writer's refuses its next charge once the file is edited.
        let ledger = writer.open_account("ann/adult").unwrap();
        past_the_guard(&path, "UPDATE accounts SET spent_units = 0");
        refused(ledger.charge(pure(0.01), "q"), &path, "totals or sums");
        drop((ledger, writer));
        remove(&path);
    }

    /// The ledger at `path` moved back to layout 3: no chain, its guard.
    fn to_layout_three(path: &Path) {
        by_hand(
            path,
            "DROP TRIGGER accounts_sealed;
             DROP INDEX spends_by_account;
             ALTER TABLE accounts DROP COLUMN links;
             ALTER TABLE accounts DROP COLUMN head;
             ALTER TABLE accounts DROP COLUMN seal;
             ALTER TABLE spends DROP COLUMN chained;
             ALTER TABLE spends DROP COLUMN link;
             ALTER TABLE spends DROP COLUMN refund_chained;
             ALTER TABLE spends DROP COLUMN refund_link;
             DROP TRIGGER charges_of_this_layout;
             CREATE TRIGGER charges_of_this_layout
             BEFORE INSERT ON spends WHEN NEW.layout IS NULL OR NEW.layout < 3
             BEGIN SELECT RAISE(ABORT, 'a newer dpkit keeps this ledger'); END;
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }

    #[test]
    fn a_ledger_of_layout_three_is_upgraded_once_and_verified_after() {
        let (path, _) = charged("upgraded");
        let before = Ledger::open(&path, 1.0, 0.0).unwrap().state().unwrap();
        to_layout_three(&path);
        // An older dpkit charges it meanwhile, and refunds a charge.
        by_hand(
            &path,
            "INSERT INTO spends (account, query, epsilon_units, delta, status, layout, keys)
             VALUES ('', 'older', 10000000000000, 0.0, 'refunded', 3, NULL)",
        )
        .unwrap();
        let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
        assert_eq!(ledger.state().unwrap(), before);
        // The layout, and the account's count of events.
        let head = |path: &Path| -> (i64, i64) {
            let connection = Connection::open(path).unwrap();
            let layout = connection.query_row("PRAGMA user_version", [], |r| r.get(0));
            let links = connection.query_row("SELECT links FROM accounts", [], |r| r.get(0));
            (layout.unwrap(), links.unwrap())
        };
        // 22 charges and 3 refunds.
        assert_eq!(head(&path), (4, 25));
        ledger.charge(pure(0.01), "after").unwrap();
        drop(ledger);
        assert!(Ledger::open(&path, 1.0, 0.0).is_ok());
        assert_eq!(head(&path).1, 26, "upgraded once: its chain goes on");
        // Once upgraded, an edit is refused, not upgraded over.
        by_hand(
            &path,
            "UPDATE spends SET epsilon_units = 1 WHERE query = 'older'",
        )
        .unwrap();
        refused(Ledger::open(&path, 1.0, 0.0), &path, "charges were changed");
        remove(&path);
    }
}
