//! Hash joins that read their probe side whatever their build side holds.
//!
//! DataFusion's hash join skips its probe side when its build side turns
//! out empty (for the join types whose answer is then empty). That makes a
//! run's duration depend on whether *any* row reached the build side: in a
//! join of two private tables on the person where a filter lets only one
//! person's rows through on one side, the other side's whole scan runs only
//! if that person is there, a cost that grows with the table and not with
//! the person, so the per-person work bound (`dpkit_total::work`) cannot
//! cover it.
//!
//! [`ProbeAlways`] closes it during physical planning: every such join's
//! build side gets one more row, the *sentinel*, which never matches (an
//! extra column, true on every real row and false on the sentinel, that
//! the join's condition asks for) and never leaves the join (the join
//! types that emit unmatched build rows are filtered on that column). A
//! join that collects its build side into one hash table gets one; a join
//! of hash-partitioned sides gets one in every build partition
//! ([`SentinelPerPartition`]), so every probe partition runs and the join
//! keeps DataFusion's parallel build. A cross join (no key), which
//! skips its right side when its left side is empty, gets the same row on
//! its left, its pairs dropped after. The join's output columns, and so its
//! answer, are the same as before.
//!
//! [`configured`] turns off, for the same reason, dynamic filters, which
//! would let the build side's keys prune the probe side's scan (row groups
//! of a Parquet file), and the swap of a join's sides by the tables'
//! statistics, which the private tables' sizes would decide. Whether a
//! join collects its build side or partitions it is still DataFusion's
//! choice from the tables' statistics; both read the probe side in full.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::JoinSide;
use datafusion::common::ScalarValue;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::JoinType;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal, binary, case};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter, JoinOn};
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, HashJoinExecBuilder};
use datafusion::prelude::SessionConfig;

mod sentinel;

use sentinel::SentinelPerPartition;

/// The build side's extra column: true on real rows, false on the
/// sentinel.
const REAL: &str = "__dpkit_real_row";

/// The physical optimizer rule; see the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct ProbeAlways;

impl PhysicalOptimizerRule for ProbeAlways {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if let Some(join) = node.downcast_ref::<HashJoinExec>()
                && skips_probe(*join.join_type())
            {
                return Ok(Transformed::yes(probing(join)?));
            }
            if let Some(join) = node.downcast_ref::<CrossJoinExec>() {
                return Ok(Transformed::yes(crossing(join)?));
            }
            Ok(Transformed::no(node))
        })
        .data()
    }

    fn name(&self) -> &str {
        "ProbeAlways"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `config` with dynamic filters off, since the build side's keys (or an
/// aggregate's or a sort's running values) must not decide how much of
/// another input is read, and without statistics-driven join swaps, since
/// the private tables' sizes must not decide which side is hashed (the
/// build side is the query's left side).
pub(crate) fn configured(mut config: SessionConfig) -> SessionConfig {
    let optimizer = &mut config.options_mut().optimizer;
    optimizer.enable_dynamic_filter_pushdown = false;
    optimizer.enable_join_dynamic_filter_pushdown = false;
    optimizer.enable_aggregate_dynamic_filter_pushdown = false;
    optimizer.enable_topk_dynamic_filter_pushdown = false;
    optimizer.join_reordering = false;
    config
}

/// The physical optimizer's rules with [`ProbeAlways`] last before the
/// sanity check: after the filters' pushdown (which would move the filter
/// that drops the sentinel below the join) and after the partitioning is
/// settled (a partitioned join's build side is then hash-partitioned, and
/// each of its partitions gets a sentinel).
pub(crate) fn rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let at = rules
        .iter()
        .position(|rule| rule.name() == "SanityCheckPlan")
        .expect("DataFusion's physical optimizer has SanityCheckPlan");
    rules.insert(at, Arc::new(ProbeAlways));
    rules
}

/// Whether DataFusion skips the probe side of a join of this type when its
/// build side (or its hash table) is empty.
fn skips_probe(join_type: JoinType) -> bool {
    join_type.empty_build_side_produces_empty_result()
        || join_type.empty_map_produces_empty_result()
}

