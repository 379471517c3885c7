//! The budget ledger: accounts (one per dataset and analyst) in a SQLite
//! file or, with the `postgres` feature, a PostgreSQL database that
//! processes on several machines share (see [`Store`]). A query's cost is
//! committed to disk before any answer is computed, and refunded if the
//! query then fails for a reason outside the data. An answer kept for
//! replay is committed before it is released.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

use dpkit_core::accounting::{ConcentratedLoss, Cost, Filter, PrivacyLoss};
use sql::{Row, Sql, SqlError, values};

pub use analysts::{AnalystRow, Analysts};
pub use backup::{Backup, Restore};
pub use error::{LedgerError, Result};
pub use group::GroupCommit;
pub use store::Store;
#[cfg(feature = "postgres")]
pub use turns::{RequestTurns, Turn};

mod analysts;
mod backup;
mod cached;
mod digest;
mod error;
pub mod group;
#[cfg(feature = "postgres")]
mod postgres;
mod replay;
mod schema;
mod sql;
mod store;
/// The tests' PostgreSQL servers: dpkit-query's test helper, shared.
#[cfg(all(test, feature = "postgres"))]
#[path = "../../dpkit-query/tests/support/postgres.rs"]
mod test_server;
#[cfg(feature = "postgres")]
mod turns;

/// The largest ε a ledger counts, as a total budget or as one query's cost.
///
/// ε is stored in integer units of 10⁻¹⁵ in SQLite's 64-bit integers, whose
/// ceiling is ε ≈ 9,223. A thousand is far beyond any meaningful guarantee
/// (a loss of e¹⁰⁰⁰ bounds nothing) and far below that ceiling, so a total
/// and one more charge always fit; the arithmetic on units is checked all the
/// same, so a damaged ledger file gives an error, never a panic or a wrap.
pub const MAX_EPSILON: f64 = 1000.0;

/// ε is stored in integer units of 10⁻¹⁵, so sums of decimal costs are exact.
const UNITS_PER_EPSILON: f64 = 1e15;
/// δ sums may round: a spend of exactly the rest is allowed this much
/// above it, relative to the total (none at all for a total of 0).
const DELTA_SLACK: f64 = 1e-12;

/// `epsilon` in ledger units, if it is finite, > 0 and at most [`MAX_EPSILON`];
/// `what` names it in the refusal. A charge is rounded to the nearest unit,
/// so that decimal costs add up as typed, but never below what dpkit's
/// mechanisms realise (at most ε·(1 − 10⁻⁶) of their declared ε), and so
/// never to 0: a cost below half a unit would otherwise be free.
fn to_units(what: &str, epsilon: f64) -> Result<i64> {
    if epsilon.is_finite() && epsilon > 0.0 && epsilon <= MAX_EPSILON {
        // At most 1e18: the casts are exact and cannot saturate.
        let nearest = (epsilon * UNITS_PER_EPSILON).round() as i64;
        let realised = (epsilon * (1.0 - 1e-6) * UNITS_PER_EPSILON).ceil() as i64;
        return Ok(nearest.max(realised).max(1));
    }
    Err(LedgerError::Budget(format!(
        "{what} ε must be finite, > 0 and at most {MAX_EPSILON}, got {epsilon}"
    )))
}

fn from_units(units: i64) -> f64 {
    units as f64 / UNITS_PER_EPSILON
}

/// Spent and remaining budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetState {
    /// The total granted.
    pub total_epsilon: f64,
    /// The total δ granted.
    pub total_delta: f64,
    /// Spent by committed queries.
    pub spent_epsilon: f64,
    /// δ spent by committed queries.
    pub spent_delta: f64,
    /// The δ plain sums of (ε, δ) may spend: all of `total_delta`, or half
    /// of it where the other half backs the concentrated accountant.
    pub plain_delta: f64,
    /// Queries charged and not refunded.
    pub queries: u64,
    /// What the concentrated accountant has spent, if it keeps this budget
    /// and no charge without a concentrated form has closed it.
    pub concentrated: Option<Concentrated>,
}

/// The concentrated accountant's side of a budget (see
/// `dpkit_core::accounting::Filter`). Its JSON is what `dpkit query
/// --format json`, Python and `dpkit serve` give as `concentrated`.
///
/// ```
/// use dpkit_ledger::Concentrated;
/// let c = Concentrated {
///     spent_rho: 0.005, total_rho: 0.02285, spent_epsilon: 0.1 + 0.2, delta: 5e-7,
///     spent_threshold_delta: 0.0, threshold_delta: 1.25e-7,
/// };
/// let json = serde_json::to_value(c).unwrap();
/// assert_eq!((json["spent_epsilon"].as_f64(), json["threshold_delta"].as_f64()), (Some(0.3), Some(1.25e-7)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Concentrated {
    /// ρ spent by charges not refunded.
    pub spent_rho: f64,
    /// ρ it allows in all.
    pub total_rho: f64,
    /// The ε its spending converts to, at the δ it keeps (in JSON as
    /// [`shown_epsilon`] shows it).
    #[serde(serialize_with = "serialize_shown_epsilon")]
    pub spent_epsilon: f64,
    /// The δ it keeps: half the budget's.
    pub delta: f64,
    /// Of that δ, what thresholds have spent (their `keys`).
    pub spent_threshold_delta: f64,
    /// Of that δ, what it keeps for thresholds (0 on accounts granted
    /// before it kept any: a threshold closes their accountant).
    pub threshold_delta: f64,
}

impl Concentrated {
    /// What it has left, for people.
    ///
    /// ```
    /// use dpkit_ledger::Concentrated;
    /// let c = Concentrated {
    ///     spent_rho: 0.5, total_rho: 1.664, spent_epsilon: 2.9, delta: 5e-7,
    ///     spent_threshold_delta: 0.0, threshold_delta: 0.0,
    /// };
    /// assert_eq!(c.left_text(), "ρ = 1.164 of 1.664 by zCDP");
    /// ```
    pub fn left_text(&self) -> String {
        format!(
            "ρ = {} of {} by zCDP",
            significant((self.total_rho - self.spent_rho).max(0.0)),
            significant(self.total_rho)
        )
    }

    /// What it has spent, for people: ρ, the ε that is at its δ, and the δ
    /// of thresholds once one has spent some.
    ///
    /// ```
    /// use dpkit_ledger::Concentrated;
    /// let mut c = Concentrated {
    ///     spent_rho: 0.005, total_rho: 0.02285, spent_epsilon: 0.43219, delta: 5e-7,
    ///     spent_threshold_delta: 0.0, threshold_delta: 1.25e-7,
    /// };
    /// assert_eq!(c.text(), "ρ = 0.005 of 0.02285 (ε = 0.4322 at δ = 5e-7)");
    /// c.spent_threshold_delta = 2e-8;
    /// assert_eq!(c.text(), "ρ = 0.005 of 0.02285 (ε = 0.4322 at δ = 5e-7); thresholds δ = 2e-8 of 1.25e-7");
    /// ```
    pub fn text(&self) -> String {
        let thresholds = match self.spent_threshold_delta {
            0.0 => String::new(),
            spent => format!(
                "; thresholds δ = {} of {}",
                four_digits_delta(spent),
                four_digits_delta(self.threshold_delta)
            ),
        };
        format!(
            "ρ = {} of {} (ε = {} at δ = {}){thresholds}",
            significant(self.spent_rho),
            significant(self.total_rho),
            significant(self.spent_epsilon),
            shown_delta(self.delta)
        )
    }
}

/// `value` to 4 significant digits: plainly from 10⁻⁴ to 10⁶, in exponent
/// notation beyond, and 0 below 10⁻⁹ (the conversion's own rounding).
fn significant(value: f64) -> String {
    if value.abs() < 1e-9 {
        return "0".into();
    }
    if !(1e-4..1e6).contains(&value.abs()) {
        return format!("{value:.3e}");
    }
    let digits = 3 - value.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits.max(0));
    format!("{}", (value * scale).round() / scale)
}

/// ε as shown to people: rounded to 12 decimals, so that sums of exact
/// ledger units print as typed (0.75, not 0.7500000000000001).
///
/// ```
/// assert_eq!(dpkit_ledger::shown_epsilon(0.1 + 0.2), 0.3);
/// ```
pub fn shown_epsilon(value: f64) -> f64 {
    (value * 1e12).round() / 1e12
}

fn serialize_shown_epsilon<S: serde::Serializer>(
    value: &f64,
    to: S,
) -> std::result::Result<S::Ok, S::Error> {
    to.serialize_f64(shown_epsilon(*value))
}

