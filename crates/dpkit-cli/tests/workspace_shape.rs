//! The workspace's shape, checked on its source: no crate holds more than a
//! third of the source lines, and no two files of a crate import each other
//! (directly or around a circle), so that each file can be read knowing
//! only what it imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root (this crate is `crates/dpkit-cli`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `src` folder of the workspace's crates, by crate name.
fn source_folders() -> Vec<(String, PathBuf)> {
    let mut folders: Vec<(String, PathBuf)> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("src").is_dir())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, path.join("src"))
        })
        .collect();
    folders.push(("python".into(), root().join("python/src")));
    folders.sort();
    folders
}

/// The `.rs` files under `folder`.
fn rust_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// A file's module path within its crate: `a/b.rs` and `a/b/mod.rs` are
/// `["a", "b"]`, `lib.rs` and `main.rs` the root `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of `text` without its unit tests and line comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .map(|line| line.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `crate::…` and `super::…` paths written in `code`, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            let boundary =
                at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if !boundary {
                continue;
            }
            let rest = &code[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let segments = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            found.push(segments);
        }
    }
    found
}

/// Which modules of one crate each module imports (the longest module
/// prefix of each path it writes), leaving out its own ancestors.
fn imports(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = rust_files(src);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|file| (module_of(src, file), file.clone()))
        .collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        // `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` (module
        // a::b) is both times `a`.
        let parent = &module[..module.len().saturating_sub(1)];
        let mut targets = BTreeSet::new();
        for path in paths(&code(&std::fs::read_to_string(file).unwrap())) {
            let base: Vec<String> = match path[0].as_str() {
                "crate" => Vec::new(),
                _ => parent.to_vec(),
            };
            let rest = &path[1..];
            let target = (1..=rest.len()).rev().find_map(|k| {
                let mut candidate = base.clone();
                candidate.extend_from_slice(&rest[..k]);
                modules.contains_key(&candidate).then_some(candidate)
            });
            if let Some(target) = target
                && !module.starts_with(&target)
            {
                targets.insert(target);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

/// A circle of imports in `graph`, if there is one.
fn circle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        node: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        done: &mut BTreeSet<Vec<String>>,
        path: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    for (name, src) in source_folders() {
        if let Some(found) = circle(&imports(&src)) {
            let shown: Vec<String> = found.iter().map(|m| m.join("/")).collect();
            panic!(
                "{name}: these files import each other: {}",
                shown.join(" → ")
            );
        }
    }
}

#[test]
fn a_circle_of_imports_is_found() {
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (
            vec!["a".to_string()],
            BTreeSet::from([vec!["b".to_string()]]),
        ),
        (
            vec!["b".to_string()],
            BTreeSet::from([vec!["c".to_string()]]),
        ),
        (
            vec!["c".to_string()],
            BTreeSet::from([vec!["a".to_string()]]),
        ),
    ]
    .into();
    assert_eq!(circle(&graph).map(|c| c.len()), Some(3));
    let mut open = graph.clone();
    open.insert(vec!["c".to_string()], BTreeSet::new());
    assert_eq!(circle(&open), None);
}

#[test]
fn paths_are_read_from_code_and_not_comments_or_tests() {
    let text = "use crate::a::B;\n// crate::c\nfn f() { super::d::e(); }\n#[cfg(test)]\nmod tests { use crate::z; }";
    let found = paths(&code(text));
    assert_eq!(
        found,
        vec![
            vec!["crate".to_string(), "a".into(), "B".into()],
            vec!["super".to_string(), "d".into(), "e".into()],
        ]
    );
}

#[test]
fn no_crate_holds_more_than_a_third_of_the_source_lines() {
    let lines: Vec<(String, usize)> = source_folders()
        .into_iter()
        .map(|(name, src)| {
            let count = rust_files(&src)
                .iter()
                .map(|file| std::fs::read_to_string(file).unwrap().lines().count())
                .sum();
            (name, count)
        })
        .collect();
    let total: usize = lines.iter().map(|(_, n)| n).sum();
    for (name, count) in &lines {
        assert!(
            count * 3 <= total,
            "{name} holds {count} of the workspace's {total} source lines, more than a third"
        );
    }
}