/// Whether the join emits build rows that matched nothing.
fn emits_unmatched_build_rows(join_type: JoinType) -> bool {
    matches!(
        join_type,
        JoinType::Left | JoinType::LeftAnti | JoinType::LeftMark | JoinType::Full
    )
}

/// A cross join (no key, no condition), which skips its right side when
/// its left side is empty: the sentinel on its left, and its pairs
/// dropped after.
fn crossing(join: &CrossJoinExec) -> Result<Arc<dyn ExecutionPlan>> {
    let left_width = join.left().schema().fields().len();
    let right_width = join.right().schema().fields().len();
    let crossed = Arc::new(CrossJoinExec::new(
        Arc::new(SentinelPerPartition::new(Arc::clone(join.left()))),
        Arc::clone(join.right()),
    ));
    let kept = (0..left_width).chain(left_width + 1..left_width + 1 + right_width);
    real_rows_only(crossed, left_width, kept.collect(), None)
}

/// `plan`'s rows whose [`REAL`] column (at `real`) is not false, with the
/// columns `kept`, at most `fetch` of them in each partition (as the join
/// limited them). A row a full join padded on the build side (NULL) stays.
fn real_rows_only(
    plan: Arc<dyn ExecutionPlan>,
    real: usize,
    kept: Vec<usize>,
    fetch: Option<usize>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let column = Arc::new(Column::new(REAL, real));
    let not_false = binary(
        column,
        Operator::IsDistinctFrom,
        literal(ScalarValue::Boolean(Some(false))),
        &plan.schema(),
    )?;
    let filter = FilterExecBuilder::new(not_false, plan)
        .with_fetch(fetch)
        .apply_projection(Some(kept))?
        .build()?;
    Ok(Arc::new(filter))
}

/// `join` with the sentinel on its build side, its output unchanged.
fn probing(join: &HashJoinExec) -> Result<Arc<dyn ExecutionPlan>> {
    let build_width = join.left().schema().fields().len();
    let (on, condition) = keys_and_condition(join, build_width)?;
    // A collected build side is one partition by then: one sentinel.
    let build: Arc<dyn ExecutionPlan> =
        Arc::new(SentinelPerPartition::new(Arc::clone(join.left())));
    let unprojected = || {
        HashJoinExecBuilder::new(
            Arc::clone(&build),
            Arc::clone(join.right()),
            on.clone(),
            *join.join_type(),
        )
        .with_filter(condition.clone())
        .with_partition_mode(*join.partition_mode())
        .with_null_equality(join.null_equality())
        .with_null_aware(join.null_aware)
        .with_fetch(join.fetch())
    };
    let before = join.builder().with_projection(None).build()?.schema();
    let after = unprojected().build()?.schema();
    // The flag sits after the build side's columns when they are emitted.
    let shifted = |i: usize| match after.fields().len() > before.fields().len() {
        true if i >= build_width => i + 1,
        _ => i,
    };
    let wanted: Vec<usize> = match &join.projection {
        Some(projection) => projection.iter().map(|&i| shifted(i)).collect(),
        None => (0..before.fields().len()).map(shifted).collect(),
    };
    if !emits_unmatched_build_rows(*join.join_type()) {
        return unprojected().with_projection(Some(wanted)).build_exec();
    }
    // The sentinel leaves at the filter, so a limit counts after it.
    let kept = wanted.len();
    let joined = unprojected()
        .with_fetch(None)
        .with_projection(Some([wanted, vec![build_width]].concat()))
        .build_exec()?;
    real_rows_only(joined, kept, (0..kept).collect(), join.fetch())
}

