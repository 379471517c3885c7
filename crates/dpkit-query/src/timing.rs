//! When an answer may leave: no earlier than a deadline computed from
//! public facts, and past it at a noisy time
//! ([`dpkit_core::mechanism::ReleaseTime`], which holds the argument).
//!
//! The deadline is what a run at the engine's typical speed would take
//! over the public number of people: `floor + people × work × typical`,
//! `work` being the planner's bound on what one person's rows can cost
//! ([`PrivateQuery::work`], in units) and `typical` what a unit takes on
//! most runs of the engine that runs the query ([`Speed`]). An answer
//! leaves at the later of the deadline and a time that is (ε, δ)-DP in
//! its run's duration, for a person who moves the duration by at most
//! `work × worst`, `worst` being the most a unit was measured to take on
//! that engine. The deadline is not part of the guarantee: a later or
//! earlier one changes how long short runs wait, not what a release time
//! shows.
//!
//! ```
//! use std::time::Duration;
//! use dpkit_query::timing::{Deadlines, Speed};
//! let deadlines = Deadlines::default();
//! let release = deadlines.release_time(10_000, Some(32_561), Speed::EMBEDDED).unwrap();
//! // 32,561 people at 10,000 units each, 0.25 ns a unit: 81.4025 ms,
//! // rounded up to the microsecond.
//! assert_eq!(release.deadline(), Duration::from_micros(81_403));
//! ```

use std::time::Duration;

use dpkit_core::mechanism::ReleaseTime;

use crate::error::Result;

/// The most nanoseconds one unit of work may take on the embedded engine:
/// `tests/row_cost.rs` fails any function, value or join past it.
pub const NANOSECONDS_PER_UNIT: u64 = 4;

/// How fast an engine runs a unit of work: at worst, for the release
/// time's sensitivity (rounded up to a power of two), and on most runs,
/// for the deadline.
///
/// ```
/// use dpkit_databases::Flavour;
/// use dpkit_query::timing::Speed;
/// assert_eq!(Speed::of(None), Speed::EMBEDDED);
/// assert!(Speed::of(Some(Flavour::Sqlite)).worst_nanoseconds() > 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Speed {
    worst_nanoseconds: u64,
    typical_picoseconds: u64,
}

impl Speed {
    /// DataFusion on files: at most [`NANOSECONDS_PER_UNIT`], which
    /// `tests/row_cost.rs` holds every node to; a quarter of a nanosecond
    /// on most runs. The work bound takes every text at its `max_length`
    /// and every branch as taken, so most runs take a fraction of it
    /// (`SELECT sex, COUNT(*) … GROUP BY sex` on Adult is bounded at 3,116
    /// units a person, 25 ms over its 32,561 people, and runs in about
    /// 10 ms).
    pub const EMBEDDED: Speed = Speed {
        worst_nanoseconds: NANOSECONDS_PER_UNIT,
        typical_picoseconds: 250,
    };

    /// The engine that runs a query: the embedded one (`None`) or a
    /// database. At worst, measured by `docs/bench/work_units.py` (one
    /// person's rows present or not, 101 alternating pairs, the median
    /// difference over the planned units; shared 2-core Intel Xeon,
    /// 2026-12-07): on both databases the slowest case was reading and
    /// capping 500 rows of one person, which the units count as on the
    /// embedded engine. Each speed is at least twice the slowest measured,
    /// as the embedded engine's 4 ns is (its measured cases stay below
    /// half of it), for slower or busier servers than the one timed:
    /// * PostgreSQL 15: 345–368 µs over 6,048 units, 57–61 ns a unit: 128.
    /// * SQLite 3.40: 2.31–2.40 ms over 6,048 units, 382–397 ns a unit
    ///   (its numeric nodes, through dpkit's registered functions at about
    ///   1.25 µs a call, came to at most 112 ns a unit): 1,024.
    /// * Spark was not timed: it takes SQLite's figures, the slowest, which
    ///   are not a measurement of Spark.
    ///
    /// On most runs, a nanosecond a unit on both databases: three queries
    /// on Adult (`COUNT(*)` by sex, `AVG(age)` by education, a `LIKE`
    /// count; 3,116 to 7,244 units) took 0.49 to 0.81 ns a unit a person,
    /// the whole `dpkit query` process timed, on either.
    pub fn of(flavour: Option<dpkit_databases::Flavour>) -> Speed {
        use dpkit_databases::Flavour;
        let (worst_nanoseconds, typical_picoseconds) = match flavour {
            None => return Self::EMBEDDED,
            Some(Flavour::Postgres) => (128, 1_000),
            Some(Flavour::Sqlite | Flavour::Spark) => (1_024, 1_000),
        };
        Speed {
            worst_nanoseconds,
            typical_picoseconds,
        }
    }