/// δ to four significant digits, as [`shown_delta`] shows it.
fn four_digits_delta(value: f64) -> String {
    shown_delta(format!("{value:.3e}").parse().unwrap_or(value))
}

/// δ as shown to people: `0`, or in exponent notation, exactly.
///
/// ```
/// assert_eq!(dpkit_ledger::shown_delta(1e-5), "1e-5");
/// assert_eq!(dpkit_ledger::shown_delta(0.0), "0");
/// ```
pub fn shown_delta(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else {
        format!("{value:e}")
    }
}

impl BudgetState {
    /// What is left.
    pub fn remaining_epsilon(&self) -> f64 {
        (self.total_epsilon - self.spent_epsilon).max(0.0)
    }

    /// δ left to plain sums: what a query's δ may still be.
    ///
    /// ```
    /// use dpkit_ledger::Ledger;
    /// let path = std::env::temp_dir().join(format!("doc-delta-{}.sqlite", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let state = Ledger::open(&path, 1.0, 1e-6).unwrap().state().unwrap();
    /// // Half of δ backs the concentrated accountant.
    /// assert_eq!((state.plain_delta, state.remaining_delta()), (5e-7, 5e-7));
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn remaining_delta(&self) -> f64 {
        (self.plain_delta - self.spent_delta).max(0.0)
    }

    /// What plain sums have left of ε, for people: "9 of 10".
    pub fn plain_left_text(&self) -> String {
        format!(
            "{} of {}",
            shown_epsilon(self.remaining_epsilon()),
            shown_epsilon(self.total_epsilon)
        )
    }

    /// That plain sums have no ε left, for people: "plain sums' ε = 10 is
    /// used up".
    pub fn used_up_text(&self) -> String {
        format!(
            "plain sums' ε = {} is used up",
            shown_epsilon(self.total_epsilon)
        )
    }

    /// Whether plain sums of (ε, δ) have passed their share of the budget
    /// (all of ε, and the δ the concentrated accountant does not keep), so
    /// that the concentrated accountant pays for the queries now: what to
    /// tell people beside the plain sums.
    pub fn past_plain_sums(&self) -> bool {
        self.concentrated.is_some_and(|c| {
            self.spent_epsilon > self.total_epsilon || self.spent_delta > self.total_delta - c.delta
        })
    }

    /// Whether the total granted is (`total_epsilon`, `total_delta`), with ε
    /// compared in the ledger's units: a description whose `[budget]` was
    /// edited after its ledger was created no longer matches.
    ///
    /// ```
    /// use dpkit_ledger::Ledger;
    /// let path = std::env::temp_dir().join(format!("doc-total-{}.sqlite", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let state = Ledger::open(&path, 0.1 + 0.2, 1e-6).unwrap().state().unwrap();
    /// assert!(state.has_total(0.3, 1e-6));
    /// assert!(!state.has_total(5.0, 1e-6) && !state.has_total(0.3, 1e-5));
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn has_total(&self, total_epsilon: f64, total_delta: f64) -> bool {
        to_units("the total", total_epsilon)
            .is_ok_and(|units| from_units(units) == self.total_epsilon)
            && total_delta == self.total_delta
    }

    /// When the total granted is not (`total_epsilon`, `total_delta`), the
    /// description's, what to tell the person who edited it: both totals,
    /// each printed as precisely as it is compared. The caller names the
    /// description before it and how to apply the new total after it.
    ///
    /// ```
    /// # use dpkit_ledger::Ledger;
    /// # let path = std::env::temp_dir().join(format!("doc-edited-{}.sqlite", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let state = Ledger::open(&path, 1.0, 1e-5).unwrap().state().unwrap();
    /// assert_eq!(state.edited_total(1.0, 1e-5), None);
    /// assert_eq!(
    ///     state.edited_total(5.0, 0.0).unwrap(),
    ///     "declares a total of ε = 5, δ = 0, but its ledger keeps the total it was created with (ε = 1, δ = 1e-5)"
    /// );
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn edited_total(&self, total_epsilon: f64, total_delta: f64) -> Option<String> {
        (!self.has_total(total_epsilon, total_delta)).then(|| {
            format!(
                "declares a total of ε = {total_epsilon}, δ = {}, but its ledger keeps the total \
                 it was created with (ε = {}, δ = {})",
                shown_delta(total_delta),
                self.total_epsilon,
                shown_delta(self.total_delta)
            )
        })
    }
}

/// A budget ledger: a SQLite file of accounts, each with its total budget,
/// its charges and the answers kept for replay. `dpkit query` keeps one
/// account (named "") per file; `dpkit serve` keeps every analyst's
/// account per dataset in its state database.
///
/// ```
/// use dpkit_ledger::Ledger;
/// use dpkit_core::accounting::PrivacyLoss;
/// # let dir = std::env::temp_dir().join(format!("doc-ledger-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("ledger.sqlite");
/// let ledger = Ledger::open(&path, 1.0, 1e-6).unwrap();
/// let charge = ledger.charge(PrivacyLoss::pure(0.4).unwrap(), "SELECT COUNT(*) FROM t").unwrap();
/// assert!(ledger.charge(PrivacyLoss::pure(0.7).unwrap(), "again").is_err());
/// ledger.refund(charge).unwrap();
/// assert_eq!(ledger.state().unwrap().spent_epsilon, 0.0);
/// # drop(ledger);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct Ledger {
    /// The store's connection, read and written in the common dialect.
    sql: Box<dyn Sql>,
    store: Store,
    account: String,
    /// The key of the request's turn this ledger's run holds, and the token
    /// of the session that holds it, if its answers are kept only while it
    /// does (`turns`).
    turn: std::cell::Cell<Option<(i64, i64)>>,
    /// The process's writer of this file, if charges are committed in
    /// groups (see [`GroupCommit`]); else each write commits on `connection`.
    writer: Option<std::sync::Arc<GroupCommit>>,
}

/// One account's writes, on a connection inside a transaction that the
/// caller opened and commits: a [`Ledger`]'s own, or a [`GroupCommit`]'s.
pub(crate) struct InAccount<'a> {
    sql: &'a dyn Sql,
    account: &'a str,
    store: &'a Store,
}

/// The receipt of a committed charge, used to refund it or keep its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge(i64);

/// What [`Ledger::charge_once`] found for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Once {
    /// The request was answered before: its answer, to send again for free.
    Answered(String),
    /// The request is new and its cost is now committed.
    Charged(Charge),
    /// The request was charged before but its answer was never kept (the
    /// process stopped while running it): nothing was released, so it runs
    /// now under that charge, and pays nothing more.
    Unanswered(Charge),
}

/// Refuses a total budget outside what a ledger counts.
fn check_totals(total_epsilon: f64, total_delta: f64) -> Result<i64> {
    let total_units = to_units("the total", total_epsilon)?;
    if !(0.0..1.0).contains(&total_delta) {
        return Err(LedgerError::Budget(format!(
            "the total δ must lie in [0, 1), got {total_delta}"
        )));
    }
    Ok(total_units)
}

/// Where an analyst's ledger for a dataset lives unless told otherwise:
/// `<table>.<analyst>.ledger.sqlite` beside the description. `dpkit query`
/// and Python's `dpkit.query` both use it, so they charge the same budget.
/// An analyst's name is letters, digits, `-` and `_`, so it cannot climb
/// out of the directory.
///
/// ```
/// use std::path::Path;
/// let path = dpkit_ledger::default_path(Path::new("data/adult.toml"), "adult", "alice").unwrap();
/// assert_eq!(path, Path::new("data/adult.alice.ledger.sqlite"));
/// assert!(dpkit_ledger::default_path(Path::new("a.toml"), "adult", "../x").is_err());
/// ```
pub fn default_path(description_path: &Path, table: &str, analyst: &str) -> Result<PathBuf> {
    if analyst.is_empty()
        || !analyst
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(LedgerError::Budget(
            "an analyst's name must be letters, digits, '-' and '_'".into(),
        ));
    }
    Ok(description_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{table}.{analyst}.ledger.sqlite")))
}

