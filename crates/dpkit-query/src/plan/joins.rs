//! Joins of private tables with public tables (`person_joins` joins them
//! with each other).
//!
//! A join with a public table maps each private row, on its own, to at most
//! `m` rows, `m` being the most rows of the public side that one key value
//! matches: a public fact, counted exactly at planning. Each person then
//! holds at most `k·m` rows, and every privacy map holds with that many
//! (`dpkit_core::sensitivity::joins` gives the argument and the number).
//! Joins that keep public rows by whether anyone matched them, and joins
//! of the private table with itself, are refused.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::JoinType;
use datafusion::logical_expr::{Expr, ExprSchemable, Join, LogicalPlan};
use datafusion::optimizer::extract_equijoin_predicate::ExtractEquijoinPredicate;
use datafusion::optimizer::{OptimizerContext, OptimizerRule};
use dpkit_core::sensitivity::{PublicJoin, rows_after_public_join};
use dpkit_total::{Sizes, Totaliser, Ty, check_work, pair_work};

use super::reach::{Reach, Reads, Rewritten, Scope, merge_size, nodes_of, work_after};
use super::{not_private, sql_error};
use crate::error::Result;

/// `join` over its rewritten sides, its condition in total form, and how far
/// one person reaches in its output.
pub(super) fn joined(
    join: &Join,
    (left, right): (Rewritten, Rewritten),
    scope: &mut Scope<'_, '_>,
) -> Result<Rewritten> {
    let private_left = match (&left.reads, &right.reads) {
        (Reads::Private(_), Reads::Private(_)) => {
            return Err(sql_error("two private sides belong to `person_joins`"));
        }
        (Reads::Private(_), Reads::Public) => Some(true),
        (Reads::Public, Reads::Private(_)) => Some(false),
        (Reads::Public, Reads::Public) => None,
    };
    let kind = private_left
        .map(|on_left| kind_of(join.join_type, on_left))
        .transpose()?;
    let (on, key_work) = keys(join, &left, &right)?;
    let sizes = both_sizes(&left, &right);
    let (joined, filter_work) = rebuilt(join, (&left, &right), on, &sizes)?;
    let (Some(private_left), Some(kind)) = (private_left, kind) else {
        return Ok(Rewritten {
            plan: joined,
            sizes,
            work: 0,
            reads: Reads::Public,
        });
    };
    let (private, public) = match private_left {
        true => (&left, &right),
        false => (&right, &left),
    };
    let LogicalPlan::Join(built) = &joined else {
        return Err(sql_error("the join was not rebuilt as a join"));
    };
    let public_keys = built
        .on
        .iter()
        .map(|(l, r)| if private_left { r } else { l }.clone())
        .collect();
    let most = most_rows(&public.plan, scope);
    if most > MOST_PUBLIC_ROWS_JOINED {
        return Err(not_private(format!(
            "the public side of a join could hold {most} rows, more than the \
             {MOST_PUBLIC_ROWS_JOINED} dpkit counts before answering: join fewer public tables \
             with each other, or join them in the file"
        )));
    }
    let matches = (scope.matches_of)(public.plan.clone(), public_keys)?;
    #[cfg(feature = "planted-holes")]
    let matches = match dpkit_planted::is_planted(dpkit_planted::Hole::JoinFanout) {
        true => matches.min(1),
        false => matches,
    };
    let Reads::Private(reach) = &private.reads else {
        return Err(sql_error("the private side was lost"));
    };
    let too_far = |_| {
        not_private("the join lets one person hold more rows than dpkit can bound: join on a key")
    };
    let rows_per_person =
        rows_after_public_join(reach.rows_per_person, matches, kind).map_err(too_far)?;
    let most = scope.most_joined_rows();
    if rows_per_person > most {
        return Err(not_private(format!(
            "the join lets one person hold up to {rows_per_person} rows, more than the {most} \
             a query may reach (the largest max_rows_per_person, or 10000): join on a key \
             that repeats less in the public table"
        )));
    }
    // Each of one person's rows meets at most `matches` public rows, and
    // the join emits each pair it keeps; its keys and filter run on the
    // batches the pairs come in.
    let row = pair_work(built.schema.fields().len());
    let nodes = join_nodes(built);
    let batches = batches_after(reach.batches, rows_per_person, built.on.is_empty());
    let spread = (reach.rows_per_person, batches.max(reach.batches));
    let per_row = key_work.per_row(matches.max(1), filter_work, row);
    let work = work_after(private.work, spread, per_row, nodes)?;
    let mut joins = reach.joins.clone();
    joins.push(said(built, &public.plan, matches, kind));
    let tables = public_tables(&public.plan).join(", ");
    let mut notes = reach.notes.clone();
    notes.extend(fanout_note(&tables, reach.rows_per_person, rows_per_person));
    Ok(Rewritten {
        plan: joined,
        sizes,
        work,
        reads: Reads::Private(Reach {
            rows_per_person,
            batches,
            joins,
            notes,
        }),
    })
}

