//! The private tables a query may read: each one's typed, capped view
//! (which the planner inlines under the table's name), the sizes of its
//! columns, and what the description makes public about it.

use datafusion::logical_expr::LogicalPlan;
use dpkit_total::Sizes;

use crate::private_table::column_size;
use dpkit_description::{Description, TableFacts};

/// One private table as the planner meets it.
pub(super) struct PrivateView<'a> {
    /// The table's name.
    pub(super) name: &'a str,
    /// Its typed, capped view.
    pub(super) view: &'a LogicalPlan,
    /// The sizes of the view's columns.
    pub(super) sizes: Sizes,
    /// Its person column, cap and columns' facts.
    pub(super) facts: TableFacts<'a>,
}

impl PrivateView<'_> {
    /// Whether `plan` is this table's view under its name: dpkit's own
    /// plan, below which the query has nothing of its own.
    pub(super) fn is(&self, plan: &LogicalPlan) -> bool {
        matches!(plan, LogicalPlan::SubqueryAlias(alias)
            if alias.alias.table() == self.name && alias.input.as_ref() == self.view)
    }
}

/// The private tables of `description`, each with its view from `views`.
pub(super) fn private_views<'a>(
    description: &'a Description,
    views: &'a [(String, LogicalPlan)],
) -> Vec<PrivateView<'a>> {
    views
        .iter()
        .filter_map(|(name, view)| {
            let facts = description.private_table(name)?;
            Some(PrivateView {
                name,
                view,
                sizes: sizes(view, &facts),
                facts,
            })
        })
        .collect()
}

/// The [`Size`](dpkit_total::Size) of each of the view's columns: text at
/// most its `max_length` characters, anything else a number's length.
fn sizes(view: &LogicalPlan, facts: &TableFacts<'_>) -> Sizes {
    view.schema()
        .fields()
        .iter()
        .map(|field| {
            let text = field.data_type() == &datafusion::arrow::datatypes::DataType::Utf8;
            let size = column_size(text, facts.max_length(field.name()));
            (field.name().clone(), size)
        })
        .collect()
}
