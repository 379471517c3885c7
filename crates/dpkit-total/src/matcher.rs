//! Regular expressions and LIKE patterns, compiled at planning into a
//! deterministic automaton whose work per byte of text is one transition,
//! whatever the pattern: `dpkit_regex(text)` and `dpkit_like(text)`.
//!
//! Why: Arrow runs both with the regex crate, which falls back to
//! simulating the pattern's NFA when its lazy DFA's cache thrashes, at a
//! cost of the pattern's size times the text's length. `a[ab]{900}[^ab]`
//! made one person's 65,536-character value cost 370 ms, so one run of a
//! query told whether that person was in the table. Here every pattern is
//! determinised in full before anything is spent, within
//! [`MAX_AUTOMATON_BYTES`]: one whose automaton is larger (counted
//! repetitions, `.{900}` after a choice) is refused, for free, and every
//! accepted one reads each byte of its text once. Unicode word boundaries
//! (`\b`, `\B`) need a look-around no DFA has; `(?-u:\b)`, the ASCII one,
//! is accepted.
//!
//! LIKE patterns that Arrow answers by a plain comparison or substring
//! search (`abc`, `abc%`, `%abc`, `%abc%`, without `_`) stay Arrow's, whose
//! cost is linear too. ILIKE never does: Arrow compiles a regular
//! expression from its pattern on every batch that has a non-ASCII value
//! (and for `%abc%` always), but only if a row reaches it, so twenty long
//! patterns behind a `CASE` cost 119 ms more when one person's row met the
//! condition than when no row did. The others are translated to a regular expression
//! exactly as Arrow translates them (`%` is `.*`, `_` is `.`, a backslash
//! escapes the next character) and compiled here.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use regex_automata::Input;
use regex_automata::dfa::{Automaton, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;

/// The largest automaton accepted, in bytes of transition table: a dense
/// DFA of a few thousand states (a pattern with a handful of `.{n}`, or a
/// few hundred literal characters, fits easily).
pub const MAX_AUTOMATON_BYTES: usize = 4 << 20;

/// Why a pattern is refused (no part of the data: only the query's own
/// literal, which the analyst wrote).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It does not parse.
    Invalid,
    /// It uses a Unicode word boundary.
    UnicodeWordBoundary,
    /// Its automaton would exceed [`MAX_AUTOMATON_BYTES`].
    TooLarge,
}

/// What a compiled pattern came from: the query's own text, kept to print
/// it back (`--explain`, a database's SQL).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// `text ~ pattern` (`~*` when case-insensitive).
    Regex {
        pattern: String,
        case_insensitive: bool,
    },
    /// `text LIKE pattern` (ILIKE when case-insensitive).
    Like {
        pattern: String,
        case_insensitive: bool,
    },
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Matcher {
    source: Source,
    dfa: Arc<dense::DFA<Vec<u32>>>,
}

impl Matcher {
    /// Compiles `source`, or says why it is refused.
    pub(crate) fn compile(source: Source) -> Result<Self, Refusal> {
        let (regex, case_insensitive) = match &source {
            Source::Regex {
                pattern,
                case_insensitive,
            } => (pattern.clone(), *case_insensitive),
            Source::Like {
                pattern,
                case_insensitive,
            } => (like_to_regex(pattern), *case_insensitive),
        };
        let dot_all = matches!(source, Source::Like { .. });
        let dfa = determinise(&regex, case_insensitive, dot_all)?;
        Ok(Self {
            source,
            dfa: Arc::new(dfa),
        })
    }

    /// Whether `text` matches anywhere (a LIKE pattern is anchored at both
    /// ends by its translation). One transition per byte at most.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        let input = Input::new(text).earliest(true);
        // A dense DFA without quit bytes cannot fail; a failure would be
        // no match rather than an error (total).
        matches!(self.dfa.try_search_fwd(&input), Ok(Some(_)))
    }

    /// The size of its automaton, in bytes.
    #[cfg(test)]
    fn automaton_bytes(&self) -> usize {
        self.dfa.memory_usage()
    }
}