/// `join` with the equalities of its condition between one side and the
/// other as its keys (SQL's `ON a.x = b.y` arrives as a condition): the
/// public side's matches are then counted per key, not over all its rows.
pub(super) fn equalities_as_keys(join: &Join) -> Result<Join> {
    let rule = ExtractEquijoinPredicate::new();
    let plan = rule
        .rewrite(LogicalPlan::Join(join.clone()), &OptimizerContext::new())
        .map_err(sql_error)?
        .data;
    match plan {
        LogicalPlan::Join(join) => Ok(join),
        _ => Err(sql_error("the join's condition could not be read")),
    }
}

/// What the join does to each private row, by its type and the side the
/// private table is on.
fn kind_of(join_type: JoinType, private_left: bool) -> Result<PublicJoin> {
    match (join_type, private_left) {
        (JoinType::Inner, _) => Ok(PublicJoin::Inner),
        (JoinType::Left, true) | (JoinType::Right, false) => Ok(PublicJoin::KeepPrivate),
        (JoinType::LeftSemi | JoinType::LeftAnti, true)
        | (JoinType::RightSemi | JoinType::RightAnti, false) => Ok(PublicJoin::Semi),
        _ => Err(not_private(
            "this join keeps a public table's rows by whether someone matched them: use JOIN, \
             or LEFT JOIN with the private table on the left",
        )),
    }
}

/// The equality keys in total form, and their work per row. Both sides of
/// each must have one type, integer, text or boolean: then rows match
/// exactly when their keys are equal as values, which is what the public
/// side's matches are counted by (a cast in the join could match `'01'`
/// and `'1'` to one number, and a real number's `0.0` and `-0.0`).
pub(super) fn keys(
    join: &Join,
    left: &Rewritten,
    right: &Rewritten,
) -> Result<(Vec<(Expr, Expr)>, KeyWork)> {
    let mut on_left = Totaliser::new(left.plan.schema(), &left.sizes);
    let mut on_right = Totaliser::new(right.plan.schema(), &right.sizes);
    let mut on = Vec::with_capacity(join.on.len());
    let mut hashed = 0u64;
    for (l, r) in &join.on {
        let (l, r) = (on_left.total(l)?, on_right.total(r)?);
        let types = (
            l.expr.get_type(left.plan.schema()).map_err(sql_error)?,
            r.expr.get_type(right.plan.schema()).map_err(sql_error)?,
        );
        if types.0 != types.1 || l.ty != r.ty || !matches!(l.ty, Ty::Int | Ty::Text | Ty::Bool) {
            return Err(not_private(format!(
                "a join's keys must have one type, integer, text or boolean (here {} and {}): \
                 CAST one side",
                shown_type(&types.0),
                shown_type(&types.1)
            )));
        }
        if l.ty == Ty::Text {
            hashed = hashed.saturating_add(l.bytes.max(r.bytes));
        }
        on.push((l.expr, r.expr));
    }
    let work = KeyWork {
        computed: on_left.work().saturating_add(on_right.work()),
        bytes: hashed,
    };
    check_work(work.computed.saturating_add(work.bytes))?;
    Ok((on, work))
}

/// The work of a join's keys per row: computing them, and the bytes of
/// text each hash or comparison reads.
pub(super) struct KeyWork {
    computed: u64,
    bytes: u64,
}

impl KeyWork {
    /// The join's work per row of one side that meets at most `meets` rows
    /// of the other: its key computed and hashed once, then compared with,
    /// the join's filter (`filter_work` per pair) run on, and the pair
    /// emitted (`row` per pair), for each of them.
    pub(super) fn per_row(&self, meets: u64, filter_work: u64, row: u64) -> u64 {
        let each = self.bytes.saturating_add(filter_work).saturating_add(row);
        (self.computed.saturating_add(self.bytes)).saturating_add(meets.saturating_mul(each))
    }
}

