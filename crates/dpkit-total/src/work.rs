//! The work one person's rows can cost, bounded at planning.
//!
//! Why: run time is a release. A query whose expression is slow only on
//! rows that match a predicate (`CASE WHEN <one person> THEN <costly>
//! END`), or only on one person's long value, tells by its duration whether
//! that person is there. So every accepted query has a public bound on the
//! work that one person's rows can cause, from public facts only (each text
//! column's `max_length`, the query's literals and functions, each table's
//! `max_rows_per_person`, each join's public fan-out), and a query above
//! [`MAX_WORK`] is refused, for free.
//!
//! The model counts everything that runs once per row, and what every
//! operation costs once per batch:
//! - **every node** of every expression costs [`NODE_WORK`] units per row
//!   it runs on, numbers and booleans included, and [`NODE_BATCH_WORK`]
//!   once for the query: DataFusion evaluates a node over a batch at a
//!   fixed cost of about a hundred nanoseconds plus a nanosecond or so a
//!   row, so a branch that only one person's rows reach costs that
//!   person the fixed part (the attack that showed this: a few hundred
//!   numeric CASE branches on one person's rows, multiplied by a join's
//!   fan-out, were free before and took seconds). A person's rows are
//!   contiguous after the cap, so they reach a node in few batches;
//! - a real function of libm's (`exp`, `pow`, `atan2`…) costs
//!   [`MATH_CALL_WORK`] more per call;
//! - text costs units per byte of its longest value, weighted by what the
//!   function does per byte ([`function_work`]); regular expressions and
//!   complex LIKE patterns are deterministic automata (`crate::matcher`):
//!   one unit per byte;
//! - each pair of rows a join compares and emits costs [`pair_work`], and
//!   each row the aggregate reads [`row_work`], for the columns they
//!   carry.
//!
//! The planner multiplies each node's per-row work by the rows one person
//! can hold where it runs (the table's cap, times every join's public
//! fan-out, times the other side's cap for joins on the person), adds
//! them up, and adds [`NODE_BATCH_WORK`] for each node of the plan: the
//! bound is per person, for the whole query. What every query pays alike
//! (reading and capping the tables) depends on the data's size, not on the
//! query, and is bounded by the description's caps and lengths; the book's
//! "What one person can cost" says what that leaves visible.
//!
//! A unit is about a nanosecond: `tests/row_cost.rs` times the worst
//! functions, values and fan-outs on one person's rows and fails past 4 ns
//! a unit.

/// The most work units one person's rows may cost a query: half a
/// millisecond at the 4 ns a unit `tests/row_cost.rs` holds the model to.
pub const MAX_WORK: u64 = 1 << 17;

/// What every node of an expression costs per row it runs on: a few
/// nanoseconds a row for the cheapest (a comparison of numbers, a
/// column's read, a CASE branch's test), vectorised over a batch.
pub const NODE_WORK: u64 = 4;

/// What every node of a plan costs once, for the batches one person's
/// rows may reach it in alone: measured at 110 to 240 ns a node for one
/// row (`tests/row_cost.rs`, on shared 2-core machines), allowed 512 ns.
pub const NODE_BATCH_WORK: u64 = 128;

/// What one call of a real function of libm's costs more than a node, per
/// row, on its slowest arguments (`pow`, `atan2`, the hyperbolic
/// functions near their limits).
pub const MATH_CALL_WORK: u64 = 16;

/// The real functions that cost [`MATH_CALL_WORK`] per call; the others
/// (`abs`, `floor`, `sqrt`, `isnan`…) are one instruction or a few, and
/// cost a node's [`NODE_WORK`].
const MATH_CALLS: &[&str] = &[
    "cbrt", "exp", "ln", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
    "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "power", "pow",
];

/// The units a call of the real function `name` costs beyond its node.
pub(crate) fn math_work(name: &str) -> u64 {
    match MATH_CALLS.contains(&name) {
        true => MATH_CALL_WORK,
        false => 0,
    }
}

