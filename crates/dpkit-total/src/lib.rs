#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-total
//!
//! Total expressions: every expression an accepted query evaluates comes
//! from an allow-list and is rewritten into a form that cannot fail, panic
//! or grow without bound on any value.
//!
//! Why: an error that happens only on one person's row (a division by zero
//! in one branch of a CASE, a cast of one odd value) is released without
//! noise, as the query's failure. One such bit per query reads a whole row
//! in a few dozen queries. So:
//! - values have four types, Int64, Float64, Utf8 and Boolean, and every
//!   conversion between them is a `TRY_CAST` (NULL when it does not parse);
//! - arithmetic is dpkit's own function: overflow and a zero divisor give
//!   NULL;
//! - functions come from [`ALLOWED_FUNCTIONS`], each total on these types
//!   with output at most linear in its input (no `repeat`, no padding to a
//!   length taken from the data);
//! - regular expressions and LIKE patterns are literals, compiled here;
//! - an expression has at most [`MAX_DEPTH`] levels and [`MAX_NODES`] nodes,
//!   so its cost per row is bounded by its size times the row's size.
//!
//! Anything else is refused at planning, which spends nothing. The planner
//! in `dpkit-query` rewrites every expression with a [`Totaliser`] and
//! checks the work one person's rows can cause with [`check_work`].
//!
//! ```
//! // SQL past what the tokenizer and planner are allowed to read is refused
//! // before it is parsed.
//! assert!(dpkit_total::check_size("SELECT COUNT(*) FROM t").is_ok());
//! assert!(dpkit_total::check_size(&"(".repeat(dpkit_total::MAX_SQL_BYTES + 1)).is_err());
//! ```

mod arithmetic;
mod error;
mod matcher;
mod math;
mod rewrite;
mod work;

pub use error::{Result, TotalError};
pub use matcher::MAX_AUTOMATON_BYTES;
pub use rewrite::{
    ALLOWED_FUNCTIONS, MAX_DEPTH, MAX_NODES, MAX_SQL_BYTES, Size, Sizes, Totaliser, Ty, Typed,
    check_size, check_work,
};
pub use work::{
    MATH_CALL_WORK, MAX_WORK, NODE_BATCH_WORK, NODE_WORK, NUMBER_AS_TEXT_BYTES,
    bytes_of_characters, pair_work, row_work,
};

/// The largest `max_length` a description may give a text column: a value
/// of that many characters (4 bytes each at most) is as much work per row
/// as a query may do ([`MAX_WORK`]).
pub const LONGEST_MAX_LENGTH: u32 = 32_768;
