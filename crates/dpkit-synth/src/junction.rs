//! Junction trees of cliques: the structure on which the model's marginals
//! are computed exactly by belief propagation.

use crate::domain::{Domain, projection};
use crate::error::{Error, Result};

/// A junction tree: cliques (sets of columns) joined in a tree such that
/// the cliques holding any one column form a connected subtree (the
/// running-intersection property), so belief propagation on it is exact.
///
/// Built from any list of cliques: each is sorted, cliques contained in
/// another are dropped, every column in none gets a clique of its own, and
/// the tree is a maximum spanning tree of the cliques weighted by the size
/// of their intersections, which is a junction tree whenever one exists
/// (Jensen & Jensen 1994). If it fails the running-intersection property,
/// the cliques are refused (their graph is not triangulated).
///
/// ```
/// use dpkit_synth::{Domain, JunctionTree};
/// let domain = Domain::new(vec![2, 2, 2, 2]).unwrap();
/// let tree = JunctionTree::new(&domain, &[vec![1, 0], vec![1, 2]]).unwrap();
/// assert_eq!(tree.cliques(), &[vec![0, 1], vec![1, 2], vec![3]]);
/// // A cycle of pairs has no junction tree.
/// assert!(JunctionTree::new(&domain, &[vec![0, 1], vec![1, 2], vec![0, 2]]).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct JunctionTree {
    cliques: Vec<Vec<usize>>,
    cells: Vec<usize>,
    /// Each clique's parent (`None` for the root, clique 0).
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    /// Breadth-first from the root: every parent before its children.
    order: Vec<usize>,
    /// For a non-root clique: its separator with its parent (sorted).
    separator: Vec<Vec<usize>>,
    /// For a non-root clique: the separator cell of each of its cells.
    to_separator: Vec<Vec<u32>>,
    /// For a non-root clique: the separator cell of each of its parent's cells.
    parent_to_separator: Vec<Vec<u32>>,
    separator_cells: Vec<usize>,
}

impl JunctionTree {
    /// The junction tree of `cliques` over `domain` (see the type).
    pub fn new(domain: &Domain, cliques: &[Vec<usize>]) -> Result<Self> {
        let mut sets: Vec<Vec<usize>> = Vec::new();
        for clique in cliques {
            domain.cells(clique)?;
            let mut clique = clique.clone();
            clique.sort_unstable();
            sets.push(clique);
        }
        // Keep the maximal cliques only (the first of equal ones).
        let contains = |big: &[usize], small: &[usize]| small.iter().all(|c| big.contains(c));
        let mut kept: Vec<Vec<usize>> = Vec::new();
        for (i, clique) in sets.iter().enumerate() {
            let covered = sets.iter().enumerate().any(|(j, other)| {
                j != i && contains(other, clique) && (other.len() > clique.len() || j < i)
            });
            if !covered {
                kept.push(clique.clone());
            }
        }
        for column in 0..domain.width() {
            if !kept.iter().any(|c| c.contains(&column)) {
                kept.push(vec![column]);
            }
        }
        let count = kept.len();
        // Prim's maximum spanning tree on intersection sizes, from clique 0.
        let weight = |a: &[usize], b: &[usize]| a.iter().filter(|c| b.contains(c)).count();
        let mut parent: Vec<Option<usize>> = vec![None; count];
        let mut in_tree = vec![false; count];
        let mut best: Vec<(usize, usize)> = vec![(0, 0); count];
        in_tree[0] = true;
        for j in 1..count {
            best[j] = (weight(&kept[0], &kept[j]), 0);
        }
        for _ in 1..count {
            let next = (0..count)
                .filter(|&j| !in_tree[j])
                .max_by_key(|&j| (best[j].0, std::cmp::Reverse(j)))
                .expect("a clique remains");
            in_tree[next] = true;
            parent[next] = Some(best[next].1);
            for j in 0..count {
                let w = weight(&kept[next], &kept[j]);
                if !in_tree[j] && w > best[j].0 {
                    best[j] = (w, next);
                }
            }
        }
        // Running intersection: for each column, the cliques holding it
        // are one more than the tree's edges between such cliques.
        for column in 0..domain.width() {
            let holding = kept.iter().filter(|c| c.contains(&column)).count();
            let edges = (0..count)
                .filter(|&j| {
                    parent[j]
                        .is_some_and(|p| kept[j].contains(&column) && kept[p].contains(&column))
                })
                .count();
            if holding != edges + 1 {
                return Err(Error::NotAJunctionTree(format!(
                    "the cliques holding column {column} are not connected in any tree of \
                     {kept:?} (the graph they form is not triangulated)"
                )));
            }
        }
        // Order breadth-first so that every parent precedes its children.
        let mut children = vec![Vec::new(); count];
        for j in 1..count {
            children[parent[j].expect("non-root")].push(j);
        }
        let mut order = Vec::with_capacity(count);
        order.push(0);
        let mut head = 0;
        while head < order.len() {
            let c = order[head];
            order.extend(children[c].iter().copied());
            head += 1;
        }
        let cells: Vec<usize> = kept
            .iter()
            .map(|c| c.iter().map(|&k| domain.size(k)).product())
            .collect();
        let mut separator = vec![Vec::new(); count];
        let mut to_separator = vec![Vec::new(); count];
        let mut parent_to_separator = vec![Vec::new(); count];
        let mut separator_cells = vec![1; count];
        for j in 1..count {
            let p = parent[j].expect("non-root");
            let sep: Vec<usize> = kept[j]
                .iter()
                .copied()
                .filter(|c| kept[p].contains(c))
                .collect();
            separator_cells[j] = sep.iter().map(|&k| domain.size(k)).product();
            to_separator[j] = projection(domain, &kept[j], &sep);
            parent_to_separator[j] = projection(domain, &kept[p], &sep);
            separator[j] = sep;
        }
        Ok(Self {
            cliques: kept,
            cells,
            parent,
            children,
            order,
            separator,
            to_separator,
            parent_to_separator,
            separator_cells,
        })
    }

    /// The cliques, each sorted.
    pub fn cliques(&self) -> &[Vec<usize>] {
        &self.cliques
    }

    /// The tree's edges, as (child, parent) clique indices.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        (0..self.cliques.len())
            .filter_map(|j| self.parent[j].map(|p| (j, p)))
            .collect()
    }

    /// The first clique holding every one of `columns`.
    pub fn clique_holding(&self, columns: &[usize]) -> Option<usize> {
        self.cliques
            .iter()
            .position(|c| columns.iter().all(|k| c.contains(k)))
    }

    pub(crate) fn cells(&self, clique: usize) -> usize {
        self.cells[clique]
    }

    pub(crate) fn parent(&self, clique: usize) -> Option<usize> {
        self.parent[clique]
    }

    pub(crate) fn children(&self, clique: usize) -> &[usize] {
        &self.children[clique]
    }

    pub(crate) fn order(&self) -> &[usize] {
        &self.order
    }

    pub(crate) fn separator(&self, clique: usize) -> &[usize] {
        &self.separator[clique]
    }

    pub(crate) fn to_separator(&self, clique: usize) -> &[u32] {
        &self.to_separator[clique]
    }

    pub(crate) fn parent_to_separator(&self, clique: usize) -> &[u32] {
        &self.parent_to_separator[clique]
    }

    pub(crate) fn separator_cells(&self, clique: usize) -> usize {
        self.separator_cells[clique]
    }
}
