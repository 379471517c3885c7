//! SQLite: the count of a value that an exact sum of the same `SELECT`
//! reads too (an average's sum and count, when the value is a column or a
//! cast of one) is made by the sum's own call.
//!
//! Every aggregate costs SQLite an interpreted step per row, and the
//! count's argument (the typed view of the value) is computed again for
//! it: about a quarter of what a private average added to the plain query
//! on SQLite (see the book's `speed/databases.md`). The sum's call counts
//! the non-NULL values it is handed, as `count` does, and returns
//! `steps,count`; each of the two result columns reads its part of that
//! text, once per group. SQLite computes identical aggregate calls of one
//! `SELECT` once, so one call per row does both.
//!
//! What comes back is what came back before: the sum's steps as text and
//! the count as an integer. The parts are cut from a text dpkit wrote
//! (digits, a sign and one comma), with functions that cannot fail on it.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast;

use super::bridge::Sqlite;
use super::flavour::Flavour;
use crate::error::Result;

/// Pairs each `count(x)` that is a whole item of a `SELECT` list with an
/// exact sum of `x` (or of a cast of `x`) that is a whole item of the same
/// list and called nowhere else in the statement, and marks those sums to
/// count.
pub(crate) fn counted_by_sums(
    statement: &mut ast::Statement,
    functions: &mut [Sqlite],
) -> Result<()> {
    let sums: Vec<String> = functions.iter().filter_map(Sqlite::sum_name).collect();
    let once: Vec<String> = sums
        .into_iter()
        .filter(|name| calls_of(statement, name) == 1)
        .collect();
    let mut pairing = Pairing {
        sums: once,
        counted: Vec::new(),
        failure: None,
    };
    let _ = ast::VisitMut::visit(statement, &mut pairing);
    if let Some(failure) = pairing.failure {
        return Err(failure);
    }
    for function in functions {
        function.count_if_named(&pairing.counted);
    }
    Ok(())
}

/// How many calls of `name` the statement makes, in any form (SQLite
/// calls one function for every call of its name, whatever the case, with
/// FILTER or OVER): a sum called twice is not paired, since every call
/// would return `steps,count`.
fn calls_of(statement: &ast::Statement, name: &str) -> usize {
    let mut calls = 0;
    let _ = ast::visit_expressions(statement, |expr| {
        if let ast::Expr::Function(function) = expr
            && let Some(last) = function.name.0.last().and_then(|p| p.as_ident())
            && last.value.eq_ignore_ascii_case(name)
        {
            calls += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    calls
}

struct Pairing {
    /// Sums called once in the statement: only those can be paired.
    sums: Vec<String>,
    /// Sums paired with a count.
    counted: Vec<String>,
    failure: Option<crate::error::DatabaseError>,
}

impl ast::VisitorMut for Pairing {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let ast::SetExpr::Select(select) = query.body.as_mut()
            && let Err(error) = self.pair(&mut select.projection)
        {
            self.failure = Some(error);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl Pairing {
    fn pair(&mut self, projection: &mut [ast::SelectItem]) -> Result<()> {
        let sums: Vec<(ast::Expr, ast::Expr)> = projection
            .iter_mut()
            .filter_map(item_expr)
            .filter(|e| call_name(e).is_some_and(|n| self.sums.iter().any(|s| s == n)))
            .filter_map(|e| Some((uncast(single_argument(e)?).clone(), e.clone())))
            .collect();
        let mut paired: Vec<ast::Expr> = Vec::new();
        for expr in projection.iter_mut().filter_map(item_expr) {
            let Some(argument) = counted_argument(expr) else {
                continue;
            };
            let Some((_, sum)) = sums.iter().find(|(a, _)| a == uncast(argument)) else {
                continue;
            };
            *expr = parse(&format!(
                "CAST(substr({sum}, instr({sum}, ',') + 1) AS INTEGER)"
            ))?;
            if !paired.contains(sum) {
                paired.push(sum.clone());
            }
        }
        for expr in projection.iter_mut().filter_map(item_expr) {
            if let Some(sum) = paired.iter().find(|s| **s == *expr) {
                *expr = parse(&format!("substr({sum}, 1, instr({sum}, ',') - 1)"))?;
            }
        }
        let names = paired.iter().filter_map(call_name).map(str::to_string);
        self.counted.extend(names);
        Ok(())
    }
}

fn parse(text: &str) -> Result<ast::Expr> {
    super::spelling::parse(text, Flavour::Sqlite)
}

fn item_expr(item: &mut ast::SelectItem) -> Option<&mut ast::Expr> {
    match item {
        ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. } => {
            Some(expr)
        }
        _ => None,
    }
}

/// The name of a plain call (no DISTINCT, FILTER, OVER or ordering).
fn call_name(expr: &ast::Expr) -> Option<&str> {
    let ast::Expr::Function(function) = expr else {
        return None;
    };
    let plain = function.filter.is_none()
        && function.over.is_none()
        && function.within_group.is_empty()
        && function.null_treatment.is_none()
        && matches!(function.parameters, ast::FunctionArguments::None);
    let ast::FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let plain = plain && list.duplicate_treatment.is_none() && list.clauses.is_empty();
    match function.name.0.as_slice() {
        [part] if plain => Some(part.as_ident()?.value.as_str()),
        _ => None,
    }
}

/// The one argument of a plain call.
fn single_argument(expr: &ast::Expr) -> Option<&ast::Expr> {
    call_name(expr)?;
    let ast::Expr::Function(function) = expr else {
        return None;
    };
    let ast::FunctionArguments::List(list) = &function.args else {
        return None;
    };
    match list.args.as_slice() {
        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(argument))] => Some(argument),
        _ => None,
    }
}

/// `x` without the casts around it: SQLite's CAST turns NULL into NULL
/// and every other value into a value, so `count(CAST(x AS …))` is
/// `count(x)` (an integer is summed as `CAST(x AS DOUBLE)`, see
/// `sql::integer_as_double`).
fn uncast(mut x: &ast::Expr) -> &ast::Expr {
    loop {
        x = match x {
            ast::Expr::Nested(inner) => inner,
            ast::Expr::Cast {
                kind: ast::CastKind::Cast,
                expr,
                ..
            } => expr,
            _ => return x,
        };
    }
}

/// `x` of a plain `count(x)` (not `count(*)`, not DISTINCT).
fn counted_argument(expr: &ast::Expr) -> Option<&ast::Expr> {
    call_name(expr)
        .filter(|name| name.eq_ignore_ascii_case("count"))
        .and_then(|_| single_argument(expr))
}
