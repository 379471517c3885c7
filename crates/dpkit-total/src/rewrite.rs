//! The rewrite itself: each expression checked against the allow-list,
//! typed, sized and rebuilt in its total form by a [`Totaliser`].

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::{
    Alias, Between, BinaryExpr, Case, InList, Like, ScalarFunction, TryCast,
};
use datafusion::logical_expr::{Expr, ExprSchemable, Operator};

use crate::arithmetic::{ArithmeticOp, total_arithmetic};
use crate::error::{Result, TotalError};
use crate::matcher::{MAX_AUTOMATON_BYTES, Matcher, Refusal, Source, like_is_plain, matched};
use crate::math as total_math;
use crate::work::{
    MAX_WORK, NODE_WORK, NUMBER_AS_TEXT_BYTES, bytes_of_characters, function_work, math_work,
};

/// Deepest expression accepted.
pub const MAX_DEPTH: usize = 48;
/// Largest expression accepted (nodes over the whole query).
pub const MAX_NODES: usize = 2_000;
/// Longest LIKE pattern accepted (Arrow's compiled form of 10,000 `_`
/// still fits the regex size limit; 30,000 do not).
const MAX_LIKE_PATTERN: usize = 1_000;
/// Longest SQL text accepted.
pub const MAX_SQL_BYTES: usize = 64 * 1024;
/// Most operators and parentheses accepted in the SQL text, checked before
/// DataFusion parses it: its planner recurses once per level, and a chain
/// of thousands of `+` would overflow the stack before [`MAX_DEPTH`] is seen.
const MAX_OPERATOR_TOKENS: usize = 1_000;
/// Largest literal position or length given to `substr`, `left`, `right`.
const MAX_LITERAL_LENGTH: i64 = 1_000_000;

/// Scalar functions an accepted query may call, as the manual lists them
/// (docs/book/src/query/sql.md).
pub const ALLOWED_FUNCTIONS: &[&str] = &[
    "abs",
    "sqrt",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log2",
    "log10",
    "floor",
    "ceil",
    "round",
    "trunc",
    "signum",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "degrees",
    "radians",
    "power",
    "pow",
    "isnan",
    "iszero",
    "nanvl",
    "lower",
    "upper",
    "btrim",
    "trim",
    "ltrim",
    "rtrim",
    "reverse",
    "initcap",
    "character_length",
    "char_length",
    "length",
    "octet_length",
    "bit_length",
    "substr",
    "substring",
    "left",
    "right",
    "strpos",
    "instr",
    "starts_with",
    "ends_with",
    "concat",
    "coalesce",
    "nullif",
    "greatest",
    "least",
];

/// The value types of accepted expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// A 64-bit integer.
    Int,
    /// A double.
    Real,
    /// UTF-8 text.
    Text,
    /// A boolean.
    Bool,
    /// An untyped NULL literal: takes the type it meets.
    Null,
}

impl Ty {
    fn data_type(self) -> DataType {
        match self {
            Self::Int => DataType::Int64,
            Self::Real | Self::Null => DataType::Float64,
            Self::Text => DataType::Utf8,
            Self::Bool => DataType::Boolean,
        }
    }

    fn of(data_type: &DataType) -> Option<Self> {
        use DataType::*;
        Some(match data_type {
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Self::Int,
            Float16 | Float32 | Float64 | Decimal32(..) | Decimal64(..) | Decimal128(..)
            | Decimal256(..) => Self::Real,
            Utf8 | LargeUtf8 | Utf8View => Self::Text,
            Boolean => Self::Bool,
            Null => Self::Null,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Int => "an integer",
            Self::Real => "a real number",
            Self::Text => "text",
            Self::Bool => "a boolean",
            Self::Null => "NULL",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Self::Int | Self::Real | Self::Null)
    }
}

fn refuse(reason: impl Into<String>) -> TotalError {
    TotalError::NotPrivate(reason.into())
}

fn sql_error(error: impl std::fmt::Display) -> TotalError {
    TotalError::Sql(error.to_string())
}

/// A rewritten expression, its type, and the most bytes its value takes
/// as text (see [`crate::work`]).
pub struct Typed {
    /// The total expression.
    pub expr: Expr,
    /// Its type.
    pub ty: Ty,
    /// The most bytes its value takes as text.
    pub bytes: u64,
}

/// Rewrites expressions over one input schema into total form.
pub struct Totaliser<'a> {
    schema: &'a DFSchema,
    sizes: &'a Sizes,
    nodes: usize,
    deepest: usize,
    work: u64,
}

