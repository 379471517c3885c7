//! Joins of private tables with each other, on the person: each of one
//! person's rows meets only rows of the same person, so the join maps each
//! person's rows on their own, and one person holds at most the product of
//! the two sides' rows (`dpkit_core::sensitivity::joins` gives the argument
//! and the number). Which columns name the person is followed through the
//! plan to each table's own person column, never read from a name.

use datafusion::common::{Column, JoinType, NullEquality};
use datafusion::logical_expr::{Expr, Join, LogicalPlan};
use dpkit_core::sensitivity::{PersonJoin, rows_after_person_join};
use dpkit_total::pair_work;

use super::joins::{batches_after, both_sizes, join_nodes, keys, rebuilt};
use super::lineage::person_in;
use super::reach::{Reach, Reads, Rewritten, Scope, work_after};
use super::{not_private, sql_error, unalias};
use crate::error::Result;

/// `join` of two private sides, its condition in total form, and how far
/// one person reaches in its output.
pub(super) fn joined(
    join: &Join,
    (left, right): (Rewritten, Rewritten),
    scope: &mut Scope<'_, '_>,
) -> Result<Rewritten> {
    if scope
        .tables
        .iter()
        .any(|table| table.facts.person.is_none())
    {
        return Err(not_private(
            "a join of the private table with itself is not supported: it would pair one \
             person's rows with another's",
        ));
    }
    let kind = kind_of(join.join_type)?;
    let person = on_the_person(join, scope)?;
    let (on, key_work) = keys(join, &left, &right)?;
    let sizes = both_sizes(&left, &right);
    let (plan, filter_work) = rebuilt(join, (&left, &right), on, &sizes)?;
    let (Reads::Private(l), Reads::Private(r)) = (&left.reads, &right.reads) else {
        return Err(sql_error("a private side was lost"));
    };
    let too_far = |_| not_private("the join lets one person hold more rows than can be counted");
    let rows_per_person =
        rows_after_person_join(l.rows_per_person, r.rows_per_person, kind).map_err(too_far)?;
    let most = scope.most_joined_rows();
    if rows_per_person > most {
        return Err(not_private(format!(
            "the join lets one person hold up to {rows_per_person} rows, more than the {most} \
             a query may reach (the largest max_rows_per_person, or 10000): join the tables \
             fewer times"
        )));
    }
    // Each of a person's rows on the left meets at most their rows on the
    // right: the pairs are compared, filtered and emitted once each; each
    // row on the right has its key computed and hashed once.
    let LogicalPlan::Join(built) = &plan else {
        return Err(sql_error("the join was not rebuilt as a join"));
    };
    let row = pair_work(built.schema.fields().len());
    let nodes = join_nodes(built);
    let batches = batches_after(l.batches.saturating_add(r.batches), rows_per_person, false);
    let probed = left.above(key_work.per_row(r.rows_per_person, filter_work, row), nodes)?;
    let built_side = right.above(key_work.per_row(0, 0, 0), 0)?;
    // The pairs' filter and emission run on the batches the pairs come in.
    let work = work_after(probed.saturating_add(built_side), (0, batches), 0, nodes)?;
    let mut joins = [l.joins.clone(), r.joins.clone()].concat();
    joins.push(said(&person, kind, rows_per_person));
    Ok(Rewritten {
        plan,
        sizes,
        work,
        reads: Reads::Private(Reach {
            rows_per_person,
            batches,
            joins,
            notes: [l.notes.clone(), r.notes.clone()].concat(),
        }),
    })
}

/// What the join does to each person's rows, by its type. A full outer
/// join would keep both sides' unmatched rows: refused (not covered by
/// the argument, and rarely what is meant).
fn kind_of(join_type: JoinType) -> Result<PersonJoin> {
    match join_type {
        JoinType::Inner | JoinType::Left | JoinType::Right => Ok(PersonJoin::Pairs),
        JoinType::LeftSemi | JoinType::LeftAnti => Ok(PersonJoin::KeepLeft),
        JoinType::RightSemi | JoinType::RightAnti => Ok(PersonJoin::KeepRight),
        _ => Err(not_private(
            "a FULL JOIN of private tables is not supported: use JOIN or LEFT JOIN",
        )),
    }
}

/// The join's equality of the two sides' persons, as `(left, right)`
/// column names, or a refusal: without it the join would pair one
/// person's rows with another's. NULL must match nothing: a row that an
/// outer join padded with NULLs names no person on that side.
fn on_the_person(join: &Join, scope: &Scope<'_, '_>) -> Result<(String, String)> {
    let refusal = || {
        not_private(
            "private tables join only on the person: add ON a.person = b.person, with each \
             table's own person column (the description's id column, or a [private] table's \
             person)",
        )
    };
    if join.null_equality != NullEquality::NullEqualsNothing {
        return Err(refusal());
    }
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::PersonJoinOnAnyKey)
        && let Some((l, r)) = join.on.first()
    {
        return Ok((l.to_string(), r.to_string()));
    }
    let person = |expr: &Expr, plan: &LogicalPlan| match unalias(expr) {
        Expr::Column(column) if person_in(plan, column, scope.tables) => Some(column.clone()),
        _ => None,
    };
    join.on
        .iter()
        .find_map(|(l, r)| {
            let (l, r): (Column, Column) = (person(l, &join.left)?, person(r, &join.right)?);
            Some((l.flat_name(), r.flat_name()))
        })
        .ok_or_else(refusal)
}

/// The join as `--explain` says it.
fn said((left, right): &(String, String), kind: PersonJoin, rows: u64) -> String {
    let each = match kind {
        PersonJoin::Pairs => "pairs each person's rows with their own",
        PersonJoin::KeepLeft | PersonJoin::KeepRight => "keeps or leaves out each person's rows",
    };
    format!("the join of private tables on {left} = {right} {each}: at most {rows} row(s) each")
}
