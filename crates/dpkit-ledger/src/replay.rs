//! Answers kept for replay: a request asked again gets the answer it got
//! the first time, for free. Averaging repeated answers then learns
//! nothing new, and a retry after a lost connection does not pay twice.
//!
//! Each kept answer is tied to the charge that paid for it, and is
//! committed before it is released: after a crash, an answer the analyst
//! may have seen is always found again, and a charged request whose
//! answer was never kept released nothing and runs again under its charge.
//! Requests are compared whole (the caller's canonical text), never by a
//! hash that could collide.
//!
//! Two runs of one request under one charge (two processes on one file,
//! each given the request) release at most one answer, and never one the
//! charge was given back for. The first answer kept is the one every run
//! releases ([`Ledger::keep_answer`] hands it to the later ones). A refund
//! gives nothing back once an answer is kept under the charge, and returns
//! that answer to be released instead; once a charge is given back, no
//! answer can be kept under it, and a run that cannot keep its answer
//! releases nothing (and its charge, if a new charge for the request
//! took its place, is given back). Each of these steps is one transaction,
//! so they happen in some order, and each order ends in one answer paid
//! for or none released.
//!
//! Callers should still keep copies from running at once: each run draws
//! its own noise, and the samplers' time depends on their draw, so the
//! first answer kept would be a draw chosen by speed. `dpkit serve` runs
//! one copy at a time across all its processes; the rules above keep
//! the budget for any caller that does not.

use dpkit_core::accounting::Cost;

use super::{Charge, InAccount, Ledger, Once, to_units};
use crate::sql::{Row, SqlResult, values};
use crate::{LedgerError, Result};

impl Ledger {
    /// The answer kept for `request`, if it was answered before.
    pub fn replayed(&self, request: &str) -> Result<Option<String>> {
        self.sql
            .first(
                "SELECT answer FROM replays WHERE account = ?1 AND request = ?2",
                values![&self.account, request],
            )
            .and_then(|row| row.map(|row| row.optional_text(0)).transpose())
            .map(Option::flatten)
            .map_err(|e| self.error(e))
    }

    /// Charges `cost` for `request` unless it was charged before, in one
    /// transaction. A charge not answered yet is taken as abandoned by a
    /// stopped process, and the request runs again under it.
    ///
    /// It may still be running elsewhere, if two processes that share the
    /// file run copies of one request at once: both runs then go on under
    /// the one charge and release at most one answer (see the module's
    /// text), but callers should keep copies apart (`dpkit serve` does).
    ///
    /// A charge whose recorded cost differs from `cost` (the description
    /// changed since) is not reused: the request is charged anew, and the
    /// unanswered charge it replaces is given back in the same transaction
    /// (it released nothing; see `InAccount::charge_once`).
    pub fn charge_once(&self, cost: impl Into<Cost>, query: &str, request: &str) -> Result<Once> {
        let cost = cost.into();
        let units = to_units("the query's", cost.loss.epsilon())?;
        let (query, request) = (query.to_string(), request.to_string());
        self.locked(move |at| at.charge_once(units, cost, &query, &request))
    }

    /// Keeps `answer` for the request `charge` paid for, unless an answer
    /// is kept for it already: then that one is returned, and must be
    /// released instead (one charge, one answer, whatever runs raced). It
    /// is on disk when this returns, so it may then be released. If another
    /// run took this one's place (it was refunded, or the request charged
    /// anew), nothing is kept, this charge is given back, and
    /// [`LedgerError::GivenBack`] says that nothing may be released.
    ///
    /// [`LedgerError::GivenBack`]: crate::LedgerError::GivenBack
    pub fn keep_answer(&self, charge: Charge, answer: &str) -> Result<Option<String>> {
        let answer = answer.to_string();
        let turn = self.turn.get();
        // The refund of a run whose place was taken must commit, so it is
        // an outcome of the transaction, and an error only after it.
        match self.locked(move |at| at.keep_answer(charge, &answer, turn))? {
            Some(Kept::Now) => Ok(None),
            Some(Kept::Before(first)) => Ok(Some(first)),
            Some(Kept::Lost(Some(first))) => Ok(Some(first)),
            Some(Kept::Lost(None)) => Err(LedgerError::GivenBack(
                "this run lost its turn (its connection to the state ended): nothing was \
                 released, and its charge stays for the request asked again (or is given back \
                 if the request is charged anew at another cost)"
                    .into(),
            )),
            None => Err(LedgerError::GivenBack(
                "another run of this request took its place: this run's charge was given back \
                 and nothing was released; ask again"
                    .into(),
            )),
        }
    }
}