/// What a column stands for once DataFusion inlines subqueries: its
/// expression's nodes and depth (a base column is one node, depth 0), the
/// most bytes its value takes as text, and the work units computing it
/// costs per row. Limits apply to expressions as they will run, not as
/// written level by level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Nodes of the expression.
    pub nodes: usize,
    /// Its depth.
    pub depth: usize,
    /// The most bytes its value takes as text.
    pub bytes: u64,
    /// Work units per row.
    pub work: u64,
}

impl Size {
    /// A column of the table, whose values take at most `bytes`.
    pub fn base(bytes: u64) -> Self {
        Self {
            nodes: 1,
            depth: 0,
            bytes,
            work: 0,
        }
    }
}

/// The [`Size`] of each column by name.
pub type Sizes = std::collections::HashMap<String, Size>;

impl<'a> Totaliser<'a> {
    /// A totaliser for expressions over `schema`.
    pub fn new(schema: &'a DFSchema, sizes: &'a Sizes) -> Self {
        Self {
            schema,
            sizes,
            nodes: 0,
            deepest: 0,
            work: 0,
        }
    }

    /// The work units per row of everything this totaliser rewrote.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Adds `units` of work per row, refusing the query past [`MAX_WORK`].
    pub fn charge(&mut self, units: u64) -> Result<()> {
        self.work = self.work.saturating_add(units);
        check_work(self.work)
    }

    /// `expr` in total form, with its own inlined [`Size`].
    pub fn total_with_size(&mut self, expr: &Expr) -> Result<(Typed, Size)> {
        let (nodes, deepest, work) = (self.nodes, self.deepest, self.work);
        self.deepest = 0;
        let typed = self.total(expr)?;
        let size = Size {
            nodes: self.nodes - nodes,
            depth: self.deepest,
            bytes: typed.bytes,
            work: self.work - work,
        };
        self.deepest = self.deepest.max(deepest);
        Ok((typed, size))
    }

    /// `expr` in total form, with its type.
    pub fn total(&mut self, expr: &Expr) -> Result<Typed> {
        #[cfg(feature = "planted-holes")]
        if dpkit_planted::is_planted(dpkit_planted::Hole::FailingExpressions) {
            let data_type = expr.get_type(self.schema).map_err(sql_error)?;
            let ty = Ty::of(&data_type).unwrap_or(Ty::Text);
            return Ok(typed(expr.clone(), ty).with_bytes(NUMBER_AS_TEXT_BYTES));
        }
        self.visit(expr, 0)
    }

    /// A total predicate: `expr` must be a boolean.
    pub fn predicate(&mut self, expr: &Expr) -> Result<Expr> {
        let typed = self.total(expr)?;
        match typed.ty {
            Ty::Bool | Ty::Null => Ok(cast_to(typed, Ty::Bool)),
            other => Err(refuse(format!(
                "a WHERE condition must be true or false, not {}",
                other.name()
            ))),
        }
    }

