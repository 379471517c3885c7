//! From SQL to a private plan: the query's logical plan is checked node by
//! node and rewritten into one that computes only clamped exact aggregates
//! of total expressions (see [`dpkit_total`]) over the typed, per-person
//! capped table (see `private_table`). The privacy step (`dpkit_release`)
//! then adds the noise to that small result.
//!
//! The steps, one module each: `input` rewrites what is below the
//! aggregate (filters and subqueries), `keys` the GROUP BY, `aggregates`
//! the aggregates (with `bounds` for the bounds of an aggregate's
//! argument), `outputs` the SELECT list, ORDER BY and LIMIT, and `having`
//! the HAVING condition on the released values; `notes`
//! reads every comparison of the query (filters, aggregates' arguments,
//! computed columns) for what the analyst should be told (a literal
//! outside a public domain).

mod aggregates;
mod arithmetic;
mod bounds;
mod comma_joins;
mod contribution;
mod embedded;
mod grid;
mod having;
mod input;
mod joins;
mod keys;
mod lineage;
mod measuring;
mod moments;
mod notes;
mod outputs;
mod person_joins;
mod quantiles;
mod reach;
mod tables;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, LogicalPlanBuilder, SortExpr};
use dpkit_release::{
    AggregateKind, AggregateRequest, Dispersion, Grid, KeySelection, MeasuredQuery, Measurement,
    NoisePlan, OutputColumn, QuantileRole, ReleaseSettings,
};

use crate::error::{QueryError, Result};
use crate::public_table::PublicTables;
use dpkit_description::Description;
pub(crate) use embedded::for_the_embedded_engine;
pub(crate) use reach::MatchesOf;

/// A query dpkit can answer privately: what it measures, and how the
/// measurements are computed.
#[derive(Debug, Clone)]
pub struct PrivateQuery {
    /// What is measured and released (the privacy step's input).
    pub measured: MeasuredQuery,
    /// The rewritten plan: keys, then one column per measurement. Not
    /// public: run as it is, it gives exact answers around the ledger
    /// ([`PrivateQuery::explanation`] shows it).
    pub(crate) plan: LogicalPlan,
    /// The most work one person's rows can cause the plan, in units of
    /// about a nanosecond (`dpkit_total::MAX_WORK`): a public bound.
    pub(crate) work: u64,
    /// The plan as the SQL a database runs, when the table lives in one.
    pub(crate) remote: Option<dpkit_databases::RemotePlan>,
    /// `plan` as DataFusion's optimiser left it, once a run has made it
    /// and if it may be kept (see `crate::reuse`).
    /// A clone copies it: a clone whose `plan` is changed after never
    /// runs the optimised form of another plan.
    pub(crate) optimised: std::sync::OnceLock<LogicalPlan>,
}

impl PrivateQuery {
    /// The most work one person's rows can cause this query, in units of
    /// about a nanosecond, from public facts only (the description's
    /// lengths and caps, the joins' public fan-outs, the query's
    /// operations): at most [`dpkit_total::MAX_WORK`], or the query is
    /// refused at planning.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// What `--explain` prints for it under `noise`: the rewritten plan
    /// (and the SQL sent, on a database), then the release's account.
    pub fn explanation(&self, noise: &NoisePlan, settings: &ReleaseSettings) -> String {
        let engine = self
            .remote
            .as_ref()
            .map_or("DataFusion", |remote| remote.flavour.name());
        let mut text = format!(
            "Rewritten plan ({engine} computes these exact, clamped aggregates; dpkit adds the \
             noise to its small result):\n"
        );
        let plan = self.plan.display_indent().to_string();
        text.push_str(&wrapped(&plan, EXPLAIN_WIDTH));
        if let Some(remote) = &self.remote {
            text.push_str(&format!(
                "\nSQL sent to {} (the plan above; only its aggregates come back):\n{}",
                remote.flavour.name(),
                wrapped(&remote.sql, EXPLAIN_WIDTH)
            ));
        }
        text.push_str(&format!(
            "\nTime: one person's rows can cost this query at most {} units of work (a unit is \
             about a nanosecond; a query may cost {} at most), from public facts only.\n",
            self.work,
            dpkit_total::MAX_WORK
        ));
        text.push_str(&dpkit_release::explanation(&self.measured, noise, settings));
        text
    }
}

/// The widest line `--explain` prints of a plan or of the SQL sent, where
/// a comma allows a break.
const EXPLAIN_WIDTH: usize = 100;