/// The join's keys and condition, so that the sentinel matches nothing:
/// the condition also asks [`REAL`] of the build row (the keys stay, so a
/// partitioned join's sides stay partitioned on them; the sentinel's keys
/// are default values, never NULL, since a NULL key leaves a row out of
/// the hash table, which an empty table's join type then skips). A
/// null-aware anti join (`NOT IN`) takes a single key and no condition:
/// that key is NULL on the sentinel instead, still a row of the build
/// side, which is all that join asks before it probes.
fn keys_and_condition(
    join: &HashJoinExec,
    build_width: usize,
) -> Result<(JoinOn, Option<JoinFilter>)> {
    let real: Arc<dyn PhysicalExpr> = Arc::new(Column::new(REAL, build_width));
    let mut on = join.on().to_vec();
    if join.null_aware {
        for (build_key, _) in &mut on {
            *build_key = case(None, vec![(Arc::clone(&real), Arc::clone(build_key))], None)?;
        }
        return Ok((on, join.filter().cloned()));
    }
    Ok((on, Some(with_real_build_row(join.filter(), build_width)?)))
}

/// `filter` (or none) and [`REAL`] of the build row at `build_width`.
fn with_real_build_row(filter: Option<&JoinFilter>, build_width: usize) -> Result<JoinFilter> {
    let mut columns = filter.map_or_else(Vec::new, |f| f.column_indices().to_vec());
    let mut fields: Vec<Field> = filter.map_or_else(Vec::new, |f| {
        f.schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect()
    });
    let at = columns.len();
    columns.push(ColumnIndex {
        index: build_width,
        side: JoinSide::Left,
    });
    fields.push(Field::new(REAL, DataType::Boolean, false));
    let real: Arc<dyn PhysicalExpr> = Arc::new(Column::new(REAL, at));
    let expression = match filter {
        Some(f) => Arc::new(BinaryExpr::new(
            Arc::clone(f.expression()),
            Operator::And,
            real,
        )),
        None => real,
    };
    Ok(JoinFilter::new(
        expression,
        columns,
        Arc::new(Schema::new(fields)),
    ))
}