    fn visit(&mut self, expr: &Expr, depth: usize) -> Result<Typed> {
        let (nodes, below) = match expr {
            Expr::Column(column) => {
                let size = self.size_of(&column.name);
                // A computed column's work is done again wherever it is
                // inlined.
                self.charge(size.work)?;
                (size.nodes, size.depth)
            }
            _ => (1, 0),
        };
        self.nodes += nodes;
        // Every node runs once per row, whatever its type (an alias is a
        // name, not a node DataFusion runs).
        if !matches!(expr, Expr::Alias(_)) {
            self.charge(NODE_WORK)?;
        }
        self.deepest = self.deepest.max(depth + below);
        if depth + below > MAX_DEPTH || self.nodes > MAX_NODES {
            return Err(refuse(format!(
                "the query is too complex (at most {MAX_DEPTH} levels and {MAX_NODES} operations)"
            )));
        }
        let next = depth + 1;
        match expr {
            Expr::Alias(alias) => {
                let inner = self.visit(&alias.expr, next)?;
                Ok(Typed {
                    expr: Expr::Alias(Alias::new(
                        inner.expr,
                        alias.relation.clone(),
                        alias.name.clone(),
                    )),
                    ty: inner.ty,
                    bytes: inner.bytes,
                })
            }
            Expr::Column(_) => self.column(expr),
            Expr::Literal(value, _) => literal(value),
            Expr::BinaryExpr(binary) => self.binary(binary, next),
            Expr::Not(inner) => {
                let inner = self.boolean(inner, next, "NOT")?;
                Ok(typed(Expr::Not(Box::new(inner)), Ty::Bool))
            }
            Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
                let inner = self.visit(inner, next)?.expr;
                Ok(typed(
                    match expr {
                        Expr::IsNull(_) => inner.is_null(),
                        _ => inner.is_not_null(),
                    },
                    Ty::Bool,
                ))
            }
            Expr::IsTrue(inner)
            | Expr::IsFalse(inner)
            | Expr::IsUnknown(inner)
            | Expr::IsNotTrue(inner)
            | Expr::IsNotFalse(inner)
            | Expr::IsNotUnknown(inner) => self.truth_test(expr, inner, next),
            Expr::Negative(inner) => self.negative(inner, next),
            Expr::Between(between) => self.between(between, next),
            Expr::Like(like) => self.like(like, next),
            Expr::InList(list) => self.in_list(list, next),
            Expr::Case(case) => self.case(case, next),
            Expr::Cast(cast) => self.cast(&cast.expr, cast.field.data_type(), next),
            Expr::TryCast(cast) => self.cast(&cast.expr, cast.field.data_type(), next),
            Expr::ScalarFunction(function) => self.function(function, next),
            Expr::SimilarTo(_) => Err(refuse("SIMILAR TO is not supported: use LIKE or ~")),
            Expr::AggregateFunction(_) => Err(refuse(
                "aggregates are allowed only at the top of the SELECT list",
            )),
            Expr::WindowFunction(_) => Err(refuse("window functions are not supported")),
            Expr::ScalarSubquery(_)
            | Expr::InSubquery(_)
            | Expr::Exists(_)
            | Expr::SetComparison(_) => Err(refuse("subqueries are not supported")),
            _ => Err(refuse(format!(
                "the expression '{}' is not supported",
                short(expr)
            ))),
        }
    }

    /// A column's [`Size`]; one the planner did not size is taken at the
    /// longest a text column may be.
    fn size_of(&self, name: &str) -> Size {
        self.sizes
            .get(name)
            .copied()
            .unwrap_or(Size::base(bytes_of_characters(crate::LONGEST_MAX_LENGTH)))
    }

    fn column(&self, expr: &Expr) -> Result<Typed> {
        let data_type = expr.get_type(self.schema).map_err(sql_error)?;
        let ty = Ty::of(&data_type).ok_or_else(|| {
            refuse(format!(
                "the column '{}' has a type dpkit does not compute with ({data_type})",
                short(expr)
            ))
        })?;
        let bytes = match expr {
            Expr::Column(column) if ty == Ty::Text => self.size_of(&column.name).bytes,
            _ => NUMBER_AS_TEXT_BYTES,
        };
        Ok(exact_type(expr.clone(), &data_type, ty).with_bytes(bytes))
    }

    fn boolean(&mut self, expr: &Expr, depth: usize, context: &str) -> Result<Expr> {
        let inner = self.visit(expr, depth)?;
        match inner.ty {
            Ty::Bool | Ty::Null => Ok(cast_to(inner, Ty::Bool)),
            other => Err(refuse(format!(
                "{context} needs true or false, not {}",
                other.name()
            ))),
        }
    }

    fn truth_test(&mut self, outer: &Expr, inner: &Expr, depth: usize) -> Result<Typed> {
        let inner = Box::new(self.boolean(inner, depth, "IS TRUE / IS FALSE")?);
        let rebuilt = match outer {
            Expr::IsTrue(_) => Expr::IsTrue(inner),
            Expr::IsFalse(_) => Expr::IsFalse(inner),
            Expr::IsUnknown(_) => Expr::IsUnknown(inner),
            Expr::IsNotTrue(_) => Expr::IsNotTrue(inner),
            Expr::IsNotFalse(_) => Expr::IsNotFalse(inner),
            _ => Expr::IsNotUnknown(inner),
        };
        Ok(typed(rebuilt, Ty::Bool))
    }

    fn negative(&mut self, inner: &Expr, depth: usize) -> Result<Typed> {
        let inner = self.visit(inner, depth)?;
        match inner.ty {
            Ty::Int => Ok(typed(
                total_arithmetic(
                    ArithmeticOp::Subtract,
                    vec![Expr::Literal(ScalarValue::Int64(Some(0)), None), inner.expr],
                ),
                Ty::Int,
            )),
            Ty::Real | Ty::Null => Ok(typed(
                Expr::Negative(Box::new(cast_to(inner, Ty::Real))),
                Ty::Real,
            )),
            other => Err(refuse(format!("cannot negate {}", other.name()))),
        }
    }

    fn binary(&mut self, binary: &BinaryExpr, depth: usize) -> Result<Typed> {
        use Operator::*;
        let op = binary.op;
        let left = self.visit(&binary.left, depth)?;
        let right = self.visit(&binary.right, depth)?;
        match op {
            Plus | Minus | Multiply | Divide | Modulo => arithmetic(op, left, right),
            Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom => {
                let sides = [(left.ty, left.bytes), (right.ty, right.bytes)];
                let (left, right, ty) = unify_pair(left, right)?;
                self.charge(comparison_work(sides[0], sides[1], ty))?;
                Ok(typed(binary_expr(left, op, right), Ty::Bool))
            }
            And | Or => {
                for side in [&left, &right] {
                    if !matches!(side.ty, Ty::Bool | Ty::Null) {
                        return Err(refuse(format!(
                            "AND and OR need true or false, not {}",
                            side.ty.name()
                        )));
                    }
                }
                Ok(typed(
                    binary_expr(cast_to(left, Ty::Bool), op, cast_to(right, Ty::Bool)),
                    Ty::Bool,
                ))
            }
            StringConcat => {
                let bytes = left.bytes.saturating_add(right.bytes);
                self.charge(bytes)?;
                Ok(typed(
                    binary_expr(cast_to(left, Ty::Text), op, cast_to(right, Ty::Text)),
                    Ty::Text,
                )
                .with_bytes(bytes))
            }
            RegexMatch | RegexIMatch | RegexNotMatch | RegexNotIMatch => {
                let pattern = literal_text(&binary.right, "a regular expression")?;
                if pattern.chars().count() > MAX_LIKE_PATTERN {
                    return Err(refuse(format!(
                        "a regular expression has at most {MAX_LIKE_PATTERN} characters"
                    )));
                }
                let case_insensitive = matches!(op, RegexIMatch | RegexNotIMatch);
                let negated = matches!(op, RegexNotMatch | RegexNotIMatch);
                let source = Source::Regex {
                    pattern,
                    case_insensitive,
                };
                #[cfg(feature = "planted-holes")]
                if dpkit_planted::is_planted(dpkit_planted::Hole::BacktrackingPatterns) {
                    return Ok(typed(
                        binary_expr(cast_to(left, Ty::Text), op, cast_to(right, Ty::Text)),
                        Ty::Bool,
                    ));
                }
                let matcher = compiled(source)?;
                self.charge(left.bytes)?;
                Ok(typed(
                    matched(cast_to(left, Ty::Text), matcher, negated),
                    Ty::Bool,
                ))
            }
            other => Err(refuse(format!("the operator {other} is not supported"))),
        }
    }

    fn between(&mut self, between: &Between, depth: usize) -> Result<Typed> {
        let value = self.visit(&between.expr, depth)?;
        let low = self.visit(&between.low, depth)?;
        let high = self.visit(&between.high, depth)?;
        let ty = unify(&[value.ty, low.ty, high.ty])?;
        let side = (value.ty, value.bytes);
        self.charge(
            comparison_work(side, (low.ty, low.bytes), ty).saturating_add(comparison_work(
                side,
                (high.ty, high.bytes),
                ty,
            )),
        )?;
        Ok(typed(
            Expr::Between(Between::new(
                Box::new(cast_to(value, ty)),
                between.negated,
                Box::new(cast_to(low, ty)),
                Box::new(cast_to(high, ty)),
            )),
            Ty::Bool,
        ))
    }

    fn like(&mut self, like: &Like, depth: usize) -> Result<Typed> {
        // Arrow compiles a LIKE pattern to a regular expression only when a
        // row reaches it, and a long one exceeds the regex size limit:
        // patterns are kept short, and ESCAPE (which Arrow refuses) is
        // refused. Patterns Arrow would run as a regular expression run as
        // a bounded automaton (see `crate::matcher`).
        let text = literal_text(&like.pattern, "a LIKE pattern")?;
        if text.chars().count() > MAX_LIKE_PATTERN {
            return Err(refuse(format!(
                "a LIKE pattern has at most {MAX_LIKE_PATTERN} characters"
            )));
        }
        if like.escape_char.is_some() {
            return Err(refuse("LIKE … ESCAPE is not supported"));
        }
        let value = self.visit(&like.expr, depth)?;
        // A pass over the value, plain or by automaton.
        self.charge(value.bytes.saturating_add(text.len() as u64))?;
        // ILIKE is never left to Arrow: it compiles a regular expression
        // from the pattern on each batch that has a non-ASCII value or a
        // row that reaches it, so a branch one person's row reaches cost
        // milliseconds more than one no row reaches.
        let plain = like_is_plain(&text) && !like.case_insensitive;
        #[cfg(feature = "planted-holes")]
        let plain = plain || dpkit_planted::is_planted(dpkit_planted::Hole::BacktrackingPatterns);
        if !plain {
            let matcher = compiled(Source::Like {
                pattern: text,
                case_insensitive: like.case_insensitive,
            })?;
            return Ok(typed(
                matched(cast_to(value, Ty::Text), matcher, like.negated),
                Ty::Bool,
            ));
        }
        let pattern = self.visit(&like.pattern, depth)?;
        Ok(typed(
            Expr::Like(Like::new(
                like.negated,
                Box::new(cast_to(value, Ty::Text)),
                Box::new(cast_to(pattern, Ty::Text)),
                like.escape_char,
                like.case_insensitive,
            )),
            Ty::Bool,
        ))
    }

    fn in_list(&mut self, list: &InList, depth: usize) -> Result<Typed> {
        let value = self.visit(&list.expr, depth)?;
        let mut items = Vec::with_capacity(list.list.len());
        for item in &list.list {
            if !matches!(unalias(item), Expr::Literal(..)) {
                return Err(refuse("IN takes a list of literal values"));
            }
            items.push(self.visit(item, depth)?);
        }
        let types: Vec<Ty> = items.iter().map(|t| t.ty).chain([value.ty]).collect();
        let ty = unify(&types)?;
        // The value is hashed (or parsed) once per row.
        self.charge(if value.ty == Ty::Text { value.bytes } else { 0 })?;
        Ok(typed(
            Expr::InList(InList::new(
                Box::new(cast_to(value, ty)),
                items.into_iter().map(|t| cast_to(t, ty)).collect(),
                list.negated,
            )),
            Ty::Bool,
        ))
    }

    fn case(&mut self, case: &Case, depth: usize) -> Result<Typed> {
        let before = self.work;
        let base = match &case.expr {
            Some(base) => Some(self.visit(base, depth)?),
            None => None,
        };
        // The base is compared in every branch, and may be computed again
        // in each.
        let base_work = self.work - before;
        let mut conditions = Vec::new();
        let mut results = Vec::new();
        for (when, then) in &case.when_then_expr {
            let condition = match &base {
                Some(base) => {
                    let when = self.visit(when, depth)?;
                    let sides = [(base.ty, base.bytes), (when.ty, when.bytes)];
                    let (left, right, ty) = unify_pair(
                        Typed {
                            expr: base.expr.clone(),
                            ty: base.ty,
                            bytes: base.bytes,
                        },
                        when,
                    )?;
                    self.charge(comparison_work(sides[0], sides[1], ty) + base_work)?;
                    binary_expr(left, Operator::Eq, right)
                }
                None => self.boolean(when, depth, "CASE WHEN")?,
            };
            conditions.push(condition);
            results.push(self.visit(then, depth)?);
        }
        let otherwise = match &case.else_expr {
            Some(e) => Some(self.visit(e, depth)?),
            None => None,
        };
        let types: Vec<Ty> = results
            .iter()
            .chain(otherwise.iter())
            .map(|t| t.ty)
            .collect();
        let ty = unify(&types)?;
        let bytes = results
            .iter()
            .chain(otherwise.iter())
            .map(|t| t.bytes)
            .max()
            .unwrap_or(0);
        let when_then = conditions
            .into_iter()
            .zip(results)
            .map(|(c, r)| (Box::new(c), Box::new(cast_to(r, ty))))
            .collect();
        let otherwise = otherwise.map(|o| Box::new(cast_to(o, ty)));
        Ok(typed(Expr::Case(Case::new(None, when_then, otherwise)), ty).with_bytes(bytes))
    }

    fn cast(&mut self, inner: &Expr, target: &DataType, depth: usize) -> Result<Typed> {
        let ty = match Ty::of(target) {
            Some(Ty::Null) | None => {
                return Err(refuse(format!(
                    "CAST to {target} is not supported: cast to BIGINT, DOUBLE, VARCHAR or BOOLEAN"
                )));
            }
            Some(ty) => ty,
        };
        let inner = self.visit(inner, depth)?;
        let bytes = match (inner.ty, ty) {
            (Ty::Text, Ty::Text) => inner.bytes,
            (_, Ty::Text) => NUMBER_AS_TEXT_BYTES,
            // Text read as a number or a boolean is parsed: one pass.
            (Ty::Text, _) => {
                self.charge(inner.bytes)?;
                NUMBER_AS_TEXT_BYTES
            }
            _ => NUMBER_AS_TEXT_BYTES,
        };
        Ok(typed(cast_to(inner, ty), ty).with_bytes(bytes))
    }

    fn function(&mut self, function: &ScalarFunction, depth: usize) -> Result<Typed> {
        let name = function.name().to_ascii_lowercase();
        if !ALLOWED_FUNCTIONS.contains(&name.as_str()) {
            return Err(refuse(format!(
                "{}() is not allowed in a private query (the manual lists the allowed functions, under \"The SQL accepted\")",
                name.to_uppercase()
            )));
        }
        let mut arguments = Vec::with_capacity(function.args.len());
        for argument in &function.args {
            arguments.push(self.visit(argument, depth)?);
        }
        let arity = arguments.len();
        let shape = signature_of(&name, arity).ok_or_else(|| {
            refuse(format!(
                "{}() with {arity} argument(s) is not supported",
                name.to_uppercase()
            ))
        })?;
        if name == "abs" && arguments[0].ty == Ty::Int {
            let argument = arguments.remove(0).expr;
            return Ok(typed(
                total_arithmetic(ArithmeticOp::Abs, vec![argument]),
                Ty::Int,
            ));
        }
        let lengths: Vec<u64> = arguments.iter().map(|a| a.bytes).collect();
        let (work, bytes) =
            function_work(&name, &lengths).unwrap_or((math_work(&name), NUMBER_AS_TEXT_BYTES));
        self.charge(work)?;
        let arguments = shape.arguments(&name, arguments, &function.args)?;
        if let Some((_, boolean)) = total_math::shape_of(&name) {
            let call = total_math::total_math(&name, arguments)
                .ok_or_else(|| refuse(format!("{}() is not available", name.to_uppercase())))?;
            return Ok(typed(call, if boolean { Ty::Bool } else { Ty::Real }));
        }
        let call = Expr::ScalarFunction(ScalarFunction::new_udf(function.func.clone(), arguments));
        let data_type = call.get_type(self.schema).map_err(sql_error)?;
        let ty = Ty::of(&data_type).ok_or_else(|| {
            refuse(format!(
                "{}() gives an unsupported type",
                name.to_uppercase()
            ))
        })?;
        Ok(exact_type(call, &data_type, ty).with_bytes(bytes))
    }
}