/// `text` with every line wider than `width` broken after commas (not
/// those inside double quotes), the rest of the line indented four spaces
/// past where it began. Each break is at the least nested comma that keeps
/// the line within `width` (a list's items before a function's arguments),
/// the rightmost of those. A plan's line lists every column of the typed
/// view: unbroken, it is a screenful on one line.
fn wrapped(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let continuation = " ".repeat(indent + 4);
        let breaks = breaks(line);
        let (mut start, mut prefix) = (0, "");
        loop {
            let room = width.saturating_sub(prefix.len());
            let rest = &line[start..];
            let later = breaks
                .iter()
                .filter(|(at, _)| *at > start && *at < line.len());
            let fitting = later
                .clone()
                .filter(|(at, _)| line[start..*at].trim_end().chars().count() <= room);
            let least_nested = fitting.clone().map(|(_, depth)| *depth).min();
            let cut = match least_nested {
                _ if rest.chars().count() <= room => None,
                Some(least) => fitting
                    .filter(|(_, d)| *d == least)
                    .map(|(at, _)| *at)
                    .next_back(),
                None => later.map(|(at, _)| *at).next(),
            };
            let Some(cut) = cut else {
                out.push_str(&format!("{prefix}{rest}\n"));
                break;
            };
            out.push_str(&format!("{prefix}{}\n", line[start..cut].trim_end()));
            (start, prefix) = (cut, &continuation);
        }
    }
    out
}

/// Where `line` may break: after each ", " outside double quotes, as (the
/// byte after it, how many brackets are open there).
fn breaks(line: &str) -> Vec<(usize, usize)> {
    let bytes = line.as_bytes();
    let (mut breaks, mut depth, mut quoted) = (Vec::new(), 0usize, false);
    for (i, &byte) in bytes.iter().enumerate() {
        match byte {
            b'"' => quoted = !quoted,
            b'(' | b'[' if !quoted => depth += 1,
            b')' | b']' if !quoted => depth = depth.saturating_sub(1),
            // ',' and ' ' are ASCII: `i + 1` is a character boundary.
            b' ' if !quoted && i > 0 && bytes[i - 1] == b',' => breaks.push((i + 1, depth)),
            _ => {}
        }
    }
    breaks
}

fn not_private(reason: impl Into<String>) -> QueryError {
    QueryError::NotPrivate(reason.into())
}

fn sql_error(error: impl std::fmt::Display) -> QueryError {
    QueryError::Sql(error.to_string())
}

/// Which column of `aggregate`'s output `column` is: a GROUP BY key or an
/// aggregate, each by its number.
fn output_of(aggregate: &Aggregate, column: &datafusion::common::Column) -> Result<OutputColumn> {
    let position = aggregate
        .schema
        .index_of_column(column)
        .map_err(sql_error)?;
    let keys = aggregate.group_expr.len();
    Ok(match position.checked_sub(keys) {
        None => OutputColumn::Group(position),
        Some(a) => OutputColumn::Aggregate(a),
    })
}

/// Strips aliases.
fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

/// A numeric literal's value as a double (`None` for NULL and non-numbers).
fn number_of(value: &ScalarValue) -> Option<f64> {
    match value.cast_to(&datafusion::arrow::datatypes::DataType::Float64) {
        Ok(ScalarValue::Float64(Some(number))) if value.data_type().is_numeric() => Some(number),
        _ => None,
    }
}

/// The text of a text literal's value, whichever string type holds it.
fn text_of(value: &ScalarValue) -> Option<&String> {
    match value {
        ScalarValue::Utf8(Some(text))
        | ScalarValue::LargeUtf8(Some(text))
        | ScalarValue::Utf8View(Some(text)) => Some(text),
        _ => None,
    }
}

/// The SELECT's pieces, peeled off the logical plan.
struct Shape<'a> {
    projection: &'a [Expr],
    aggregate: &'a Aggregate,
    /// HAVING's predicate over the aggregate's output, if any.
    having: Option<&'a Expr>,
    sort: Option<&'a [SortExpr]>,
    limit: Option<usize>,
}

