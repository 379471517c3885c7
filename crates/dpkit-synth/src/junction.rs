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
        let mut kept = maximal(&sets);
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

    /// A junction tree whose cliques cover each of `sets` (as AIM needs
    /// for measured sets that no tree joins): the graph joining the columns
    /// of each set is triangulated by greedy elimination, each step taking
    /// the column whose elimination clique (it and its remaining
    /// neighbours) has the fewest cells, and joining its neighbours; the
    /// elimination cliques are the cliques of the triangulated graph
    /// (Koller & Friedman 2009, §9.4 and §10.4). A clique above
    /// [`crate::MAX_CELLS`] cells is an error.
    ///
    /// ```
    /// use dpkit_synth::{Domain, JunctionTree};
    /// let domain = Domain::new(vec![2, 3, 2, 4]).unwrap();
    /// // A cycle of four pairs gets one chord: two triangles.
    /// let cycle = [vec![0, 1], vec![1, 2], vec![2, 3], vec![0, 3]];
    /// let tree = JunctionTree::covering(&domain, &cycle).unwrap();
    /// assert_eq!(tree.cliques().len(), 2);
    /// assert!(cycle.iter().all(|set| tree.clique_holding(set).is_some()));
    /// ```
    pub fn covering(domain: &Domain, sets: &[Vec<usize>]) -> Result<Self> {
        Self::new(domain, &triangulation(domain, sets)?)
    }

    /// The cells of [`JunctionTree::covering`]'s maximal cliques, summed:
    /// the model's size in numbers (AIM's limit is on its size in bytes,
    /// 8 a number), without building the tree.
    pub fn covering_cells(domain: &Domain, sets: &[Vec<usize>]) -> Result<usize> {
        let mut cliques = triangulation(domain, sets)?;
        cliques.iter_mut().for_each(|c| c.sort_unstable());
        Ok(maximal(&cliques)
            .iter()
            .map(|clique| clique.iter().map(|&c| domain.size(c)).product::<usize>())
            .sum())
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

/// The elimination cliques of the graph joining the columns of each of
/// `sets`, eliminated greedily (see [`JunctionTree::covering`]).
fn triangulation(domain: &Domain, sets: &[Vec<usize>]) -> Result<Vec<Vec<usize>>> {
    let width = domain.width();
    let mut neighbours = vec![vec![false; width]; width];
    for set in sets {
        domain.cells(set)?;
        for &a in set {
            for &b in set {
                neighbours[a][b] |= a != b;
            }
        }
    }
    let mut remaining = vec![true; width];
    let mut cliques: Vec<Vec<usize>> = Vec::with_capacity(width);
    for _ in 0..width {
        let clique_of = |v: usize| -> Vec<usize> {
            (0..width)
                .filter(|&u| u == v || (remaining[u] && neighbours[v][u]))
                .collect()
        };
        let weight = |clique: &[usize]| {
            clique
                .iter()
                .fold(1u128, |acc, &c| acc.saturating_mul(domain.size(c) as u128))
        };
        let v = (0..width)
            .filter(|&v| remaining[v])
            .min_by_key(|&v| (weight(&clique_of(v)), v))
            .expect("a column remains");
        let clique = clique_of(v);
        domain.cells(&clique)?;
        for &a in &clique {
            for &b in &clique {
                neighbours[a][b] |= a != b;
            }
        }
        remaining[v] = false;
        cliques.push(clique);
    }
    Ok(cliques)
}

/// The cliques (each sorted) not contained in another, the first of equal ones.
fn maximal(sets: &[Vec<usize>]) -> Vec<Vec<usize>> {
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
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_covering_tree_holds_every_set_and_keeps_a_tree_of_pairs_as_it_is() {
        let domain = Domain::new(vec![2, 3, 2, 4, 3, 2, 5]).unwrap();
        let pairs = vec![
            vec![0, 1],
            vec![1, 2],
            vec![1, 3],
            vec![3, 4],
            vec![4, 5],
            vec![4, 6],
        ];
        let tree = JunctionTree::covering(&domain, &pairs).unwrap();
        let mut cliques = tree.cliques().to_vec();
        cliques.sort();
        assert_eq!(cliques, pairs);
        // Two cycles, a triple and a column in nothing.
        let sets = vec![
            vec![0, 1],
            vec![1, 2],
            vec![2, 3],
            vec![3, 0],
            vec![3, 4],
            vec![4, 5],
            vec![5, 3],
            vec![2, 4, 1],
        ];
        let tree = JunctionTree::covering(&domain, &sets).unwrap();
        assert!(sets.iter().all(|s| tree.clique_holding(s).is_some()));
        assert!(tree.clique_holding(&[6]).is_some());
        // No clique holds all of a cycle's columns that need not be joined.
        assert!(
            tree.cliques().iter().all(|c| c.len() <= 4),
            "{:?}",
            tree.cliques()
        );
        // The covering's size, without the tree, is its cliques' cells.
        let cells: usize = (0..tree.cliques().len()).map(|c| tree.cells(c)).sum();
        assert_eq!(JunctionTree::covering_cells(&domain, &sets).unwrap(), cells);
        // Too large a clique is an error, not a panic.
        let wide = Domain::new(vec![300; 4]).unwrap();
        let cycle = [vec![0, 1], vec![1, 2], vec![2, 3], vec![3, 0]];
        assert!(matches!(
            JunctionTree::covering(&wide, &cycle),
            Err(Error::DomainTooLarge { .. })
        ));
    }
}
