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
