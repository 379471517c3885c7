//! The `dpkit` command that the wheel installs: the binary's own code
//! ([`dpkit_cli::run`]), so `pip install` gives the whole tool, server and
//! lab included, and what the binary does the command does.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the command line `argv` (its first item names the program) without
/// the GIL and returns the exit status.
#[pyfunction]
pub(crate) fn _run_command(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(|| dpkit_cli::run(argv))
}