/// Whether Arrow answers `pattern` without a regular expression: no `_`
/// and no backslash, and `%` only as its first or last character.
pub(crate) fn like_is_plain(pattern: &str) -> bool {
    let inner = pattern.strip_prefix('%').unwrap_or(pattern);
    let inner = inner.strip_suffix('%').unwrap_or(inner);
    !inner.contains(['%', '_', '\\'])
}

/// Arrow's translation of a LIKE pattern to a regular expression.
fn like_to_regex(pattern: &str) -> String {
    let mut regex = String::with_capacity(pattern.len() * 2 + 2);
    regex.push('^');
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => push_literal(&mut regex, next),
                None => regex.push_str("\\\\"),
            },
            '%' => regex.push_str(".*"),
            '_' => regex.push('.'),
            c => push_literal(&mut regex, c),
        }
    }
    regex.push('$');
    regex
}

fn push_literal(regex: &mut String, c: char) {
    if regex_syntax::is_meta_character(c) {
        regex.push('\\');
    }
    regex.push(c);
}

/// The full DFA of `regex`, refused past the size limit at every stage
/// (the NFA, the determinisation's working memory, the table).
fn determinise(
    regex: &str,
    case_insensitive: bool,
    dot_all: bool,
) -> Result<dense::DFA<Vec<u32>>, Refusal> {
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .dot_matches_new_line(dot_all)
        .build()
        .parse(regex)
        .map_err(|_| Refusal::Invalid)?;
    if has_unicode_word_boundary(&parsed) {
        return Err(Refusal::UnicodeWordBoundary);
    }
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .dfa_size_limit(Some(MAX_AUTOMATON_BYTES))
                .determinize_size_limit(Some(MAX_AUTOMATON_BYTES))
                .minimize(false),
        )
        .syntax(
            syntax::Config::new()
                .case_insensitive(case_insensitive)
                .dot_matches_new_line(dot_all),
        )
        .thompson(thompson::Config::new().nfa_size_limit(Some(MAX_AUTOMATON_BYTES)))
        .build(regex)
        .map_err(|_| Refusal::TooLarge)
}

/// Whether `hir` has `\b` or `\B` in their Unicode form.
fn has_unicode_word_boundary(hir: &regex_syntax::hir::Hir) -> bool {
    use regex_syntax::hir::{HirKind, Look};
    match hir.kind() {
        HirKind::Look(look) => matches!(
            look,
            Look::WordUnicode
                | Look::WordUnicodeNegate
                | Look::WordStartUnicode
                | Look::WordEndUnicode
                | Look::WordStartHalfUnicode
                | Look::WordEndHalfUnicode
        ),
        HirKind::Repetition(repetition) => has_unicode_word_boundary(&repetition.sub),
        HirKind::Capture(capture) => has_unicode_word_boundary(&capture.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            parts.iter().any(has_unicode_word_boundary)
        }
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
    }
}

/// The scalar function that runs a [`Matcher`] on Utf8 text: NULL stays
/// NULL, and the answer is negated when `negated`.
#[derive(Debug)]
struct MatchFunction {
    matcher: Matcher,
    negated: bool,
    signature: Signature,
}

impl PartialEq for MatchFunction {
    fn eq(&self, other: &Self) -> bool {
        self.matcher.source == other.matcher.source && self.negated == other.negated
    }
}

impl Eq for MatchFunction {}

impl Hash for MatchFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.matcher.source.hash(state);
        self.negated.hash(state);
    }
}

