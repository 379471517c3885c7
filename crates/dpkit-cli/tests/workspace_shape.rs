//! The workspace's shape, checked on its source: no crate holds more than a
//! third of the source lines, and no file of a crate imports, directly or
//! around a circle, a file that imports it back (a child reading what its
//! own parent module declares is not counted), so that each file can be
//! read knowing only what it imports. Imports are read from `crate::` and
//! `super::` paths, grouped imports expanded and re-exports followed. And
//! only the end-to-end auditor calls dpkit-query's uncharged `internals`.

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

/// The paths a use tree at `code[at..]` names, expanded: `a::{b, c::d}`
/// is `a::b` and `a::c::d`. Returns them and where the tree ends.
fn use_tree(code: &[u8], mut at: usize) -> (Vec<Vec<String>>, usize) {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut prefix: Vec<String> = Vec::new();
    loop {
        while code.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        if code.get(at) == Some(&b'{') {
            let mut all = Vec::new();
            at += 1;
            loop {
                while code
                    .get(at)
                    .is_some_and(|&b| b.is_ascii_whitespace() || b == b',')
                {
                    at += 1;
                }
                match code.get(at) {
                    None => return (all, at),
                    Some(b'}') => return (all, at + 1),
                    Some(_) => {}
                }
                let (inner, next) = use_tree(code, at);
                at = if next == at { at + 1 } else { next };
                all.extend(
                    inner
                        .into_iter()
                        .map(|tail| [prefix.clone(), tail].concat()),
                );
            }
        }
        let start = at;
        while code.get(at).copied().is_some_and(is_word) {
            at += 1;
        }
        if at > start {
            prefix.push(String::from_utf8_lossy(&code[start..at]).into_owned());
        }
        if at == start || code.get(at..at + 2) != Some(b"::".as_slice()) {
            return (vec![prefix], at);
        }
        at += 2;
    }
}

/// The `crate::…` and `super::…` paths written in `code`, as segments,
/// with grouped imports expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            let boundary =
                at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if boundary {
                found.extend(use_tree(bytes, at).0.into_iter().filter(|p| p.len() > 1));
            }
        }
    }
    found
}

/// The paths a module re-exports (`pub use …;` and `pub(crate) use …;`),
/// as written.
fn reexports(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for start in ["pub use ", "pub(crate) use ", "pub(super) use "] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            found.extend(use_tree(bytes, from).0);
        }
    }
    found
}

/// The module a path written in `module` leads to: the longest prefix that
/// is a module, followed through a re-export of the next name if there is
/// one (`crate::Name` re-exported at the root from `crate::a`).
fn resolve(
    module: &[String],
    path: &[String],
    modules: &BTreeMap<Vec<String>, PathBuf>,
    exported: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Option<Vec<String>> {
    let (base, rest): (Vec<String>, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        // `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` (module
        // a::b) is both times `a`.
        "super" => (
            module[..module.len().saturating_sub(1)].to_vec(),
            &path[1..],
        ),
        "self" => (module.to_vec(), &path[1..]),
        // A path from the module itself, as `pub use` in lib.rs writes them.
        _ => (module.to_vec(), path),
    };
    let k = (0..=rest.len()).rev().find(|&k| {
        let candidate = [base.clone(), rest[..k].to_vec()].concat();
        modules.contains_key(&candidate)
    })?;
    let target = [base, rest[..k].to_vec()].concat();
    match rest.get(k) {
        Some(name) => Some(
            exported
                .get(&(target.clone(), name.clone()))
                .cloned()
                .unwrap_or(target),
        ),
        None => Some(target),
    }
}

/// Which modules of one crate each module imports, leaving out its own
/// ancestors (a child reads what its parent declares; that is not a circle).
fn imports(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules: BTreeMap<Vec<String>, PathBuf> = rust_files(src)
        .into_iter()
        .map(|file| (module_of(src, &file), file))
        .collect();
    let codes: BTreeMap<&Vec<String>, String> = modules
        .iter()
        .map(|(module, file)| (module, code(&std::fs::read_to_string(file).unwrap())))
        .collect();
    let none = BTreeMap::new();
    let mut exported = BTreeMap::new();
    for (module, code) in &codes {
        for path in reexports(code) {
            if let (Some(name), Some(target)) =
                (path.last(), resolve(module, &path, &modules, &none))
                && name != "self"
            {
                exported.insert(((*module).clone(), name.clone()), target);
            }
        }
    }
    let mut graph = BTreeMap::new();
    for (module, code) in &codes {
        let targets = paths(code)
            .iter()
            .filter_map(|path| resolve(module, path, &modules, &exported))
            .filter(|target| !module.starts_with(target))
            .collect();
        graph.insert((*module).clone(), targets);
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
    let text = "use crate::a::B;\n// crate::c\nfn f() { super::d::e(); }\n\
                use crate::{g::H, i::{j, k::L}};\n#[cfg(test)]\nmod tests { use crate::z; }";
    let found = paths(&code(text));
    let shown: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        shown,
        [
            "crate::a::B",
            "crate::g::H",
            "crate::i::j",
            "crate::i::k::L",
            "super::d::e"
        ]
    );
}

/// A file whose sibling it imports through a root re-export
/// (`crate::Name`) imports it back: the circle is found.
#[test]
fn a_circle_through_a_reexport_is_found() {
    let src = std::env::temp_dir().join(format!("dpkit-shape-{}", std::process::id()));
    std::fs::create_dir_all(&src).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\npub use a::Answer;\n");
    write("a.rs", "use crate::b::helper;\npub struct Answer;\n");
    write("b.rs", "use crate::{Answer};\npub fn helper() {}\n");
    let graph = imports(&src);
    assert!(circle(&graph).is_some(), "{graph:?}");
    write("b.rs", "pub fn helper() {}\n");
    assert_eq!(circle(&imports(&src)), None);
    std::fs::remove_dir_all(&src).unwrap();
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

/// The files of the workspace's sources (not tests, benchmarks or examples)
/// whose code names `internals`, dpkit-query's exact, uncharged answers.
/// The workspace's source files whose code (comments aside) holds `word`.
fn files_naming(word: &str) -> BTreeSet<String> {
    let root = root();
    source_folders()
        .into_iter()
        .flat_map(|(_, src)| rust_files(&src))
        .filter(|file| code(&std::fs::read_to_string(file).unwrap()).contains(word))
        .map(|file| {
            let relative = file.strip_prefix(&root).unwrap_or(&file);
            relative.to_string_lossy().into_owned()
        })
        .collect()
}

#[test]
fn only_the_end_to_end_auditor_reaches_exact_uncharged_answers() {
    // Where they are defined, and the one caller.
    let expected = [
        "crates/dpkit-audit/src/query.rs",
        "crates/dpkit-query/src/engine.rs",
        "crates/dpkit-query/src/lib.rs",
    ];
    let found = files_naming("internals");
    assert_eq!(
        found,
        expected.map(String::from).into(),
        "a serving path must never answer without charging the ledger"
    );
}

#[test]
fn only_the_curators_check_command_reads_the_data_against_its_description() {
    // `dpkit_query::check` counts private values exactly, for the curator:
    // no serving path, and not the analyst's Python API, may call it.
    let found = files_naming("dpkit_query::check");
    assert_eq!(
        found,
        ["crates/dpkit-cli/src/check.rs".to_string()].into(),
        "the data check is the curator's command only"
    );
}