    /// The most nanoseconds a unit may take on this engine.
    pub fn worst_nanoseconds(self) -> u64 {
        self.worst_nanoseconds
    }
}

/// How answers are held back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deadlines {
    /// Added to every deadline: what any run takes, whatever it asks.
    pub floor: Duration,
    /// The release time's ε in the run's duration.
    pub epsilon: f64,
    /// The release time's δ in the run's duration.
    pub delta: f64,
}

impl Default for Deadlines {
    /// No floor; the release time at ε = 0.01 and δ = 10⁻⁹.
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
    /// person, on a table of `people` (when public; none adds nothing),
    /// run by an engine of `speed`.
    pub fn release_time(
        &self,
        work: u64,
        people: Option<u64>,
        speed: Speed,
    ) -> Result<ReleaseTime> {
        let picoseconds = people
            .unwrap_or(0)
            .saturating_mul(work)
            .saturating_mul(speed.typical_picoseconds);
        let deadline = self
            .floor
            .saturating_add(Duration::from_nanos(picoseconds / 1000));
        let sensitivity = Duration::from_nanos(work.saturating_mul(speed.worst_nanoseconds));
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
        let release = deadlines
            .release_time(100, Some(1_000), Speed::EMBEDDED)
            .unwrap();
        assert_eq!(release.deadline(), Duration::from_nanos(5_025_000));
        let release = deadlines.release_time(100, None, Speed::EMBEDDED).unwrap();
        assert_eq!(release.deadline(), Duration::from_millis(5));
        // Past the deadline: 400 ns of sensitivity (rounded up to 1 µs) at
        // ε = 0.01 is a scale of 100 µs, and the offset ln(1/δ) scales,
        // about 2.07 ms.
        let offset = release.offset();
        assert!(offset > Duration::from_micros(2_000) && offset < Duration::from_micros(2_150));
    }

    #[test]
    fn a_database_slower_a_unit_gets_its_own_deadline_and_more_noise_past_it() {
        use dpkit_databases::Flavour;
        let deadlines = Deadlines::default();
        let at = |flavour| {
            deadlines
                .release_time(1_000, Some(1_000), Speed::of(flavour))
                .unwrap()
        };
        let embedded = at(None);
        // 10^6 units at 0.25 ns: 250 µs; 1,000 units at 4 ns: 4 µs of
        // sensitivity.
        assert_eq!(embedded.deadline(), Duration::from_micros(250));
        for (flavour, worst) in [
            (Flavour::Postgres, 128),
            (Flavour::Sqlite, 1_024),
            (Flavour::Spark, 1_024),
        ] {
            let release = at(Some(flavour));
            // A nanosecond a unit: 1 ms.
            assert_eq!(release.deadline(), Duration::from_millis(1));
            let ratio = release.offset().as_secs_f64() / embedded.offset().as_secs_f64();
            assert!(
                (ratio - worst as f64 / 4.0).abs() < 0.01 * ratio,
                "{flavour:?}: {ratio}"
            );
        }
    }
}
