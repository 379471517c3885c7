#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-functions
//!
//! The DataFusion functions a private query runs once per row, kept apart
//! from the planner so that they alone are built optimised in the dev
//! profile (see `docs/book/src/speed/build.md`):
//!
//! * [`clamp`]: `dpkit_clamp(value, low, high[, centre])`, a value within
//!   public bounds;
//! * [`exact_sum`]: `dpkit_exact_sum(value)`, a sum on a public grid with no
//!   rounding error, in whole grid steps (`dpkit_clamped_sum` when it does
//!   its argument's clamp in its own pass);
//! * [`sum_and_count`]: the same sum counting its values in its own pass,
//!   for an average's or a variance's count;
//! * [`cut_text`]: `dpkit_cut_text(value, limit)`, text cut to a public
//!   number of characters.
//!
//! Each is pure and deterministic, like a built-in. What they compute is
//! decided by the planner (`dpkit-query`), from public facts only.
//!
//! ```
//! use datafusion::prelude::col;
//! let sum = dpkit_functions::exact_sum::exact_sum(
//!     dpkit_functions::clamp::clamp_to_bounds(col("age"), 0.0, 125.0),
//!     0,
//! );
//! assert!(sum.to_string().starts_with("dpkit_exact_sum(dpkit_clamp(age"));
//! ```

pub mod clamp;
pub mod cut_text;
pub mod exact_sum;
pub mod sum_and_count;