/// What a function's arguments must be.
enum Shape {
    /// All arguments real numbers.
    Reals,
    /// All arguments text.
    Texts,
    /// A text, then literal integers (bounded).
    TextThenLiteralInts,
    /// Arguments of one common type.
    Common,
}

fn signature_of(name: &str, arity: usize) -> Option<Shape> {
    Some(match (name, arity) {
        ("abs" | "sqrt" | "cbrt" | "exp" | "ln" | "log" | "log2" | "log10" | "floor", 1)
        | ("ceil" | "round" | "trunc" | "signum" | "sin" | "cos" | "tan" | "asin", 1)
        | ("acos" | "atan" | "sinh" | "cosh" | "tanh" | "asinh" | "acosh" | "atanh", 1)
        | ("degrees" | "radians" | "isnan" | "iszero", 1)
        | ("atan2" | "power" | "pow" | "nanvl", 2) => Shape::Reals,
        ("lower" | "upper" | "btrim" | "trim" | "ltrim" | "rtrim" | "reverse" | "initcap", 1)
        | ("character_length" | "char_length" | "length" | "octet_length" | "bit_length", 1)
        | ("strpos" | "instr" | "starts_with" | "ends_with", 2) => Shape::Texts,
        ("concat", 1..=64) => Shape::Texts,
        ("substr" | "substring", 2 | 3) | ("left" | "right", 2) => Shape::TextThenLiteralInts,
        ("coalesce" | "greatest" | "least", 1..=64) | ("nullif", 2) => Shape::Common,
        _ => return None,
    })
}