fn literal(value: ScalarValue) -> Arc<dyn PhysicalExpr> {
    Arc::new(Literal::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::datasource::MemTable;
    use datafusion::physical_plan::collect;
    use datafusion::physical_plan::execution_plan::{
        ChildrenPropertiesMode, ReplaceChildrenOptions,
    };
    use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
    use datafusion::prelude::SessionContext;

    const ROWS: i64 = 3000;
    /// The target's rows: the only ones with a negative `v`.
    const TARGET: [(i64, i64); 2] = [(5, -1), (6, -2)];

    /// `name(id, v)`: ids 0..999 three times over with one NULL, `v` = the
    /// row's number, in three partitions, and the target's rows or not.
    fn table(name: &str, target: bool) -> MemTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new(format!("{name}_id"), DataType::Int64, true),
            Field::new(format!("{name}_v"), DataType::Int64, true),
        ]));
        let part = |start: i64, extra: &[(i64, i64)]| {
            let rows = (start..start + ROWS / 3).map(|i| ((i != 7).then_some(i % 1000), i));
            let rows: Vec<_> = rows
                .chain(extra.iter().map(|&(i, v)| (Some(i), v)))
                .collect();
            let ids: Int64Array = rows.iter().map(|r| r.0).collect();
            let values: Int64Array = rows.iter().map(|r| Some(r.1)).collect();
            let columns = vec![Arc::new(ids) as _, Arc::new(values) as _];
            vec![RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()]
        };
        let extra: &[(i64, i64)] = if target { &TARGET } else { &[] };
        let parts = vec![part(0, &[]), part(ROWS / 3, extra), part(2 * ROWS / 3, &[])];
        MemTable::try_new(Arc::clone(&schema), parts).unwrap()
    }

    /// `context` with `a` (the target's rows or not) and `b`.
    fn with_tables(context: SessionContext, target: bool) -> SessionContext {
        context
            .register_table("a", Arc::new(table("a", target)))
            .unwrap();
        context
            .register_table("b", Arc::new(table("b", false)))
            .unwrap();
        context
    }

    /// The answer of `sql`, its rows sorted, and the rows each hash or
    /// cross join read from its probe (right) side.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
    }

    fn run(context: &SessionContext, sql: &str) -> (Vec<String>, Vec<usize>) {
        runtime().block_on(async {
            let plan = context
                .sql(sql)
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            let plan = counted(plan);
            let batches = collect(Arc::clone(&plan), context.task_ctx())
                .await
                .unwrap();
            let text = pretty_format_batches(&batches).unwrap().to_string();
            let mut rows: Vec<String> = text.lines().map(str::to_string).collect();
            rows.sort();
            let mut probed = Vec::new();
            plan.apply(|node| {
                if node.is::<HashJoinExec>() || node.is::<CrossJoinExec>() {
                    let metrics = node.children()[1]
                        .metrics()
                        .expect("the probe side's metrics");
                    probed.push(metrics.output_rows().unwrap_or(0));
                }
                Ok(TreeNodeRecursion::Continue)
            })
            .unwrap();
            assert!(!probed.is_empty(), "no hash or cross join: {sql}");
            (rows, probed)
        })
    }

    /// `plan` with each hash join's probe side read through a projection
    /// of all its columns, whose metrics count the rows the join pulled.
    fn counted(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        plan.transform_up(|node| {
            if !node.is::<HashJoinExec>() && !node.is::<CrossJoinExec>() {
                return Ok(Transformed::no(node));
            }
            let [build, probe] = [0, 1].map(|i| Arc::clone(node.children()[i]));
            let schema = probe.schema();
            let all: Vec<_> = (schema.fields().iter().enumerate())
                .map(|(i, field)| {
                    let column = Arc::new(Column::new(field.name(), i)) as Arc<dyn PhysicalExpr>;
                    ProjectionExpr::new(column, field.name().to_string())
                })
                .collect();
            let through = Arc::new(ProjectionExec::try_new(all, probe)?);
            let children = vec![build, through as Arc<dyn ExecutionPlan>];
            let recompute = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
            Ok(Transformed::yes(
                node.replace_children(children, recompute)?,
            ))
        })
        .data()
        .unwrap()
    }

    /// Joins of every kind DataFusion plans as hash joins, `a`'s rows kept
    /// by `keep`.
    fn queries(keep: &str) -> Vec<String> {
        vec![
            format!("SELECT COUNT(*), SUM(b_v) FROM a JOIN b ON a_id = b_id WHERE {keep}"),
            format!("SELECT a_v, b_v FROM a JOIN b ON a_id = b_id AND a_v < b_v WHERE {keep}"),
            format!("SELECT a_v, b_v FROM a LEFT JOIN b ON a_id = b_id WHERE {keep}"),
            format!("SELECT a_v, b_v FROM b RIGHT JOIN a ON a_id = b_id WHERE {keep}"),
            format!("SELECT COUNT(*) FROM b WHERE b_id IN (SELECT a_id FROM a WHERE {keep})"),
            format!(
                "SELECT COUNT(*) FROM a JOIN b ON NULLIF(a_id, 0) = b_id AND a_v < b_v \
                 WHERE {keep}"
            ),
            format!("SELECT COUNT(*) FROM b WHERE b_id NOT IN (SELECT a_id FROM a WHERE {keep})"),
            format!(
                "SELECT a_v FROM a WHERE a_id NOT IN (SELECT b_id FROM b WHERE b_v < 20) AND {keep}"
            ),
            format!(
                "SELECT a_v FROM a WHERE {keep} AND NOT EXISTS \
                 (SELECT 1 FROM b WHERE b_id = a_id AND b_v > 2500)"
            ),
            format!(
                "SELECT a_v FROM a WHERE {keep} AND \
                 (a_v > 110 OR EXISTS (SELECT 1 FROM b WHERE b_id = a_id AND b_v > 2500))"
            ),
            format!("SELECT COUNT(*) FROM a FULL JOIN b ON a_id = b_id WHERE {keep} OR b_v < 10"),
            format!(
                "SELECT COUNT(*), SUM(b_v) FROM a CROSS JOIN (SELECT * FROM b WHERE b_v < 50) \
                 WHERE {keep}"
            ),
            format!("SELECT a_v, b_v FROM a JOIN b ON true WHERE b_v < 5 AND ({keep})"),
            format!(
                "SELECT COUNT(*) FROM (SELECT a_v FROM a LEFT JOIN b ON a_id = b_id \
                 WHERE {keep} LIMIT 3)"
            ),
        ]
    }

    const KEEPS: [&str; 5] = [
        "a_v < 0",
        "a_v = 5",
        "a_v BETWEEN 100 AND 120",
        "a_id IS NULL",
        "a_v < 0 OR a_v > 2990",
    ];

    /// The engine's session, or one whose hash joins all partition both
    /// sides (DataFusion's choice for large tables), with the rule or
    /// without it.
    fn session(partitioned: bool, probing: bool) -> SessionContext {
        let mut config = configured(SessionConfig::new().with_target_partitions(3));
        if partitioned {
            let optimizer = &mut config.options_mut().optimizer;
            optimizer.hash_join_single_partition_threshold = 0;
            optimizer.hash_join_single_partition_threshold_rows = 0;
        }
        let mut rules = rules();
        rules.retain(|rule| probing || rule.name() != "ProbeAlways");
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .build();
        SessionContext::new_with_state(state)
    }

    /// Every query answers as DataFusion alone answers it, on both tables,
    /// with build sides collected or partitioned.
    #[test]
    fn answers_are_unchanged() {
        for target in [false, true] {
            let plain = with_tables(SessionContext::new(), target);
            for probing in [
                with_tables(crate::engine::session(), target),
                with_tables(session(true, true), target),
            ] {
                for sql in KEEPS.iter().flat_map(|keep| queries(keep)) {
                    assert_eq!(run(&probing, &sql).0, run(&plain, &sql).0, "{sql}");
                }
            }
        }
    }

    /// The rows each join reads from its probe side differ between the
    /// neighbours by at most the target's own rows, whatever the target's
    /// rows are alone in passing. Without [`ProbeAlways`], DataFusion skips
    /// the whole probe side when the build side is empty.
    #[test]
    fn the_probe_side_is_read_with_or_without_the_target() {
        let probed = |context: SessionContext, target: bool, sql: &str| {
            run(&with_tables(context, target), sql).1
        };
        // A limit stops the probe side early whatever the build side holds
        // (dpkit refuses LIMIT below an aggregate): its answers are
        // checked above.
        let unlimited: Vec<String> = KEEPS.iter().flat_map(|keep| queries(keep)).collect();
        for partitioned in [false, true] {
            for sql in unlimited.iter().filter(|sql| !sql.contains("LIMIT")) {
                let with = probed(session(partitioned, true), true, sql);
                let without = probed(session(partitioned, true), false, sql);
                assert_eq!(with.len(), without.len(), "{sql}");
                for (w, o) in with.iter().zip(&without) {
                    assert!(
                        w.abs_diff(*o) <= TARGET.len(),
                        "{with:?} against {without:?}, partitioned {partitioned}: {sql}"
                    );
                }
            }
            // The same configuration without the rule: the hole put back.
            let sql = "SELECT COUNT(*) FROM a JOIN b ON a_id = b_id WHERE a_v < 0";
            let with = probed(session(partitioned, false), true, sql);
            let without = probed(session(partitioned, false), false, sql);
            // (a partitioned join skips only the partitions the target's
            // key does not hash to)
            let (with, without): (usize, usize) = (with.iter().sum(), without.iter().sum());
            assert!(
                with > without + 900,
                "{with} against {without}, {partitioned}"
            );
        }
    }

    /// The partitioned session does partition, and its build side gets a
    /// sentinel in each partition.
    #[test]
    fn a_partitioned_join_keeps_its_partitions() {
        let context = with_tables(session(true, true), true);
        let sql = "SELECT COUNT(*) FROM a JOIN b ON a_id = b_id WHERE a_v < 0";
        let plan = runtime().block_on(async {
            let frame = context.sql(sql).await.unwrap();
            frame.create_physical_plan().await.unwrap()
        });
        let shown = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(true)
            .to_string();
        assert!(
            shown.contains("mode=Partitioned") && shown.contains("SentinelPerPartition"),
            "{shown}"
        );
    }
}
