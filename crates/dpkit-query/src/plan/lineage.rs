//! Where a column of the aggregate's input comes from: the table's own
//! column, read through the typed view, or an expression a subquery
//! computes. Only the first carries the description's facts (whole
//! numbers, bounds, domain); a computed column has only what can be proven
//! from its expression (see `bounds`), whatever name the subquery gives it.
//!
//! Why: `FROM (SELECT CASE … THEN 7.5 … END AS "education-num" FROM adult)`
//! once borrowed the real column's `integer` fact by its name, and the
//! sum of a "whole-number" column was then rounded as a total, which one
//! person could move by more than its bound.

use datafusion::common::{Column, JoinType};
use datafusion::logical_expr::{Expr, LogicalPlan};

use super::tables::PrivateView;
use super::unalias;
use crate::public_table::PublicTables;
use dpkit_description::{ColumnFacts, Description};

/// A column's origin.
pub(super) enum Origin<'a> {
    /// A private table's own column: (the table, the column's name).
    Table(&'a PrivateView<'a>, String),
    /// A public table's column: (table, column).
    Public(String, String),
    /// An expression a subquery computes, over the plan below it.
    Computed(&'a Expr, &'a LogicalPlan),
}

/// The plan below the aggregate, and what it reads.
#[derive(Clone, Copy)]
pub(super) struct Lineage<'a> {
    /// The plan whose output columns are asked about.
    pub(super) plan: &'a LogicalPlan,
    /// The private tables, whose own columns carry the description's facts.
    pub(super) tables: &'a [PrivateView<'a>],
    /// The description.
    pub(super) description: &'a Description,
    /// The public tables, whose columns carry the facts read from them.
    pub(super) public: &'a PublicTables,
}

impl<'a> Lineage<'a> {
    /// The same table, asked about the columns of `plan`.
    pub(super) fn below(&self, plan: &'a LogicalPlan) -> Self {
        Self { plan, ..*self }
    }

    /// Where `column` of this plan's output comes from (`None` when it
    /// cannot be followed: no facts then).
    pub(super) fn origin(&self, column: &Column) -> Option<Origin<'a>> {
        #[cfg(feature = "planted-holes")]
        if dpkit_planted::is_planted(dpkit_planted::Hole::BorrowedFacts) {
            return Some(Origin::Table(self.tables.first()?, column.name.clone()));
        }
        origin(self.plan, column, self.tables)
    }

    /// The facts of `column`: the description's, if it is the table's own,
    /// or a public table's, if it is one of its columns.
    pub(super) fn facts(&self, column: &Column) -> Option<&'a ColumnFacts> {
        match self.origin(column)? {
            Origin::Table(table, name) => table.facts.columns.get(&name),
            Origin::Public(table, name) => self.public.get(&table)?.columns.get(&name),
            Origin::Computed(..) => None,
        }
    }

    /// The private table's column that `column` is, by its name in the
    /// table, with the description's facts of it.
    pub(super) fn table_column(&self, column: &Column) -> Option<(String, &'a ColumnFacts)> {
        match self.origin(column)? {
            Origin::Table(table, name) => table.facts.columns.get(&name).map(|f| (name, f)),
            Origin::Public(..) | Origin::Computed(..) => None,
        }
    }

    /// Whether `column` is a private table's own person column, whose value
    /// on each row is the person the row belongs to.
    pub(super) fn is_person(&self, column: &Column) -> bool {
        person_in(self.plan, column, self.tables)
    }

    /// Whether `column` is a private table's own person column on every
    /// row (see [`person_on_every_row`]).
    pub(super) fn is_person_on_every_row(&self, column: &Column) -> bool {
        person_on_every_row(self.plan, column, self.tables)
    }

    /// Whether `plan` is a private table's typed, capped view under its
    /// name: dpkit's own plan, below which the query has nothing of its own.
    pub(super) fn is_view(&self, plan: &LogicalPlan) -> bool {
        self.tables.iter().any(|table| table.is(plan))
    }
}