impl Shape {
    fn arguments(&self, name: &str, arguments: Vec<Typed>, original: &[Expr]) -> Result<Vec<Expr>> {
        Ok(match self {
            Self::Reals => {
                for argument in &arguments {
                    if !argument.ty.numeric() {
                        return Err(refuse(format!(
                            "{}() needs numbers, not {}",
                            name.to_uppercase(),
                            argument.ty.name()
                        )));
                    }
                }
                arguments
                    .into_iter()
                    .map(|a| cast_to(a, Ty::Real))
                    .collect()
            }
            Self::Texts => arguments
                .into_iter()
                .map(|a| cast_to(a, Ty::Text))
                .collect(),
            Self::TextThenLiteralInts => {
                for (position, argument) in original.iter().enumerate().skip(1) {
                    let value = literal_integer(argument).ok_or_else(|| {
                        refuse(format!(
                            "{}() takes literal whole numbers after its text",
                            name.to_uppercase()
                        ))
                    })?;
                    let limit = if position == 2 {
                        0
                    } else {
                        -MAX_LITERAL_LENGTH
                    };
                    if !(limit..=MAX_LITERAL_LENGTH).contains(&value) {
                        return Err(refuse(format!(
                            "{}(): numbers must lie in [{limit}, {MAX_LITERAL_LENGTH}]",
                            name.to_uppercase()
                        )));
                    }
                }
                let mut arguments = arguments.into_iter();
                let text = arguments.next().map(|a| cast_to(a, Ty::Text));
                text.into_iter()
                    .chain(arguments.map(|a| cast_to(a, Ty::Int)))
                    .collect()
            }
            Self::Common => {
                let types: Vec<Ty> = arguments.iter().map(|a| a.ty).collect();
                let ty = unify(&types)?;
                arguments.into_iter().map(|a| cast_to(a, ty)).collect()
            }
        })
    }
}

