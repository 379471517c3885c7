//! Step 4 of [`super::sql`]: dpkit's functions spelled in a database's SQL,
//! on the unparsed statement's syntax tree (post-order, so arguments are
//! already spelled). Each spelling computes what the embedded engine's
//! function computes and cannot raise an error on any value; why, for each
//! one, is written beside it and in [`super::safe_sql`].

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::{Dialect, SQLiteDialect, SparkSqlDialect};
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

use super::flavour::Flavour;
use crate::error::{DatabaseError, Result};

/// Steps per row saturate here (the largest `float8` below 2^63, a valid
/// `bigint`), as the embedded engine saturates at the ends of `i64`.
const MAX_ROW_STEPS: &str = "9223372036854774784";
/// The longest spelling of one expression (nested spellings included).
const MAX_SPELLED_BYTES: usize = 1 << 20;
/// `bigint`'s range.
const BIGINT: (&str, &str) = ("-9223372036854775808", "9223372036854775807");

/// Step 3: dpkit's functions spelled in the database's SQL, on the tree.
/// Text literals are written first: each spelling prints its arguments and
/// reads them back.
pub(crate) fn spell(statement: &mut ast::Statement, flavour: Flavour) -> Result<()> {
    rewrite(statement, |expr| {
        literal(expr, flavour).or_else(|| negated(expr))
    })?;
    rewrite(statement, |expr| match expr {
        ast::Expr::Function(function) => spelling(function, flavour).map(|text| {
            // Some spellings use an argument twice, so nesting could double
            // the text at each level: refused, free, past a size.
            if text.len() > MAX_SPELLED_BYTES {
                return Err(DatabaseError::NotPrivate(format!(
                    "the query's expressions are too deeply nested to write for {}",
                    flavour.name()
                )));
            }
            parse(&text, flavour)
        }),
        _ => None,
    })?;
    if flavour == Flavour::Sqlite {
        return Ok(());
    }
    rewrite(statement, |expr| double_literal(expr, flavour))
}

/// Replaces each expression `change` has a replacement for (post-order,
/// so arguments are already replaced); stops at the first failure.
fn rewrite(
    statement: &mut ast::Statement,
    mut change: impl FnMut(&ast::Expr) -> Option<Result<ast::Expr>>,
) -> Result<()> {
    let mut failure = None;
    let _ = ast::visit_expressions_mut(statement, |expr| {
        match change(expr) {
            Some(Ok(replacement)) => *expr = replacement,
            Some(Err(error)) => {
                failure = Some(error);
                return std::ops::ControlFlow::Break(());
            }
            None => {}
        }
        std::ops::ControlFlow::Continue(())
    });
    failure.map_or(Ok(()), Err)
}

/// A literal as every database reads it.
///
/// Text: sqlparser's printer leaves a quote after a backslash, and a pair
/// of quotes, as they are (it takes them for escapes already written). The
/// value `x\' OR …` would be printed `'x\' OR …'`, which SQLite and
/// PostgreSQL read as `'x\'` followed by SQL of the analyst's own, and the
/// value `a''b` would be read as `a'b`. Spark also reads `\` as an escape
/// and substitutes `${…}` anywhere in the text. So text with a backslash,
/// a quote or a control character (a line break would end a comment) is
/// written as pieces without them, joined by `char(92)`, `char(39)` and
/// their kin (`chr` on PostgreSQL), and on Spark, as is text with a dollar
/// sign, as the cast of its UTF-8 bytes in hexadecimal.
///
/// Infinite doubles, which the unparser prints `inf`, are `9e999` on
/// SQLite, and NaN is refused there (the other databases refuse both, see
/// `safe_sql`).
fn literal(expr: &ast::Expr, flavour: Flavour) -> Option<Result<ast::Expr>> {
    let ast::Expr::Value(value) = expr else {
        return None;
    };
    let text = match &value.value {
        ast::Value::SingleQuotedString(text) => text,
        ast::Value::Number(n, _) if flavour == Flavour::Sqlite && n.ends_with("inf") => {
            return Some(parse(&n.replace("inf", "9e999"), flavour));
        }
        // SQLite has no NaN: printed `NaN`, it would name a column.
        ast::Value::Number(n, _) if n.eq_ignore_ascii_case("nan") => {
            return Some(Err(super::flavour::unavailable(flavour, "a NaN literal")));
        }
        _ => return None,
    };
    let written = match flavour {
        Flavour::Spark if text.chars().any(|c| unwritten(c) || c == '$') => {
            let hex: String = text.bytes().map(|b| format!("{b:02X}")).collect();
            format!("CAST(X'{hex}' AS STRING)")
        }
        Flavour::Sqlite | Flavour::Postgres if !text.chars().any(unwritten) => return None,
        Flavour::Sqlite => joined(text, "char"),
        Flavour::Postgres => joined(text, "chr"),
        Flavour::Spark => return None,
    };
    Some(parse(&written, flavour))
}