/// The batches one person's `rows` may come in after a join whose
/// private side's rows came in `before`: a hash join (on equalities)
/// emits each probed batch's matches together, in batches of up to 8,192
/// rows, so each of `before` may become two, and more when the rows
/// outgrow them; a join on no equality pairs row by row, and may emit
/// each pair in a batch of its own.
pub(super) fn batches_after(before: u64, rows: u64, no_equality: bool) -> u64 {
    match no_equality {
        true => rows.max(before),
        false => before.saturating_mul(2).saturating_add(rows / BATCH_ROWS),
    }
}

/// The operations a join runs on each batch: its keys, its filter, and
/// itself.
pub(super) fn join_nodes(join: &Join) -> u64 {
    let keys = join.on.iter().flat_map(|(l, r)| [l, r]);
    nodes_of(keys.chain(&join.filter)) + 1
}

/// The rows of a batch DataFusion builds (its default `batch_size`).
const BATCH_ROWS: u64 = 8192;

/// The sizes of both sides' columns.
pub(super) fn both_sizes(left: &Rewritten, right: &Rewritten) -> Sizes {
    let mut sizes = left.sizes.clone();
    for (name, size) in &right.sizes {
        merge_size(&mut sizes, name, *size);
    }
    sizes
}

/// The most rows a plan over public tables can hold before it is run (each
/// join as if it paired every row with every row), for the count of its
/// matches, which runs at planning, before any charge or run limit.
const MOST_PUBLIC_ROWS_JOINED: u64 = 10_000_000;

/// A bound on the rows of the public `plan`: each table's rows, multiplied
/// over joins.
fn most_rows(plan: &LogicalPlan, scope: &Scope<'_, '_>) -> u64 {
    match plan {
        LogicalPlan::TableScan(scan) => scope
            .public
            .get(scan.table_name.table())
            .map_or(u64::MAX, |table| table.rows),
        other => other
            .inputs()
            .into_iter()
            .map(|input| most_rows(input, scope))
            .fold(1, u64::saturating_mul),
    }
}

fn shown_type(data_type: &DataType) -> String {
    data_type.to_string().to_lowercase()
}

/// The join over the rewritten sides, its filter in total form, and the
/// filter's work per pair of rows.
pub(super) fn rebuilt(
    join: &Join,
    (left, right): (&Rewritten, &Rewritten),
    on: Vec<(Expr, Expr)>,
    sizes: &Sizes,
) -> Result<(LogicalPlan, u64)> {
    let built = Join::try_new(
        Arc::new(left.plan.clone()),
        Arc::new(right.plan.clone()),
        on,
        None,
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )
    .map_err(sql_error)?;
    let Some(condition) = &join.filter else {
        return Ok((LogicalPlan::Join(built), 0));
    };
    let mut totaliser = Totaliser::new(&built.schema, sizes);
    let filter = totaliser.predicate(condition)?;
    let work = totaliser.work();
    Ok((
        LogicalPlan::Join(Join {
            filter: Some(filter),
            ..built
        }),
        work,
    ))
}

/// The join as `--explain` says it.
fn said(join: &Join, public: &LogicalPlan, matches: u64, kind: PublicJoin) -> String {
    let tables = public_tables(public).join(", ");
    let on: Vec<String> = join.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
    let on = match on.is_empty() {
        true => "every row".to_string(),
        false => on.join(" AND "),
    };
    let each = match kind {
        PublicJoin::Semi => "keeps each row or leaves it out".to_string(),
        PublicJoin::KeepPrivate => format!("makes each row at most {} row(s)", matches.max(1)),
        PublicJoin::Inner => format!("makes each row at most {matches} row(s)"),
    };
    format!("the join with public table {tables} on {on} {each}")
}

/// The public tables a plan scans, in order.
fn public_tables(plan: &LogicalPlan) -> Vec<String> {
    match plan {
        LogicalPlan::TableScan(scan) => vec![scan.table_name.table().to_string()],
        other => other.inputs().into_iter().flat_map(public_tables).collect(),
    }
}

/// The note for a join with a public table whose key repeats: one person
/// then holds more rows after it than before, and the noise grows with
/// them; a unique key would stop that.
fn fanout_note(table: &str, before: u64, after: u64) -> Option<String> {
    (after > before).then(|| {
        format!(
            "a join key repeats in public table {table}, so one person can hold up to {after} \
             rows after joining it (not {before}), and the noise is scaled to that: a key that \
             is unique in the public table keeps it at {before}"
        )
    })
}
