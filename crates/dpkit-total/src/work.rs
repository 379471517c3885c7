//! The work one row can cost, bounded at planning.
//!
//! Why: run time is a release. A query whose expression is slow only on
//! rows that match a predicate (`CASE WHEN <one person> THEN <costly>
//! END`), or only on one person's long value, tells by its duration whether
//! that person is there. So every accepted expression has a public bound
//! on its work per row, from public facts only (each text column's
//! `max_length`, the query's literals), and a query above [`MAX_WORK`] is
//! refused, for free.
//!
//! A unit is one byte of text that one pass of the cheapest functions
//! reads; the dearer ones cost several units per byte, as measured on
//! their worst inputs (`benches/row_cost.rs`, which times each function's
//! most expensive row against this model). Numbers, booleans and NULLs cost
//! no unit: their work per node is a constant, and nodes are bounded
//! (`total::MAX_NODES`). Regular expressions and complex LIKE patterns are
//! deterministic automata (`crate::matcher`): one unit per byte.

/// The most work units one row may cost. On the worst values of each
/// function, a row at this bound took at most 0.27 ms on a 2-core AMD EPYC
/// (`tests/row_cost.rs`, which fails past 4 ns a unit, 0.52 ms).
pub const MAX_WORK: u64 = 1 << 17;

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
}
