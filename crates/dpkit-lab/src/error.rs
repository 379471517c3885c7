//! What can stop an experiment.

use std::path::PathBuf;

use thiserror::Error;

/// An experiment that could not run or write its results.
#[derive(Debug, Error)]
pub enum LabError {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
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