/// Whether `column` of `plan`'s output is a private table's own person
/// column.
pub(super) fn person_in(plan: &LogicalPlan, column: &Column, tables: &[PrivateView<'_>]) -> bool {
    padded_person(plan, column, tables).is_some()
}

/// Whether `column` of `plan`'s output is a private table's own person
/// column on every row: read from no side that an outer join pads with
/// NULLs (there it names no one on the rows it pads).
pub(super) fn person_on_every_row(
    plan: &LogicalPlan,
    column: &Column,
    tables: &[PrivateView<'_>],
) -> bool {
    padded_person(plan, column, tables) == Some(false)
}

/// For a private table's own person column, whether an outer join pads it
/// with NULLs on the way; `None` for any other column.
fn padded_person(plan: &LogicalPlan, column: &Column, tables: &[PrivateView<'_>]) -> Option<bool> {
    match traced(plan, column, tables)? {
        (Origin::Table(table, name), padded) if table.facts.person == Some(name.as_str()) => {
            Some(padded)
        }
        _ => None,
    }
}

fn origin<'a>(
    plan: &'a LogicalPlan,
    column: &Column,
    tables: &'a [PrivateView<'a>],
) -> Option<Origin<'a>> {
    traced(plan, column, tables).map(|(origin, _)| origin)
}

/// The origin of `column`, and whether an outer join on the way pads it
/// with NULLs.
fn traced<'a>(
    plan: &'a LogicalPlan,
    column: &Column,
    tables: &'a [PrivateView<'a>],
) -> Option<(Origin<'a>, bool)> {
    let own = |plan: &LogicalPlan| {
        tables.iter().find(|table| match plan {
            LogicalPlan::TableScan(scan) => scan.table_name.table() == table.name,
            plan => table.is(plan),
        })
    };
    match plan {
        plan if own(plan).is_some() => {
            Some((Origin::Table(own(plan)?, column.name.clone()), false))
        }
        LogicalPlan::TableScan(scan) => Some((
            Origin::Public(scan.table_name.table().to_string(), column.name.clone()),
            false,
        )),
        LogicalPlan::Join(join) => {
            let index = join.schema.index_of_column(column).ok()?;
            let left = join.left.schema().fields().len();
            // A semi- or anti-join's output is one side's columns.
            let (side, index, padded) = match (join.join_type, index.checked_sub(left)) {
                (JoinType::RightSemi | JoinType::RightAnti, _) => (&join.right, index, false),
                (JoinType::LeftSemi | JoinType::LeftAnti, _) => (&join.left, index, false),
                (join_type, None) => (
                    &join.left,
                    index,
                    matches!(join_type, JoinType::Right | JoinType::Full),
                ),
                (join_type, Some(right)) => (
                    &join.right,
                    right,
                    matches!(join_type, JoinType::Left | JoinType::Full),
                ),
            };
            let (qualifier, field) = side.schema().qualified_field(index);
            let inner = Column::new(qualifier.cloned(), field.name());
            traced(side, &inner, tables).map(|(origin, below)| (origin, below || padded))
        }
        LogicalPlan::Filter(filter) => traced(&filter.input, column, tables),
        LogicalPlan::SubqueryAlias(alias) => {
            let index = alias.schema.index_of_column(column).ok()?;
            let (qualifier, field) = alias.input.schema().qualified_field(index);
            let inner = Column::new(qualifier.cloned(), field.name());
            traced(&alias.input, &inner, tables)
        }
        LogicalPlan::Projection(projection) => {
            let index = projection.schema.index_of_column(column).ok()?;
            match unalias(&projection.expr[index]) {
                Expr::Column(inner) => traced(&projection.input, inner, tables),
                computed => Some((Origin::Computed(computed, &projection.input), false)),
            }
        }
        _ => None,
    }
}