impl Ledger {
    /// Opens the single-account ledger at `path` (account ""), creating it
    /// with the given totals if it does not exist (totals of an existing
    /// ledger are kept: editing the description does not raise a budget
    /// already granted; see [`BudgetState::has_total`] and
    /// [`Ledger::set_total`]). A ledger of the first layout is moved to accounts.
    ///
    /// A total ε that is not finite, ≤ 0 or above [`MAX_EPSILON`], or a total
    /// δ outside `[0, 1)`, is refused before the file is touched. A ledger
    /// that is not whole (a table or column missing), or whose account does
    /// not verify (its charges or totals edited outside dpkit: see the
    /// `digest` module), is refused with [`LedgerError::Storage`], in one
    /// line that says how to restore it; it is never made anew.
    pub fn open(path: &Path, total_epsilon: f64, total_delta: f64) -> Result<Self> {
        let total_units = check_totals(total_epsilon, total_delta)?;
        let ledger = Self::connect(&Store::file(path), "")?;
        ledger.locked(move |at| at.make(total_units, total_delta))?;
        ledger.verify()?;
        Ok(ledger)
    }

    /// Opens the single-account ledger at `path` for a description that
    /// declares the totals `total_epsilon`, `total_delta`, as
    /// [`Ledger::open`] does. With `grant`, the ledger's total is set to the
    /// declared one first ([`Ledger::set_total`]); without it, a ledger
    /// that keeps another total is returned with the text of
    /// [`BudgetState::edited_total`], for the caller to show as a note.
    ///
    /// ```
    /// use dpkit_ledger::Ledger;
    /// # let dir = std::env::temp_dir().join(format!("doc-declared-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("ledger.sqlite");
    /// let (_, note) = Ledger::open_declared(&path, 1.0, 0.0, false).unwrap();
    /// assert_eq!(note, None);
    /// let (_, note) = Ledger::open_declared(&path, 2.0, 0.0, false).unwrap();
    /// assert!(note.unwrap().starts_with("declares a total of ε = 2"));
    /// let (ledger, note) = Ledger::open_declared(&path, 2.0, 0.0, true).unwrap();
    /// assert_eq!((note, ledger.state().unwrap().total_epsilon), (None, 2.0));
    /// # drop(ledger);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn open_declared(
        path: &Path,
        total_epsilon: f64,
        total_delta: f64,
        grant: bool,
    ) -> Result<(Self, Option<String>)> {
        let ledger = Self::open(path, total_epsilon, total_delta)?;
        if grant {
            ledger.set_total(total_epsilon, total_delta)?;
            return Ok((ledger, None));
        }
        let edited = ledger.state()?.edited_total(total_epsilon, total_delta);
        Ok((ledger, edited))
    }

    /// Opens `account` in the ledger at `path`; it must have been granted
    /// (see [`Ledger::grant`]), else [`LedgerError::Budget`]. Its charges and
    /// totals are verified whole first, as [`Ledger::open`] does.
    pub fn open_account(path: &Path, account: &str) -> Result<Self> {
        Self::open_account_in(&Store::file(path), account)
    }

    /// Opens `account` in `store`, as [`Ledger::open_account`] does in a file.
    pub fn open_account_in(store: &Store, account: &str) -> Result<Self> {
        let ledger = Self::connect(store, account)?;
        if !ledger.verify()? {
            return Err(LedgerError::Budget("no budget has been granted".into()));
        }
        Ok(ledger)
    }

    /// Grants `account` a total budget, or sets the total of an account
    /// that has one (raised or lowered: what was spent stays spent).
    pub fn grant(path: &Path, account: &str, total_epsilon: f64, total_delta: f64) -> Result<()> {
        Self::grant_in(&Store::file(path), account, total_epsilon, total_delta)
    }

    /// Grants `account` in `store`, as [`Ledger::grant`] does in a file.
    pub fn grant_in(
        store: &Store,
        account: &str,
        total_epsilon: f64,
        total_delta: f64,
    ) -> Result<()> {
        check_totals(total_epsilon, total_delta)?;
        Self::connect(store, account)?.set_total(total_epsilon, total_delta)
    }

    /// Sets the total budget of this ledger's account, as [`Ledger::grant`]
    /// does: raised or lowered, what was spent stays spent.
    pub fn set_total(&self, total_epsilon: f64, total_delta: f64) -> Result<()> {
        let total_units = check_totals(total_epsilon, total_delta)?;
        self.locked(move |at| at.set_total(total_units, total_delta))
    }

    /// Whether `account` has a budget in the ledger at `path`.
    pub fn has_account(path: &Path, account: &str) -> Result<bool> {
        Self::connect(&Store::file(path), account)?.has_other_account(account)
    }

    /// The budget of `account` in the ledger at `path`, if it has been
    /// granted one.
    pub fn account_state(path: &Path, account: &str) -> Result<Option<BudgetState>> {
        Self::account_state_in(&Store::file(path), account)
    }

    /// The budget of `account` in `store`, as [`Ledger::account_state`]
    /// reads it in a file.
    pub fn account_state_in(store: &Store, account: &str) -> Result<Option<BudgetState>> {
        let ledger = Self::connect(store, account)?;
        if !ledger.verify()? {
            return Ok(None);
        }
        ledger.state().map(Some)
    }

    /// Opens the ledger at `path` (creating its tables) without choosing an
    /// account: for [`Ledger::has_other_account`]; it can charge nothing.
    pub fn reader(path: &Path) -> Result<Self> {
        Self::reader_in(&Store::file(path))
    }

    /// Opens `store` without choosing an account, as [`Ledger::reader`]
    /// does a file.
    pub fn reader_in(store: &Store) -> Result<Self> {
        Self::connect(store, "\u{0}no account")
    }

    /// Every account in this ledger's file with its budget, by name (a
    /// read on the open connection, for a service's metrics).
    ///
    /// ```
    /// use dpkit_ledger::Ledger;
    /// let path = std::env::temp_dir().join(format!("doc-every-{}.sqlite", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// Ledger::grant(&path, "ann/adult", 2.0, 0.0).unwrap();
    /// let accounts = Ledger::reader(&path).unwrap().every_account().unwrap();
    /// assert_eq!(accounts.len(), 1);
    /// assert_eq!((accounts[0].0.as_str(), accounts[0].1.total_epsilon), ("ann/adult", 2.0));
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn every_account(&self) -> Result<Vec<(String, BudgetState)>> {
        let rows = self
            .sql
            .rows("SELECT account FROM accounts ORDER BY account", &[])
            .map_err(|e| self.error(e))?;
        rows.iter()
            .map(|row| {
                let name = row.text(0).map_err(|e| self.error(e))?;
                let state = read_state(&*self.sql, &name).map_err(|e| self.error(e))?;
                Ok((name, state))
            })
            .collect()
    }

    /// Whether `account` has a budget in this ledger's file (a read on the
    /// open connection, for callers that check grants often).
    pub fn has_other_account(&self, account: &str) -> Result<bool> {
        let row = self
            .sql
            .first(
                "SELECT COUNT(*) > 0 FROM accounts WHERE account = ?1",
                values![account],
            )
            .map_err(|e| self.error(e))?;
        row.map_or(Ok(false), |row| row.flag(0))
            .map_err(|e| self.error(e))
    }

    fn connect(store: &Store, account: &str) -> Result<Self> {
        Ok(Self {
            sql: store.connect()?,
            store: store.clone(),
            turn: std::cell::Cell::new(None),
            account: account.to_string(),
            writer: None,
        })
    }

    fn error(&self, error: SqlError) -> LedgerError {
        store_error(&self.store, error)
    }

    /// Verifies this ledger's account whole, its seal and its chain (see
    /// [`digest`]); `false` if it has not been granted. An account that
    /// was deleted with charges left behind is refused, never taken as new.
    fn verify(&self) -> Result<bool> {
        let verify = || {
            let granted = digest::verify(&*self.sql, &self.account)?;
            if !granted {
                digest::no_orphans(&*self.sql, &self.account)?;
            }
            Ok(granted)
        };
        verify().map_err(|e| self.error(e))
    }

    /// Whether this ledger's connection has ended for good (a PostgreSQL
    /// server that closed its session): open another. A file's never ends.
    pub fn is_closed(&self) -> bool {
        self.sql.is_closed()
    }

    /// The account this ledger charges.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// Spent and remaining budget.
    pub fn state(&self) -> Result<BudgetState> {
        read_state(&*self.sql, &self.account).map_err(|e| self.error(e))
    }

    /// Runs `work` in an IMMEDIATE transaction: the reads and writes in it
    /// happen under one write lock, so two concurrent charges cannot both
    /// take the last of the budget. It commits (to disk) only if `work`
    /// succeeds. With a [`GroupCommit`], its thread runs `work` in a
    /// transaction shared with other writes, under the same lock.
    fn locked<T: Send + 'static>(
        &self,
        work: impl FnOnce(&InAccount) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if let Some(writer) = &self.writer {
            return writer.write(&self.account, work);
        }
        // A transaction a panic left open is undone, never committed.
        if self.sql.in_transaction() {
            let _ = self.sql.rollback();
        }
        self.sql.begin_write().map_err(|e| self.error(e))?;
        let outcome = work(&InAccount {
            sql: &*self.sql,
            account: &self.account,
            store: &self.store,
        });
        let end = if outcome.is_ok() {
            self.sql.commit()
        } else {
            self.sql.rollback()
        };
        if let Err(error) = end {
            let _ = self.sql.rollback();
            return Err(self.error(error));
        }
        outcome
    }

    /// Commits `cost` to disk if the budget's filter admits it, else
    /// refuses with [`LedgerError::Budget`] and records nothing. A cost
    /// whose ε is above [`MAX_EPSILON`] is refused before the ledger is read.
    /// The filter (`dpkit_core::accounting::Filter`) admits it while plain
    /// sums of (ε, δ) or, for accounts that keep one, the concentrated
    /// accountant would still keep the budget; both record every charge.
    pub fn charge(&self, cost: impl Into<Cost>, query: &str) -> Result<Charge> {
        let cost = cost.into();
        let units = to_units("the query's", cost.loss.epsilon())?;
        let query = query.to_string();
        self.locked(move |at| at.charge(units, cost, &query))
    }

    /// How many more charges of `cost` the budget admits now: as many as
    /// plain sums or the concentrated accountant would admit, whichever
    /// admits more (each counts every charge). Spends nothing.
    pub fn how_many_more(&self, cost: impl Into<Cost>) -> Result<u64> {
        let (plain, concentrated) = self.room(cost.into())?;
        Ok(plain.max(concentrated))
    }

    /// How many more charges of `cost` plain sums admit, and how many the
    /// concentrated accountant does (each counts every charge).
    fn room(&self, cost: Cost) -> Result<(u64, u64)> {
        // A cost no ledger counts fits no budget; the charge says why.
        let Ok(units) = to_units("the query's", cost.loss.epsilon()) else {
            return Ok((0, 0));
        };
        let totals = read_totals(&*self.sql, &self.account).map_err(|e| self.error(e))?;
        let Some(filter) = totals.filter() else {
            return Ok((0, 0));
        };
        let left = totals.total_units.saturating_sub(totals.spent_units).max(0);
        let by_epsilon = (left / units) as u64;
        let delta_left = filter.sums_delta() * (1.0 + DELTA_SLACK) - totals.spent_delta;
        let by_delta = match cost.loss.delta() {
            0.0 => u64::MAX,
            delta => (delta_left / delta).max(0.0).floor() as u64,
        };
        let concentrated = filter.concentrated_room(totals.concentrated, cost.concentrated);
        Ok((by_epsilon.min(by_delta), concentrated))
    }

    /// What is left after a release that cost `cost`, for people: in the
    /// unit of the accountant that pays for more releases like it (ε for
    /// plain sums, ρ for the concentrated accountant), and how many more
    /// it pays for. Spends nothing. `dpkit budget` gives both accounts.
    pub fn left_after(&self, cost: impl Into<Cost>) -> Result<String> {
        let (plain, concentrated) = self.room(cost.into())?;
        let state = self.state()?;
        let more = match plain.max(concentrated) {
            0 => "not enough for another like it".to_string(),
            n => format!("enough for {n} more like it"),
        };
        let plain_spent = state.past_plain_sums() || state.remaining_epsilon() == 0.0;
        Ok(match state.concentrated {
            Some(c) if concentrated > plain || plain_spent => format!(
                "{}, {more} ({})",
                c.left_text(),
                if plain_spent {
                    state.used_up_text()
                } else {
                    format!("plain sums: ε = {}", state.plain_left_text())
                }
            ),
            _ => format!("ε = {}, {more}", state.plain_left_text()),
        })
    }

    /// Gives back a charge whose query failed before releasing anything,
    /// and forgets the request it paid for; `None` when given back.
    ///
    /// A charge that has an answer kept under it is not given back: another
    /// run of the same request (in another process sharing the file) kept
    /// that answer, and may have released it, so the charge paid for it.
    /// That answer is returned, and must be released instead of the failure.
    pub fn refund(&self, charge: Charge) -> Result<Option<String>> {
        self.locked(move |at| at.refund(charge))
    }
}