impl ScalarUDFImpl for MatchFunction {
    fn name(&self) -> &str {
        match self.matcher.source {
            Source::Regex { .. } => "dpkit_regex",
            Source::Like { .. } => "dpkit_like",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes one argument",
                self.name()
            )));
        };
        let answer = |text: &str| self.matcher.is_match(text) != self.negated;
        match value {
            ColumnarValue::Scalar(scalar) => {
                let text = match scalar {
                    ScalarValue::Utf8(text) => text.as_deref(),
                    _ => return Err(DataFusionError::Plan("dpkit_match needs Utf8".into())),
                };
                Ok(ColumnarValue::Scalar(ScalarValue::Boolean(
                    text.map(answer),
                )))
            }
            ColumnarValue::Array(array) => {
                let strings = array
                    .as_string_opt::<i32>()
                    .ok_or_else(|| DataFusionError::Plan("dpkit_match needs Utf8".into()))?;
                let answers: BooleanArray = strings.iter().map(|t| t.map(answer)).collect();
                Ok(ColumnarValue::Array(Arc::new(answers) as Arc<dyn Array>))
            }
        }
    }
}

/// `text` matched by `matcher` (or not, when `negated`), as an expression.
pub(crate) fn matched(text: Expr, matcher: Matcher, negated: bool) -> Expr {
    ScalarUDF::from(MatchFunction {
        matcher,
        negated,
        signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
    })
    .call(vec![text])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(pattern: &str) -> Result<Matcher, Refusal> {
        Matcher::compile(Source::Regex {
            pattern: pattern.into(),
            case_insensitive: false,
        })
    }

    fn like(pattern: &str, case_insensitive: bool) -> Matcher {
        Matcher::compile(Source::Like {
            pattern: pattern.into(),
            case_insensitive,
        })
        .unwrap()
    }

    #[test]
    fn regular_expressions_match_as_the_regex_crate_does() {
        let texts = ["", "abc", "xxabbbc", "Ab\nc", "ñandú", "a1b2", "a.b"];
        for pattern in [
            "b+c",
            "^a",
            "c$",
            "(?i)ab",
            "[[:digit:]]",
            "\\.",
            "a.b",
            "(?s)b.c",
        ] {
            let ours = regex(pattern).unwrap();
            let theirs = regex::Regex::new(pattern).unwrap();
            for text in texts {
                assert_eq!(
                    ours.is_match(text),
                    theirs.is_match(text),
                    "{pattern} {text:?}"
                );
            }
        }
    }

    #[test]
    fn like_patterns_match_as_arrow_translates_them() {
        let cases = [
            ("a_c", "abc", true),
            ("a_c", "abbc", false),
            ("%b_d%", "xxbcdxx", true),
            ("a\\%c", "a%c", true),
            ("a\\%c", "abc", false),
            ("a.c", "abc", false),
            ("%\n%", "x\ny", true),
            ("tail\\", "tail\\", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                like(pattern, false).is_match(text),
                expected,
                "{pattern:?} {text:?}"
            );
        }
        assert!(like("%ÑA_D%", true).is_match("ñandú"));
        assert!(like_is_plain("%abc%") && like_is_plain("abc%") && like_is_plain("abc"));
        assert!(!like_is_plain("a_c") && !like_is_plain("%a%b%") && !like_is_plain("a\\%"));
    }

    #[test]
    fn patterns_whose_automaton_explodes_are_refused() {
        assert_eq!(regex("a[ab]{900}[^ab]").unwrap_err(), Refusal::TooLarge);
        assert_eq!(
            regex("\\b.{900}\\bq").unwrap_err(),
            Refusal::UnicodeWordBoundary
        );
        assert_eq!(
            regex("(?-u:\\b).{900}(?-u:\\b)q").unwrap_err(),
            Refusal::TooLarge
        );
        assert_eq!(regex("(").unwrap_err(), Refusal::Invalid);
        let underscores = format!("%a{}b%", "_".repeat(40));
        assert!(
            Matcher::compile(Source::Like {
                pattern: underscores,
                case_insensitive: false
            })
            .is_err()
        );
        let small = regex("a[ab]{8}[^ab]").unwrap();
        assert!(small.automaton_bytes() <= MAX_AUTOMATON_BYTES);
    }
}