fn peel(plan: &LogicalPlan) -> Result<Shape<'_>> {
    let mut node = plan;
    let mut limit = None;
    let mut sort = None;
    if let LogicalPlan::Limit(l) = node {
        if l.skip.is_some() {
            return Err(not_private("OFFSET is not supported"));
        }
        limit = match l.fetch.as_deref() {
            None => None,
            Some(Expr::Literal(ScalarValue::Int64(Some(n)), _)) if *n >= 0 => Some(*n as usize),
            Some(_) => return Err(not_private("LIMIT must be a whole number")),
        };
        node = &l.input;
    }
    if let LogicalPlan::Sort(s) = node {
        if let Some(fetch) = s.fetch {
            limit = Some(limit.map_or(fetch, |l: usize| l.min(fetch)));
        }
        sort = Some(s.expr.as_slice());
        node = &s.input;
    }
    let LogicalPlan::Projection(projection) = node else {
        return Err(not_private(
            "dpkit answers SELECT … FROM table [WHERE …] [GROUP BY …] with COUNT, SUM, AVG, VAR, STDDEV, MIN, MAX, MEDIAN or PERCENTILE_CONT",
        ));
    };
    let (below, having) = match projection.input.as_ref() {
        LogicalPlan::Filter(filter) => (filter.input.as_ref(), Some(&filter.predicate)),
        other => (other, None),
    };
    let LogicalPlan::Aggregate(aggregate) = below else {
        return match projection.input.as_ref() {
            LogicalPlan::Filter(_) if has_aggregate_below(&projection.input) => Err(not_private(
                "HAVING must sit directly on the GROUP BY: it compares the released values",
            )),
            LogicalPlan::Sort(_) => Err(not_private("ORDER BY must name columns of the answer")),
            _ => Err(not_private(
                "every query must aggregate (COUNT, SUM, AVG, VAR, STDDEV, MIN, MAX, MEDIAN or PERCENTILE_CONT): dpkit never releases rows",
            )),
        };
    };
    Ok(Shape {
        projection: &projection.expr,
        aggregate,
        having,
        sort,
        limit,
    })
}

fn has_aggregate_below(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Aggregate(_))
        || plan.inputs().iter().any(|p| has_aggregate_below(p))
}

/// Evaluates a GROUP BY expression over every value of one bounded integer
/// column (its name and bounds), giving the public domain of its bins.
pub(crate) type DomainOf<'a> = dyn FnMut(&Expr, &str, (i64, i64)) -> Result<Vec<String>> + 'a;

/// What the planner reads: the description, the private tables' views,
/// the public tables, and the engine's evaluators of public facts.
pub(crate) struct Sources<'a, 'b> {
    /// The description.
    pub(crate) description: &'a Description,
    /// The typed, capped view of each private table, by name.
    pub(crate) views: &'a [(String, LogicalPlan)],
    /// The public tables' facts.
    pub(crate) public: &'a PublicTables,
    /// Evaluates a GROUP BY expression over every value of one bounded
    /// integer column.
    pub(crate) domain_of: &'a mut DomainOf<'b>,
    /// Counts the most rows of a public plan that share one key.
    pub(crate) matches_of: &'a mut MatchesOf<'b>,
}

/// Plans `sql` privately against the `sources`.
pub(crate) fn plan_private(
    sql: &str,
    logical: &LogicalPlan,
    sources: Sources<'_, '_>,
) -> Result<PrivateQuery> {
    let Sources {
        description,
        views,
        public,
        domain_of,
        matches_of,
    } = sources;
    let logical = &comma_joins::as_equijoins(logical.clone());
    let shape = peel(logical)?;
    let aggregate = shape.aggregate;
    let tables = tables::private_views(description, views);
    let mut scope = reach::Scope {
        tables: &tables,
        public,
        matches_of,
    };
    let rewritten = input::rewrite(&aggregate.input, &mut scope)?;
    let reach::Reads::Private(reach) = &rewritten.reads else {
        return Err(not_private(
            "the query reads only public tables: they are public, query them directly",
        ));
    };
    let (input, sizes) = (rewritten.plan.clone(), &rewritten.sizes);
    #[cfg(feature = "planted-holes")]
    let input = planted_cap_after_from(input, description)?;
    let lineage = lineage::Lineage {
        plan: &aggregate.input,
        tables: &tables,
        description,
        public,
    };
    let keys = keys::plan(aggregate, input.schema(), sizes, &lineage, domain_of)?;
    let mut measured = aggregates::plan(aggregate, input.schema(), sizes, &lineage)?;
    // The keys and aggregates run on each of the rows one person holds
    // after the joins, which the aggregate reads (its keys and
    // measurements); bounds per group order them by the keys once more.
    let contribution = contribution::of(description, reach.rows_per_person)?;
    let bounded =
        description.max_groups_per_person.is_some() || description.max_rows_per_group.is_some();
    let key_work = keys.work.saturating_mul(if bounded { 2 } else { 1 });
    let read = dpkit_total::row_work(keys.exprs.len() + measured.exprs.len());
    let nodes = reach::nodes_of(keys.exprs.iter().chain(&measured.exprs)) + 1;
    let work = rewritten.above(
        key_work.saturating_add(measured.work).saturating_add(read),
        nodes,
    )?;
    let threshold_measurement =
        (keys.selection == KeySelection::Threshold).then(|| measured.threshold_count());
    let (outputs, order_by, combinations) =
        outputs::plan(&shape, aggregate, &mut measured.aggregates)?;
    let having = shape
        .having
        .map(|predicate| having::plan(predicate, aggregate))
        .transpose()?;
    let input = contribution::truncated(input, &keys.exprs, contribution, &lineage)?;
    let plan = LogicalPlanBuilder::from(input)
        .aggregate(keys.exprs, measured.exprs)
        .and_then(LogicalPlanBuilder::build)
        .map_err(sql_error)?;
    let measured = MeasuredQuery {
        sql: sql.to_string(),
        group_names: keys.names,
        aggregates: measured.aggregates,
        outputs,
        combinations,
        measurements: measured.measurements,
        measurement_of: measured.measurement_of,
        threshold_measurement,
        keys: keys.selection,
        having,
        order_by,
        limit: shape.limit,
        contribution,
        neighbouring: description.neighbouring,
        // No group holds more than each person's rows in one group.
        count_ceiling: description
            .public_rows
            .and_then(|people| people.checked_mul(contribution.rows_per_group))
            .map(|rows| rows as f64),
        notes: notes::notes(aggregate, &lineage)
            .into_iter()
            .chain(quantiles::extremes_note(aggregate))
            .chain(reach.notes.iter().cloned())
            .collect(),
        joins: reach.joins.clone(),
    };
    Ok(PrivateQuery {
        measured,
        plan,
        work,
        remote: None,
        optimised: std::sync::OnceLock::new(),
    })
}

