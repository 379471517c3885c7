//! When an answer may leave: no earlier than a deadline computed from
//! public facts, and past it at a noisy time
//! ([`dpkit_core::mechanism::ReleaseTime`], which holds the argument).
//!
//! The deadline is what a run at a tenth of the query's work bound would
//! take over the public number of people: `floor + people × work ×
//! 0.25 ns`, `work`
//! being the planner's bound on what one person's rows can cost
//! ([`PrivateQuery::work`], units of about a nanosecond). A run that ends
//! by then is released at the deadline, which shows nothing; a run that
//! overruns it is released at a time that is (ε, δ)-DP in its duration,
//! for a person who moves the duration by at most `work × 4 ns` (the
//! bound `tests/row_cost.rs` holds every unit to).
//!
//! ```
//! use std::time::Duration;
//! use dpkit_query::timing::Deadlines;
//! let deadlines = Deadlines::default();
//! let release = deadlines.release_time(10_000, Some(32_561)).unwrap();
//! // 32,561 people at 10,000 units each, 0.25 ns a unit: 81.4025 ms,
//! // rounded up to the microsecond.
//! assert_eq!(release.deadline(), Duration::from_micros(81_403));
//! ```

use std::time::Duration;

use dpkit_core::mechanism::ReleaseTime;

use crate::error::Result;

/// The most nanoseconds one unit of work may take: `tests/row_cost.rs`
/// fails any function, value or join past it.
pub const NANOSECONDS_PER_UNIT: u64 = 4;

/// The picoseconds a unit of work takes on most rows, for the deadline: a
/// quarter of a nanosecond. The work bound takes every text at its
/// `max_length` and every branch as taken; most runs take a fraction of it
/// (`SELECT sex, COUNT(*) … GROUP BY sex` on Adult is bounded at 3,116
/// units a person, 25 ms over its 32,561 people, and runs in about 10 ms).
/// It was a tenth of a nanosecond while text columns with a domain were
/// bounded at 1,024 characters (8,000 units for that query): the quarter
/// keeps its deadline where it was. A run past its deadline is released at
/// a noisy time, which the guarantee does not need the deadline for.
const TYPICAL_PICOSECONDS_PER_UNIT: u64 = 250;

/// How answers are held back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deadlines {
    /// Added to every deadline: what any run takes, whatever it asks.
    pub floor: Duration,
    /// The release time's ε past the deadline.
    pub epsilon: f64,
    /// The release time's δ past the deadline.
    pub delta: f64,
}

impl Default for Deadlines {
    /// No floor; past the deadline, ε = 0.01 and δ = 10⁻⁹.
    fn default() -> Self {
        Self {
            floor: Duration::ZERO,
            epsilon: 0.01,
            delta: 1e-9,
        }
    }
}

impl Deadlines {
    /// The release time of a query whose work bound is `work` units per
    /// person, on a table of `people` (when public; none adds nothing).
    pub fn release_time(&self, work: u64, people: Option<u64>) -> Result<ReleaseTime> {
        let picoseconds = people
            .unwrap_or(0)
            .saturating_mul(work)
            .saturating_mul(TYPICAL_PICOSECONDS_PER_UNIT);
        let deadline = self
            .floor
            .saturating_add(Duration::from_nanos(picoseconds / 1000));
        let sensitivity = Duration::from_nanos(work.saturating_mul(NANOSECONDS_PER_UNIT));
        Ok(ReleaseTime::new(
            deadline,
            sensitivity,
            self.epsilon,
            self.delta,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_grows_with_the_people_and_the_work_and_the_floor() {
        let deadlines = Deadlines {
            floor: Duration::from_millis(5),
            ..Deadlines::default()
        };
        let release = deadlines.release_time(100, Some(1_000)).unwrap();
        assert_eq!(release.deadline(), Duration::from_nanos(5_025_000));
        let release = deadlines.release_time(100, None).unwrap();
        assert_eq!(release.deadline(), Duration::from_millis(5));
        // Past the deadline: 400 ns of sensitivity (rounded up to 1 µs) at
        // ε = 0.01 is a scale of 100 µs, and the offset ln(1/δ) scales,
        // about 2.07 ms.
        let offset = release.offset();
        assert!(offset > Duration::from_micros(2_000) && offset < Duration::from_micros(2_150));
    }
}