impl InAccount<'_> {
    fn error(&self, error: SqlError) -> LedgerError {
        store_error(self.store, error)
    }

    /// Makes this account with the totals given, unless it is there.
    fn make(&self, total_units: i64, total_delta: f64) -> Result<()> {
        let there = self
            .sql
            .first(
                "SELECT COUNT(*) > 0 FROM accounts WHERE account = ?1",
                values![self.account],
            )
            .and_then(|row| row.map_or(Ok(false), |row| row.flag(0)))
            .map_err(|e| self.error(e))?;
        if there {
            return Ok(());
        }
        self.set_total(total_units, total_delta)
    }

    /// Sets this account's totals, making it if it is not there. An account
    /// that does not verify is refused, never sealed again as it stands; one
    /// deleted with its charges left behind is not made anew.
    fn set_total(&self, total_units: i64, total_delta: f64) -> Result<()> {
        let granted = || {
            let totals = read_totals(self.sql, self.account)?;
            if totals.chain.is_none() {
                digest::no_orphans(self.sql, self.account)?;
            }
            digest::reseal(
                self.sql,
                self.account,
                &format!(
                    "INSERT INTO accounts
                         (account, epsilon_units, delta, accounting, thresholds, links, head)
                     VALUES (?1, ?2, ?3, 'combined', ?4, 0, ?5)
                     ON CONFLICT (account) DO UPDATE SET epsilon_units = ?2, delta = ?3, seal = NULL
                     RETURNING {}",
                    digest::ACCOUNT
                ),
                values![
                    self.account,
                    total_units,
                    total_delta,
                    Filter::THRESHOLDS_VERSION,
                    digest::genesis(self.account)
                ],
            )
        };
        granted().map_err(|e| self.error(e))
    }

    /// Records a charge of `cost` (`units` of ε) if the account's filter
    /// admits it, else refuses and writes nothing. The charge is the next
    /// event of the account's chain (see [`digest`]).
    fn charge(&self, units: i64, cost: Cost, query: &str) -> Result<Charge> {
        let totals = read_totals(self.sql, self.account).map_err(|e| self.error(e))?;
        check_fits(&totals, units, cost)?;
        let Some(chain) = totals.chain else {
            return Err(LedgerError::Budget("no budget has been granted".into()));
        };
        // An accountant that keeps no δ for thresholds cannot count one:
        // the charge closes it, as a charge without a concentrated form does.
        let form = cost
            .concentrated
            .filter(|form| form.keys() == 0.0 || totals.thresholds > 0);
        let number = chain.links + 1;
        let charged = self.record(units, cost.loss.delta(), form, query, number)?;
        let link = digest::charge_link(&chain.head, self.account, number, &charged);
        self.sql
            .run(
                "UPDATE spends SET link = ?2 WHERE id = ?1",
                values![charged.id, &link],
            )
            .and_then(|_| self.add_to_sums(units, cost.loss.delta(), form, number, &link))
            .map_err(|e| self.error(e))?;
        Ok(Charge(charged.id))
    }

    /// Inserts a charge's row as event `number` of the chain, and links it.
    fn record(
        &self,
        units: i64,
        delta: f64,
        form: Option<ConcentratedLoss>,
        query: &str,
        number: i64,
    ) -> Result<digest::Charged> {
        let inserted = self
            .sql
            .first(
                "INSERT INTO spends (account, query, epsilon_units, delta, status, rho, spread,
                     tail, layout, keys, chained)
                 VALUES (?1, ?2, ?3, ?4, 'charged', ?5, ?6, ?7, ?8, ?9, ?10)
                 RETURNING id, at, query, epsilon_units, delta, rho, spread, tail, layout, keys",
                values![
                    self.account,
                    query,
                    units,
                    delta,
                    form.map(|f| f.rho()),
                    form.map(|f| f.spread()),
                    form.map(|f| f.tail()),
                    schema::LAYOUT,
                    form.map(|f| f.keys()),
                    number
                ],
            )
            .and_then(|row| {
                // The digest is of the values as the store keeps them.
                row.map_or(Err(SqlError("no charge was recorded".into())), |row| {
                    digest::charged_at(&row, 0)
                })
            })
            .map_err(|e| self.error(e))?;
        Ok(inserted)
    }

    /// Adds a charge to the account's running sums, and `link` as its head.
    fn add_to_sums(
        &self,
        units: i64,
        delta: f64,
        form: Option<ConcentratedLoss>,
        number: i64,
        link: &str,
    ) -> std::result::Result<(), SqlError> {
        // check_fits refuses a charge whose ε sum would overflow.
        let formless = i64::from(form.is_none());
        let form = form.unwrap_or_default();
        digest::reseal(
            self.sql,
            self.account,
            &format!(
                "UPDATE accounts SET spent_units = spent_units + ?2, spent_delta = spent_delta + ?3,
                     queries = queries + 1, spent_rho = spent_rho + ?4,
                     spent_spread = spent_spread + ?5, spent_tail = spent_tail + ?6,
                     formless = formless + ?7, concentrated_terms = concentrated_terms + 1,
                     spent_keys = spent_keys + ?8, links = ?9, head = ?10, seal = NULL
                 WHERE account = ?1
                 RETURNING {}",
                digest::ACCOUNT
            ),
            values![
                self.account,
                units,
                delta,
                form.rho(),
                form.spread(),
                form.tail(),
                formless,
                form.keys(),
                number,
                link
            ],
        )
    }

    /// Gives back `charge` and forgets the request it paid for, unless an
    /// answer is kept under it (see [`Ledger::refund`]).
    fn refund(&self, charge: Charge) -> Result<Option<String>> {
        let kept = self
            .sql
            .first(
                "SELECT answer FROM replays WHERE spend = ?1 AND answer IS NOT NULL",
                values![charge.0],
            )
            .and_then(|row| row.map(|row| row.text(0)).transpose())
            .map_err(|e| self.error(e))?;
        if kept.is_some() {
            return Ok(kept);
        }
        self.give_back(charge).map_err(|e| self.error(e))?;
        self.sql
            .run("DELETE FROM replays WHERE spend = ?1", values![charge.0])
            .map_err(|e| self.error(e))?;
        Ok(None)
    }

    /// Marks `charge` refunded, if it is charged, as the next event of its
    /// account's chain, and takes its ε and δ off the account's sums.
    fn give_back(&self, charge: Charge) -> std::result::Result<(), SqlError> {
        let Some(row) = self.sql.first(
            "SELECT account, epsilon_units, delta, link FROM spends
             WHERE id = ?1 AND status = 'charged'",
            values![charge.0],
        )?
        else {
            return Ok(());
        };
        let account = row.text(0)?;
        let Some(chain) = read_totals(self.sql, &account)?.chain else {
            return Err(SqlError(
                digest::Damage::Orphaned(account.clone()).to_string(),
            ));
        };
        let number = chain.links + 1;
        let link = digest::refund_link(&chain.head, &account, number, charge.0, &row.text(3)?);
        self.sql.run(
            "UPDATE spends SET status = 'refunded', refund_chained = ?2, refund_link = ?3
             WHERE id = ?1",
            values![charge.0, number, &link],
        )?;
        digest::reseal(
            self.sql,
            &account,
            &format!(
                "UPDATE accounts SET spent_units = spent_units - ?2, spent_delta = spent_delta - ?3,
                     queries = queries - 1, links = ?4, head = ?5, seal = NULL
                 WHERE account = ?1
                 RETURNING {}",
                digest::ACCOUNT
            ),
            values![&account, row.integer(1)?, row.real(2)?, number, &link],
        )
    }
}

