//! `dpkit_cut_text(value, n)`: a Utf8 column with every value cut to its
//! column's `max_length` of n characters, as `left(value, n)`.
//!
//! `left` copies every string and counts its characters. Almost every
//! value is far shorter than the cut, and a value of at most n
//! bytes has at most that many characters, so this function first reads the
//! array's offsets (one in 64, see `any_longer`): when no value is longer
//! in bytes, the array is returned as it is, without a copy. On the 10-million-row benchmark
//! (`crates/dpkit-query/benches/dp_overhead.rs`) `left` on the group key was a fifth of the
//! private query's time.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility, lit,
};

/// The cutting function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CutText {
    signature: Signature,
}

/// `text`'s first `limit` characters.
fn cut(text: &str, limit: usize) -> &str {
    match text.char_indices().nth(limit) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The array with every value cut, or the array itself when no value is
/// longer than the cut in bytes (so none is in characters).
fn cut_array(array: &Arc<dyn Array>, limit: usize) -> datafusion::common::Result<Arc<dyn Array>> {
    let strings = array.as_string_opt::<i32>().ok_or_else(|| {
        DataFusionError::Plan(format!(
            "dpkit_cut_text needs Utf8 text, got {}",
            array.data_type()
        ))
    })?;
    let offsets = strings.offsets();
    let characters = limit;
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    if !any_longer(offsets, limit) {
        return Ok(Arc::clone(array));
    }
    let cut: StringArray = strings
        .iter()
        .map(|value| value.map(|v| cut(v, characters)))
        .collect();
    Ok(Arc::new(cut))
}

/// Values read together: their bytes in all are one subtraction.
const RUN: usize = 64;

/// Whether any value between `offsets` is longer than `limit` bytes.
///
/// Offsets never decrease, so a run of values whose bytes together are
/// within the limit holds no longer value: only the offsets at the ends
/// of each run of [`RUN`] values are read, and a run that is longer in all
/// is looked at value by value. For the same reason no difference can
/// overflow: `wrapping_sub` only drops the overflow check, whose branch
/// (every build checks arithmetic) would keep the pass from being
/// vectorised.
fn any_longer(offsets: &[i32], limit: i32) -> bool {
    let last = offsets.len() - 1;
    (0..last).step_by(RUN).any(|start| {
        let end = (start + RUN).min(last);
        offsets[end].wrapping_sub(offsets[start]) > limit
            && offsets[start + 1..=end]
                .iter()
                .zip(&offsets[start..end])
                .fold(false, |long, (end, start)| {
                    long | (end.wrapping_sub(*start) > limit)
                })
    })
}

impl ScalarUDFImpl for CutText {
    fn name(&self) -> &str {
        "dpkit_cut_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let [
            value,
            ColumnarValue::Scalar(ScalarValue::Int64(Some(limit))),
        ] = args.args.as_slice()
        else {
            return Err(DataFusionError::Plan(
                "dpkit_cut_text takes a value and a literal length".into(),
            ));
        };
        let limit = usize::try_from(*limit).unwrap_or(0);
        Ok(match value {
            ColumnarValue::Array(array) => ColumnarValue::Array(cut_array(array, limit)?),
            ColumnarValue::Scalar(ScalarValue::Utf8(text)) => ColumnarValue::Scalar(
                ScalarValue::Utf8(text.as_deref().map(|t| cut(t, limit).to_string())),
            ),
            ColumnarValue::Scalar(other) => {
                return Err(DataFusionError::Plan(format!(
                    "dpkit_cut_text needs Utf8 text, got {}",
                    other.data_type()
                )));
            }
        })
    }
}

/// `dpkit_cut_text(value, limit)` as an expression; `value` must be Utf8.
///
/// ```
/// use datafusion::prelude::col;
/// let cut = dpkit_functions::cut_text::cut_text(col("country"), 1024);
/// assert_eq!(cut.to_string(), "dpkit_cut_text(country, Int64(1024))");
/// ```
pub fn cut_text(value: Expr, limit: u32) -> Expr {
    let function = ScalarUDF::from(CutText {
        signature: Signature::exact(vec![DataType::Utf8, DataType::Int64], Volatility::Immutable),
    });
    function.call(vec![value, lit(i64::from(limit))])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1024;

    #[test]
    fn short_values_are_kept_without_a_copy_and_long_ones_cut_by_characters() {
        let short: Arc<dyn Array> = Arc::new(StringArray::from(vec![Some("a"), None, Some("é")]));
        let kept = cut_array(&short, LIMIT).unwrap();
        assert!(Arc::ptr_eq(&kept, &short));

        let long = "é".repeat(LIMIT + 3);
        let mixed: Arc<dyn Array> = Arc::new(StringArray::from(vec![Some("x"), Some(&long), None]));
        let cut = cut_array(&mixed, LIMIT).unwrap();
        let cut = cut.as_string::<i32>();
        assert_eq!(cut.value(0), "x");
        assert_eq!(cut.value(1).chars().count(), LIMIT);
        assert!(cut.is_null(2));
    }

    /// Each value alone, as the runs of [`any_longer`] must agree with.
    fn any_longer_one_by_one(offsets: &[i32], limit: i32) -> bool {
        offsets.windows(2).any(|pair| pair[1] - pair[0] > limit)
    }

    #[test]
    fn one_long_value_is_found_wherever_it_lies_in_its_run() {
        let limit = 8;
        for count in [0, 1, RUN - 1, RUN, RUN + 1, 3 * RUN + 5] {
            // Values of 8 bytes: every run is longer in all than the limit,
            // and so is looked at value by value.
            let short: Vec<i32> = (0..=count as i32).map(|i| 8 * i).collect();
            assert!(!any_longer(&short, limit), "{count} values of the limit");
            for long in 0..count {
                let offsets: Vec<i32> = (0..=count)
                    .map(|i| 8 * i as i32 + i32::from(i > long))
                    .collect();
                assert!(any_longer(&offsets, limit), "value {long} of {count}");
                assert!(any_longer_one_by_one(&offsets, limit));
            }
        }
    }

    #[test]
    fn one_long_value_among_empty_ones_is_found_at_any_place() {
        let limit = 8;
        let count = 3 * RUN + 5;
        for at in 0..count {
            // Every run but the value's is skipped whole.
            for (length, longer) in [(limit + 1, true), (limit, false)] {
                let offsets: Vec<i32> = (0..=count)
                    .map(|i| if i > at { length } else { 0 })
                    .collect();
                assert_eq!(any_longer(&offsets, limit), longer, "value {at}");
            }
        }
    }

    #[test]
    fn runs_agree_with_each_value_alone_on_mixed_lengths() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for round in 0..200 {
            let mut offsets = vec![0i32];
            for _ in 0..(round * 7) % 300 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Mostly short values, whose runs are skipped whole; now
                // and then one just within the limit, whose run is read
                // value by value; rarely one over it.
                let length = match state % 97 {
                    0 => 401,
                    1..=4 => 400,
                    _ => (state % 6) as i32,
                };
                offsets.push(offsets.last().unwrap() + length);
            }
            assert_eq!(
                any_longer(&offsets, 400),
                any_longer_one_by_one(&offsets, 400),
                "round {round}"
            );
        }
    }

    #[test]
    fn a_value_of_exactly_the_limit_is_kept_whole() {
        let exact = "a".repeat(LIMIT);
        assert_eq!(cut(&exact, LIMIT).len(), LIMIT);
        let two_byte = "é".repeat(LIMIT);
        assert_eq!(cut(&two_byte, LIMIT), two_byte);
    }
}
