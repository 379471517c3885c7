//! [`SentinelPerPartition`]: every partition of a plan's rows, then one
//! more row of default values, with a column that is true on the rows and
//! false on the added one.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

/// `input`'s rows in each of its partitions, [`super::REAL`] true, then a
/// sentinel row. Its partitioning is declared as `input`'s: a hash join
/// pairs its build partition `i` with the probe side's partition `i`, and
/// the sentinel, in every partition, matches nothing wherever it is.
#[derive(Debug)]
pub(super) struct SentinelPerPartition {
    input: Arc<dyn ExecutionPlan>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl SentinelPerPartition {
    pub(super) fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        let mut fields: Vec<Field> = (input.schema().fields().iter())
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(super::REAL, DataType::Boolean, false));
        let schema = Arc::new(Schema::new(fields));
        let given = input.properties();
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            given.output_partitioning().clone(),
            given.emission_type,
            given.boundedness,
        );
        Self {
            input,
            schema,
            properties: Arc::new(properties),
        }
    }

    /// The sentinel row: each column's default value, then false.
    fn sentinel(&self) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for field in self.input.schema().fields() {
            columns.push(ScalarValue::new_default(field.data_type())?.to_array_of_size(1)?);
        }
        columns.push(Arc::new(BooleanArray::from(vec![false])));
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

impl DisplayAs for SentinelPerPartition {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SentinelPerPartition")
    }
}

impl ExecutionPlan for SentinelPerPartition {
    fn name(&self) -> &'static str {
        "SentinelPerPartition"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match children.len() {
            1 => Ok(Arc::new(Self::new(children.remove(0)))),
            n => datafusion::common::internal_err!("SentinelPerPartition takes 1 child, not {n}"),
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let recompute = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
        self.replace_children(children, recompute)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = Arc::clone(&self.schema);
        let rows = self.input.execute(partition, context)?.map(move |batch| {
            let batch = batch?;
            let mut columns = batch.columns().to_vec();
            columns.push(Arc::new(BooleanArray::from(vec![true; batch.num_rows()])));
            Ok(RecordBatch::try_new(Arc::clone(&schema), columns)?)
        });
        let sentinel = futures::stream::once(std::future::ready(self.sentinel()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            rows.chain(sentinel),
        )))
    }
}