/// What one row costs where the aggregate reads it: each of its
/// `columns` is hashed and compared as a key, or added.
pub const fn row_work(columns: usize) -> u64 {
    NODE_WORK * (columns as u64 + 1)
}

/// What a join costs for each pair of rows it compares and emits: a walk
/// of the hash table's chain for the key (all of one person's rows share
/// it in a join on the person), then each of its `columns` taken into the
/// output batch. Measured at 0.3 to 0.9 µs a pair for one person's rows
/// joined with themselves (`tests/row_cost.rs`, shared 2-core machines),
/// allowed 1 µs and 16 ns more a column.
pub const fn pair_work(columns: usize) -> u64 {
    PAIR_WORK + NODE_WORK * columns as u64
}

/// The part of [`pair_work`] that does not depend on the columns.
const PAIR_WORK: u64 = 256;
/// The most bytes a character takes in UTF-8.
const BYTES_PER_CHARACTER: u64 = 4;

/// The most bytes a text value of `characters` characters takes.
pub fn bytes_of_characters(characters: u32) -> u64 {
    u64::from(characters) * BYTES_PER_CHARACTER
}

/// The most bytes a number or boolean takes when cast to text
/// (`-1.7976931348623157e308` is 23).
pub const NUMBER_AS_TEXT_BYTES: u64 = 24;

/// Units per byte of input, and the output's most bytes from the inputs'
/// most bytes, of an allowed text function (`None` for the others, which
/// do a constant amount of work).
pub(crate) fn function_work(name: &str, inputs: &[u64]) -> Option<(u64, u64)> {
    let total: u64 = inputs.iter().sum();
    let first = inputs.first().copied().unwrap_or(0);
    let largest = inputs.iter().copied().max().unwrap_or(0);
    Some(match name {
        // Case mappings may grow a character (`İ` lowercases to two, `ΐ`
        // uppercases to three), and go through Unicode's tables: measured
        // at 4 and 16 ns per byte of Greek text, against about 1 for a
        // plain pass.
        "lower" => (4 * first, first + first.div_ceil(2)),
        "upper" | "initcap" => (16 * first, 3 * first),
        "reverse" => (4 * first, first),
        "btrim" | "trim" | "ltrim" | "rtrim" => (first, first),
        "substr" | "substring" | "left" | "right" => (first, first),
        "character_length" | "char_length" | "length" => (first, NUMBER_AS_TEXT_BYTES),
        "octet_length" | "bit_length" => (0, NUMBER_AS_TEXT_BYTES),
        "strpos" | "instr" => (total, NUMBER_AS_TEXT_BYTES),
        "starts_with" | "ends_with" => (largest, NUMBER_AS_TEXT_BYTES),
        "concat" => (total, total),
        // Text compared with text, or passed through.
        "coalesce" | "nullif" | "greatest" | "least" => (total, largest),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_grow_with_their_inputs_and_case_mappings_cost_most() {
        assert_eq!(function_work("concat", &[10, 20, 30]), Some((60, 60)));
        assert_eq!(function_work("upper", &[100]), Some((1600, 300)));
        assert_eq!(function_work("lower", &[100]), Some((400, 150)));
        assert_eq!(function_work("sqrt", &[8]), None);
        assert_eq!(bytes_of_characters(1024), 4096);
    }

    #[test]
    fn libms_calls_cost_more_than_a_node_and_rows_cost_their_columns() {
        for name in ["atan2", "pow", "power", "exp", "sinh", "ln"] {
            assert_eq!(math_work(name), MATH_CALL_WORK, "{name}");
        }
        assert_eq!(math_work("abs"), 0);
        assert_eq!(row_work(0), NODE_WORK);
        assert_eq!(row_work(9), 10 * NODE_WORK);
        assert_eq!(pair_work(9), PAIR_WORK + 9 * NODE_WORK);
    }
}
