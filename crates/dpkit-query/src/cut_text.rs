//! `dpkit_cut_text(value)`: a Utf8 column with every value cut to
//! [`MAX_TEXT_CHARS`] characters, as `left(value, MAX_TEXT_CHARS)`.
//!
//! `left` copies every string and counts its characters. Almost every
//! value is far shorter than the cut, and a value of at most `MAX_TEXT_CHARS`
//! bytes has at most that many characters, so this function first reads the
//! array's offsets: when no value is longer in bytes, the array is returned
//! as it is, without a copy. On the 10-million-row benchmark
//! (`benches/dp_overhead.rs`) `left` on the group key was a fifth of the
//! private query's time.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::source::MAX_TEXT_CHARS;

/// The cutting function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CutText {
    signature: Signature,
}

/// `text`'s first `MAX_TEXT_CHARS` characters.
fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT_CHARS as usize) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The array with every value cut, or the array itself when no value is
/// longer than the cut in bytes (so none is in characters).
fn cut_array(array: &Arc<dyn Array>) -> datafusion::common::Result<Arc<dyn Array>> {
    let strings = array.as_string_opt::<i32>().ok_or_else(|| {
        DataFusionError::Plan(format!(
            "dpkit_cut_text needs Utf8 text, got {}",
            array.data_type()
        ))
    })?;
    let offsets = strings.offsets();
    let limit = MAX_TEXT_CHARS as i32;
    // All the values' bytes together within the limit settle it at once;
    // otherwise one branch-free pass (SSE2 compares, no per-value branch).
    let total = offsets[offsets.len() - 1] - offsets[0];
    let all_short = total <= limit
        || !offsets[1..]
            .iter()
            .zip(offsets.iter())
            .fold(false, |long, (end, start)| long | (end - start > limit));
    if all_short {
        return Ok(Arc::clone(array));
    }
    let cut: StringArray = strings.iter().map(|value| value.map(cut)).collect();
    Ok(Arc::new(cut))
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
        let [value] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(
                "dpkit_cut_text takes one value".into(),
            ));
        };
        Ok(match value {
            ColumnarValue::Array(array) => ColumnarValue::Array(cut_array(array)?),
            ColumnarValue::Scalar(ScalarValue::Utf8(text)) => ColumnarValue::Scalar(
                ScalarValue::Utf8(text.as_deref().map(|t| cut(t).to_string())),
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

/// `dpkit_cut_text(value)` as an expression; `value` must be Utf8.
pub(crate) fn cut_text(value: Expr) -> Expr {
    let function = ScalarUDF::from(CutText {
        signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
    });
    function.call(vec![value])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_kept_without_a_copy_and_long_ones_cut_by_characters() {
        let short: Arc<dyn Array> = Arc::new(StringArray::from(vec![Some("a"), None, Some("é")]));
        let kept = cut_array(&short).unwrap();
        assert!(Arc::ptr_eq(&kept, &short));

        let long = "é".repeat(MAX_TEXT_CHARS as usize + 3);
        let mixed: Arc<dyn Array> = Arc::new(StringArray::from(vec![Some("x"), Some(&long), None]));
        let cut = cut_array(&mixed).unwrap();
        let cut = cut.as_string::<i32>();
        assert_eq!(cut.value(0), "x");
        assert_eq!(cut.value(1).chars().count(), MAX_TEXT_CHARS as usize);
        assert!(cut.is_null(2));
    }

    #[test]
    fn a_value_of_exactly_the_limit_is_kept_whole() {
        let exact = "a".repeat(MAX_TEXT_CHARS as usize);
        assert_eq!(cut(&exact).len(), MAX_TEXT_CHARS as usize);
        let two_byte = "é".repeat(MAX_TEXT_CHARS as usize);
        assert_eq!(cut(&two_byte), two_byte);
    }
}