impl InAccount<'_> {
    /// [`Ledger::charge_once`] inside the caller's transaction.
    fn charge_once(&self, units: i64, cost: Cost, query: &str, request: &str) -> Result<Once> {
        let earlier = self
            .sql
            .first(
                "SELECT r.spend, r.answer, s.epsilon_units, s.delta, s.rho, s.spread, s.tail,
                     COALESCE(s.keys, 0.0)
                 FROM replays r JOIN spends s ON s.id = r.spend
                 WHERE r.account = ?1 AND r.request = ?2 AND s.status = 'charged'",
                values![self.account, request],
            )
            .and_then(|row| row.as_ref().map(Earlier::of).transpose())
            .map_err(|e| self.error(e))?;
        match earlier {
            Some(Earlier {
                answer: Some(answer),
                ..
            }) => return Ok(Once::Answered(answer)),
            Some(earlier) if earlier.pays_for(units, &cost) => {
                return Ok(Once::Unanswered(Charge(earlier.spend)));
            }
            // Charged before at another cost and never answered: it released
            // nothing (answers and failures are kept before they are
            // released), and the new charge takes its place in `replays`. So
            // it is given back now: left standing, a charge whose run
            // crashed or lost its turn stayed spent and was never reused. A
            // run still going under it keeps nothing and releases nothing
            // (`keep_answer` finds its row gone).
            Some(earlier) => self
                .give_back(Charge(earlier.spend))
                .map_err(|e| self.error(e))?,
            None => {}
        }
        let charge = self.charge(units, cost, query)?;
        self.sql
            .run(
                "INSERT INTO replays (account, request, spend, answer) VALUES (?1, ?2, ?3, NULL)
                 ON CONFLICT (account, request) DO UPDATE SET spend = ?3, answer = NULL",
                values![self.account, request, charge.0],
            )
            .map_err(|e| self.error(e))?;
        Ok(Once::Charged(charge))
    }

    /// [`Ledger::keep_answer`] inside the caller's transaction: `None` when
    /// another run took this one's place and its charge was given back.
    /// A run whose `turn` is no longer held (see `crate::turns`) keeps
    /// nothing and gives nothing back: its charge stays unanswered, for the
    /// request asked again (as after a crash), or for a copy that now holds
    /// the turn and runs under it.
    fn keep_answer(
        &self,
        charge: Charge,
        answer: &str,
        turn: Option<(i64, i64)>,
    ) -> Result<Option<Kept>> {
        if let Some(turn) = turn
            && !self.holds(turn)?
        {
            return Ok(Some(Kept::Lost(self.kept_under(charge)?)));
        }
        let kept = self
            .sql
            .run(
                "UPDATE replays SET answer = ?2
                 WHERE account = ?1 AND spend = ?3 AND answer IS NULL",
                values![self.account, answer, charge.0],
            )
            .map_err(|e| self.error(e))?;
        if kept == 1 {
            return Ok(Some(Kept::Now));
        }
        // No row for this charge: a refund forgot the request, or it was
        // charged anew (its cost changed). Either way this run releases
        // nothing, so its charge, if it still stands, is given back.
        match self.kept_under(charge)? {
            Some(first) => Ok(Some(Kept::Before(first))),
            None => {
                self.refund(charge)?;
                Ok(None)
            }
        }
    }

    /// The answer kept under `charge`, if any.
    fn kept_under(&self, charge: Charge) -> Result<Option<String>> {
        self.sql
            .first(
                "SELECT answer FROM replays WHERE account = ?1 AND spend = ?2",
                values![self.account, charge.0],
            )
            .and_then(|row| row.map(|row| row.optional_text(0)).transpose())
            .map(Option::flatten)
            .map_err(|e| self.error(e))
    }

    /// Whether the session that holds the advisory lock `token` (its own,
    /// taken when it began, in the two-key form: `objsubid` 2) still holds
    /// the request's turn `key` (the one-key form: `objsubid` 1). A key's
    /// halves are `classid` and `objid`. A session is named by its token,
    /// not its process id, which a later session may be given. Only a
    /// PostgreSQL store's turns are checked.
    fn holds(&self, (key, token): (i64, i64)) -> Result<bool> {
        let halves = |v: i64| ((v >> 32) & 0xffff_ffff, v & 0xffff_ffff);
        let ((key_high, key_low), (token_high, token_low)) = (halves(key), halves(token));
        let count = self
            .sql
            .first(
                "SELECT COUNT(*) FROM pg_locks k JOIN pg_locks t ON t.pid = k.pid
                 WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
                     AND k.classid::bigint = ?1 AND k.objid::bigint = ?2
                     AND t.locktype = 'advisory' AND t.granted AND t.objsubid = 2
                     AND t.classid::bigint = ?3 AND t.objid::bigint = ?4",
                values![key_high, key_low, token_high, token_low],
            )
            .and_then(|row| row.map_or(Ok(0), |row| row.integer(0)))
            .map_err(|e| self.error(e))?;
        Ok(count > 0)
    }
}

