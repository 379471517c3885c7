//! The Adult training file read independently of the engine, so that tests
//! can compute exact answers to compare with. Shared by the query crate's
//! tests and the CLI's (`#[path]`).

use std::collections::HashMap;

/// Every row of `data/adult/adult.data.csv` as a map from column name to field.
pub fn adult_rows() -> Vec<HashMap<String, String>> {
    let path = format!(
        "{}/../../data/adult/adult.data.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}