/// `expr` of type `ty`. Text is taken at the longest a value may be until
/// [`Typed::with_bytes`] says less, so that a forgotten length refuses
/// rather than under-counts.
fn typed(expr: Expr, ty: Ty) -> Typed {
    let bytes = match ty {
        Ty::Text => bytes_of_characters(crate::LONGEST_MAX_LENGTH),
        _ => NUMBER_AS_TEXT_BYTES,
    };
    Typed { expr, ty, bytes }
}

impl Typed {
    /// The same, whose value takes at most `bytes` as text.
    fn with_bytes(self, bytes: u64) -> Self {
        Self { bytes, ..self }
    }
}

/// The work of comparing two sides `(type, most bytes)` as `ty`: text
/// with text stops at the shorter; text read as a number is parsed.
fn comparison_work(left: (Ty, u64), right: (Ty, u64), ty: Ty) -> u64 {
    if ty == Ty::Text {
        return left.1.min(right.1);
    }
    [left, right]
        .iter()
        .filter(|(side, _)| *side == Ty::Text)
        .map(|(_, bytes)| bytes)
        .sum()
}

/// Refuses a query whose bound on the work one person's rows cause is past
/// [`MAX_WORK`], saying what to change.
pub fn check_work(work: u64) -> Result<()> {
    if work <= MAX_WORK {
        return Ok(());
    }
    Err(refuse(format!(
        "the query could cost one person's rows {work} units of work, over the limit of \
         {MAX_WORK} per query that keeps its run time from showing one person: every \
         operation costs units for each row it runs on (each of a person's rows, times the \
         rows a join makes of it), text functions per byte (upper and initcap 16, lower and \
         reverse 4, the others 1): use fewer operations or text functions, join fewer rows \
         per person, or declare a smaller max_length or max_rows_per_person (a text column \
         with neither a max_length nor a domain counts 1024 characters a value, the default)"
    )))
}

