//! What a rewritten plan below the aggregate reads, and how far one person
//! reaches in it: the state `input` and `joins` share.

use datafusion::logical_expr::{Expr, LogicalPlan};

use super::tables::PrivateView;
use crate::error::Result;
use crate::public_table::PublicTables;
use dpkit_total::{Size, Sizes, check_work};

/// Counts, over a public plan, the most rows that share one value of the
/// given key expressions (all its rows when there are none).
pub(crate) type MatchesOf<'a> = dyn FnMut(LogicalPlan, Vec<Expr>) -> Result<u64> + 'a;

/// What the rewrite reads, and how to count a public key's matches.
pub(super) struct Scope<'a, 'b> {
    /// The private tables, each with its typed, capped view.
    pub(super) tables: &'a [PrivateView<'a>],
    /// The public tables.
    pub(super) public: &'a PublicTables,
    /// Counts a public key's matches.
    pub(super) matches_of: &'a mut MatchesOf<'b>,
}

/// The fewest rows per person that joins may always reach (see
/// [`Scope::most_joined_rows`]).
const JOINED_ROWS_FLOOR: u64 = 10_000;

impl Scope<'_, '_> {
    /// The most rows one person may hold after joins: the largest cap a
    /// table declares, or 10,000 if that is more. What those rows cost is
    /// bounded apart, by the work bound (`dpkit_total::MAX_WORK`), which
    /// counts every row a join emits and every operation on it; this bound
    /// keeps the privacy maps' row counts, and the counts of public
    /// matches, within what a query can mean.
    pub(super) fn most_joined_rows(&self) -> u64 {
        let caps = self.tables.iter().map(|t| t.facts.rows_per_person);
        caps.fold(JOINED_ROWS_FLOOR, u64::max)
    }
}

/// A rewritten plan, its output columns' sizes, the work one person's rows
/// cause in it (units, see `dpkit_total::MAX_WORK`), and what it reads.
pub(super) struct Rewritten {
    pub(super) plan: LogicalPlan,
    pub(super) sizes: Sizes,
    pub(super) work: u64,
    pub(super) reads: Reads,
}

/// Whether a plan reads a private table, and how far one person reaches
/// in its output.
#[derive(Debug, Clone)]
pub(super) enum Reads {
    /// Public tables only.
    Public,
    /// Private tables.
    Private(Reach),
}

/// How many output rows one person can make, and the joins that multiplied
/// them.
#[derive(Debug, Clone)]
pub(super) struct Reach {
    /// Rows one person holds.
    pub(super) rows_per_person: u64,
    /// Batches those rows may be spread over (see [`Rewritten::above`]).
    pub(super) batches: u64,
    /// What each join did, as `--explain` says it.
    pub(super) joins: Vec<String>,
    /// What the answer should tell of the joins (a public key that repeats).
    pub(super) notes: Vec<String>,
}

impl Rewritten {
    /// The work one person's rows cause (see `dpkit_total::MAX_WORK`) after
    /// a node of `nodes` operations costing `work` per row of this plan's
    /// output: one person holds at most `rows_per_person` of them, in at
    /// most `batches` batches, each of which costs every operation
    /// `dpkit_total::NODE_BATCH_WORK` whatever its rows (DataFusion
    /// evaluates an expression over a batch at once). Past the limit, a
    /// refusal.
    pub(super) fn above(&self, work: u64, nodes: u64) -> Result<u64> {
        let spread = match &self.reads {
            Reads::Private(reach) => (reach.rows_per_person, reach.batches),
            Reads::Public => (1, 1),
        };
        work_after(self.work, spread, work, nodes)
    }
}

/// `below` and a node of `nodes` operations costing `work` per row, run on
/// one person's `rows` in at most `batches` batches (see
/// [`Rewritten::above`]). Past the limit, a refusal.
pub(super) fn work_after(
    below: u64,
    (rows, batches): (u64, u64),
    work: u64,
    nodes: u64,
) -> Result<u64> {
    let per_batch = nodes.saturating_mul(dpkit_total::NODE_BATCH_WORK);
    let work = below
        .saturating_add(rows.saturating_mul(work))
        .saturating_add(batches.saturating_mul(per_batch));
    check_work(work)?;
    Ok(work)
}

/// The batches one person's rows reach a scan's operators in: the cap
/// sorts each person's rows together, but the scan's partitions and the
/// boundaries of batches may cut them: twelve rows of one person cost a
/// branch they alone reach two to four times what one row does
/// (`tests/row_cost.rs`).
pub(super) const SCANNED_BATCHES: u64 = 4;

/// The nodes of `exprs`, each evaluated once per batch.
pub(super) fn nodes_of<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> u64 {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut nodes = 0u64;
    for expr in exprs {
        let _ = expr.apply(|_| {
            nodes += 1;
            Ok(TreeNodeRecursion::Continue)
        });
    }
    nodes
}

/// Records `size` for the column `name`: two columns of one name get the
/// larger of each measure.
pub(super) fn merge_size(sizes: &mut Sizes, name: &str, size: Size) {
    let merged = match sizes.get(name) {
        Some(known) => Size {
            nodes: known.nodes.max(size.nodes),
            depth: known.depth.max(size.depth),
            bytes: known.bytes.max(size.bytes),
            work: known.work.max(size.work),
        },
        None => size,
    };
    sizes.insert(name.to_string(), merged);
}