/// A minus sign before its operand in parentheses: printed bare, `-(-x)`
/// is `--x`, which every database reads as a comment to the end of the
/// line (a line the analyst's text could end).
fn negated(expr: &ast::Expr) -> Option<Result<ast::Expr>> {
    let ast::Expr::UnaryOp { op, expr: operand } = expr else {
        return None;
    };
    if matches!(**operand, ast::Expr::Nested(_)) {
        return None;
    }
    Some(Ok(ast::Expr::UnaryOp {
        op: *op,
        expr: Box::new(ast::Expr::Nested(operand.clone())),
    }))
}

/// Characters a text literal is not written with: a backslash, a quote
/// and control characters (a line break could end a comment).
fn unwritten(c: char) -> bool {
    c == '\\' || c == '\'' || c.is_control()
}

/// `text` as its pieces without an [`unwritten`] character, joined by
/// `function(n)` calls, which return each (n its code point).
fn joined(text: &str, function: &str) -> String {
    let mut parts = Vec::new();
    let mut piece = String::new();
    for c in text.chars() {
        if unwritten(c) {
            if !piece.is_empty() {
                parts.push(format!("'{piece}'"));
                piece.clear();
            }
            parts.push(format!("{function}({})", u32::from(c)));
        } else {
            piece.push(c);
        }
    }
    if !piece.is_empty() || parts.is_empty() {
        parts.push(format!("'{piece}'"));
    }
    format!("({})", parts.join(" || "))
}

/// A number with a point or an exponent (a `Float64` literal, as the
/// unparser prints it: positional, so 1e-300 has 300 zeros) as a cast of
/// its shortest text to a double: Spark would read it as a decimal, whose
/// 38 digits it may overflow, and PostgreSQL as a `numeric`. (SQLite reads
/// such numbers as doubles.)
fn double_literal(expr: &ast::Expr, flavour: Flavour) -> Option<Result<ast::Expr>> {
    let ast::Expr::Value(value) = expr else {
        return None;
    };
    let ast::Value::Number(text, _) = &value.value else {
        return None;
    };
    if !text.contains(['.', 'e', 'E']) {
        return None;
    }
    let x: f64 = text.parse().ok()?;
    Some(parse(
        &format!("CAST('{x:e}' AS {})", flavour.double()),
        flavour,
    ))
}

/// sqlparser's reading of `flavour`'s SQL.
pub(crate) fn dialect(flavour: Flavour) -> &'static dyn Dialect {
    match flavour {
        Flavour::Sqlite => &SQLiteDialect {},
        Flavour::Postgres => &super::postgres_reading::PostgresReading,
        Flavour::Spark => &SparkSqlDialect {},
    }
}

