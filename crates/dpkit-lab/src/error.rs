//! What can stop an experiment.

use std::path::PathBuf;

use thiserror::Error;

/// An experiment that could not run or write its results.
#[derive(Debug, Error)]
pub enum LabError {
    /// A file could not be read or written (the cause is the error's source).
    #[error("{action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The Adult files an experiment needs are not in the data folder.
    #[error(
        "no Adult files (adult.data.csv, adult.test.csv) in {folder}: give the folder that \
         holds them with --data (the repository's is data/adult)"
    )]
    NoData {
        /// The folder looked in.
        folder: PathBuf,
    },
    /// The data file is not what the experiment expects (never echoes values).
    #[error("{path}: {reason}")]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong, without data values.
        reason: String,
    },
    /// A figure could not be drawn.
    #[error(transparent)]
    Plot(#[from] dpkit_plot::PlotError),
    /// A mechanism rejected its parameters.
    #[error(transparent)]
    Mechanism(#[from] dpkit_core::Error),
}

/// `Result` with [`LabError`].
pub type Result<T> = std::result::Result<T, LabError>;