/// The ledger's totals and sums, with ε in exact units.
struct Totals {
    total_units: i64,
    total_delta: f64,
    spent_units: i64,
    spent_delta: f64,
    queries: i64,
    /// Whether the concentrated accountant keeps this account too.
    combined: bool,
    /// The version of the share of δ that accountant keeps for thresholds
    /// (`Filter::of_version`; 0: none).
    thresholds: u32,
    /// Its sums, or `None` once a charge without a concentrated form closed it.
    concentrated: Option<ConcentratedLoss>,
    /// Its chain, verified by its seal; `None` for an account not granted.
    chain: Option<digest::Head>,
}

impl Totals {
    /// Whether a newer dpkit's concentrated accountant keeps this account.
    fn kept_by_newer_dpkit(&self) -> bool {
        self.combined && self.thresholds > Filter::THRESHOLDS_VERSION
    }

    /// The filter that admits this account's charges, or `None` for an
    /// account with nothing granted (every charge is refused).
    fn filter(&self) -> Option<Filter> {
        let total =
            PrivacyLoss::approximate(from_units(self.total_units), self.total_delta).ok()?;
        // A total the concentrated accountant cannot keep (an ε so small
        // that no ρ fits, say) is kept by the sums alone.
        if !self.combined {
            return Some(Filter::sums_only(total));
        }
        // An accountant of a version this dpkit does not know (a newer
        // one's) admits nothing here: every charge is refused.
        if self.kept_by_newer_dpkit() {
            return None;
        }
        Some(Filter::of_version(total, self.thresholds).unwrap_or(Filter::sums_only(total)))
    }
}

/// An account's totals and sums, refused (as an error of the store) if
/// its seal does not verify (see [`digest`]).
fn read_totals(sql: &dyn Sql, account: &str) -> std::result::Result<Totals, SqlError> {
    let row = sql.first(
        &format!(
            "SELECT {} FROM accounts WHERE account = ?1",
            digest::ACCOUNT
        ),
        values![account],
    )?;
    let Some(row) = row else {
        return Ok(Totals {
            total_units: 0,
            total_delta: 0.0,
            spent_units: 0,
            spent_delta: 0.0,
            queries: 0,
            combined: false,
            thresholds: 0,
            concentrated: None,
            chain: None,
        });
    };
    let chain = digest::verified(account, &row)?;
    Ok(Totals {
        chain: Some(chain),
        ..totals_of(&row)?
    })
}

/// An account's row, as [`read_totals`] selects it; its chain unread.
fn totals_of(row: &Row) -> std::result::Result<Totals, SqlError> {
    let formless = row.integer(9)?;
    let terms = row.integer(10)?;
    let parts = (row.real(6)?, row.real(7)?, row.real(8)?);
    let keys = row.real(12)?;
    // Sums in doubles, bounded for their rounding; a damaged
    // value closes the accountant (plain sums still count).
    let concentrated = (formless == 0)
        .then(|| {
            ConcentratedLoss::from_parts(parts.0, parts.1, parts.2)
                .and_then(|sum| match keys {
                    0.0 => Ok(sum),
                    keys => sum.with_keys(keys),
                })
                .ok()
        })
        .flatten()
        .map(|sum| sum.at_most(u64::try_from(terms).unwrap_or(u64::MAX)));
    let thresholds = u32::try_from(row.integer(11)?)
        .map_err(|_| SqlError("an account's thresholds are out of range".into()))?;
    Ok(Totals {
        total_units: row.integer(0)?,
        total_delta: row.real(1)?,
        spent_units: row.integer(2)?,
        spent_delta: row.real(3)?,
        queries: row.integer(4)?,
        combined: row.text(5)? == "combined",
        thresholds,
        concentrated,
        chain: None,
    })
}

fn read_state(sql: &dyn Sql, account: &str) -> std::result::Result<BudgetState, SqlError> {
    let totals = read_totals(sql, account)?;
    let filter = totals.filter();
    let concentrated = filter.and_then(|filter| {
        let spent = totals.concentrated?;
        Some(Concentrated {
            spent_rho: spent.rho(),
            total_rho: filter.concentrated_rho()?,
            spent_epsilon: filter.concentrated_epsilon(Some(spent))?,
            delta: filter.concentrated_delta()?,
            spent_threshold_delta: spent.keys(),
            threshold_delta: filter.threshold_delta()?,
        })
    });
    Ok(BudgetState {
        total_epsilon: from_units(totals.total_units),
        total_delta: totals.total_delta,
        spent_epsilon: from_units(totals.spent_units),
        spent_delta: totals.spent_delta,
        plain_delta: filter.map_or(totals.total_delta, |f| f.sums_delta()),
        queries: u64::try_from(totals.queries).unwrap_or(0),
        concentrated,
    })
}