/// The statement as sent reads back as the statement written: printed,
/// parsed again in the database's dialect, the same tree. sqlparser's
/// printer and parser once disagreed (a quote after a backslash in the
/// analyst's literal was printed as it was, and read back as the literal's
/// end, so the rest of it ran as SQL); any such disagreement left, in a
/// spelling or in the printer, is refused here, before anything is spent.
/// Returns the text that was read back: the text to send.
pub(crate) fn reads_back(statement: &ast::Statement, flavour: Flavour) -> Result<String> {
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::UnreadSql) {
        return Ok(statement.to_string());
    }
    let mut written = statement.clone();
    let _ = ast::VisitMut::visit(&mut written, &mut Canonical);
    let text = written.to_string();
    let parsed = Parser::new(dialect(flavour))
        .with_recursion_limit(100_000)
        .try_with_sql(&text)
        .and_then(|mut parser| parser.parse_statements());
    match parsed {
        Ok(statements) if statements.as_slice() == std::slice::from_ref(&written) => Ok(text),
        _ => Err(DatabaseError::NotPrivate(format!(
            "the SQL for {} would be read otherwise than dpkit wrote it: it cannot be sent",
            flavour.name()
        ))),
    }
}

/// Trees that print alike and mean the same, written as the parser reads
/// them: DataFusion's unparser writes a `LIMIT` clause of nothing where
/// the parser writes none, and a negative number as one literal where the
/// parser reads a minus before a number (which is why `-` before it is
/// checked: printed `--5`, it would be read as a comment).
struct Canonical;

