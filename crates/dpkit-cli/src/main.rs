#![forbid(unsafe_code)]
//! `dpkit`: differentially private releases from the command line (the
//! whole tool is [`dpkit_cli::run`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(dpkit_cli::run(std::env::args_os()))
}
