//! Public domains of discrete columns, and the index arithmetic of marginals.

use crate::error::{Error, Result};

/// The largest number of cells of any marginal or clique this crate holds
/// (2²⁴: 128 MiB of `f64`).
pub const MAX_CELLS: usize = 1 << 24;

/// The public domain of a table: column `i` takes the codes `0..sizes[i]`.
///
/// # Privacy
/// The domain must be public, fixed without looking at the private rows
/// (declared bounds and bins, a published code list): the synthesizers
/// treat it as known to everyone, and its sizes shape every release.
///
/// A marginal over a list of columns is the vector of counts of each
/// combination of their codes, row-major in the order the columns are
/// listed (the last column varies fastest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    sizes: Vec<usize>,
}

impl Domain {
    /// A domain of `sizes.len()` columns (at least one), each with at least
    /// one code.
    pub fn new(sizes: Vec<usize>) -> Result<Self> {
        if sizes.is_empty() {
            return Err(Error::NoColumns);
        }
        if let Some(column) = sizes.iter().position(|&n| n == 0) {
            return Err(Error::EmptyDomain { column });
        }
        if let Some(column) = sizes.iter().position(|&n| n > MAX_CELLS) {
            return Err(Error::DomainTooLarge {
                columns: vec![column],
                cells: sizes[column] as u128,
                limit: MAX_CELLS,
            });
        }
        Ok(Self { sizes })
    }

    /// The number of columns.
    pub fn width(&self) -> usize {
        self.sizes.len()
    }

    /// The number of codes of each column.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// The number of codes of `column` (which must exist).
    pub fn size(&self, column: usize) -> usize {
        self.sizes[column]
    }

    /// The number of cells of the marginal over `columns`: an error if a
    /// column does not exist or is repeated, if there are none, or if the
    /// marginal has more than [`MAX_CELLS`] cells.
    pub fn cells(&self, columns: &[usize]) -> Result<usize> {
        if columns.is_empty() {
            return Err(Error::NoColumns);
        }
        let distinct = columns
            .iter()
            .enumerate()
            .all(|(i, c)| !columns[..i].contains(c));
        if !distinct || columns.iter().any(|&c| c >= self.width()) {
            return Err(Error::BadColumns {
                columns: columns.to_vec(),
                width: self.width(),
            });
        }
        let cells = columns
            .iter()
            .fold(1u128, |acc, &c| acc.saturating_mul(self.sizes[c] as u128));
        if cells > MAX_CELLS as u128 {
            return Err(Error::DomainTooLarge {
                columns: columns.to_vec(),
                cells,
                limit: MAX_CELLS,
            });
        }
        Ok(cells as usize)
    }
}

/// For each cell of the marginal over `clique` (row-major), the index of
/// its cell in the marginal over `subset`, whose columns all lie in
/// `clique` (in any order). The clique's size is already checked.
pub(crate) fn projection(domain: &Domain, clique: &[usize], subset: &[usize]) -> Vec<u32> {
    let cells: usize = clique.iter().map(|&c| domain.size(c)).product();
    // The stride of each clique column within the subset's marginal (0 when absent).
    let mut strides = vec![0usize; clique.len()];
    let mut stride = 1;
    for &column in subset.iter().rev() {
        let position = clique
            .iter()
            .position(|&c| c == column)
            .expect("subset lies in clique");
        strides[position] = stride;
        stride *= domain.size(column);
    }
    let sizes: Vec<usize> = clique.iter().map(|&c| domain.size(c)).collect();
    let mut digits = vec![0usize; clique.len()];
    let mut index = 0usize;
    let mut out = Vec::with_capacity(cells);
    for _ in 0..cells {
        out.push(index as u32);
        // Increment the digits from the last column, as an odometer.
        for position in (0..clique.len()).rev() {
            digits[position] += 1;
            index += strides[position];
            if digits[position] < sizes[position] {
                break;
            }
            index -= strides[position] * sizes[position];
            digits[position] = 0;
        }
    }
    out
}

/// The codes of each column of `columns` in cell `cell` of their marginal.
pub(crate) fn decode(domain: &Domain, columns: &[usize], mut cell: usize, out: &mut [u32]) {
    for (position, &column) in columns.iter().enumerate().rev() {
        let size = domain.size(column);
        out[position] = (cell % size) as u32;
        cell /= size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_maps_each_cell_to_its_subset_cell() {
        let domain = Domain::new(vec![2, 3, 4]).unwrap();
        let map = projection(&domain, &[0, 1, 2], &[2, 0]);
        let mut codes = [0u32; 3];
        for (cell, &index) in map.iter().enumerate() {
            decode(&domain, &[0, 1, 2], cell, &mut codes);
            assert_eq!(index as usize, codes[2] as usize * 2 + codes[0] as usize);
        }
    }
}