impl ast::VisitorMut for Canonical {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut ast::Expr) -> std::ops::ControlFlow<()> {
        if let ast::Expr::Value(value) = expr
            && let ast::Value::Number(number, long) = &value.value
            && let Some(magnitude) = number.strip_prefix('-')
        {
            let magnitude = ast::Value::Number(magnitude.to_string(), *long);
            *expr = ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr: Box::new(ast::Expr::value(magnitude)),
            };
        }
        std::ops::ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> std::ops::ControlFlow<()> {
        if let Some(ast::LimitClause::LimitOffset {
            limit: None,
            offset: None,
            limit_by,
        }) = &query.limit_clause
            && limit_by.is_empty()
        {
            query.limit_clause = None;
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The SQL sent has nothing a database could read differently from
/// sqlparser's printer, which wrote it:
/// - no backslash (an escape to Spark, and to the printer before a quote:
///   text literals are written without one, see [`literal`]);
/// - no NUL (SQLite stops reading at one);
/// - on Spark, no dollar sign (it substitutes `${…}` before parsing);
/// - no quoted name holding a quote, nor text: the printer leaves a
///   pair of quotes as it is, so the names `a"b` and `a""b` would be sent
///   as one name;
/// - no control character (a line break ends a `--` comment) and no
///   comment at all: dpkit writes none, so one would be made of the
///   analyst's text and hide what follows it.
///
/// Literals are written without these, and the analyst's names are
/// renamed (see [`super::renamed`]); what is left could only be in a name
/// of the description's (the table or a column), and is refused.
pub(crate) fn unambiguous(sql: &str, flavour: Flavour) -> Result<()> {
    let refused = || {
        DatabaseError::NotPrivate(format!(
            "the SQL for {} would hold a comment, or a name with a quote, a backslash or a \
             control character{}: it cannot be sent",
            flavour.name(),
            if flavour == Flavour::Spark {
                " (or a dollar sign)"
            } else {
                ""
            },
        ))
    };
    let dollar = flavour == Flavour::Spark && sql.contains('$');
    if dollar || sql.chars().any(|c| c == '\\' || c.is_control()) {
        return Err(refused());
    }
    let tokens = Tokenizer::new(dialect(flavour), sql)
        .tokenize()
        .map_err(|_| refused())?;
    let ambiguous = |token: &Token| match token {
        Token::Word(word) => word
            .quote_style
            .is_some_and(|q| word.value.contains([q, '"', '`', ']'])),
        Token::SingleQuotedString(text) => text.contains('\''),
        Token::Whitespace(
            Whitespace::SingleLineComment { .. } | Whitespace::MultiLineComment(_),
        ) => true,
        _ => false,
    };
    if tokens.iter().any(ambiguous) {
        return Err(refused());
    }
    names_apart(&tokens, flavour)
}

/// No two names a database would take for one: SQLite and Spark find a
/// name whatever its case, so an alias `"NAME"` would hide the column
/// `name` in the query below it (and a text key read as a number fails, or
/// not, with the rows); PostgreSQL cuts names at 63 bytes (and tells quoted
/// names apart by case: `COLLATE "C"` beside a table `"c"`). The analyst's
/// names are renamed before this check, so it guards the description's.
/// Every name is quoted, so on SQLite and Spark each must be the only
/// spelling of its lower case (names in different scopes too), and on
/// PostgreSQL at most 63 bytes.
fn names_apart(tokens: &[Token], flavour: Flavour) -> Result<()> {
    let mut spellings: std::collections::HashMap<String, &str> = Default::default();
    for token in tokens {
        let Token::Word(word) = token else { continue };
        if word.quote_style.is_none() {
            continue;
        }
        let clash = match flavour {
            Flavour::Postgres => word.value.len() > 63,
            Flavour::Sqlite | Flavour::Spark => spellings
                .insert(word.value.to_lowercase(), &word.value)
                .is_some_and(|other| other != word.value),
        };
        if clash {
            return Err(DatabaseError::NotPrivate(format!(
                "two names in the query differ only in case, or a name is over 63 bytes: \
                 {} would take them for one (rename one)",
                flavour.name()
            )));
        }
    }
    Ok(())
}

pub(crate) fn parse(text: &str, flavour: Flavour) -> Result<ast::Expr> {
    let dialect = dialect(flavour);
    let failed = |e: String| {
        DatabaseError::Sql(format!("cannot write the plan for {}: {e}", flavour.name()))
    };
    let mut parser = Parser::new(dialect)
        .with_recursion_limit(100_000)
        .try_with_sql(text)
        .map_err(|e| failed(e.to_string()))?;
    let expr = parser.parse_expr().map_err(|e| failed(e.to_string()))?;
    // The whole spelling must be one expression: a parser that stopped
    // early would send a different expression than the one written here.
    match parser.peek_token().token {
        Token::EOF => Ok(expr),
        _ => Err(failed("a spelling did not parse whole".into())),
    }
}

/// The length of `dpkit_cut_text(value, n)`: its second argument, a whole
/// number (printed again from the number, not from the argument's text).
fn cut_length(list: &ast::FunctionArgumentList) -> Option<u32> {
    let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(expr)) = list.args.get(1)? else {
        return None;
    };
    let mut expr = expr;
    while let ast::Expr::Nested(inner) = expr {
        expr = inner;
    }
    match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::Number(number, _) => number.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// The text of a call of one of dpkit's functions, if it is one. SQLite
/// sees only the clamp and the cut here (everything else of dpkit's runs
/// in dpkit's code there, see `bridge`).
fn spelling(function: &ast::Function, flavour: Flavour) -> Option<String> {
    let name = function.name.0.last()?.as_ident()?.value.clone();
    if flavour == Flavour::Spark && function.over.is_some() {
        return spark_window(function);
    }
    let ast::FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let args: Vec<String> = list.args.iter().map(|a| format!("({a})")).collect();
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let double = flavour.double();
    let text = if flavour == Flavour::Spark {
        "STRING"
    } else {
        "TEXT"
    };
    match (name.as_str(), flavour) {
        // A cap's random draw per row (`keep = "random"`): SQLite's and
        // PostgreSQL's `random()`, Spark's `rand()`; each is seeded apart
        // from the rows, which is all the cap's argument needs.
        ("random", Flavour::Spark) if args.is_empty() => Some("rand()".into()),
        // Quantile cells come back as `cell:count` text, as from SQLite:
        // one pair per row, the cell being a group key (`sql::cells_by_group`).
        // `||` keeps a NULL cell NULL.
        ("dpkit_cell_count", _) => Some(format!(
            "(CAST({} AS {text}) || ':' || CAST(COUNT(*) AS {text}))",
            a(0)
        )),
        // An explicit cast to `varchar(n)` cuts to n characters, as SUBSTR
        // does, at a fraction of its cost per row (it checks the length in
        // bytes first).
        // The length is the column's `max_length`, a literal the planner
        // wrote (an integer printed by dpkit, never the analyst's text).
        ("dpkit_cut_text", Flavour::Postgres) => {
            Some(format!("CAST({} AS VARCHAR({}))", a(0), cut_length(list)?))
        }
        // Spark's octet_length reads a stored size; a value of at most so
        // many bytes has at most so many characters, and is its own cut.
        ("dpkit_cut_text", Flavour::Spark) => Some(format!(
            "CASE WHEN octet_length({x}) <= {n} THEN {x} ELSE SUBSTR({x}, 1, {n}) END",
            x = a(0),
            n = cut_length(list)?
        )),
        // SQLite's cut is not written as Spark's (`octet_length` first): it
        // computes the typed view's expression once for
        // the length and again for the value, which cost more than the
        // copy saves (instructions measured in docs/book/src/speed/databases.md).
        ("dpkit_cut_text", _) => Some(format!("SUBSTR({}, 1, {})", a(0), cut_length(list)?)),
        // Adding 0 turns −0 into 0 and leaves every other value as it is.
        ("dpkit_key", Flavour::Sqlite) => Some(format!("({} + 0.0)", a(0))),
        // The cast types a key that is NULL in every row (which PostgreSQL
        // would take as text).
        ("dpkit_key", _) => Some(format!("(CAST({} AS {double}) + 0.0)", a(0))),
        ("dpkit_clamp", Flavour::Sqlite) => Some(sqlite_clamp(&a(0), &a(1), &a(2), args.get(3))),
        ("dpkit_clamp", _) => Some(clamp(&a(0), &a(1), &a(2), args.get(3), double)),
        (_, Flavour::Sqlite) => None,
        ("dpkit_cell", _) => Some(cell(&args, flavour)),
        // Below 1e-154 a square underflows (PostgreSQL raises an error);
        // it is then under 2^-1000, the finest summation grid, and adds
        // 0 steps to the exact sum it is the argument of, as 0 does.
        ("dpkit_square", Flavour::Postgres) => Some(format!(
            "CASE WHEN ABS({x}) < CAST('1e-154' AS {double}) THEN CAST(0 AS {double}) \
             ELSE {x} * {x} END",
            x = a(0)
        )),
        ("dpkit_square", Flavour::Spark) => Some(format!("({x} * {x})", x = a(0))),
        (name, Flavour::Postgres) => {
            postgres_integer(name, &a(0), &a(1)).or_else(|| exact_sum(name, &a(0), flavour))
        }
        (name, Flavour::Spark) => spark_integer(name, &a(0), &a(1))
            .or_else(|| spark_real(name, &a(0), &a(1)))
            .or_else(|| exact_sum(name, &a(0), flavour)),
    }
}

/// The per-person cap's `row_number() OVER (PARTITION BY id)` for Spark,
/// which numbers rows only in an ordered window: ordered by the id itself,
/// so each person's rows are numbered in no particular order, as in the
/// other engines (any of them may be the ones kept).
fn spark_window(function: &ast::Function) -> Option<String> {
    let Some(ast::WindowType::WindowSpec(window)) = &function.over else {
        return None;
    };
    if !window.order_by.is_empty() || window.partition_by.is_empty() {
        return None;
    }
    let partition: Vec<String> = window.partition_by.iter().map(|e| e.to_string()).collect();
    let partition = partition.join(", ");
    Some(format!(
        "{}() OVER (PARTITION BY {partition} ORDER BY {partition})",
        function.name
    ))
}

/// dpkit's total integer arithmetic in PostgreSQL: computed in `numeric`
/// (exact), NULL outside `bigint`, NULL for a zero divisor.
///
/// Each argument is written once, and PostgreSQL computes each once
/// (`NULLIF`, `LEAST` and `GREATEST` evaluate their arguments once): a
/// spelling that named its argument twice would cost 2^depth a row for
/// nested arithmetic, where dpkit's work bound counts each node once.
fn postgres_integer(name: &str, x: &str, y: &str) -> Option<String> {
    let divisor = format!("NULLIF(CAST({y} AS NUMERIC), 0)");
    let exact = match name {
        "dpkit_int_add" => format!("(CAST({x} AS NUMERIC) + {y})"),
        "dpkit_int_sub" => format!("(CAST({x} AS NUMERIC) - {y})"),
        "dpkit_int_mul" => format!("(CAST({x} AS NUMERIC) * {y})"),
        "dpkit_int_div" => format!("DIV(CAST({x} AS NUMERIC), {divisor})"),
        // The remainder's magnitude is below the divisor's: within bigint.
        // PostgreSQL's `mod` of bigint by −1 is 0, as dpkit's is.
        "dpkit_int_mod" => return Some(format!("MOD({x}, NULLIF({y}, 0))")),
        // NULL for the one bigint whose magnitude is past the range. The
        // cast first: a literal such as -2147483648 is an `integer` to
        // PostgreSQL, whose own least value `ABS` would raise an error on.
        "dpkit_int_abs" => {
            return Some(format!("ABS(NULLIF(CAST({x} AS BIGINT), {}))", BIGINT.0));
        }
        _ => return None,
    };
    Some(in_bigint(&exact))
}

/// An exact `numeric` as a `bigint`, NULL outside its range (and NULL when
/// NULL): moved to just past an end of the range, where `NULLIF` turns it
/// into NULL, and the rest cast. `GREATEST` skips a NULL, which then ends
/// at the lower sentinel and is NULL again.
fn in_bigint(exact: &str) -> String {
    let (below, above) = ("-9223372036854775809", "9223372036854775808");
    format!(
        "CAST(NULLIF(NULLIF(LEAST(GREATEST({exact}, {below}), {above}), {below}), {above}) \
         AS BIGINT)"
    )
}

/// dpkit's total integer arithmetic in Spark: `try_add` and its kin give
/// NULL on overflow (in ANSI mode too); division is guarded against a zero
/// divisor and the one quotient beyond `bigint`, remainder against a zero
/// divisor.
fn spark_integer(name: &str, x: &str, y: &str) -> Option<String> {
    // As `bigint` first: Spark reads a literal such as 2147483647 as an
    // `int`, whose `try_add` would give NULL where dpkit's sum is a
    // `bigint`, and whose least value `ABS` would raise an error on.
    let (x, y) = (
        format!("CAST({x} AS BIGINT)"),
        format!("CAST({y} AS BIGINT)"),
    );
    let min = BIGINT.0;
    let guard = format!("{y} = 0 OR ({x} = {min} AND {y} = -1)");
    Some(match name {
        "dpkit_int_add" => format!("try_add({x}, {y})"),
        "dpkit_int_sub" => format!("try_subtract({x}, {y})"),
        "dpkit_int_mul" => format!("try_multiply({x}, {y})"),
        "dpkit_int_div" => format!("CASE WHEN {guard} THEN NULL ELSE {x} DIV {y} END"),
        // Java's remainder of a long by −1 is 0, as dpkit's is.
        "dpkit_int_mod" => format!("({x} % NULLIF({y}, 0))"),
        "dpkit_int_abs" => format!("CASE WHEN {x} = {min} THEN NULL ELSE ABS({x}) END"),
        _ => return None,
    })
}

/// dpkit's total arithmetic on doubles in Spark: IEEE 754, as in dpkit,
/// where only a zero divisor raises an error; dpkit gives NULL for it.
fn spark_real(name: &str, x: &str, y: &str) -> Option<String> {
    Some(match name {
        "dpkit_real_add" => format!("({x} + {y})"),
        "dpkit_real_sub" => format!("({x} - {y})"),
        "dpkit_real_mul" => format!("({x} * {y})"),
        "dpkit_real_div" => format!("CASE WHEN {y} = 0 THEN NULL ELSE {x} / {y} END"),
        "dpkit_real_mod" => format!("CASE WHEN {y} = 0 THEN NULL ELSE {x} % {y} END"),
        "dpkit_real_abs" => format!("ABS({x})"),
        _ => return None,
    })
}

/// A quantile's cell (`dpkit_cell(x, lo, hi, w, last, tiny)`, see
/// [`super::planned`]): `x` clamped, its distance from `lo` divided by the
/// cell width `w` (a distance below `tiny` is cell 0, whose quotient
/// PostgreSQL could refuse as an underflow), floored, kept at most
/// `last`, as a `bigint`. The quotient is at most about 2^16 cells, so
/// Spark's `FLOOR` (a `bigint`) cannot overflow.
fn cell(args: &[String], flavour: Flavour) -> String {
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let double = flavour.double();
    let distance = format!("({} - {})", clamp(&a(0), &a(1), &a(2), None, double), a(1));
    let quotient = match flavour {
        Flavour::Postgres => format!(
            "CASE WHEN {distance} < {tiny} THEN CAST(0 AS {double}) ELSE {distance} / {w} END",
            tiny = a(5),
            w = a(3)
        ),
        _ => format!("({distance} / {})", a(3)),
    };
    // The distance is not negative, so neither is the floor; LEAST skips
    // NULLs, so a NULL value is kept NULL first.
    format!(
        "CAST(CASE WHEN {x} IS NULL THEN NULL ELSE LEAST(FLOOR({quotient}), {last}) END AS BIGINT)",
        x = a(0),
        last = a(4)
    )
}

/// `dpkit_clamp`: NaN goes to `low` (both databases order NaN above
/// infinity), then `- centre`. NULL matches no branch and stays NULL; the
/// usual value takes two comparisons.
fn clamp(v: &str, low: &str, high: &str, centre: Option<&String>, double: &str) -> String {
    // The bounds and the centre are Float64 literals, which `spell` writes
    // as doubles.
    let infinity = format!("CAST('Infinity' AS {double})");
    let clamped = format!(
        "CASE WHEN {v} < {low} THEN {low} WHEN {v} <= {high} THEN {v} \
         WHEN {v} <= {infinity} THEN {high} WHEN {v} > {infinity} THEN {low} END"
    );
    match centre {
        Some(centre) => format!("(({clamped}) - {centre})"),
        None => clamped,
    }
}

/// `dpkit_clamp` in SQLite, which has no NaN (it stores NaN as NULL) and
/// whose comparisons and subtraction never fail. SQLite's `min` and `max`
/// of several arguments are NULL when any argument is, so NULL stays NULL.
/// `v` is written once: SQLite copies a view's expression into every place
/// its column is named, and the `CASE` this replaces, naming `v` four
/// times, computed the typed view four times per row.
fn sqlite_clamp(v: &str, low: &str, high: &str, centre: Option<&String>) -> String {
    let clamped = format!("max({low}, min({high}, {v}))");
    match centre {
        Some(centre) => format!("(({clamped}) - {centre})"),
        None => clamped,
    }
}

/// `dpkit_exact_sum_m<k>(v)`: grid steps summed exactly, as the engine
/// does. Each value's steps are saturated within `bigint` before `FLOOR`
/// (whose result is a `bigint` in Spark), as the engine saturates at the
/// ends of `i64`, and a value that is not finite adds none; unless the name
/// says they are bounded (`dpkit_bounded_sum_m<k>`: a clamp to finite
/// bounds, whose steps are within ±2^32). They are summed in an exact type
/// and sent as whole steps, never rounded to a double: PostgreSQL's `SUM`
/// of `bigint` is `numeric` (sent as text); Spark sums bounded steps in two
/// `bigint`s, their high and their low 16 bits, when the description's
/// public count of people bounds a group below 2^47 rows (where they
/// cannot overflow), and otherwise in `DECIMAL(38,0)`, which holds any sum
/// of fewer than 2^63 rows. A group whose values are all NULL sums to 0
/// steps, as in the engine.
fn exact_sum(name: &str, v: &str, flavour: Flavour) -> Option<String> {
    let (exponent, bounded) = super::placeholder::exact_sum_exponent(name)?;
    let double = flavour.double();
    // Powers of two print as the shortest decimal that reads back exactly.
    let inverse = 2f64.powi(-exponent);
    let shifted = format!("({v} * CAST('{inverse:e}' AS {double}) + 0.5)");
    let kept = if bounded {
        shifted
    } else {
        // NULL matches no branch and stays NULL; NaN (above +∞ in both
        // databases) and ±∞ add no steps.
        let infinity = format!("CAST('Infinity' AS {double})");
        format!(
            "CASE WHEN {shifted} = -{infinity} THEN 0 WHEN {shifted} < -{MAX_ROW_STEPS} \
             THEN -{MAX_ROW_STEPS} WHEN {shifted} <= {MAX_ROW_STEPS} THEN {shifted} \
             WHEN {shifted} < {infinity} THEN {MAX_ROW_STEPS} WHEN {shifted} >= {infinity} \
             THEN 0 END"
        )
    };
    let steps = format!("CAST(FLOOR({kept}) AS BIGINT)");
    Some(match (flavour, bounded) {
        // `shiftright` keeps the sign, so steps = high · 2^16 + low. Spark
        // adds `bigint`s as Java longs, but `DECIMAL(38,0)` as BigDecimal:
        // the private query took 3x the plain one with the latter.
        (Flavour::Spark, true) => format!(
            "(CAST(COALESCE(SUM(shiftright({steps}, 16)), 0) AS DECIMAL(38,0)) * 65536 \
             + COALESCE(SUM({steps} & 65535), 0))"
        ),
        (Flavour::Spark, false) => format!("COALESCE(SUM(CAST({steps} AS DECIMAL(38,0))), 0)"),
        _ => format!("CAST(COALESCE(SUM({steps}), 0) AS TEXT)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &str) -> ast::Statement {
        Parser::parse_sql(dialect(Flavour::Postgres), sql)
            .unwrap()
            .remove(0)
    }

    /// The first projection of a `SELECT`, without its parentheses: a tree
    /// whose printed text reads back as another tree.
    fn unparenthesised(mut statement: ast::Statement) -> ast::Statement {
        let ast::Statement::Query(query) = &mut statement else {
            panic!("not a query")
        };
        let ast::SetExpr::Select(select) = query.body.as_mut() else {
            panic!("not a select")
        };
        let ast::SelectItem::UnnamedExpr(ast::Expr::BinaryOp { left, .. }) =
            &mut select.projection[0]
        else {
            panic!("not a binary operation")
        };
        let ast::Expr::Nested(inner) = left.as_ref() else {
            panic!("not parenthesised")
        };
        *left = inner.clone();
        statement
    }

    /// `dpkit_int_<op>` nested `depth` deep, the column `bottom` at the
    /// bottom, alternately as the first and the second argument.
    fn nested(op: &str, depth: usize) -> String {
        let mut expr = "bottom".to_string();
        for level in 0..depth {
            expr = match (op, level % 2) {
                ("abs", _) => format!("dpkit_int_abs({expr})"),
                (_, 0) => format!("dpkit_int_{op}({expr}, 7)"),
                _ => format!("dpkit_int_{op}(7, {expr})"),
            };
        }
        format!("SELECT {expr} FROM t")
    }

    #[test]
    fn postgres_arithmetic_names_its_arguments_once_however_deep() {
        // Each argument written once: the text, the reading and the
        // database's work per row grow with the depth, not 3^depth.
        // On a stack as large as a planning thread's (`dpkit_query`'s).
        let spelled = |op: &'static str| {
            let thread = std::thread::Builder::new().stack_size(256 << 20);
            let written = thread.spawn(move || {
                let mut written = statement(&nested(op, 24));
                spell(&mut written, Flavour::Postgres).unwrap();
                reads_back(&written, Flavour::Postgres).unwrap()
            });
            written.unwrap().join().unwrap()
        };
        for op in ["add", "sub", "mul", "div", "mod", "abs"] {
            let text = spelled(op);
            assert_eq!(text.matches("bottom").count(), 1, "{op}: {text}");
            assert!(text.len() < 24 * 200, "{op}: {} bytes", text.len());
        }
    }

    #[test]
    fn a_statement_that_reads_back_otherwise_is_refused() {
        let written = statement("SELECT (a + b) * c FROM t");
        for flavour in [Flavour::Postgres, Flavour::Spark, Flavour::Sqlite] {
            assert!(reads_back(&written, flavour).is_ok());
            // (a + b) * c without its parentheses prints as a + b * c.
            let misread = unparenthesised(written.clone());
            assert_eq!(misread.to_string(), "SELECT a + b * c FROM t");
            let refused = reads_back(&misread, flavour).unwrap_err();
            assert!(refused.to_string().contains("read otherwise"), "{refused}");
        }
    }
}
