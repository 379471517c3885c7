#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-serve
//!
//! `dpkit serve`: the curator's private query service. The curator holds
//! the data, the keys and the ledgers; analysts reach only an HTTP JSON
//! API of noisy answers, explanations and their own budget. Every query
//! runs through the same planning, noise and ledger code as `dpkit query`.
pub mod analysts;
pub mod backup;
pub mod config;
pub mod datasets;
pub mod error;
pub mod metrics;
pub mod operations;

pub use config::Config;
pub use error::{Result, ServeError};
pub mod api;
pub mod server;
mod web;

pub use server::Server;