/// The hole: the cap partitioned by whatever the query's FROM calls the id.
#[cfg(feature = "planted-holes")]
fn planted_cap_after_from(input: LogicalPlan, description: &Description) -> Result<LogicalPlan> {
    use datafusion::common::Column;
    use datafusion::logical_expr::{ExprFunctionExt, lit};
    let planted = dpkit_planted::is_planted(dpkit_planted::Hole::CapAfterFrom);
    let dpkit_description::PrivacyUnit::Id { column, max_rows } = &description.privacy_unit else {
        return Ok(input);
    };
    if !planted {
        return Ok(input);
    }
    let numbered = datafusion::functions_window::expr_fn::row_number()
        .partition_by(vec![Expr::Column(Column::new_unqualified(column))])
        .build()
        .map_err(sql_error)?
        .alias("__dpkit_planted_row");
    // The input's own columns after the filter, as the real cap keeps
    // them: a database's SQL then reads the numbered rows as a subquery.
    let columns: Vec<Expr> = input
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    LogicalPlanBuilder::from(input)
        .window(vec![numbered])
        .and_then(|b| {
            b.filter(
                Expr::Column(Column::new_unqualified("__dpkit_planted_row"))
                    .lt_eq(lit(*max_rows as i64)),
            )
        })
        .and_then(|b| b.project(columns))
        .and_then(LogicalPlanBuilder::build)
        .map_err(sql_error)
}

#[cfg(test)]
mod wrap_tests {
    use super::wrapped;

    #[test]
    fn long_lines_break_between_items_outside_quotes_and_lose_nothing() {
        let items: Vec<String> = (0..30).map(|i| format!("f(x, y) AS c{i}")).collect();
        let line = format!("  Projection: {}, Utf8(\"a, b, c\") AS q", items.join(", "));
        let text = format!("Aggregate: x\n{line}\n    TableScan: t");
        let shown = wrapped(&text, 50);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "Aggregate: x");
        assert!(lines[1].starts_with("  Projection: f(x, y) AS c0, f(x, y) AS c1,"));
        assert!(lines[2].starts_with("      f(x, y) AS c"), "{shown}");
        assert!(lines.iter().all(|l| l.chars().count() <= 50), "{shown}");
        let broken = &lines[1..lines.len() - 2];
        assert!(
            broken
                .iter()
                .all(|l| l.ends_with(',') && !l.ends_with("x,")),
            "{shown}"
        );
        assert!(shown.contains("Utf8(\"a, b, c\") AS q\n"), "{shown}");
        assert_eq!(lines.last(), Some(&"    TableScan: t"));
        let joined: String = lines[1..lines.len() - 1]
            .iter()
            .map(|l| l.trim_start())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(format!("  {joined}"), line);
    }

    #[test]
    fn a_piece_wider_than_the_line_stands_alone_and_short_lines_stay() {
        let long = "x".repeat(80);
        let shown = wrapped(&format!("a, {long}, b\nshort, line"), 20);
        assert_eq!(shown, format!("a,\n    {long},\n    b\nshort, line\n"));
    }
}
