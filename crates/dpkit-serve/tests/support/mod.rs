//! Shared by the server's tests (`mod support;`).
#![allow(dead_code)]
pub mod fixture;
pub mod http;
pub mod marker;