/// Refuses `cost` (`units` of ε) unless the account's filter admits it:
/// plain sums (with checked arithmetic: sums a ledger cannot hold are
/// refused, not wrapped) or, for accounts that keep one, the concentrated
/// accountant. The refusal names the concentrated accountant when it keeps
/// the account and could have paid for the query in its form (issue 67:
/// past plain sums, blaming ε alone read like an overdraft), and the plain
/// sums in every case.
fn check_fits(totals: &Totals, units: i64, cost: Cost) -> Result<()> {
    if totals.kept_by_newer_dpkit() {
        return Err(LedgerError::Budget(
            "a newer dpkit keeps this account: upgrade dpkit to charge it".into(),
        ));
    }
    let Some(filter) = totals.filter() else {
        return Err(LedgerError::Budget("no budget has been granted".into()));
    };
    // Past plain sums, the concentrated accountant lets the ε sum grow
    // beyond the total: one a ledger cannot hold is refused, not wrapped.
    if totals.spent_units.checked_add(units).is_none() {
        return Err(LedgerError::Budget(
            "this budget has paid for as many queries as its ledger can count".into(),
        ));
    }
    let sums = sums_fit(totals, units, cost.loss, filter.sums_delta());
    if sums.is_ok() || filter.concentrated_fits(totals.concentrated, cost.concentrated) {
        return Ok(());
    }
    match (
        filter.concentrated_rho(),
        totals.concentrated,
        cost.concentrated,
        sums,
    ) {
        (Some(total), Some(spent), Some(needed), Err(LedgerError::Budget(plain))) => {
            Err(LedgerError::Budget(format!(
                "the concentrated accountant (zCDP), which pays for queries past plain sums, \
                 has ρ = {} of {} left and the query needs ρ = {}; by plain sums, {plain}",
                significant((total - spent.rho()).max(0.0)),
                significant(total),
                significant(needed.rho())
            )))
        }
        (_, _, _, sums) => sums,
    }
}

/// Whether plain sums keep (ε, `total_delta`) after `cost`.
fn sums_fit(totals: &Totals, units: i64, cost: PrivacyLoss, total_delta: f64) -> Result<()> {
    let remaining = totals.total_units.checked_sub(totals.spent_units);
    let fits = remaining.is_some_and(|remaining| units <= remaining);
    if !fits {
        return Err(LedgerError::Budget(format!(
            "the query costs ε = {} but only ε = {} of {} remains",
            cost.epsilon(),
            remaining.map_or(0.0, |r| from_units(r.max(0))),
            from_units(totals.total_units)
        )));
    }
    let remaining_delta = (total_delta - totals.spent_delta).max(0.0);
    if totals.spent_delta + cost.delta() > total_delta * (1.0 + DELTA_SLACK) {
        let half = if total_delta < totals.total_delta {
            " (half the budget's δ: the other half backs the concentrated accountant, \
             which cannot pay for this query either)"
        } else {
            ""
        };
        return Err(LedgerError::Budget(format!(
            "the query costs δ = {:e} but only δ = {:e} of {:e} remains{half}",
            cost.delta(),
            remaining_delta,
            total_delta
        )));
    }
    Ok(())
}

fn store_error(store: &Store, error: impl std::fmt::Display) -> LedgerError {
    LedgerError::Storage {
        path: store.to_string(),
        reason: error.to_string(),
    }
}