fn binary_expr(left: Expr, op: Operator, right: Expr) -> Expr {
    Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right)))
}

fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// A short, data-free rendering of an expression for messages (the query's
/// own text, never a value from the data).
fn short(expr: &Expr) -> String {
    let mut text = expr.to_string();
    if text.chars().count() > 60 {
        text = text.chars().take(57).collect::<String>() + "…";
    }
    text
}

fn literal(value: &ScalarValue) -> Result<Typed> {
    let ty = Ty::of(&value.data_type()).ok_or_else(|| {
        refuse(format!(
            "literals of type {} are not supported",
            value.data_type()
        ))
    })?;
    if ty == Ty::Null {
        return Ok(typed(Expr::Literal(value.clone(), None), Ty::Null));
    }
    let bytes = match value {
        ScalarValue::Utf8(Some(text))
        | ScalarValue::LargeUtf8(Some(text))
        | ScalarValue::Utf8View(Some(text)) => text.len() as u64,
        _ => NUMBER_AS_TEXT_BYTES,
    };
    // A literal that does not convert exactly is left to a TRY_CAST (NULL).
    Ok(match value.cast_to(&ty.data_type()) {
        Ok(converted) => typed(Expr::Literal(converted, None), ty),
        Err(_) => exact_type(Expr::Literal(value.clone(), None), &value.data_type(), ty),
    }
    .with_bytes(bytes))
}

/// `source` compiled into a bounded automaton, or refused saying why.
fn compiled(source: Source) -> Result<Matcher> {
    let what = match source {
        Source::Regex { .. } => "the regular expression",
        Source::Like { .. } => "the LIKE pattern",
    };
    Matcher::compile(source).map_err(|refusal| match refusal {
        Refusal::Invalid => refuse(format!(
            "{what} does not compile (it must be a valid literal)"
        )),
        Refusal::UnicodeWordBoundary => refuse(
            "\\b and \\B cannot run in a bounded time per row in their Unicode form: \
             write (?-u:\\b) for an ASCII word boundary",
        ),
        Refusal::TooLarge => refuse(format!(
            "{what} is too costly to run in a bounded time per row (its automaton would \
             exceed {} MiB): use fewer counted repetitions or alternatives",
            MAX_AUTOMATON_BYTES >> 20
        )),
    })
}

fn literal_text(expr: &Expr, what: &str) -> Result<String> {
    match unalias(expr) {
        Expr::Literal(
            ScalarValue::Utf8(Some(text))
            | ScalarValue::LargeUtf8(Some(text))
            | ScalarValue::Utf8View(Some(text)),
            _,
        ) => Ok(text.clone()),
        _ => Err(refuse(format!("{what} must be a literal string"))),
    }
}

