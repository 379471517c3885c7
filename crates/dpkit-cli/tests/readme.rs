//! The README's first screen, as a newcomer meets it: its first command
//! shows the build's progress (cargo's `-q` hid a first build of half an
//! hour and more, which looked like a hang), and says how long it takes.

fn readme() -> String {
    std::fs::read_to_string(format!("{}/../../README.md", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn the_first_command_shows_the_builds_progress_and_says_how_long_it_takes() {
    let text = readme();
    let block = text.split("```sh\n").nth(1).unwrap();
    let first = block
        .lines()
        .find(|line| line.starts_with("cargo "))
        .unwrap();
    assert!(
        first.starts_with("cargo run -p dpkit-cli -- query"),
        "{first}"
    );
    let before: String = block
        .lines()
        .take_while(|l| !l.starts_with("cargo "))
        .collect();
    assert!(
        before.contains("The first build takes 15 to 40 minutes"),
        "{before}"
    );
    assert!(before.contains("cargo shows its progress"), "{before}");
}

/// The book helps choose the caps (issue 67, point 9): the descriptions
/// page has the section, measured, and the cap's key links to it.
#[test]
fn the_book_says_how_to_choose_the_caps() {
    let page = std::fs::read_to_string(format!(
        "{}/../../docs/book/src/query/descriptions.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert!(page.contains("\n## Choosing the caps\n"));
    let key = page
        .lines()
        .find(|l| l.starts_with("| `[privacy_unit] column`, `max_rows_per_person`"))
        .unwrap();
    assert!(key.contains("(#choosing-the-caps)"), "{key}");
    let section = page.split("\n## Choosing the caps\n").nth(1).unwrap();
    assert!(section.contains("--target-error") && section.contains("| k | people over k |"));
}

/// Every other way in reuses the first command's build (issue 67, point 2):
/// `cargo install` builds from nothing in a folder of its own unless told
/// the target folder, and the README says so, with the command that reuses
/// it. (That the command alone and the wheel ask for the workspace's
/// features, so that the folder's DataFusion fits them, is
/// `python/feature-check.sh`'s check.)
#[test]
fn the_readmes_install_reuses_the_first_commands_build() {
    let text = readme().replace('\n', " ");
    let install = text
        .split('`')
        .find(|span| span.starts_with("cargo install --path crates/dpkit-cli"))
        .unwrap();
    assert!(install.contains("--profile dev"), "{install}");
    assert!(install.contains("--locked"), "{install}");
    assert!(
        install.contains("--target-dir \"${CARGO_TARGET_DIR:-target}\""),
        "{install}"
    );
    assert!(text.contains("pip install ./python"));
}
