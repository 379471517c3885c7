//! Test-only switches that put closed holes back, so that the end-to-end
//! auditor's tests can show it catches each one (as the mechanism auditor
//! does with its deliberately broken mechanisms). It is an optional
//! dependency, switched on only by the non-default `planted-holes` feature
//! of the crates that hold the holes (`dpkit-total`, `dpkit-release`,
//! `dpkit-query`, `dpkit-synth`): the default build, which `cargo install` and the wheel
//! ship, does not contain it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::sync::atomic::{AtomicU32, Ordering};

/// One hole that was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Hole {
    /// Expressions run as written, without the total rewrite: a failure on
    /// one row is an exact bit.
    FailingExpressions = 1,
    /// Staircase noise over groups charged once, as if its loss were linear.
    StaircaseChargedOnce = 2,
    /// Keys that print alike (or repeat in a domain) released separately.
    RepeatedKeys = 4,
    /// The per-person cap applied after the query's FROM, by whatever
    /// column it calls the id.
    CapAfterFrom = 8,
    /// CSV column types inferred from the data.
    InferredTypes = 16,
    /// Sums computed in floating point, in whatever order.
    FloatingPointSums = 32,
    /// A subquery's computed column borrows the facts (whole numbers,
    /// bounds, domain) of the table's column of the same name.
    BorrowedFacts = 64,
    /// Whole-number sums added on a fine grid and rounded as totals, half
    /// away from zero (not translation invariant across 0), instead of
    /// each value rounded ties upwards before it is added.
    RoundedTotals = 128,
    /// Regular expressions and LIKE and ILIKE patterns run by Arrow's regex
    /// engine, whose cost per row grows with the pattern's size and which
    /// compiles ILIKE's pattern on each batch a row reaches it in.
    BacktrackingPatterns = 256,
    /// The SQL sent to a database is not read back and compared with the
    /// statement dpkit wrote.
    UnreadSql = 512,
    /// A join with a public table counted as if each private row met at
    /// most one of its rows, whatever its key repeats.
    JoinFanout = 1024,
    /// Bounds per group used for the noise, but each person's rows not
    /// truncated to them.
    UntruncatedGroups = 2048,
    /// Two private tables joined on any key, as if it named the person.
    PersonJoinOnAnyKey = 4096,
    /// A synthetic table's first 1-way marginal measured without noise.
    UnnoisedMarginal = 8192,
}

static PLANTED: AtomicU32 = AtomicU32::new(0);

/// Puts `hole` back until [`clear`] (process-wide: use one test process).
pub fn plant(hole: Hole) {
    PLANTED.fetch_or(hole as u32, Ordering::SeqCst);
}

/// Closes every planted hole.
pub fn clear() {
    PLANTED.store(0, Ordering::SeqCst);
}

/// Whether `hole` is planted.
pub fn is_planted(hole: Hole) -> bool {
    PLANTED.load(Ordering::SeqCst) & hole as u32 != 0
}