fn ledger_error(path: &Path, error: impl std::fmt::Display) -> LedgerError {
    LedgerError::Storage {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    impl Ledger {
        /// A connection of the test's own to this ledger's file, for
        /// statements no ledger runs.
        fn raw(&self) -> Connection {
            // A test's ledger is a file, shown as its path.
            Connection::open(self.store.to_string()).unwrap()
        }
    }

    /// Sets `set` in `account`'s row and seals it again, as dpkit would
    /// have written it: a state only a newer dpkit, or a faulty one, writes.
    pub(super) fn sealed_update(ledger: &Ledger, account: &str, set: &str) {
        let update = format!(
            "UPDATE accounts SET {set}, seal = NULL WHERE account = ?1 RETURNING {}",
            digest::ACCOUNT
        );
        digest::reseal(&ledger.raw(), account, &update, values![account]).unwrap();
    }

    /// A fresh ledger file path for one test.
    pub(super) fn temporary(name: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("dpkit-ledger-{name}-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    pub(super) fn pure(epsilon: f64) -> PrivacyLoss {
        PrivacyLoss::pure(epsilon).unwrap()
    }

    #[test]
    fn totals_the_ledger_cannot_count_are_refused_before_the_file_exists() {
        let path = temporary("huge-total");
        for total in [
            1e6,
            9_300.0,
            MAX_EPSILON * 1.000_001,
            f64::INFINITY,
            f64::NAN,
            0.0,
            -1.0,
        ] {
            let error = Ledger::open(&path, total, 0.0).err();
            assert!(
                matches!(error, Some(LedgerError::Budget(_))),
                "total {total}"
            );
            assert!(!path.exists(), "total {total}");
        }
        for delta in [1.0, -1e-9, f64::NAN] {
            assert!(matches!(
                Ledger::open(&path, 1.0, delta),
                Err(LedgerError::Budget(_))
            ));
        }
        assert!(Ledger::open(&path, MAX_EPSILON, 0.0).is_ok());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn charges_of_any_size_never_panic_and_never_overspend() {
        let path = temporary("any-size");
        let ledger = Ledger::open(&path, MAX_EPSILON, 0.0).unwrap();
        let costs = [
            1e-15,
            1.0,
            998.0,
            1e300,
            9_000.0,
            1e6,
            MAX_EPSILON,
            1.0,
            1e-15,
        ];
        for _round in 0..3 {
            for cost in costs {
                match ledger.charge(pure(cost), "q") {
                    Ok(_) => assert!(cost <= MAX_EPSILON),
                    Err(LedgerError::Budget(message)) => assert!(!message.contains('\n')),
                    Err(other) => panic!("ε = {cost}: {other}"),
                }
                let state = ledger.state().unwrap();
                assert!(
                    state.spent_epsilon <= state.total_epsilon,
                    "after ε = {cost}"
                );
            }
        }
        let state = ledger.state().unwrap();
        assert!(
            state.spent_epsilon >= 999.0,
            "the small charges went through"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_refused_charge_records_nothing() {
        let path = temporary("refused");
        let ledger = Ledger::open(&path, 10.0, 0.0).unwrap();
        ledger.charge(pure(4.0), "kept").unwrap();
        for cost in [1e6, 1e300, MAX_EPSILON * 2.0, 6.5] {
            assert!(matches!(
                ledger.charge(pure(cost), "refused"),
                Err(LedgerError::Budget(_))
            ));
        }
        let state = ledger.state().unwrap();
        assert_eq!((state.spent_epsilon, state.queries), (4.0, 1));
        let rows: i64 = ledger
            .raw()
            .query_row("SELECT COUNT(*) FROM spends", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 1, "no row for a refused charge");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_damaged_ledger_gives_an_error_not_a_panic() {
        let path = temporary("damaged");
        let ledger = Ledger::open(&path, 10.0, 0.0).unwrap();
        // Sealed, as a dpkit with a fault could have written it.
        sealed_update(
            &ledger,
            "",
            "epsilon_units = -9223372036854775807, spent_units = 9223372036854775807",
        );
        assert!(matches!(
            ledger.charge(pure(1.0), "q"),
            Err(LedgerError::Budget(_))
        ));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_ledger_of_the_first_layout_keeps_its_budget_and_charges() {
        let path = temporary("first-layout");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE budget (id INTEGER PRIMARY KEY CHECK (id = 1),
                     epsilon_units INTEGER NOT NULL, delta REAL NOT NULL);
                 CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT,
                     at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                     query TEXT NOT NULL, epsilon_units INTEGER NOT NULL, delta REAL NOT NULL,
                     status TEXT NOT NULL CHECK (status IN ('charged', 'refunded')));
                 INSERT INTO budget VALUES (1, 3000000000000000, 0.0);
                 INSERT INTO spends (query, epsilon_units, delta, status)
                     VALUES ('a', 1000000000000000, 0.0, 'charged'), ('b', 500000000000000, 0.0, 'refunded');",
            )
            .unwrap();
        // The totals given now are ignored: the ledger's own are kept.
        let ledger = Ledger::open(&path, 10.0, 0.0).unwrap();
        let state = ledger.state().unwrap();
        assert_eq!(
            (state.total_epsilon, state.spent_epsilon, state.queries),
            (3.0, 1.0, 1)
        );
        ledger.charge(pure(2.0), "c").unwrap();
        assert!(matches!(
            ledger.charge(pure(0.1), "d"),
            Err(LedgerError::Budget(_))
        ));
        drop(ledger);
        assert_eq!(
            Ledger::open(&path, 10.0, 0.0)
                .unwrap()
                .state()
                .unwrap()
                .spent_epsilon,
            3.0
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn accounts_are_granted_raised_and_lowered_and_kept_apart() {
        let path = temporary("accounts");
        assert!(matches!(
            Ledger::open_account(&path, "ann/adult"),
            Err(LedgerError::Budget(_))
        ));
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        Ledger::grant(&path, "bob/adult", 1.0, 0.0).unwrap();
        let ann = Ledger::open_account(&path, "ann/adult").unwrap();
        ann.charge(pure(1.0), "q").unwrap();
        assert!(ann.charge(pure(0.5), "q").is_err());
        let bob = Ledger::open_account(&path, "bob/adult").unwrap();
        assert_eq!(
            bob.state().unwrap().spent_epsilon,
            0.0,
            "ann's spend is not bob's"
        );
        Ledger::grant(&path, "ann/adult", 2.0, 0.0).unwrap();
        ann.charge(pure(0.5), "q").unwrap();
        Ledger::grant(&path, "ann/adult", 0.5, 0.0).unwrap();
        let state = ann.state().unwrap();
        assert_eq!((state.spent_epsilon, state.remaining_epsilon()), (1.5, 0.0));
        assert!(ann.charge(pure(1e-9), "q").is_err());
        assert!(!Ledger::has_account(&path, "carl/adult").unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn running_sums_equal_the_charges_after_charges_and_refunds() {
        let path = temporary("running-sums");
        let ledger = Ledger::open(&path, 100.0, 0.5).unwrap();
        let mut charges = Vec::new();
        for i in 0..40 {
            let cost = PrivacyLoss::approximate(0.25 + f64::from(i % 7), 1e-4).unwrap();
            charges.push(ledger.charge(cost, "q").unwrap());
            if i % 3 == 0 {
                let refunded = charges.remove(charges.len() / 2);
                ledger.refund(refunded).unwrap();
                ledger.refund(refunded).unwrap(); // a second refund gives nothing back
            }
        }
        let (units, delta, count): (i64, f64, i64) = ledger
            .raw()
            .query_row(
                "SELECT SUM(epsilon_units), SUM(delta), COUNT(*) FROM spends WHERE status = 'charged'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .unwrap();
        let state = ledger.state().unwrap();
        assert_eq!(state.spent_epsilon, from_units(units));
        assert!((state.spent_delta - delta).abs() < 1e-15);
        assert_eq!(state.queries, count as u64);
        assert_eq!(count as usize, charges.len());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn accounts_without_running_sums_get_them_from_their_charges() {
        let path = temporary("no-sums");
        Connection::open(&path)
            .unwrap()
            .execute_batch(&format!(
                "CREATE TABLE accounts (account TEXT PRIMARY KEY, epsilon_units INTEGER NOT NULL,
                     delta REAL NOT NULL);
                 {OLD_SPENDS_AND_REPLAYS}
                 INSERT INTO accounts VALUES ('a', 5000000000000000, 0.0), ('b', 5000000000000000, 0.0);
                 INSERT INTO spends (query, epsilon_units, delta, status, account) VALUES
                     ('q', 2000000000000000, 0.0, 'charged', 'a'),
                     ('q', 1000000000000000, 0.0, 'refunded', 'a'),
                     ('q', 4000000000000000, 0.0, 'charged', 'b');",
            ))
            .unwrap();
        let a = Ledger::open_account(&path, "a").unwrap().state().unwrap();
        let b = Ledger::open_account(&path, "b").unwrap().state().unwrap();
        assert_eq!((a.spent_epsilon, a.queries), (2.0, 1));
        assert_eq!((b.spent_epsilon, b.queries), (4.0, 1));
        assert!(
            Ledger::open_account(&path, "b")
                .unwrap()
                .charge(pure(1.5), "q")
                .is_err()
        );
        std::fs::remove_file(&path).unwrap();
    }

    /// The spends and replays of the ledgers made before charges had a
    /// concentrated form.
    const OLD_SPENDS_AND_REPLAYS: &str =
        "CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT,
                     at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                     query TEXT NOT NULL, epsilon_units INTEGER NOT NULL, delta REAL NOT NULL,
                     status TEXT NOT NULL CHECK (status IN ('charged', 'refunded')),
                     account TEXT NOT NULL DEFAULT '');
                 CREATE TABLE replays (account TEXT NOT NULL, request TEXT NOT NULL,
                     spend INTEGER NOT NULL REFERENCES spends (id), answer TEXT,
                     PRIMARY KEY (account, request));";

    /// A ledger made before the concentrated accountant: accounts, spends
    /// and replays as they were, with one account of (5, 1e-6).
    fn older_ledger(name: &str) -> PathBuf {
        let path = temporary(name);
        Connection::open(&path)
            .unwrap()
            .execute_batch(&format!(
                "CREATE TABLE accounts (account TEXT PRIMARY KEY, epsilon_units INTEGER NOT NULL,
                     delta REAL NOT NULL, spent_units INTEGER NOT NULL DEFAULT 0,
                     spent_delta REAL NOT NULL DEFAULT 0.0, queries INTEGER NOT NULL DEFAULT 0);
                 {OLD_SPENDS_AND_REPLAYS}
                 CREATE INDEX replays_by_spend ON replays (spend);
                 INSERT INTO accounts (account, epsilon_units, delta) VALUES ('a', 5000000000000000, 1e-6);",
            ))
            .unwrap();
        path
    }

    #[test]
    fn older_accounts_keep_plain_sums_over_the_whole_delta_and_new_ones_split_it() {
        let path = older_ledger("older-sums");
        let older = Ledger::open_account(&path, "a").unwrap();
        let whole = PrivacyLoss::approximate(0.5, 1e-6).unwrap();
        assert!(older.state().unwrap().concentrated.is_none());
        older.charge(whole, "all of δ, as before").unwrap();
        Ledger::grant(&path, "b", 5.0, 1e-6).unwrap();
        let newer = Ledger::open_account(&path, "b").unwrap();
        // Half of δ backs the concentrated accountant, which a cost with no
        // concentrated form cannot use.
        let refusal = newer.charge(whole, "all of δ").unwrap_err().to_string();
        assert!(refusal.contains("half the budget's δ"), "{refusal}");
        let half = PrivacyLoss::approximate(0.5, 5e-7).unwrap();
        newer.charge(half, "half of δ").unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_concentrated_accountant_admits_many_gaussian_counts_where_plain_sums_stop() {
        use dpkit_core::mechanism::DiscreteGaussian;
        let path = temporary("concentrated");
        let ledger = Ledger::open(&path, 1.0, 1e-6).unwrap();
        // Gaussian counts at (0.05, 1e-8): plain sums pay for 20 of them.
        let count = DiscreteGaussian::new(0.05, 1e-8, 1).unwrap();
        let cost = Cost {
            loss: PrivacyLoss::approximate(0.05, 1e-8).unwrap(),
            concentrated: Some(count.concentrated(1).unwrap()),
        };
        let mut admitted = 0;
        let refusal = loop {
            match ledger.charge(cost, "count") {
                Ok(_) => admitted += 1,
                Err(refusal) => break refusal.to_string(),
            }
        };
        // The refusal names the accountant that ran out, past plain sums
        // (issue 67: it blamed ε alone, "0 of 1 remains", like an overdraft).
        assert!(
            refusal.contains("the concentrated accountant (zCDP), which pays for queries past plain sums, has ρ = ")
                && refusal.contains("; by plain sums, the query costs ε = 0.05 but only ε = 0 of 1 remains"),
            "{refusal}"
        );
        let state = ledger.state().unwrap();
        let concentrated = state.concentrated.unwrap();
        assert!(admitted > 100, "{admitted} admitted");
        assert!(concentrated.spent_rho <= concentrated.total_rho);
        assert!(concentrated.spent_epsilon <= 1.0 && concentrated.spent_epsilon > 0.9);
        assert_eq!(state.queries, admitted);
        // One charge without a concentrated form closes that accountant: the
        // plain sums, long past ε, refuse the rest.
        let path2 = temporary("closed");
        let closed = Ledger::open(&path2, 1.0, 1e-6).unwrap();
        closed.charge(pure(0.01), "no form").unwrap();
        let admitted_after = (0..200)
            .take_while(|_| closed.charge(cost, "count").is_ok())
            .count();
        assert_eq!(admitted_after, 19);
        for p in [path, path2] {
            std::fs::remove_file(&p).unwrap();
        }
    }

    /// A pure count at ε = 0.01 whose keys passed a threshold of δ `keys`.
    fn thresholded(keys: f64) -> Cost {
        use dpkit_core::accounting::ConcentratedLoss;
        Cost {
            loss: PrivacyLoss::approximate(0.01, keys).unwrap(),
            concentrated: Some(
                ConcentratedLoss::pure(0.01)
                    .unwrap()
                    .with_keys(keys)
                    .unwrap(),
            ),
        }
    }

    #[test]
    fn thresholds_are_paid_by_the_concentrated_accountant_within_their_share_of_delta() {
        let path = temporary("thresholds");
        // Plain sums pay for 100 of these; ρ for about 440; the δ kept for
        // thresholds (a quarter of half of δ: 1.25e-7) for 126 of 0.99e-9.
        let ledger = Ledger::open(&path, 1.0, 1e-6).unwrap();
        assert_eq!(ledger.how_many_more(thresholded(0.99e-9)).unwrap(), 126);
        let admitted = (0..1_000)
            .take_while(|_| ledger.charge(thresholded(0.99e-9), "q").is_ok())
            .count();
        assert_eq!(admitted, 126);
        let state = ledger.state().unwrap();
        let concentrated = state.concentrated.unwrap();
        assert!(
            concentrated
                .text()
                .ends_with("thresholds δ = 1.247e-7 of 1.25e-7")
        );
        assert!(concentrated.spent_epsilon < 1.0);
        // Smaller thresholds' δ: ρ is what stops them.
        let path2 = temporary("thresholds-rho");
        let ledger = Ledger::open(&path2, 1.0, 1e-6).unwrap();
        let admitted = (0..1_000)
            .take_while(|_| ledger.charge(thresholded(1e-11), "q").is_ok())
            .count();
        assert!((400..460).contains(&admitted), "{admitted}");
        for p in [path, path2] {
            std::fs::remove_file(&p).unwrap();
        }
    }

    #[test]
    fn accounts_of_layout_two_keep_an_accountant_that_thresholds_close() {
        let path = temporary("layout-two");
        Ledger::grant(&path, "old", 1.0, 1e-6).unwrap();
        // Back to layout 2: no chain, no column for thresholds, the older guard.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "DROP TRIGGER accounts_sealed;
                 ALTER TABLE accounts DROP COLUMN links;
                 ALTER TABLE accounts DROP COLUMN head;
                 ALTER TABLE accounts DROP COLUMN seal;
                 ALTER TABLE spends DROP COLUMN chained;
                 ALTER TABLE spends DROP COLUMN link;
                 ALTER TABLE spends DROP COLUMN refund_chained;
                 ALTER TABLE spends DROP COLUMN refund_link;
                 ALTER TABLE accounts DROP COLUMN thresholds;
                 ALTER TABLE accounts DROP COLUMN spent_keys;
                 ALTER TABLE spends DROP COLUMN keys;
                 DROP TRIGGER charges_of_this_layout;
                 CREATE TRIGGER charges_of_this_layout
                 BEFORE INSERT ON spends WHEN NEW.layout IS NULL
                 BEGIN SELECT RAISE(ABORT, 'a newer dpkit keeps this ledger'); END;
                 PRAGMA user_version = 2;",
            )
            .unwrap();
        let old = Ledger::open_account(&path, "old").unwrap();
        let before = old.state().unwrap().concentrated.unwrap();
        // An accountant of a version this dpkit does not know charges nothing.
        Ledger::grant(&path, "newer", 1.0, 1e-6).unwrap();
        let newer = Ledger::open_account(&path, "newer").unwrap();
        sealed_update(&newer, "newer", "thresholds = 2");
        let refusal = newer.charge(pure(0.1), "q").unwrap_err().to_string();
        assert!(
            refusal.contains("a newer dpkit keeps this account"),
            "{refusal}"
        );
        assert_eq!(before.threshold_delta, 0.0);
        assert_eq!(old.how_many_more(thresholded(1e-11)).unwrap(), 100);
        old.charge(thresholded(1e-11), "q").unwrap();
        assert!(old.state().unwrap().concentrated.is_none());
        Ledger::grant(&path, "new", 1.0, 1e-6).unwrap();
        let new = Ledger::open_account(&path, "new").unwrap();
        new.charge(thresholded(1e-11), "q").unwrap();
        let after = new.state().unwrap().concentrated.unwrap();
        assert!(after.total_rho < before.total_rho && after.total_rho > 0.97 * before.total_rho);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_older_dpkit_cannot_charge_this_layout_and_a_full_count_is_refused() {
        let path = temporary("layout");
        let ledger = Ledger::open(&path, 1000.0, 1e-6).unwrap();
        // What a dpkit from before the concentrated accountant would write.
        let older = ledger.raw().execute(
            "INSERT INTO spends (account, query, epsilon_units, delta, status)
             VALUES ('', 'q', 1, 0.0, 'charged')",
            [],
        );
        assert!(older.unwrap_err().to_string().contains("newer dpkit"));
        // What a dpkit of layout 2 would write: no threshold's δ.
        let layout_two = ledger.raw().execute(
            "INSERT INTO spends (account, query, epsilon_units, delta, status, rho, spread, tail, layout)
             VALUES ('', 'q', 1, 0.0, 'charged', 0.1, 0.0, 0.0, 2)",
            [],
        );
        assert!(layout_two.unwrap_err().to_string().contains("newer dpkit"));
        // A sum of ε the ledger cannot hold is refused in one line.
        sealed_update(&ledger, "", "spent_units = 9223372036854775000");
        let refusal = ledger.charge(pure(0.1), "q").unwrap_err().to_string();
        assert!(
            refusal.contains("as many queries as its ledger can count"),
            "{refusal}"
        );
        assert!(ledger.state().is_ok());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_unanswered_charge_pays_again_only_for_no_more_than_it_paid() {
        use dpkit_core::accounting::ConcentratedLoss;
        let path = temporary("replay-forms");
        let ledger = Ledger::open(&path, 10.0, 1e-6).unwrap();
        let loss = PrivacyLoss::pure(0.5).unwrap();
        let form = |rho: f64| Some(ConcentratedLoss::from_parts(rho, 0.0, 0.0).unwrap());
        let charged = |concentrated| Cost { loss, concentrated };
        let Once::Charged(first) = ledger.charge_once(charged(form(0.2)), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        // The same request, unanswered, with a smaller form: the old charge.
        let again = ledger.charge_once(charged(form(0.1)), "q", "r").unwrap();
        assert_eq!(again, Once::Unanswered(first));
        // With a larger form, or none, it is charged anew.
        for concentrated in [form(0.3), None] {
            let again = ledger.charge_once(charged(concentrated), "q", "r").unwrap();
            assert!(matches!(again, Once::Charged(c) if c != first), "{again:?}");
        }
        // The same with a threshold's δ: paid for if no larger than before.
        let keys = |keys: f64| form(0.2).map(|f| f.with_keys(keys).unwrap());
        let Once::Charged(first) = ledger.charge_once(charged(keys(2e-12)), "q", "k").unwrap()
        else {
            panic!("a new request is charged");
        };
        let again = ledger.charge_once(charged(keys(1e-12)), "q", "k").unwrap();
        assert_eq!(again, Once::Unanswered(first));
        let again = ledger.charge_once(charged(keys(3e-12)), "q", "k").unwrap();
        assert!(matches!(again, Once::Charged(c) if c != first), "{again:?}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_cost_below_half_a_unit_is_not_free_and_a_pure_budget_spends_no_delta() {
        let path = temporary("tiny");
        // Ten units of ε: costs of a tenth of a unit each pay at least one.
        let ledger = Ledger::open(&path, 1e-14, 0.0).unwrap();
        let tiny = (0..100)
            .take_while(|_| ledger.charge(pure(1e-16), "tiny").is_ok())
            .count();
        assert_eq!(tiny, 10);
        // No δ at all, however small, on a budget of δ = 0.
        let pure_path = temporary("pure-delta");
        let pure_budget = Ledger::open(&pure_path, 1.0, 0.0).unwrap();
        let approximate = PrivacyLoss::approximate(0.1, 1e-18).unwrap();
        assert!(pure_budget.charge(approximate, "δ").is_err());
        for p in [path, pure_path] {
            std::fs::remove_file(&p).unwrap();
        }
    }
}
