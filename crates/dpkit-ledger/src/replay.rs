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

use dpkit_core::accounting::Cost;
use rusqlite::{OptionalExtension, params};

use super::{Charge, Ledger, Once, to_units};
use crate::Result;

impl Ledger {
    /// The answer kept for `request`, if it was answered before.
    pub fn replayed(&self, request: &str) -> Result<Option<String>> {
        let answer: Option<Option<String>> = self
            .connection
            .query_row(
                "SELECT answer FROM replays WHERE account = ?1 AND request = ?2",
                params![self.account, request],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.error(e))?;
        Ok(answer.flatten())
    }

    /// Charges `cost` for `request` unless it was charged before, in one
    /// transaction. The caller must not run the same request of the same
    /// account twice at once (`dpkit serve` holds a lock per request): an
    /// unanswered charge is taken as abandoned by a stopped process.
    ///
    /// A charge whose recorded cost differs from `cost` (the description
    /// changed since) is not reused: the request is charged anew.
    pub fn charge_once(&self, cost: impl Into<Cost>, query: &str, request: &str) -> Result<Once> {
        let cost = cost.into();
        let units = to_units("the query's", cost.loss.epsilon())?;
        self.locked(|connection| {
            let earlier: Option<(i64, Option<String>, i64, f64)> = connection
                .query_row(
                    "SELECT r.spend, r.answer, s.epsilon_units, s.delta
                     FROM replays r JOIN spends s ON s.id = r.spend
                     WHERE r.account = ?1 AND r.request = ?2 AND s.status = 'charged'",
                    params![self.account, request],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
                )
                .optional()
                .map_err(|e| self.error(e))?;
            match earlier {
                Some((_, Some(answer), _, _)) => return Ok(Once::Answered(answer)),
                Some((spend, None, spent_units, spent_delta))
                    if spent_units == units && spent_delta == cost.loss.delta() =>
                {
                    return Ok(Once::Unanswered(Charge(spend)));
                }
                _ => {}
            }
            let charge = self.charge_in(connection, units, cost, query)?;
            connection
                .execute(
                    "INSERT INTO replays (account, request, spend, answer) VALUES (?1, ?2, ?3, NULL)
                     ON CONFLICT (account, request) DO UPDATE SET spend = ?3, answer = NULL",
                    params![self.account, request, charge.0],
                )
                .map_err(|e| self.error(e))?;
            Ok(Once::Charged(charge))
        })
    }

    /// Keeps `answer` for the request `charge` paid for, unless an answer
    /// is kept for it already: then that one is returned, and must be
    /// released instead (one charge, one answer, whatever runs raced). It
    /// is on disk when this returns, so it may then be released.
    pub fn keep_answer(&self, charge: Charge, answer: &str) -> Result<Option<String>> {
        self.locked(|connection| {
            let kept = connection
                .execute(
                    "UPDATE replays SET answer = ?2
                     WHERE account = ?1 AND spend = ?3 AND answer IS NULL",
                    params![self.account, answer, charge.0],
                )
                .map_err(|e| self.error(e))?;
            if kept == 1 {
                return Ok(None);
            }
            connection
                .query_row(
                    "SELECT answer FROM replays WHERE account = ?1 AND spend = ?2",
                    params![self.account, charge.0],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
                .map_err(|e| self.error(e))
                .map(Option::flatten)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LedgerError;
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
        assert!(matches!(
            ledger.charge_once(pure(0.4), "q", "other"),
            Err(LedgerError::Budget(_))
        ));
        assert_eq!(ledger.state().unwrap().queries, 2);
        std::fs::remove_file(&path).unwrap();
    }
}