fn literal_integer(expr: &Expr) -> Option<i64> {
    match unalias(expr) {
        Expr::Literal(value, _) => match value.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(Some(v)) if !value.data_type().is_floating() => Some(v),
            _ => None,
        },
        Expr::Negative(inner) => literal_integer(inner).and_then(i64::checked_neg),
        _ => None,
    }
}

/// The common type of several values: one type, or numbers (real if any is).
fn unify(types: &[Ty]) -> Result<Ty> {
    let mut common = Ty::Null;
    for &ty in types {
        common = match (common, ty) {
            (a, Ty::Null) => a,
            (Ty::Null, b) => b,
            (a, b) if a == b => a,
            (Ty::Int, Ty::Real) | (Ty::Real, Ty::Int) => Ty::Real,
            (a, b) => {
                return Err(refuse(format!(
                    "cannot mix {} and {} here: CAST one of them",
                    a.name(),
                    b.name()
                )));
            }
        };
    }
    Ok(common)
}

/// Both sides of a comparison in one type: text meeting a number or a
/// boolean is read as that type (NULL where it does not parse).
fn unify_pair(left: Typed, right: Typed) -> Result<(Expr, Expr, Ty)> {
    let ty = match (left.ty, right.ty) {
        (Ty::Text, other) | (other, Ty::Text) if other != Ty::Null => other,
        (a, b) => unify(&[a, b])?,
    };
    Ok((cast_to(left, ty), cast_to(right, ty), ty))
}

/// `value` as `ty`. Every [`Typed`] expression already has its type's exact
/// Arrow type, so this is either nothing or a `TRY_CAST`.
fn cast_to(value: Typed, ty: Ty) -> Expr {
    if value.ty == ty && ty != Ty::Null {
        return value.expr;
    }
    if value.ty == Ty::Null && matches!(unalias(&value.expr), Expr::Literal(..)) {
        return Expr::Literal(
            ScalarValue::try_from(ty.data_type()).unwrap_or(ScalarValue::Float64(None)),
            None,
        );
    }
    Expr::TryCast(TryCast::new(Box::new(value.expr), ty.data_type()))
}

/// `expr`, whose Arrow type is `data_type`, with exactly the Arrow type of `ty`.
fn exact_type(expr: Expr, data_type: &DataType, ty: Ty) -> Typed {
    if ty == Ty::Null || *data_type == ty.data_type() {
        typed(expr, ty)
    } else {
        typed(
            Expr::TryCast(TryCast::new(Box::new(expr), ty.data_type())),
            ty,
        )
    }
}

/// Integer arithmetic stays integer (with NULL on overflow and on a zero
/// divisor); anything else is real.
fn arithmetic(op: Operator, left: Typed, right: Typed) -> Result<Typed> {
    for side in [&left, &right] {
        if !side.ty.numeric() {
            return Err(refuse(format!(
                "arithmetic needs numbers, not {}: CAST it first",
                side.ty.name()
            )));
        }
    }
    let ty = if left.ty == Ty::Int && right.ty == Ty::Int {
        Ty::Int
    } else {
        Ty::Real
    };
    let op = match op {
        Operator::Plus => ArithmeticOp::Add,
        Operator::Minus => ArithmeticOp::Subtract,
        Operator::Multiply => ArithmeticOp::Multiply,
        Operator::Divide => ArithmeticOp::Divide,
        _ => ArithmeticOp::Modulo,
    };
    Ok(typed(
        total_arithmetic(op, vec![cast_to(left, ty), cast_to(right, ty)]),
        ty,
    ))
}

/// Refuses SQL too long or with too many operators to plan safely, from
/// its tokens alone (no recursion).
pub fn check_size(sql: &str) -> Result<()> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let too_complex = || {
        refuse(format!(
            "the query is too complex (at most {MAX_SQL_BYTES} bytes and \
             {MAX_OPERATOR_TOKENS} operators)"
        ))
    };
    if sql.len() > MAX_SQL_BYTES {
        return Err(too_complex());
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| TotalError::Sql(e.to_string()))?;
    let operators = tokens
        .iter()
        .filter(|token| {
            !matches!(
                token,
                Token::Word(_)
                    | Token::Number(..)
                    | Token::SingleQuotedString(_)
                    | Token::DoubleQuotedString(_)
                    | Token::Whitespace(_)
                    | Token::Comma
                    | Token::Period
                    | Token::SemiColon
            )
        })
        .count();
    if operators > MAX_OPERATOR_TOKENS {
        return Err(too_complex());
    }
    Ok(())
}