/// Which answer a charge keeps.
enum Kept {
    /// The one just given.
    Now,
    /// One kept before, by another run under the same charge.
    Before(String),
    /// None: this run lost its turn. The one kept under the charge by
    /// another run, if any, is released instead.
    Lost(Option<String>),
}

/// A request's earlier charge, and its answer if one was kept.
struct Earlier {
    spend: i64,
    answer: Option<String>,
    units: i64,
    delta: f64,
    /// ρ, spread, tail and keys; `None` for a charge without a concentrated
    /// form, which closed that accountant.
    form: Option<(f64, f64, f64, f64)>,
}

impl Earlier {
    /// Whether the earlier charge paid for `cost` in every form: the same
    /// ε and δ, and a concentrated loss at least `cost`'s (or none, which
    /// closed the concentrated accountant and so pays for any).
    fn pays_for(&self, units: i64, cost: &Cost) -> bool {
        let form = match (self.form, cost.concentrated) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some((rho, spread, tail, keys)), Some(new)) => {
                rho >= new.rho()
                    && spread >= new.spread()
                    && tail >= new.tail()
                    && keys >= new.keys()
            }
        };
        self.units == units && self.delta == cost.loss.delta() && form
    }

    /// The row [`InAccount::charge_once`] selects.
    fn of(row: &Row) -> SqlResult<Self> {
        let form = (
            row.optional_real(4)?,
            row.optional_real(5)?,
            row.optional_real(6)?,
            row.real(7)?,
        );
        Ok(Self {
            spend: row.integer(0)?,
            answer: row.optional_text(1)?,
            units: row.integer(2)?,
            delta: row.real(3)?,
            form: match form {
                (Some(rho), Some(spread), Some(tail), keys) => Some((rho, spread, tail, keys)),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{pure, temporary};

    #[test]
    fn a_request_is_charged_once_and_its_kept_answer_replayed() {
        let path = temporary("replay-once");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
        let Once::Charged(charge) = ledger.charge_once(pure(0.5), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        // Charged but not yet answered (a crash here): it runs again under its charge.
        assert_eq!(
            ledger.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Unanswered(charge)
        );
        assert_eq!(ledger.keep_answer(charge, "the answer").unwrap(), None);
        // A second run under the same charge cannot replace the first answer.
        assert_eq!(
            ledger
                .keep_answer(charge, "another answer")
                .unwrap()
                .as_deref(),
            Some("the answer")
        );
        for _ in 0..3 {
            assert_eq!(
                ledger.charge_once(pure(0.5), "q", "r").unwrap(),
                Once::Answered("the answer".into())
            );
        }
        assert_eq!(ledger.replayed("r").unwrap().as_deref(), Some("the answer"));
        let state = ledger.state().unwrap();
        assert_eq!((state.spent_epsilon, state.queries), (0.5, 1));
        std::fs::remove_file(&path).unwrap();
    }

    /// Two processes given one request: the first charges it, the second
    /// finds the charge unanswered and runs under it too.
    fn two_runs(path: &std::path::Path) -> (Ledger, Ledger, Charge) {
        Ledger::grant(path, "ann/adult", 1.0, 0.0).unwrap();
        let first = Ledger::open_account(path, "ann/adult").unwrap();
        let second = Ledger::open_account(path, "ann/adult").unwrap();
        let Once::Charged(charge) = first.charge_once(pure(0.5), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        assert_eq!(
            second.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Unanswered(charge)
        );
        (first, second, charge)
    }

    #[test]
    fn a_charge_given_back_keeps_no_answer_from_another_run() {
        let path = temporary("replay-refund-first");
        let (first, second, charge) = two_runs(&path);
        assert_eq!(first.refund(charge).unwrap(), None);
        assert!(matches!(
            second.keep_answer(charge, "released for free"),
            Err(LedgerError::GivenBack(_))
        ));
        assert_eq!(second.replayed("r").unwrap(), None);
        assert_eq!(first.state().unwrap().spent_epsilon, 0.0);
        assert!(matches!(
            second.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Charged(_)
        ));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_charge_superseded_by_a_new_cost_is_given_back_when_its_run_ends() {
        let path = temporary("replay-superseded");
        let (first, second, charge) = two_runs(&path);
        // Another dpkit prices the request anew, and charges it again.
        let Once::Charged(anew) = second.charge_once(pure(0.25), "q", "r").unwrap() else {
            panic!("a changed cost is charged anew");
        };
        assert!(matches!(
            first.keep_answer(charge, "never released"),
            Err(LedgerError::GivenBack(_))
        ));
        assert_eq!(first.state().unwrap().spent_epsilon, 0.25);
        assert_eq!(second.keep_answer(anew, "the answer").unwrap(), None);
        std::fs::remove_file(&path).unwrap();
    }

    /// Issue 63: a run that crashed (or lost its turn) left its charge
    /// unanswered; the request asked again at a new cost is charged anew,
    /// and the old charge, which released nothing, is given back then, not
    /// left spent for good.
    #[test]
    fn an_unanswered_charge_replaced_by_a_new_cost_is_given_back_at_once() {
        let path = temporary("replay-orphan");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
        let Once::Charged(crashed) = ledger.charge_once(pure(0.5), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        let Once::Charged(anew) = ledger.charge_once(pure(0.25), "q", "r").unwrap() else {
            panic!("a changed cost is charged anew");
        };
        let state = ledger.state().unwrap();
        assert_eq!((state.spent_epsilon, state.queries), (0.25, 1));
        // A run still going under the old charge keeps and releases nothing.
        assert!(matches!(
            ledger.keep_answer(crashed, "never released"),
            Err(LedgerError::GivenBack(_))
        ));
        assert_eq!(ledger.keep_answer(anew, "the answer").unwrap(), None);
        assert_eq!(ledger.state().unwrap().spent_epsilon, 0.25);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_charge_whose_answer_another_run_kept_is_not_given_back() {
        let path = temporary("replay-kept-first");
        let (first, second, charge) = two_runs(&path);
        assert_eq!(second.keep_answer(charge, "the answer").unwrap(), None);
        assert_eq!(first.refund(charge).unwrap().as_deref(), Some("the answer"));
        assert_eq!(first.state().unwrap().spent_epsilon, 0.5);
        assert_eq!(
            first.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Answered("the answer".into())
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn replays_belong_to_their_account_and_refunds_forget_them() {
        let path = temporary("replay-accounts");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        Ledger::grant(&path, "bob/adult", 1.0, 0.0).unwrap();
        let ann = Ledger::open_account(&path, "ann/adult").unwrap();
        let bob = Ledger::open_account(&path, "bob/adult").unwrap();
        let Once::Charged(charge) = ann.charge_once(pure(0.5), "q", "r").unwrap() else {
            panic!()
        };
        ann.keep_answer(charge, "ann's").unwrap();
        assert_eq!(bob.replayed("r").unwrap(), None);
        assert!(matches!(
            bob.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Charged(_)
        ));
        assert_eq!(bob.state().unwrap().spent_epsilon, 0.5);
        let Once::Charged(refunded) = ann.charge_once(pure(0.25), "q2", "r2").unwrap() else {
            panic!()
        };
        ann.refund(refunded).unwrap();
        assert!(matches!(
            ann.charge_once(pure(0.25), "q2", "r2").unwrap(),
            Once::Charged(_)
        ));
        assert_eq!(ann.state().unwrap().spent_epsilon, 0.75);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_changed_cost_is_charged_anew_and_a_spent_budget_refuses() {
        let path = temporary("replay-changed");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
        assert!(matches!(
            ledger.charge_once(pure(0.5), "q", "r").unwrap(),
            Once::Charged(_)
        ));
        assert!(matches!(
            ledger.charge_once(pure(0.4), "q", "r").unwrap(),
            Once::Charged(_)
        ));
        // The unanswered 0.5 was given back: 0.4 is spent, and 0.4 more fits.
        assert!(matches!(
            ledger.charge_once(pure(0.4), "q", "other").unwrap(),
            Once::Charged(_)
        ));
        assert!(matches!(
            ledger.charge_once(pure(0.4), "q", "third"),
            Err(LedgerError::Budget(_))
        ));
        assert_eq!(ledger.state().unwrap().queries, 2);
        std::fs::remove_file(&path).unwrap();
    }
}
