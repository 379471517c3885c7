//! PostgreSQL's SQL as sqlparser reads it, in time that grows with the
//! text, not with the nesting of its function calls.
//!
//! sqlparser's [`PostgreSqlDialect`] reads each function argument twice
//! when it is not a named one: first as the name of a named argument
//! (`f(a + 1 => 2)`, which PostgreSQL itself does not accept: its names
//! are identifiers), and, when no `=>` follows, again as a value. Each
//! level of nested calls doubles the work: `f(f(…))` forty deep would take
//! about 2⁴⁰ readings. dpkit reads back every statement it sends (see
//! [`super::spelling`]) and its spellings nest calls as the analyst's
//! expression does, so this is [`PostgreSqlDialect`] in everything but
//! that: a named argument is read as PostgreSQL reads it, an identifier
//! before `=>`.

use std::any::TypeId;

use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// [`PostgreSqlDialect`], reading a named argument's name as an identifier.
#[derive(Debug, Default)]
pub(crate) struct PostgresReading;

const PG: PostgreSqlDialect = PostgreSqlDialect {};

/// Every method [`PostgreSqlDialect`] overrides, forwarded to it but
/// `supports_named_fn_args_with_expr_name`; and its type, so that the
/// parser's checks for PostgreSQL (`dialect_of!`) hold for this one too.
/// The list is sqlparser 0.62's (the version DataFusion 55.2 pins): when
/// sqlparser changes, compare it with `dialect/postgresql.rs` again.
impl Dialect for PostgresReading {
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }
    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        false
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        PG.identifier_quote_style(identifier)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        PG.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        PG.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        PG.is_identifier_part(ch)
    }
    fn supports_unicode_string_literal(&self) -> bool {
        PG.supports_unicode_string_literal()
    }
    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        PG.is_reserved_for_identifier(kw)
    }
    fn is_custom_operator_part(&self, ch: char) -> bool {
        PG.is_custom_operator_part(ch)
    }
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        PG.get_next_precedence(parser)
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        PG.supports_filter_during_aggregation()
    }
    fn supports_group_by_expr(&self) -> bool {
        PG.supports_group_by_expr()
    }
    fn prec_value(&self, prec: Precedence) -> u8 {
        PG.prec_value(prec)
    }
    fn allow_extract_custom(&self) -> bool {
        PG.allow_extract_custom()
    }
    fn allow_extract_single_quotes(&self) -> bool {
        PG.allow_extract_single_quotes()
    }
    fn supports_create_index_with_clause(&self) -> bool {
        PG.supports_create_index_with_clause()
    }
    fn supports_explain_with_utility_options(&self) -> bool {
        PG.supports_explain_with_utility_options()
    }
    fn supports_listen_notify(&self) -> bool {
        PG.supports_listen_notify()
    }
    fn supports_factorial_operator(&self) -> bool {
        PG.supports_factorial_operator()
    }
    fn supports_bitwise_shift_operators(&self) -> bool {
        PG.supports_bitwise_shift_operators()
    }
    fn supports_comment_on(&self) -> bool {
        PG.supports_comment_on()
    }
    fn supports_load_extension(&self) -> bool {
        PG.supports_load_extension()
    }
    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        PG.supports_named_fn_args_with_colon_operator()
    }
    fn supports_empty_projections(&self) -> bool {
        PG.supports_empty_projections()
    }
    fn supports_nested_comments(&self) -> bool {
        PG.supports_nested_comments()
    }
    fn supports_string_escape_constant(&self) -> bool {
        PG.supports_string_escape_constant()
    }
    fn supports_numeric_literal_underscores(&self) -> bool {
        PG.supports_numeric_literal_underscores()
    }
    fn supports_array_typedef_with_brackets(&self) -> bool {
        PG.supports_array_typedef_with_brackets()
    }
    fn supports_geometric_types(&self) -> bool {
        PG.supports_geometric_types()
    }
    fn supports_set_names(&self) -> bool {
        PG.supports_set_names()
    }
    fn supports_alter_column_type_using(&self) -> bool {
        PG.supports_alter_column_type_using()
    }
    fn supports_notnull_operator(&self) -> bool {
        PG.supports_notnull_operator()
    }
    fn supports_interval_options(&self) -> bool {
        PG.supports_interval_options()
    }
    fn supports_insert_table_alias(&self) -> bool {
        PG.supports_insert_table_alias()
    }
    fn supports_create_table_like_parenthesized(&self) -> bool {
        PG.supports_create_table_like_parenthesized()
    }
    fn supports_select_wildcard_with_alias(&self) -> bool {
        PG.supports_select_wildcard_with_alias()
    }
    fn supports_comma_separated_trim(&self) -> bool {
        PG.supports_comma_separated_trim()
    }
    fn supports_xml_expressions(&self) -> bool {
        PG.supports_xml_expressions()
    }
    fn supports_comment_optimizer_hint(&self) -> bool {
        PG.supports_comment_optimizer_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Statements in what dpkit writes for PostgreSQL, and PostgreSQL's
    /// own syntax around it: read alike by both dialects.
    const WRITTEN: &[&str] = &[
        "SELECT CAST(NULLIF(NULLIF(LEAST(GREATEST((CAST(a AS NUMERIC) + 1), \
         -9223372036854775809), 9223372036854775808), -9223372036854775809), \
         9223372036854775808) AS BIGINT) FROM t",
        "SELECT \"a\"\"b\", x::float8, 'a' || chr(39) || E'\\n', 3 !, 1 << 2, $1 FROM \"t\" AS s",
        "SELECT CASE WHEN x NOTNULL THEN 1 END, \
         EXTRACT(year FROM d), TRIM(BOTH ' ' FROM n), COUNT(*) FILTER (WHERE x > 0) FROM t",
        "SELECT row_number() OVER (PARTITION BY id ORDER BY random()) AS r, \
         CAST(x AS VARCHAR(12)), DIV(CAST(a AS NUMERIC), NULLIF(CAST(b AS NUMERIC), 0)) \
         FROM (SELECT * FROM t WHERE a BETWEEN -1 AND 1 AND b LIKE 'x%' AND c ~ 'y') AS u \
         GROUP BY 1 ORDER BY 1 NULLS FIRST LIMIT 10",
    ];

    #[test]
    fn it_reads_what_postgres_reads() {
        for sql in WRITTEN {
            let ours = Parser::parse_sql(&PostgresReading, sql).unwrap();
            let theirs = Parser::parse_sql(&PG, sql).unwrap();
            assert_eq!(ours, theirs, "{sql}");
        }
    }

    #[test]
    fn nested_calls_are_read_in_time_that_grows_with_the_text() {
        // Forty levels: 2^40 readings with PostgreSqlDialect's own rule,
        // about eighty with this one.
        let mut expr = "a".to_string();
        for _ in 0..40 {
            expr = format!("NULLIF(GREATEST({expr}, 1), 2)");
        }
        let sql = format!("SELECT {expr} FROM t");
        let (send, receive) = mpsc::channel();
        // As deep as a planning thread's stack allows (`dpkit_query`'s).
        let reader = std::thread::Builder::new().stack_size(256 << 20);
        let _ = reader.spawn(move || {
            let parsed = Parser::new(&PostgresReading)
                .with_recursion_limit(100_000)
                .try_with_sql(&sql)
                .and_then(|mut parser| parser.parse_statements());
            let _ = send.send(parsed.is_ok());
        });
        let read = receive.recv_timeout(Duration::from_secs(60));
        assert_eq!(read, Ok(true), "80 nested calls were not read in a minute");
    }
}
