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
    /// table declares, or 10,000 if that is more. The time a query takes
    /// grows with the rows one person holds, and only the bound on it is
    /// public: a join that multiplied a person's rows far past what any
    /// table allows would let their rows alone take visibly long (a
    /// red-team helper joined a table of 5 rows per person to itself six
    /// times and to a public table of 64 rows, about a million rows per
    /// person: 119 ms with that person's rows against 64 ms without, by
    /// its own script). 10,000 rows are a hundredth of that (not timed);
    /// a table whose curator allows more rows per person allows their
    /// time too.
    pub(super) fn most_joined_rows(&self) -> u64 {
        let caps = self.tables.iter().map(|t| t.facts.rows_per_person);
        caps.fold(JOINED_ROWS_FLOOR, u64::max)
    }
}

/// A rewritten plan, its output columns' sizes, its work per row of a
/// private table, and what it reads.
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

/// How many output rows one person, and one row of a private table, can
/// make, and the joins that multiplied them.
#[derive(Debug, Clone)]
pub(super) struct Reach {
    /// Rows one person holds.
    pub(super) rows_per_person: u64,
    /// Rows one row of a private table becomes.
    pub(super) fanout: u64,
    /// What each join did, as `--explain` says it.
    pub(super) joins: Vec<String>,
    /// What the answer should tell of the joins (a public key that repeats).
    pub(super) notes: Vec<String>,
}

impl Rewritten {
    /// The work per private row after a node costing `work` per row of this
    /// plan's output: each private row is at most `fanout` of them.
    pub(super) fn above(&self, work: u64) -> Result<u64> {
        let work = self.work.saturating_add(self.fanout().saturating_mul(work));
        check_work(work)?;
        Ok(work)
    }

    /// Output rows per private row (1 for a public plan, whose work is public).
    pub(super) fn fanout(&self) -> u64 {
        match &self.reads {
            Reads::Private(reach) => reach.fanout,
            Reads::Public => 1,
        }
    }
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
