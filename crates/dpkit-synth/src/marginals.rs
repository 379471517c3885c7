//! Where the exact marginal counts come from: a trait, and an in-memory table.

use crate::domain::Domain;
use crate::error::{Error, Result};

/// A source of exact marginal counts over a public [`Domain`].
///
/// The synthesizers add the noise themselves: a source returns true
/// counts (the exponential mechanism's scores need them too), and is
/// trusted to count each row of the private table once. Next to the
/// in-memory [`Table`], a database answering `GROUP BY` queries through
/// dpkit's query engine is the intended implementation.
pub trait Marginals {
    /// The public domain of the table.
    fn domain(&self) -> &Domain;

    /// The exact counts of the marginal over `columns` (distinct columns of
    /// the domain), row-major over their codes in the order listed: as
    /// many as [`Domain::cells`] gives.
    fn counts(&mut self, columns: &[usize]) -> Result<Vec<u64>>;
}

/// A table of integer codes held in memory, column by column.
///
/// ```
/// use dpkit_synth::{Domain, Marginals, Table};
/// let domain = Domain::new(vec![2, 3]).unwrap();
/// let mut table = Table::from_rows(domain, &[vec![0, 2], vec![1, 2], vec![1, 0]]).unwrap();
/// assert_eq!(table.counts(&[1]).unwrap(), vec![1, 0, 2]);
/// assert_eq!(table.counts(&[1, 0]).unwrap(), vec![0, 1, 0, 0, 1, 1]);
/// assert!(Table::from_rows(Domain::new(vec![2]).unwrap(), &[vec![2]]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    domain: Domain,
    columns: Vec<Vec<u32>>,
    rows: usize,
}

impl Table {
    /// A table from its columns (one `Vec` of codes per column of the
    /// domain, all of one length), each code checked against its domain.
    pub fn new(domain: Domain, columns: Vec<Vec<u32>>) -> Result<Self> {
        if columns.len() != domain.width() {
            return Err(Error::BadColumns {
                columns: (0..columns.len()).collect(),
                width: domain.width(),
            });
        }
        let rows = columns[0].len();
        for (column, codes) in columns.iter().enumerate() {
            if codes.len() != rows {
                return Err(Error::RaggedColumns {
                    column,
                    found: codes.len(),
                    expected: rows,
                });
            }
            let size = domain.size(column);
            if let Some(row) = codes.iter().position(|&code| code as usize >= size) {
                return Err(Error::CodeOutOfDomain {
                    column,
                    row,
                    code: u64::from(codes[row]),
                    size,
                });
            }
        }
        Ok(Self {
            domain,
            columns,
            rows,
        })
    }

    /// A table from its rows, each with one code per column of the domain.
    pub fn from_rows(domain: Domain, rows: &[Vec<u32>]) -> Result<Self> {
        let width = domain.width();
        let mut columns = vec![Vec::with_capacity(rows.len()); width];
        for (row, values) in rows.iter().enumerate() {
            if values.len() != width {
                return Err(Error::RowLength {
                    row,
                    found: values.len(),
                    expected: width,
                });
            }
            for (column, &code) in values.iter().enumerate() {
                columns[column].push(code);
            }
        }
        Self::new(domain, columns)
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The codes of one column (which must exist).
    pub fn column(&self, column: usize) -> &[u32] {
        &self.columns[column]
    }
}

impl Marginals for Table {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    fn counts(&mut self, columns: &[usize]) -> Result<Vec<u64>> {
        let cells = self.domain.cells(columns)?;
        let mut index = vec![0u32; self.rows];
        for &column in columns {
            let size = self.domain.size(column) as u32;
            for (i, &code) in index.iter_mut().zip(&self.columns[column]) {
                *i = *i * size + code;
            }
        }
        let mut counts = vec![0u64; cells];
        for i in index {
            counts[i as usize] += 1;
        }
        Ok(counts)
    }
}
